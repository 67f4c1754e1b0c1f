#include "tensor/models/cca_attention.h"

#include <optional>
#include <utility>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"

namespace shardplan::tensor::models {
namespace {

// nn.Conv1d(C, C, width, groups=groups) with its bias: weight [C, C / groups, width], bias [C];
// forward is F.conv1d without padding (the projection pads the sequence itself).
class CcaConv1d : public Module {
 public:
  CcaConv1d(int64_t channels, int64_t width, int64_t groups, const TensorOptions& o)
      : Module("Conv1d"), groups_(groups) {
    register_parameter("weight", empty({channels, channels / groups, width}, o));
    register_parameter("bias", empty({channels}, o));
  }
  Tensor forward(const Tensor& x) override {
    return conv1d(x, parameter("weight"), parameter("bias"), /*stride=*/1, /*padding=*/0,
                  /*dilation=*/1, groups_);
  }

 private:
  int64_t groups_;
};

struct CcaQkv {
  Tensor q, k, v;  // [B, S, H, d], [B, S, K, d], [B, S, K, d]
};

// ZayaCCAProjection (Note [CCA trace] in cca_attention.h).
class CcaProjection : public Module {
 public:
  CcaProjection(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "CCAProjection"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        pad_(c.cca_time0 - 1 + c.cca_time1 - 1) {
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    const int64_t channels = q + kv;
    register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    // Each half as wide as half the values (kv / 2 is exact: parse refuses an odd width).
    register_module("v_proj_current", std::make_shared<Linear>(h, kv / 2, c.qkv_bias, o));
    register_module("v_proj_delayed", std::make_shared<Linear>(h, kv / 2, c.qkv_bias, o));
    register_module("conv_qk_depthwise",
                    std::make_shared<CcaConv1d>(channels, c.cca_time0, channels, o));
    register_module("conv_qk_grouped",
                    std::make_shared<CcaConv1d>(channels, c.cca_time1, heads_ + kv_heads_, o));
  }
  CcaQkv run(const Tensor& x) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    const int64_t groups = heads_ / kv_heads_, q_width = heads_ * d;
    const Tensor q = child("q_proj")->call(x);
    const Tensor k = child("k_proj")->call(x);
    Tensor qk = cat({q, k}, -1);  // [B, S, C]
    // The residual paths: each query head averaged with its group's key head (repeat_kv: an
    // expand and a copy), and each key head the mean of its group's averages.
    const Tensor k_heads = transpose(view(k, {b, s, kv_heads_, d}), 1, 2);  // [B, K, S, d]
    const Tensor k_repeated = transpose(
        reshape(expand(unsqueeze(k_heads, 2), {b, kv_heads_, groups, s, d}), {b, heads_, s, d}), 1,
        2);  // [B, S, H, d]
    const Tensor q_residual = mul(add(view(q, {b, s, heads_, d}), k_repeated), 0.5);
    const Tensor k_residual = mean(reshape(q_residual, {b, s, kv_heads_, groups, d}), {-2});
    // Over time: [B, C, S], left-padded so that both convolutions together keep S outputs.
    qk = transpose(qk, 1, 2);
    if (pad_ > 0) {
      qk = cat({zeros({b, qk.size(1), pad_}, {.dtype = qk.dtype()}), qk}, -1);
    } else {
      qk = contiguous(qk);  // F.pad by nothing still copies
    }
    qk = child("conv_qk_grouped")->call(child("conv_qk_depthwise")->call(qk));
    qk = transpose(qk, 1, 2);  // [B, S, C]
    // Its columns as heads: a view of the transposed output (split, not merged, dimensions).
    const Tensor query = add(reshape(narrow(qk, -1, 0, q_width), {b, s, heads_, d}), q_residual);
    const Tensor key =
        add(reshape(narrow(qk, -1, q_width, kv_heads_ * d), {b, s, kv_heads_, d}), k_residual);
    // The values: the current token's half, and the delayed half one token late, the first token
    // reading v_proj_delayed of a zero token (what transformers computes without a cache).
    const Tensor current = child("v_proj_current")->call(x);
    const Tensor delayed = child("v_proj_delayed")->call(x);
    const Tensor first =
        child("v_proj_delayed")->call(zeros({b, 1, x.size(2)}, {.dtype = x.dtype()}));
    const Tensor shifted = cat({first, narrow(delayed, 1, 0, s - 1)}, 1);
    const Tensor value = view(cat({current, shifted}, -1), {b, s, kv_heads_, d});
    return {query, key, value};
  }

