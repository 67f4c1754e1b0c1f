// ZAYA1's attention (Zyphra 2025, "Compressed Convolutional Attention", arXiv 2510.04476;
// transformers' modeling_zaya.py, ZayaAttention): grouped-query attention whose queries and keys
// are mixed over time by two short convolutions, whose values are half the current token's and
// half the previous token's projection, and whose queries and keys are L2-normalized with a learned
// scale per key head. Internal to tensor/models/ (family_zaya.cpp builds it). h hidden, H heads, K
// key-value heads, d head_dim, C = (H + K) d, t0 = cca_time0, t1 = cca_time1; names and order as
// transformers registers them (ZayaAttention's o_proj first):
//   o_proj [h, H d]
//   qkv_proj (ZayaCCAProjection): q_proj [H d, h], k_proj [K d, h], v_proj_current [K d / 2, h],
//     v_proj_delayed [K d / 2, h] (each with a bias by attention_bias, as o_proj),
//     conv_qk_depthwise.{weight [C, 1, t0], bias [C]}, conv_qk_grouped.{weight [C, d, t1], bias
//     [C]}
//   qk_norm (ZayaQKNorm): temp [K]
//
// Note [CCA trace]
// Per layer, as ZayaCCAProjection.forward runs it in training (no cache, no padding mask):
//   q = q_proj(x), k = k_proj(x); the residuals q_r = (q + k repeated to every query head of its
//   group) / 2 and k_r = the mean of q_r over each group;
//   [q; k] over time, left-padded by (t0 - 1) + (t1 - 1) zeros (F.pad: a copy), through the
//   depthwise convolution (one tap set per channel) and the grouped one (groups H + K: each head's
//   d channels mixed with each other over t1 steps), back to [B, S, C]; q and k are its two parts
//   plus q_r and k_r;
//   v = [v_proj_current(x); v_proj_delayed(x) shifted one token later], the first token's delayed
//   half being v_proj_delayed of a zero token (a [B, 1, h] product transformers runs);
// then q and k divided by their L2 norm per head times sqrt(d) (the weightless RMSNorm: q / rms(q)
// is the same vector, one fused kernel as Llama 4's L2 norm is traced), k times temp per key head,
// RoPE on the first int(d partial_rotary_factor) channels, one fused attention (a window on a
// sliding layer), o_proj. The convolutions are conv1d ops (tensor/ops.h): their FLOPs are counted
// but not as matrix products. Under context parallelism a rank needs the t0 + t1 - 2 tokens before
// its chunk for the convolutions and one for the delayed values (not priced, as the short
// convolution's are not: Note [Short convolution trace] in short_conv.h).
#pragma once

#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// The attention of a layer of kind `kind` (kFull, or kSliding with its window) of a config with
// cca_time0 and cca_time1 set, typed "<prefix>Attention" (its parts "<prefix>CCAProjection" and
// "<prefix>QKNorm"); run(x, cos, sin) takes the rotary tables of the rotated width, [1, 1, S, r].
std::shared_ptr<AttentionBlock> make_cca_attention(const ModelConfig& c, const LayerKind& kind,
                                                   const std::string& prefix,
                                                   const TensorOptions& o, bool training);

}  // namespace shardplan::tensor::models
