// The throughput figures every plan reports, with the one definition of MFU the planner uses
// (docs/cost-model.md §2.4 "Model FLOPs and MFU"):
//   model FLOPs per token = 6 N + 12 L H Q s   (N active parameters: all for a dense model; L
//   attention layers, H heads, Q head width, s sequence; H Q = h, the hidden size, for GPT)
//   mfu = model FLOPs per token * tokens per step / (GPUs * dense bf16 peak * step time)
// 6 N counts a forward (2 N) and a backward (4 N) multiply-add per parameter (Kaplan et al. 2020,
// "Scaling Laws for Neural Language Models", §2.1); 12 L H Q s counts attention's two products,
// Q K^T and scores x V, forward and backward (Chowdhery et al. 2022, PaLM, Appendix B, whose H Q
// is the heads' width, not the hidden size: they differ for Qwen3, Gemma and Falcon-H1).
// Recomputation is not counted: it is work the plan chose, not work the model needs.
//   double f = model_flops_per_token(find_model_config("gpt2"), 1024);  // 859,885,056
//   double u = mfu(f, 1'048'576, 8, 989e12, 0.5);
#pragma once

#include <cstdint>

#include "tensor/models/model_config.h"

namespace shardplan::planner {

// Every parameter of the model built from `c` (tied weights once), on meta.
int64_t parameter_count(const tensor::ModelConfig& c);

// The parameters one token passes through: all of them for a dense model; for a mixture of
// experts, the routed experts' parameters counted top-k / E times (each token visits k of E).
int64_t active_parameter_count(const tensor::ModelConfig& c);

// 6 N + attention_flops_per_token for sequences of `seq` tokens, N the active parameters: all of
// them for a dense model, the ones a token uses for a mixture of experts (so that MFU stays a
// fraction of the peak; 6 x all of Mixtral's parameters would count work no token does). Layers
// that run more than once a step (HRM-Text's cycles, tensor::layer_passes) count 2 N per forward
// pass and 4 N per backward pass of their weights, and attention alike.
double model_flops_per_token(const tensor::ModelConfig& c, int64_t seq);

// PaLM's 12 L H Q s generalized per layer: 6 s x heads x (q/k width + value width) summed over
// the layers that score keys (softmax attention of any window: the full square, as PaLM and
// torchtitan count it); linear-attention and Mamba layers score none and add nothing. Latent
// attention scores over qk_nope + qk_rope channels and returns v_head_dim (DeepSeek-V3: 192 and
// 128); Gemma 4's full layers use their own global_head_dim.
double attention_flops_per_token(const tensor::ModelConfig& c, int64_t seq);

// The fraction of the GPUs' dense peak the model FLOPs of one step use; in [0, 1] for any
// physically possible step time. Throws shardplan::Error for non-positive inputs.
double mfu(double model_flops_per_token, int64_t tokens_per_step, int64_t gpus,
           double peak_flops_per_gpu, double step_time_s);

}  // namespace shardplan::planner
