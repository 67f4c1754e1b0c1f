#include "tensor/models/gated_delta_net.h"

#include "tensor/layers.h"
#include "tensor/models/blocks.h"

namespace shardplan::tensor::models {
namespace {

// nn.Conv1d(channels, channels, K, groups=channels, padding=K-1, bias=False), run as trainers
// run it: causal_conv1d_fn with SiLU, one fused op (tensor/ops.h).
class CausalConv1d : public Module {
 public:
  CausalConv1d(int64_t channels, int64_t width, const TensorOptions& o) : Module("Conv1d") {
    register_parameter("weight", empty({channels, 1, width}, o));
  }
  // x [B, C, L] -> [B, C, L].
  Tensor forward(const Tensor& x) override { return causal_conv1d(x, parameter("weight")); }
};

// Qwen3NextRMSNormGated: RMSNorm over the last dim with a weight (one at init), times silu(z).
class GatedRMSNorm : public Module {
 public:
  GatedRMSNorm(std::string type_name, int64_t dim, double eps, const TensorOptions& o)
      : Module(std::move(type_name)), dim_(dim), eps_(eps) {
    register_parameter("weight", empty({dim}, o));
  }
  Tensor run(const Tensor& x, const Tensor& z) {
    CallScope scope(*this);
    return mul(rms_norm(x, {dim_}, parameter("weight"), eps_), silu(z));
  }

