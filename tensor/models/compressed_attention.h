// DeepSeek-V4's attention (DeepSeek-AI 2026, "DeepSeek-V4"; transformers'
// modeling_deepseek_v4.py, DeepseekV4Attention): multi-query attention with one head that serves
// as both key and value, queries through a low-rank latent, and a grouped low-rank output
// projection. Every layer attends a sliding window; a compressed layer also attends entries
// that each pool several tokens. Internal to tensor/models/ (family_deepseek_v4.cpp builds it).
// h hidden, n heads, d head_dim, q q_lora_rank, g o_groups, r o_lora_rank; names and order as
// transformers registers them (a module's own parameters first):
//   sinks [n], q_a_proj [q, h], q_a_norm [q], q_b_proj [n d, q], kv_proj [d, h], kv_norm [d],
//   o_a_proj [g r, n d / g] (DeepseekV4GroupedLinear: group j's r outputs read heads
//   j n/g .. (j+1) n/g - 1), o_b_proj [h, g r],
//   compressor (kCompressedSparse, m = compress_rate_csa: DeepseekV4CSACompressor):
//     position_bias [m, 2d], kv_proj [2d, h], gate_proj [2d, h], kv_norm [d],
//     indexer (DeepseekV4Indexer; i heads of e = index_head_dim): position_bias [m, 2e],
//       kv_proj [2e, h], gate_proj [2e, h], kv_norm [e], q_b_proj [i e, q],
//       scorer.weights_proj [i, h]
//   compressor (kHeavilyCompressed, m' = compress_rate_hca: DeepseekV4HCACompressor):
//     position_bias [m', d], kv_proj [d, h], gate_proj [d, h], kv_norm [d]
//
// Note [Compressed attention trace]
// A compressor turns each window of m tokens into one entry: its kv and gate projections, the
// gate plus a learned position bias, a float32 softmax over the window's slots, the weighted sum,
// an RMSNorm and RoPE at the entry's position. The CSA compressor's entries overlap (entry w
// pools the 2m tokens of windows w - 1 and w: each projection is two series of d, stacked as
// 2m slots), the HCA's do not. The S / m entries are appended to the layer's single key-value
// head, and the queries attend them as one fused attention whose keys per query are bounded by
// what each query reads: the sliding window plus index_topk picked entries (CSA), or plus every
// entry (HCA: S / m', what the trace passes). The lightning indexer of a CSA layer pools its own
// entries of e channels the same way and scores them against its i query heads as one fused
// call (Note [Lightning indexer trace] in latent_attention.h), the per-query head weights summing
// the heads' scores. The keys and values carry RoPE on their last rotated channels, so the output
// is rotated back (the same tables, sine negated). transformers' eager code computes the dense
// [S, S + S/m] scores and masks them; DeepSeek's kernels read only the picked keys, which is
// what is counted here. The rotation of pairs of adjacent channels on the trailing channels is
// counted as the half-split rotation of the other families (the same work).
#pragma once

#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// The attention of layer kind `kind` (kSliding, kCompressedSparse or kHeavilyCompressed) of a
// DeepSeek-V4 config; run(x, cos, sin) takes the rotary tables of its layer type.
std::shared_ptr<AttentionBlock> make_compressed_attention(const ModelConfig& c,
                                                          const LayerKind& kind,
                                                          const TensorOptions& o, bool training);

}  // namespace shardplan::tensor::models
