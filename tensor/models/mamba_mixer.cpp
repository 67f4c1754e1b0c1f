#include "tensor/models/mamba_mixer.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/checked.h"
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
      const double eps = c.linear_norm_eps > 0 ? c.linear_norm_eps : c.norm_eps;
      auto norm = [&](int64_t dim) {
        return std::make_shared<RMSNorm>(DimVector{dim}, eps, style.bcdt_norm_weights, o);
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

void parse_mamba1_config(const ConfigFields& f, ModelConfig& c) {
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu" && act != "swish") {
    f.fail("hidden_act", "'" + act +
                             "' is not built; expected \"silu\" (causal-conv1d's kernel applies it "
                             "after the convolution, and the gate is SiLU whatever it says)");
  }
  c.hidden_act = "silu";  // ACT2FN's "swish" is SiLU
  int64_t inner = 0;
  if (f.has("intermediate_size")) {
    inner = f.integer("intermediate_size");
    if (inner <= 0) f.fail("intermediate_size", "must be positive, got " + std::to_string(inner));
    (void)f.has("expand");  // read by the class, then replaced by the key above
  } else {
    const int64_t expand = f.integer("expand", 2);
    if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
      f.fail("expand",
             std::to_string(expand) + " must be positive, with expand x hidden_size in int64");
    }
  }
  // "auto": ceil(hidden_size / 16), as MambaConfig.__post_init__ computes it.
  int64_t rank = c.hidden_size / 16 + (c.hidden_size % 16 != 0 ? 1 : 0);
  if (f.has("time_step_rank")) {
    const nlohmann::json& v = f.raw("time_step_rank");
    if (v.is_string() && v.get<std::string>() != "auto") {
      f.fail("time_step_rank", v.dump().substr(0, 40) +
                                   " is not a rank; expected a positive integer or \"auto\" "
                                   "(ceil(hidden_size / 16))");
    }
    if (!v.is_string()) rank = f.integer("time_step_rank");
    if (rank <= 0) f.fail("time_step_rank", "must be positive, got " + std::to_string(rank));
  }
  c.linear_num_value_heads = inner;
  c.linear_value_head_dim = 1;
  c.linear_num_key_heads = 1;
  c.linear_key_head_dim = f.integer("state_size", 16);
  c.linear_conv_kernel_dim = f.integer("conv_kernel", 4);
  c.linear_conv_bias = f.boolean("use_conv_bias", true);
  c.linear_proj_bias = f.boolean("use_bias", false);
  c.linear_dt_rank = rank;
  c.num_attention_heads = inner;
  c.num_key_value_heads = inner;
  c.head_dim = 1;
  c.intermediate_size = inner;
}

void mamba1_config_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  const int64_t inner = c.linear_num_value_heads;
  SP_CHECK(c.linear_value_head_dim == 1 && c.linear_num_key_heads == 1 &&
               c.num_attention_heads == inner && c.num_key_value_heads == inner &&
               c.head_dim == 1 && c.intermediate_size == inner,
           c.model_type, ": a Mamba-1 mixer of ", inner,
           " channels is written as heads of width 1 in one group, with the attention sizes its ",
           "channels; got linear_value_head_dim ", c.linear_value_head_dim,
           ", linear_num_key_heads ", c.linear_num_key_heads, ", num_attention_heads ",
           c.num_attention_heads, ", num_key_value_heads ", c.num_key_value_heads, ", head_dim ",
           c.head_dim, ", intermediate_size ", c.intermediate_size);
  j["hidden_act"] = c.hidden_act;
  j["intermediate_size"] = inner;
  // The key above wins over it; written where it states the same width.
  if (c.hidden_size > 0 && inner % c.hidden_size == 0) j["expand"] = inner / c.hidden_size;
  j["state_size"] = c.linear_key_head_dim;
  j["conv_kernel"] = c.linear_conv_kernel_dim;
  j["use_conv_bias"] = c.linear_conv_bias;
  j["use_bias"] = c.linear_proj_bias;
  j["time_step_rank"] = c.linear_dt_rank;
}

std::shared_ptr<AttentionBlock> make_mamba_mixer(const ModelConfig& c, const std::string& type_name,
                                                 const TensorOptions& o,
                                                 const MambaMixerStyle& style) {
  return std::make_shared<SelectiveScanMixer>(c, type_name, o, style);
}

}  // namespace shardplan::tensor::models
