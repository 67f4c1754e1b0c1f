#include "tensor/models/latent_attention.h"

#include <cmath>
#include <optional>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"

namespace shardplan::tensor::models {
namespace {

// Note [Lightning indexer trace]: the indexer's projections, and its scoring as one fused call.
class LightningIndexer : public Module {
 public:
  LightningIndexer(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "Indexer"),
        heads_(c.index_n_heads),
        dim_(c.index_head_dim),
        rope_(c.qk_rope_head_dim) {
    const int64_t h = c.hidden_size;
    register_module("wq_b", std::make_shared<Linear>(c.q_lora_rank, heads_ * dim_, false, o));
    register_module("wk", std::make_shared<Linear>(h, dim_, false, o));
    register_module("k_norm", std::make_shared<LayerNorm>(DimVector{dim_}, 1e-6, true, true, o));
    register_module("weights_proj", std::make_shared<Linear>(h, heads_, false, o));
  }

  // x [B, S, h], q_latent [B, S, q_lora_rank]: the per-query scores of every earlier key,
  // [B, m, S, 1] (what the top-k selection reads).
  Tensor run(const Tensor& x, const Tensor& q_latent, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor q = split_heads(child("wq_b")->call(q_latent), heads_, dim_);
    const Tensor q_all = cat(
        {apply_rotary(narrow(q, -1, 0, rope_), cos_t, sin_t), narrow(q, -1, rope_, dim_ - rope_)},
        -1);
    const Tensor k = split_heads(child("k_norm")->call(child("wk")->call(x)), 1, dim_);
    const Tensor k_all = cat(
        {apply_rotary(narrow(k, -1, 0, rope_), cos_t, sin_t), narrow(k, -1, rope_, dim_ - rope_)},
        -1);
    const Tensor w = split_heads(child("weights_proj")->call(x), 1, heads_);  // [B, 1, S, m]
    return scaled_dot_product_attention(q_all, k_all, narrow(w, -1, 0, 1), Tensor(), 0.0,
                                        /*is_causal=*/true, {}, /*enable_gqa=*/true);
  }

