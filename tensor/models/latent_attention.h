// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2; DeepSeek-AI 2024, "DeepSeek-V2" §2.1):
// keys and values come from one low-rank latent per token, and only a narrow slice of each head
// is rotated. Internal to tensor/models/: the rotary decoder builds it for families whose
// RotaryDecoderStyle::latent_attention is set. Names and shapes are transformers 5's
// (modeling_deepseek_v3.py), h hidden, n heads, r = qk_rope_head_dim, d = qk_nope_head_dim,
// v = v_head_dim:
//   q_a_proj [q_lora_rank, h], q_a_layernorm [q_lora_rank], q_b_proj [n (d + r), q_lora_rank]
//     (or q_proj [n (d + r), h] when q_lora_rank is null)
//   kv_a_proj_with_mqa [kv_lora_rank + r, h], kv_a_layernorm [kv_lora_rank],
//   kv_b_proj [n (d + v), kv_lora_rank], o_proj [h, n v]
// DeepSeek Sparse Attention (DeepSeek-AI 2025, "DeepSeek-V3.2"; transformers'
// modeling_deepseek_v32.py and modeling_glm_moe_dsa.py): a kSparse layer adds, after o_proj, a
// lightning indexer "indexer" of m = index_n_heads heads of e = index_head_dim channels (unless
// it reuses an earlier layer's selection: LayerKind::indexer):
//   wq_b [m e, q_lora_rank] (from the query latent), wk [e, h], k_norm LayerNorm [e] with a bias,
//   weights_proj [m, h]
// Note [Lightning indexer trace]
// The indexer scores every earlier token for each query: per head a product of its query with
// the one shared key, ReLU, summed over heads with per-query weights; the top index_topk keys are
// the ones the attention then reads. Training frameworks run the scoring as one fused kernel (it
// never holds the scores), as FlashAttention runs an attention, so the trace writes it as one
// scaled_dot_product_attention of m heads of e channels against a single key head (grouped
// query), whose one-channel "value" is the per-query weight: 2 L S e FLOPs per head for the
// scores and 2 L S for the weighting, as the real scoring, causal; transformers' eager loop
// (scores materialized, under no_grad) is not what a trainer runs. It keeps its gradient: the
// indexer is trained (DeepSeek's KL loss on a detached input; the trace's gradient into the input
// is a few small GEMMs more). The attention's keys are bounded by index_topk (keys_per_query),
// a band of index_topk keys per query as a sliding window's.
#pragma once

#include <memory>
#include <string>

#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// What a decoder layer calls: x [B, S, h] and the rotary tables of the rotated width.
class AttentionBlock : public Module {
 public:
  using Module::Module;
  virtual Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) = 0;
};

// The latent attention of `c` (c.kv_lora_rank > 0) for a layer of kind `kind` (kSparse: with
// the indexer when kind.indexer); norms by `make_norm` (width, eps, options). With `query_gate`
// (A.X-K2, RotaryDecoderStyle::latent_query_gate) one q_gate_proj [n (d + r + v), 2 q_lora_rank]
// over [q_a_layernorm(q_a); q_a] in place of q_b_proj makes each head's query and an output gate
// as wide as its value: o_proj(out * sigmoid(gate)). With `latent_scales` (LongCat-Flash's
// LongcatFlashMLA, always) the query's two parts are multiplied by sqrt(h / q_lora_rank) and the
// normed key-value latent by sqrt(h / kv_lora_rank) before RoPE and kv_b_proj (its
// mla_scale_q_lora and mla_scale_kv_lora): three elementwise products, no parameter.
std::shared_ptr<AttentionBlock> make_latent_attention(
    const ModelConfig& c, const LayerKind& kind, const std::string& prefix, const TensorOptions& o,
    bool training, ModulePtr (*make_norm)(int64_t dim, double eps, const TensorOptions& o),
    bool query_gate = false, bool latent_scales = false);

}  // namespace shardplan::tensor::models