 private:
  int64_t heads_, kv_heads_, head_dim_, pad_;
};

// ZayaQKNorm: q and k scaled to norm sqrt(d) per head, k then times temp per key head.
class CcaQkNorm : public Module {
 public:
  CcaQkNorm(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "QKNorm"), kv_heads_(c.num_key_value_heads), head_dim_(c.head_dim) {
    register_parameter("temp", empty({kv_heads_}, o));
  }
  // q [B, S, H, d], k [B, S, K, d].
  std::pair<Tensor, Tensor> run(const Tensor& q, const Tensor& k) {
    CallScope scope(*this);
    // x sqrt(d) / max(|x|, eps) is x / rms(x): the weightless RMSNorm, its eps the dtype's (the
    // clamp's) in place of a norm epsilon.
    const Tensor qn = rms_norm(q, {head_dim_});
    const Tensor kn = rms_norm(k, {head_dim_});
    return {qn, mul(kn, view(parameter("temp"), {kv_heads_, 1}))};
  }

 private:
  int64_t kv_heads_, head_dim_;
};

// ZayaAttention: o_proj, qkv_proj, qk_norm (the order of its __init__).
class CcaAttention : public AttentionBlock {
 public:
  CcaAttention(const ModelConfig& c, const LayerKind& kind, const std::string& prefix,
               const TensorOptions& o, bool training)
      : AttentionBlock(prefix + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        dropout_(training ? c.attention_dropout : 0.0) {
    if (kind.window > 0) window_ = kind.window;
    const int64_t h = c.hidden_size, q = heads_ * c.head_dim;
    register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    qkv_proj_ = register_module("qkv_proj", std::make_shared<CcaProjection>(c, prefix, o));
    qk_norm_ = register_module("qk_norm", std::make_shared<CcaQkNorm>(c, prefix, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    const CcaQkv p = qkv_proj_->run(x);
    const auto [qn, kn] = qk_norm_->run(p.q, p.k);
    // [B, S, heads, d] -> [B, heads, S, d], then RoPE on the first rotated channels.
    const Tensor q = apply_rotary(transpose(qn, 1, 2), cos_t, sin_t);
    const Tensor k = apply_rotary(transpose(kn, 1, 2), cos_t, sin_t);
    const Tensor v = transpose(p.v, 1, 2);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    return child("o_proj")->call(merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_;
  double dropout_;
  std::optional<int64_t> window_;
  std::shared_ptr<CcaProjection> qkv_proj_;
  std::shared_ptr<CcaQkNorm> qk_norm_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_cca_attention(const ModelConfig& c, const LayerKind& kind,
                                                   const std::string& prefix,
                                                   const TensorOptions& o, bool training) {
  SP_CHECK(c.cca_time0 > 0 && c.cca_time1 > 0, prefix,
           "Attention: compressed convolutional attention needs cca_time0 and cca_time1 >= 1, got ",
           c.cca_time0, " and ", c.cca_time1);
  SP_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0 &&
               (c.num_key_value_heads * c.head_dim) % 2 == 0,
           prefix, "Attention: ", c.num_attention_heads, " heads over ", c.num_key_value_heads,
           " key-value heads of ", c.head_dim,
           ", expected whole groups and an even value width (two halves)");
  return std::make_shared<CcaAttention>(c, kind, prefix, o, training);
}

}  // namespace shardplan::tensor::models
