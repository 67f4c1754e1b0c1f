// MiniMax's lightning attention (MiniMax 2025, "MiniMax-01: Scaling Foundation Models with
// Lightning Attention", arXiv 2501.08313, §2.2; transformers' MiniMaxLightningAttention in
// modeling_minimax.py): causal linear attention with a fixed decay per head, the token mixer of
// MiniMax-Text-01's linear_attention layers. Internal to tensor/models/: family_minimax.cpp builds
// it, as "self_attn", for the layers that attend kLinear. h hidden, H heads of d
// (num_attention_heads, head_dim: the softmax attention's own, ModelFamily::lightning_mixer), B the
// block (ModelConfig::linear_block_size); in named_parameters order:
//   norm.weight [H d]             RMSNorm over every head's output at once, eps 1e-6 (the class's
//                                 default: the layer passes no rms_norm_eps)
//   qkv_proj.weight [3 H d, h]    per head [q | k | v] (its output viewed [.., H, 3 d])
//   out_proj.weight [h, H d]
//   output_gate.weight [H d, h]
// and the persistent buffers (not parameters; a function of the layer's index) slope_rate
// [H, 1, 1], query_decay and key_decay [H, B, 1], diagonal_decay [1, H, B, B].
//   auto mixer = make_lightning_attention(c, "MiniMax", o);   // "MiniMaxLightningAttention"
//   Tensor y = mixer->run(x, Tensor(), Tensor());               // no RoPE
//
// Note [Lightning attention trace]
// Per token: qkv_proj, then SiLU (the config's hidden_act, MiniMax's act_fn); q, k and v are views
// of it per head, [B, T, H, d], the layout the fused kernel reads; the blocked lightning attention
// as one fused op with the layer's decays (Note [Lightning attention work] in tensor/ops.h); its
// heads merged ([B, T, H d], a view) and normed over the whole width; times
// sigmoid(output_gate(x)); out_proj. transformers multiplies q, k and v by the padding mask first
// (apply_mask_to_padding_states): with no padding, as a planned training batch is packed, an
// all-ones product, not traced. Under tensor parallelism (docs/models.md "Lightning attention"):
// qkv_proj column-parallel, whose rows run head by head ([q | k | v] of head 0, then head 1), so a
// contiguous split hands each rank whole heads with their q, k and v; output_gate column-parallel
// over the same heads; out_proj row-parallel. Each head's state and decay stay on its rank. The
// norm spans every head: a rank norms its heads with the sum of squares all-reduced ([B, T] values,
// not priced, as for OLMo 2's full-width q/k norms), its weight kept whole on every rank.
#pragma once

#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// The lightning attention of `c` (linear_block_size set), typed "<prefix>LightningAttention".
std::shared_ptr<AttentionBlock> make_lightning_attention(const ModelConfig& c,
                                                         const std::string& prefix,
                                                         const TensorOptions& o);

}  // namespace shardplan::tensor::models