 private:
  int64_t dim_;
  double eps_;
};

// Note [Gated DeltaNet trace] in gated_delta_net.h.
class GatedDeltaNet : public AttentionBlock {
 public:
  GatedDeltaNet(const ModelConfig& c, const std::string& prefix, const TensorOptions& o,
                GatedDeltaProjections projections)
      : AttentionBlock(prefix + "GatedDeltaNet"),
        key_heads_(c.linear_num_key_heads),
        value_heads_(c.linear_num_value_heads),
        dk_(c.linear_key_head_dim),
        dv_(c.linear_value_head_dim),
        layout_(projections),
        double_beta_(c.linear_allow_neg_eigval) {
    const int64_t h = c.hidden_size, key_dim = key_heads_ * dk_, value_dim = value_heads_ * dv_;
    const int64_t conv_dim = 2 * key_dim + value_dim;
    // transformers' registration order: conv1d, in_proj_qkvz, in_proj_ba, dt_bias, A_log, norm,
    // out_proj (Qwen3.5: conv1d, dt_bias, A_log, norm, out_proj, in_proj_qkv, in_proj_z,
    // in_proj_b, in_proj_a; OLMo Hybrid: q_proj, k_proj, v_proj, a_proj, b_proj, g_proj, o_proj,
    // conv1d, A_log, dt_bias, o_norm); the direct parameters list first, as PyTorch lists a
    // module's own.
    if (layout_ == GatedDeltaProjections::kSeparateQkv) {
      register_module("q_proj", std::make_shared<Linear>(h, key_dim, false, o));
      register_module("k_proj", std::make_shared<Linear>(h, key_dim, false, o));
      register_module("v_proj", std::make_shared<Linear>(h, value_dim, false, o));
      register_module("a_proj", std::make_shared<Linear>(h, value_heads_, false, o));
      register_module("b_proj", std::make_shared<Linear>(h, value_heads_, false, o));
      register_module("g_proj", std::make_shared<Linear>(h, value_dim, false, o));
      register_module("o_proj", std::make_shared<Linear>(value_dim, h, false, o));
      register_module("conv1d",
                      std::make_shared<CausalConv1d>(conv_dim, c.linear_conv_kernel_dim, o));
      register_parameter("A_log", empty({value_heads_}, o));
      register_parameter("dt_bias", empty({value_heads_}, o));
      // flash-linear-attention's FusedRMSNormGated eps, which the checkpoints were trained with.
      constexpr double kFlaGatedNormEps = 1e-5;
      norm_ = register_module("o_norm", std::make_shared<GatedRMSNorm>(prefix + "RMSNormGated", dv_,
                                                                       kFlaGatedNormEps, o));
      return;
    }
    register_module("conv1d",
                    std::make_shared<CausalConv1d>(conv_dim, c.linear_conv_kernel_dim, o));
    if (layout_ == GatedDeltaProjections::kFusedPerKeyHead) {
      register_module("in_proj_qkvz",
                      std::make_shared<Linear>(h, 2 * key_dim + 2 * value_dim, false, o));
      register_module("in_proj_ba", std::make_shared<Linear>(h, 2 * value_heads_, false, o));
    }
    register_parameter("dt_bias", empty({value_heads_}, o));
    register_parameter("A_log", empty({value_heads_}, o));
    norm_ = register_module(
        "norm", std::make_shared<GatedRMSNorm>(prefix + "RMSNormGated", dv_, c.norm_eps, o));
    register_module("out_proj", std::make_shared<Linear>(value_dim, h, false, o));
    if (layout_ == GatedDeltaProjections::kSeparate) {
      register_module("in_proj_qkv", std::make_shared<Linear>(h, conv_dim, false, o));
      register_module("in_proj_z", std::make_shared<Linear>(h, value_dim, false, o));
      register_module("in_proj_b", std::make_shared<Linear>(h, value_heads_, false, o));
      register_module("in_proj_a", std::make_shared<Linear>(h, value_heads_, false, o));
    }
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    if (layout_ == GatedDeltaProjections::kSeparateQkv) {
      // OlmoHybridGatedDeltaNet.forward's op order: q, k and v through the convolution, then
      // beta and the decay, the rule, and only then the output gate.
      const Tensor mixed =
          cat({child("q_proj")->call(x), child("k_proj")->call(x), child("v_proj")->call(x)}, -1);
      const auto [q, k, v] = convolve(mixed);
      const Tensor beta = write_strength(child("b_proj")->call(x));
      const Tensor g = decay(child("a_proj")->call(x));
      const Tensor core = rule(q, k, v, g, beta);
      const Tensor z = view(child("g_proj")->call(x), {b, s, value_heads_, dv_});
      return gated_output(core, z, "o_proj");
    }
    if (layout_ == GatedDeltaProjections::kSeparate) {
      const Tensor qkv = child("in_proj_qkv")->call(x);
      const Tensor z = view(child("in_proj_z")->call(x), {b, s, value_heads_, dv_});
      const Tensor beta = write_strength(child("in_proj_b")->call(x));
      const Tensor a = child("in_proj_a")->call(x);
      return mix(qkv, z, beta, a);
    }
    const int64_t r = value_heads_ / key_heads_;
    // Per key head: [q dk | k dk | v r dv | z r dv] and [b r | a r] (fix_query_key_value_ordering).
    const Tensor qkvz =
        view(child("in_proj_qkvz")->call(x), {b, s, key_heads_, 2 * dk_ + 2 * r * dv_});
    const Tensor ba = view(child("in_proj_ba")->call(x), {b, s, key_heads_, 2 * r});
    const Tensor z =
        reshape(narrow(qkvz, 3, 2 * dk_ + r * dv_, r * dv_), {b, s, value_heads_, dv_});
    const Tensor beta = write_strength(reshape(narrow(ba, 3, 0, r), {b, s, value_heads_}));
    const Tensor a = reshape(narrow(ba, 3, r, r), {b, s, value_heads_});
    // q, k and v as one [B, L, 2 n dk + m dv] tensor, as the convolution reads them.
    const Tensor mixed =
        cat({reshape(narrow(qkvz, 3, 0, dk_), {b, s, key_heads_ * dk_}),
             reshape(narrow(qkvz, 3, dk_, dk_), {b, s, key_heads_ * dk_}),
             reshape(narrow(qkvz, 3, 2 * dk_, r * dv_), {b, s, value_heads_ * dv_})},
            -1);
    return mix(mixed, z, beta, a);
  }

