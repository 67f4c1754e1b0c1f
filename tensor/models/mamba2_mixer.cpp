#include "tensor/models/mamba2_mixer.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/checked.h"
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
              const TensorOptions& o, const Mamba2MixerStyle& style)
      : AttentionBlock(type_name),
        heads_(c.linear_num_value_heads),
        head_dim_(c.linear_value_head_dim),
        groups_(c.linear_num_key_heads) {
    const int64_t h = c.hidden_size, inner = heads_ * head_dim_;
    const int64_t conv_dim = inner + 2 * groups_ * c.linear_key_head_dim;
    const int64_t projected = inner + conv_dim + heads_;  // [z | x B C | dt]
    // transformers' registration order: conv1d, in_proj, dt_bias, A_log, norm, D, out_proj (the
    // norm an nn.Identity without parameters when absent: Falcon-H1's mamba_rms_norm false).
    conv_ =
        register_module("conv1d", std::make_shared<Conv1dParameters>(
                                      conv_dim, c.linear_conv_kernel_dim, c.linear_conv_bias, o));
    register_module("in_proj", std::make_shared<Linear>(h, projected, c.linear_proj_bias, o));
    register_parameter("dt_bias", empty({heads_}, o));
    register_parameter("A_log", empty({heads_}, o));
    if (c.linear_gated_norm) {
      norm_ = register_module("norm", std::make_shared<NormWeight>(norm_type_name, inner, o));
    }
    register_parameter("D", empty({heads_}, o));
    const bool out_bias = c.linear_out_proj_bias.value_or(c.linear_proj_bias);
    register_module("out_proj", std::make_shared<Linear>(inner, h, out_bias, o));
    if (style.mup_multipliers) {
      ssm_in_multiplier_ = c.ssm_in_multiplier;
      // FalconH1Model registers it on every mixer after building the layers, non-persistent.
      register_buffer("mup_vector", empty({1, 1, projected}, o), /*persistent=*/false);
    }
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    // Falcon-H1: the input and in_proj's output scaled (Mamba2MixerStyle::mup_multipliers).
    const Tensor in = ssm_in_multiplier_ ? mul(x, *ssm_in_multiplier_) : x;
    Tensor zxbcdt = child("in_proj")->call(in);
    if (ssm_in_multiplier_) zxbcdt = mul(zxbcdt, buffer("mup_vector"));
    const Tensor a = neg(exp(to(parameter("A_log"), DType::kFloat32)));
    const Tensor y = mamba_split_conv1d_scan_combined(
        zxbcdt, conv_->parameter("weight"), conv_->parameter("bias"), parameter("dt_bias"), a,
        parameter("D"), norm_ ? norm_->parameter("weight") : Tensor(), groups_);
    return child("out_proj")->call(view(y, {b, s, heads_ * head_dim_}));
  }

 private:
  int64_t heads_, head_dim_, groups_;
  ModulePtr conv_, norm_;                    // norm_ null without the gated norm
  std::optional<double> ssm_in_multiplier_;  // set with Mamba2MixerStyle::mup_multipliers
};

}  // namespace

void parse_mamba2_config(const ConfigFields& f, ModelConfig& c) {
  const int64_t heads = f.integer("mamba_n_heads", 128);
  const int64_t expand = f.integer("mamba_expand", 2);
  int64_t inner = 0;
  if (heads <= 0) f.fail("mamba_n_heads", "must be positive, got " + std::to_string(heads));
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("mamba_expand",
           std::to_string(expand) + " must be positive, with mamba_expand x hidden_size in int64");
  }
  if (inner % heads != 0) {
    f.fail("mamba_n_heads",
           std::to_string(heads) +
               " does not divide mamba_expand x hidden_size = " + std::to_string(inner));
  }
  int64_t head_dim = inner / heads;
  if (f.has("mamba_d_head") &&
      !(f.raw("mamba_d_head").is_string() && f.raw("mamba_d_head").get<std::string>() == "auto")) {
    head_dim = f.integer("mamba_d_head");
    if (head_dim != inner / heads) {
      f.fail("mamba_d_head", std::to_string(head_dim) + " x mamba_n_heads " +
                                 std::to_string(heads) +
                                 " is not mamba_expand x hidden_size = " + std::to_string(inner) +
                                 "; expected " + std::to_string(inner / heads) + " (or \"auto\")");
    }
  }
  c.linear_num_value_heads = heads;
  c.linear_value_head_dim = head_dim;
  c.linear_num_key_heads = f.integer("mamba_n_groups", 1);
  c.linear_key_head_dim = f.integer("mamba_d_state", 256);
  c.linear_conv_kernel_dim = f.integer("mamba_d_conv", 4);
  c.linear_conv_bias = f.boolean("mamba_conv_bias", true);
  c.linear_proj_bias = f.boolean("mamba_proj_bias", false);
  // The scan's chunk changes the kernels' tiling, not the model: read, priced at kMambaChunk
  // (Note [Mamba-2 scan work] in tensor/ops.h).
  if (f.integer("mamba_chunk_size", 256) <= 0) {
    f.fail("mamba_chunk_size", "must be positive, got " + f.raw("mamba_chunk_size").dump());
  }
  f.has("time_step_limit");  // clamps dt at run time: no shape, no work
}

void mamba2_config_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["mamba_n_heads"] = c.linear_num_value_heads;
  j["mamba_d_head"] = c.linear_value_head_dim;
  j["mamba_expand"] = c.linear_num_value_heads * c.linear_value_head_dim / c.hidden_size;
  j["mamba_n_groups"] = c.linear_num_key_heads;
  j["mamba_d_state"] = c.linear_key_head_dim;
  j["mamba_d_conv"] = c.linear_conv_kernel_dim;
  j["mamba_conv_bias"] = c.linear_conv_bias;
  j["mamba_proj_bias"] = c.linear_proj_bias;
}

ModulePtr make_conv1d_parameters(int64_t channels, int64_t width, bool bias,
                                 const TensorOptions& o) {
  return std::make_shared<Conv1dParameters>(channels, width, bias, o);
}

std::shared_ptr<AttentionBlock> make_mamba2_mixer(const ModelConfig& c,
                                                  const std::string& type_name,
                                                  const std::string& norm_type_name,
                                                  const TensorOptions& o,
                                                  const Mamba2MixerStyle& style) {
  return std::make_shared<Mamba2Mixer>(c, type_name, norm_type_name, o, style);
}

}  // namespace shardplan::tensor::models
