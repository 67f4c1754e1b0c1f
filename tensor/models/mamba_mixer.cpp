#include "tensor/models/mamba_mixer.h"

#include <memory>
#include <string>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// Note [Mamba-1 trace] in mamba_mixer.h.
class SelectiveScanMixer : public AttentionBlock {
 public:
  SelectiveScanMixer(const ModelConfig& c, const std::string& type_name, const TensorOptions& o,
                     const MambaMixerStyle& style)
      : AttentionBlock(type_name),
        inner_(c.linear_num_value_heads),
        state_(c.linear_key_head_dim),
        rank_(c.linear_dt_rank) {
    SP_CHECK(c.linear_dt_rank > 0 && c.linear_value_head_dim == 1 && c.linear_num_key_heads == 1,
             type_name, ": a Mamba-1 mixer needs linear_dt_rank > 0 and its channels as heads of ",
             "width 1 in one group, got linear_dt_rank ", c.linear_dt_rank,
             ", linear_value_head_dim ", c.linear_value_head_dim, ", linear_num_key_heads ",
             c.linear_num_key_heads);
    const int64_t h = c.hidden_size;
    // transformers' registration order: conv1d, in_proj, x_proj, dt_proj, A_log, D, out_proj, the
    // norms; the module's own parameters (A_log, D) list first.
    conv_ = register_module(
        "conv1d", make_conv1d_parameters(inner_, c.linear_conv_kernel_dim, c.linear_conv_bias, o));
    in_proj_ =
        register_module("in_proj", std::make_shared<Linear>(h, 2 * inner_, c.linear_proj_bias, o));
    x_proj_ =
        register_module("x_proj", std::make_shared<Linear>(inner_, rank_ + 2 * state_, false, o));
    dt_proj_ = register_module("dt_proj", std::make_shared<Linear>(rank_, inner_, true, o));
    register_parameter("A_log", empty({inner_, state_}, o));
    register_parameter("D", empty({inner_}, o));
    out_proj_ =
        register_module("out_proj", std::make_shared<Linear>(inner_, h, c.linear_proj_bias, o));
    if (style.bcdt_norms) {
      auto norm = [&](int64_t dim) {
        return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
      };
      dt_norm_ = register_module("dt_layernorm", norm(rank_));
      b_norm_ = register_module("b_layernorm", norm(state_));
      c_norm_ = register_module("c_layernorm", norm(state_));
    }
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    // [B, T, 2 D] -> [B, 2 D, T], a view; its first half is x, its second the gate z.
    const Tensor xz = transpose(in_proj_->call(x), 1, 2);
    const Tensor a = neg(exp(to(parameter("A_log"), DType::kFloat32)));
    const Tensor gate = narrow(xz, 1, inner_, inner_);
    // causal_conv1d_fn with the SiLU (the family refuses another activation), [B, D, T].
    const Tensor u = causal_conv1d(narrow(xz, 1, 0, inner_), conv_->parameter("weight"),
                                   conv_->parameter("bias"), /*silu=*/true);
    const Tensor dtbc = x_proj_->call(transpose(u, 1, 2));  // [B, T, R + 2 N]
    Tensor dt = narrow(dtbc, -1, 0, rank_);
    Tensor b = narrow(dtbc, -1, rank_, state_);
    Tensor c = narrow(dtbc, -1, rank_ + state_, state_);
    if (dt_norm_) {
      dt = dt_norm_->call(dt);
      b = b_norm_->call(b);
      c = c_norm_->call(c);
    }
    Tensor delta;
    {
      CallScope dt_scope(*dt_proj_);  // dt_proj.weight @ dt^T: [D, R] x [B, R, T] -> [B, D, T]
      delta = matmul(dt_proj_->weight(), transpose(dt, 1, 2));
    }
    // selective_scan_fn copies an input whose last dim is strided: B and C transposed, and z (a
    // half of in_proj's transposed output); u and delta are contiguous already.
    const Tensor y =
        selective_scan(u, delta, a, contiguous(transpose(b, 1, 2)), contiguous(transpose(c, 1, 2)),
                       to(parameter("D"), DType::kFloat32), contiguous(gate),
                       to(dt_proj_->bias(), DType::kFloat32));
    return out_proj_->call(transpose(y, 1, 2));
  }

 private:
  int64_t inner_, state_, rank_;
  ModulePtr conv_;
  std::shared_ptr<Linear> in_proj_, x_proj_, dt_proj_, out_proj_;
  ModulePtr dt_norm_, b_norm_, c_norm_;  // null without MambaMixerStyle::bcdt_norms
};

}  // namespace

std::shared_ptr<AttentionBlock> make_mamba_mixer(const ModelConfig& c, const std::string& type_name,
                                                 const TensorOptions& o,
                                                 const MambaMixerStyle& style) {
  return std::make_shared<SelectiveScanMixer>(c, type_name, o, style);
}

}  // namespace shardplan::tensor::models
