#include "tensor/models/mamba2_mixer.h"

#include "tensor/layers.h"

namespace shardplan::tensor::models {
namespace {

// Modules whose parameters the fused op reads (it runs them; they have no forward of their own):
// nn.Conv1d's weight and bias (absent without mamba_conv_bias, as nn.Conv1d registers None) and
// the gated norm's weight.
class Conv1dParameters : public Module {
 public:
  Conv1dParameters(int64_t channels, int64_t width, bool bias, const TensorOptions& o)
      : Module("Conv1d") {
    register_parameter("weight", empty({channels, 1, width}, o));
    register_parameter("bias", bias ? empty({channels}, o) : Tensor());
  }
};
class NormWeight : public Module {
 public:
  NormWeight(std::string type_name, int64_t dim, const TensorOptions& o)
      : Module(std::move(type_name)) {
    register_parameter("weight", empty({dim}, o));
  }
};

// Note [Mamba-2 trace] in mamba2_mixer.h.
class Mamba2Mixer : public AttentionBlock {
 public:
  Mamba2Mixer(const ModelConfig& c, const std::string& type_name, const std::string& norm_type_name,
              const TensorOptions& o)
      : AttentionBlock(type_name),
        heads_(c.linear_num_value_heads),
        head_dim_(c.linear_value_head_dim),
        groups_(c.linear_num_key_heads) {
    const int64_t h = c.hidden_size, inner = heads_ * head_dim_;
    const int64_t conv_dim = inner + 2 * groups_ * c.linear_key_head_dim;
    // transformers' registration order: conv1d, in_proj, dt_bias, A_log, norm, D, out_proj.
    conv_ =
        register_module("conv1d", std::make_shared<Conv1dParameters>(
                                      conv_dim, c.linear_conv_kernel_dim, c.linear_conv_bias, o));
    register_module("in_proj",
                    std::make_shared<Linear>(h, inner + conv_dim + heads_, c.linear_proj_bias, o));
    register_parameter("dt_bias", empty({heads_}, o));
    register_parameter("A_log", empty({heads_}, o));
    norm_ = register_module("norm", std::make_shared<NormWeight>(norm_type_name, inner, o));
    register_parameter("D", empty({heads_}, o));
    register_module("out_proj", std::make_shared<Linear>(inner, h, c.linear_proj_bias, o));
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    const Tensor zxbcdt = child("in_proj")->call(x);
    const Tensor a = neg(exp(to(parameter("A_log"), DType::kFloat32)));
    const Tensor y = mamba_split_conv1d_scan_combined(
        zxbcdt, conv_->parameter("weight"), conv_->parameter("bias"), parameter("dt_bias"), a,
        parameter("D"), norm_->parameter("weight"), groups_);
    return child("out_proj")->call(view(y, {b, s, heads_ * head_dim_}));
  }

 private:
  int64_t heads_, head_dim_, groups_;
  ModulePtr conv_, norm_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_mamba2_mixer(const ModelConfig& c,
                                                  const std::string& type_name,
                                                  const std::string& norm_type_name,
                                                  const TensorOptions& o) {
  return std::make_shared<Mamba2Mixer>(c, type_name, norm_type_name, o);
}

}  // namespace shardplan::tensor::models