 private:
  int64_t heads_, dim_, rope_;
};

class LatentAttention : public AttentionBlock {
 public:
  LatentAttention(const ModelConfig& c, const LayerKind& kind, const std::string& prefix,
                  const TensorOptions& o, bool training,
                  ModulePtr (*make_norm)(int64_t, double, const TensorOptions&), bool query_gate,
                  bool latent_scales)
      : AttentionBlock(prefix + "Attention"),
        heads_(c.num_attention_heads),
        nope_(c.qk_nope_head_dim),
        rope_(c.qk_rope_head_dim),
        v_(c.v_head_dim),
        kv_lora_(c.kv_lora_rank),
        dropout_(training ? c.attention_dropout : 0.0),
        query_gate_(query_gate) {
    const int64_t h = c.hidden_size, qk = nope_ + rope_;
    auto norm = [&](int64_t dim) {
      return make_norm ? make_norm(dim, c.norm_eps, o)
                       : std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
    };
    SP_ASSERT(!query_gate_ || c.q_lora_rank > 0, "the query gate reads the query latent");
    SP_ASSERT(!latent_scales || c.q_lora_rank > 0, "the query scale is sqrt(h / q_lora_rank)");
    if (latent_scales) {
      q_scale_ = std::sqrt(static_cast<double>(h) / static_cast<double>(c.q_lora_rank));
      kv_scale_ = std::sqrt(static_cast<double>(h) / static_cast<double>(kv_lora_));
    }
    if (c.q_lora_rank > 0) {
      register_module("q_a_proj", std::make_shared<Linear>(h, c.q_lora_rank, c.qkv_bias, o));
      register_module("q_a_layernorm", norm(c.q_lora_rank));
      if (query_gate_) {  // A.X-K2: [query | gate] per head, from the normed and the raw latent
        register_module("q_gate_proj",
                        std::make_shared<Linear>(2 * c.q_lora_rank, heads_ * (qk + v_), false, o));
      } else {
        register_module("q_b_proj", std::make_shared<Linear>(c.q_lora_rank, heads_ * qk, false, o));
      }
    } else {
      register_module("q_proj", std::make_shared<Linear>(h, heads_ * qk, false, o));
    }
    register_module("kv_a_proj_with_mqa",
                    std::make_shared<Linear>(h, kv_lora_ + rope_, c.qkv_bias, o));
    register_module("kv_a_layernorm", norm(kv_lora_));
    register_module("kv_b_proj",
                    std::make_shared<Linear>(kv_lora_, heads_ * (nope_ + v_), false, o));
    register_module("o_proj", std::make_shared<Linear>(heads_ * v_, h, c.o_bias, o));
    if (kind.attention == AttentionType::kSparse) {
      window_ = kind.window;
      if (kind.indexer) {
        indexer_ = register_module("indexer", std::make_shared<LightningIndexer>(c, prefix, o));
      }
    }
  }

  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    // Queries: through the q latent (or directly), [B, n, S, d + r], split into the unrotated
    // and rotated parts.
    Tensor q_latent, q, gate;
    if (query_gate_) {
      // AXK2Attention: q_gate_proj([q_a_layernorm(q_a); q_a]) viewed per head as [query | gate].
      const Tensor q_a = child("q_a_proj")->call(x);
      q_latent = child("q_a_layernorm")->call(q_a);
      const Tensor qg = child("q_gate_proj")->call(cat({q_latent, q_a}, -1));
      const int64_t qk = nope_ + rope_;
      const Tensor per_head = view(qg, {qg.size(0), qg.size(1), heads_, qk + v_});
      q = transpose(narrow(per_head, -1, 0, qk), 1, 2);
      gate = reshape(narrow(per_head, -1, qk, v_), {qg.size(0), qg.size(1), heads_ * v_});
    } else {
      if (!has_child("q_proj")) {
        q_latent = child("q_a_layernorm")->call(child("q_a_proj")->call(x));
      }
      const Tensor qx =
          has_child("q_proj") ? child("q_proj")->call(x) : child("q_b_proj")->call(q_latent);
      q = split_heads(qx, heads_, nope_ + rope_);
    }
    // LongCat-Flash scales both parts of the query (two products, as LongcatFlashMLA splits it).
    Tensor q_nope, q_rope = narrow(q, -1, nope_, rope_);
    if (q_scale_) {
      q_nope = mul(narrow(q, -1, 0, nope_), *q_scale_);
      q_rope = mul(q_rope, *q_scale_);
    }
    const Tensor q_rot = apply_rotary(q_rope, cos_t, sin_t);
    // Keys and values: one latent of kv_lora_rank per token plus one rotated key slice shared by
    // every head, the latent expanded to n heads of d key and v value channels.
    const Tensor kv_a = child("kv_a_proj_with_mqa")->call(x);
    Tensor latent = child("kv_a_layernorm")->call(narrow(kv_a, -1, 0, kv_lora_));
    if (kv_scale_) latent = mul(latent, *kv_scale_);
    const Tensor k_rot =
        apply_rotary(split_heads(narrow(kv_a, -1, kv_lora_, rope_), 1, rope_), cos_t, sin_t);
    const Tensor kv = split_heads(child("kv_b_proj")->call(latent), heads_, nope_ + v_);
    const Tensor v = narrow(kv, -1, nope_, v_);
    const Tensor q_all = cat({q_scale_ ? q_nope : narrow(q, -1, 0, nope_), q_rot}, -1);
    const DimVector shared = {k_rot.size(0), heads_, k_rot.size(2), rope_};
    const Tensor k_all = cat({narrow(kv, -1, 0, nope_), expand(k_rot, shared)}, -1);
    // The indexer selects each query's keys before the attention reads them (DSA layers).
    if (indexer_) (void)indexer_->run(x, q_latent, cos_t, sin_t);
    const Tensor out = scaled_dot_product_attention(q_all, k_all, v, Tensor(), dropout_,
                                                    /*is_causal=*/true, {}, false, window_);
    if (query_gate_) {  // out * sigmoid(gate) in float32, cast back before o_proj
      const Tensor merged = merge_heads(out);
      return child("o_proj")->call(
          to(mul(merged, sigmoid(to(gate, DType::kFloat32))), merged.dtype()));
    }
    return child("o_proj")->call(merge_heads(out));
  }

 private:
  bool has_child(const char* name) const {
    for (const auto& [n, m] : named_children()) {
      if (n == name) return true;
    }
    return false;
  }
  int64_t heads_, nope_, rope_, v_, kv_lora_;
  double dropout_;
  bool query_gate_;
  std::optional<int64_t> window_;              // index_topk on kSparse layers
  std::optional<double> q_scale_, kv_scale_;   // LongCat-Flash's latent scales
  std::shared_ptr<LightningIndexer> indexer_;  // on kSparse layers with their own indexer
};

}  // namespace

std::shared_ptr<AttentionBlock> make_latent_attention(
    const ModelConfig& c, const LayerKind& kind, const std::string& prefix, const TensorOptions& o,
    bool training, ModulePtr (*make_norm)(int64_t dim, double eps, const TensorOptions& o),
    bool query_gate, bool latent_scales) {
  return std::make_shared<LatentAttention>(c, kind, prefix, o, training, make_norm, query_gate,
                                           latent_scales);
}

}  // namespace shardplan::tensor::models
