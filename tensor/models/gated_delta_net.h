// Gated DeltaNet linear attention (Yang, Kautz and Hatamizadeh 2024, "Gated Delta Networks"), the
// token mixer of Qwen3-Next's, Qwen3.5's and OLMo Hybrid's linear_attention layers (kLinear): a
// recurrent state per head in place of keys and values over the whole sequence. Internal to
// tensor/models/: the rotary decoder (and family_olmo_hybrid.cpp) builds it, as "linear_attn",
// for the layers that attend kLinear. Names and shapes are transformers' Qwen3NextGatedDeltaNet
// (modeling_qwen3_next.py; the other layouts are GatedDeltaProjections' below), h hidden, n =
// linear key heads, m = linear value heads (a multiple r of n), dk and dv their widths, K the
// convolution width:
//   dt_bias [m], A_log [m]                                   (the per-head decay parameters)
//   conv1d.weight [2 n dk + m dv, 1, K]                      (depthwise, causal, no bias)
//   in_proj_qkvz.weight [2 n dk + 2 m dv, h]                 (q, k, v and the output gate z,
//                                                             grouped per key head)
//   in_proj_ba.weight [2 m, h]                               (write strength b, decay input a)
//   norm.weight [dv]                                         (gated RMSNorm over each head)
//   out_proj.weight [h, m dv]
// Note [Gated DeltaNet trace]
// The forward traced is transformers' with flash-linear-attention's kernels, which a trainer
// runs: the projections; q, k and v concatenated through the causal depthwise convolution and
// SiLU (causal_conv1d_fn); beta = sigmoid(b) and the log decay g = -exp(A_log) softplus(a +
// dt_bias) in fp32; q and k repeated to the m value heads; the chunked gated delta rule as one
// fused op (Note [Gated delta rule work] in tensor/ops.h); the gated RMSNorm, norm(o) * silu(z);
// out_proj. Under tensor parallelism Megatron-LM splits the layer by key-head groups: the
// in_proj_qkvz and in_proj_ba rows of a group are contiguous, so the column-parallel split of
// each is a split by groups, and the convolution, the rule and the norm of a group stay on its
// rank; out_proj is row-parallel (tensor/models/linear_attention_config.h,
// kLinearAttentionTpPlan). OLMo Hybrid's separate q, k, v, a, b and g projections split the same
// way, each by whole heads (family_olmo_hybrid.cpp, kOlmoHybridTpPlan).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// How the input projections are laid out: Qwen3-Next's two fused ones, grouped per key head, or
// Qwen3.5's four plain ones (Qwen3_5GatedDeltaNet): in_proj_qkv [2 n dk + m dv, h] ([q | k | v]
// over all heads), in_proj_z [m dv, h], in_proj_b [m, h], in_proj_a [m, h], registered after
// out_proj. The work is the same; under tensor parallelism a column split of in_proj_qkv is a
// split of each of its three parts, as Megatron-LM takes it.
// kSeparateQkv is OLMo Hybrid's layout (OlmoHybridGatedDeltaNet, flash-linear-attention's
// GatedDeltaNet layer names), every projection its own and registered before the convolution:
// q_proj, k_proj [n dk, h], v_proj [m dv, h], a_proj, b_proj [m, h], g_proj [m dv, h] (the output
// gate), o_proj [h, m dv], then conv1d, A_log, dt_bias and the gated norm o_norm [dv], whose eps
// is flash-linear-attention's 1e-5 whatever rms_norm_eps says. q, k and v are concatenated for
// the convolution (torch.cat); beta is doubled with ModelConfig::linear_allow_neg_eigval.
enum class GatedDeltaProjections : uint8_t { kFusedPerKeyHead, kSeparate, kSeparateQkv };

// The Gated DeltaNet of `c` (linear_* fields set), typed "<prefix>GatedDeltaNet", its gated norm
// "<prefix>RMSNormGated"; its beta doubled when c.linear_allow_neg_eigval (the write strength in
// [0, 2]: Grazzi et al. 2025, "Unlocking State-Tracking in Linear RNNs Through Negative
// Eigenvalues").
std::shared_ptr<AttentionBlock> make_gated_delta_net(const ModelConfig& c,
                                                     const std::string& prefix,
                                                     const TensorOptions& o,
                                                     GatedDeltaProjections projections);

}  // namespace shardplan::tensor::models