 private:
  struct Qkv {
    Tensor q, k, v;
  };
  // The rest of the layer from [q | k | v] [B, L, 2 n dk + m dv], the gate z [B, L, m, dv], beta
  // and a [B, L, m]: the convolution, the decays, the rule, the gated norm and out_proj.
  Tensor mix(const Tensor& mixed, const Tensor& z, const Tensor& beta, const Tensor& a) {
    const auto [q, k, v] = convolve(mixed);
    const Tensor g = decay(a);
    return gated_output(rule(q, k, v, g, beta), z, "out_proj");
  }
  // [q | k | v] through the causal depthwise convolution (with SiLU), split into heads.
  Qkv convolve(const Tensor& mixed) {
    const int64_t b = mixed.size(0), s = mixed.size(1);
    const Tensor conv = transpose(child("conv1d")->call(transpose(mixed, 1, 2)), 1, 2);
    const int64_t key_dim = key_heads_ * dk_;
    return {reshape(narrow(conv, -1, 0, key_dim), {b, s, key_heads_, dk_}),
            reshape(narrow(conv, -1, key_dim, key_dim), {b, s, key_heads_, dk_}),
            reshape(narrow(conv, -1, 2 * key_dim, value_heads_ * dv_), {b, s, value_heads_, dv_})};
  }
  // beta = sigmoid(b), times 2 where negative eigenvalues are allowed (OLMo Hybrid).
  Tensor write_strength(const Tensor& b_logits) const {
    const Tensor beta = sigmoid(b_logits);
    return double_beta_ ? mul(beta, 2.0) : beta;
  }
  // g = -exp(A_log) * softplus(a + dt_bias), in fp32 (softplus as log(1 + exp)).
  Tensor decay(const Tensor& a) {
    const Tensor rate = neg(exp(to(parameter("A_log"), DType::kFloat32)));
    return mul(rate, log(add(exp(add(to(a, DType::kFloat32), parameter("dt_bias"))), 1.0)));
  }
  // q and k repeated to the value heads, then the chunked rule: [B, L, m, dv].
  Tensor rule(Tensor q, Tensor k, const Tensor& v, const Tensor& g, const Tensor& beta) const {
    const int64_t b = q.size(0), s = q.size(1), r = value_heads_ / key_heads_;
    if (r > 1) {  // repeat_interleave(r, dim=2): each key head to its r value heads
      q = reshape(expand(unsqueeze(q, 3), {b, s, key_heads_, r, dk_}), {b, s, value_heads_, dk_});
      k = reshape(expand(unsqueeze(k, 3), {b, s, key_heads_, r, dk_}), {b, s, value_heads_, dk_});
    }
    return chunk_gated_delta_rule(q, k, v, g, beta);
  }
  // The gated norm per value head, norm(core) * silu(z), then the output projection `out`.
  Tensor gated_output(const Tensor& core, const Tensor& z, const char* out) {
    const int64_t b = core.size(0), s = core.size(1);
    const Tensor normed = norm_->run(reshape(core, {b * s * value_heads_, dv_}),
                                     reshape(z, {b * s * value_heads_, dv_}));
    return child(out)->call(reshape(normed, {b, s, value_heads_ * dv_}));
  }

  int64_t key_heads_, value_heads_, dk_, dv_;
  GatedDeltaProjections layout_;
  bool double_beta_;  // ModelConfig::linear_allow_neg_eigval
  std::shared_ptr<GatedRMSNorm> norm_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_gated_delta_net(const ModelConfig& c,
                                                     const std::string& prefix,
                                                     const TensorOptions& o,
                                                     GatedDeltaProjections projections) {
  return std::make_shared<GatedDeltaNet>(c, prefix, o, projections);
}

}  // namespace shardplan::tensor::models
