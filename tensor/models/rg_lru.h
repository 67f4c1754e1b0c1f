// Griffin's recurrent block (De et al. 2024, "Griffin: Mixing Gated Linear Recurrences with Local
// Attention for Efficient Language Models", arXiv 2402.19427, §2.3 and §2.4): two branches of
// the normed input, one through a GeLU, the other through a causal depthwise convolution and the
// Real-Gated Linear Recurrent Unit (RG-LRU), multiplied and projected back. The token mixer of
// RecurrentGemma's "recurrent" layers (transformers' RecurrentGemmaRecurrentBlock and
// RecurrentGemmaRglru, modeling_recurrent_gemma.py). Internal to tensor/models/; the
// recurrent_gemma family builds it as a layer's temporal_block:
//   auto block = register_module("temporal_block", make_rg_lru_block(c, "RecurrentGemma", o));
//   Tensor y = block->run(x, position_ids(seq));   // x [B, T, h] -> [B, T, h]
// h hidden, W = lru_width channels in H heads (the RG-LRU's blocks) of w = W / H, K the
// convolution's taps; in named_parameters order:
//   linear_y.weight [W, h], linear_y.bias [W]        the gate branch, act(linear_y(x))
//   linear_x.weight [W, h], linear_x.bias [W]        the recurrent branch
//   linear_out.weight [h, W], linear_out.bias [h]
//   conv_1d.weight [W, 1, K], conv_1d.bias [W]       nn.Conv1d(W, W, K, groups = W), causal
//   rg_lru.recurrent_param [W]                       the decay's log-rate, before softplus
//   rg_lru.input_gate_weight [H, w, w], rg_lru.input_gate_bias [H, w]
//   rg_lru.recurrent_gate_weight [H, w, w], rg_lru.recurrent_gate_bias [H, w]
// ModelConfig keeps H in linear_num_value_heads (and linear_num_key_heads), w in
// linear_value_head_dim (and linear_key_head_dim), K in linear_conv_kernel_dim; the biases are
// linear_proj_bias and linear_conv_bias (always true in RecurrentGemma).
//
// Note [RG-LRU trace]
// Per token, as transformers computes it in training, with two kernels a trainer runs in place of
// its loops: linear_y and the activation (hidden_act, gelu tanh); linear_x; the causal depthwise
// convolution with its bias and no activation, traced as causal-conv1d's causal_conv1d_fn (as
// LFM2's short convolution, docs/cost-model.md §8.10; transformers' nn.Conv1d pads both ends and
// drops K - 1 outputs, not modelled); the RG-LRU: its two gates r and i as block-diagonal
// products, one batched GEMM per gate over the heads ([H, B T, w] x [H, w, w], transformers'
// baddbmm with the bias) and a sigmoid each; log a = -8 r softplus(recurrent_param) (Griffin's
// c = 8), a = exp(log a) and a^2 = exp(2 log a); the gated input x i times sqrt(1 - a^2)
// (SqrtBoundDerivative: a square root whose gradient is clipped); at a position 0 a new sequence
// starts, so there the multiplier is 1 and a is 0 (three more elementwise passes on the position
// ids' reset mask, as transformers runs them); the recurrence h_t = a_t h_{t-1} + x_t as one
// linear_scan op (Note [Linear scan work] in tensor/ops.h; transformers loops over the tokens in
// Python, Griffin's §3.2 runs one kernel); then h times the gate branch and linear_out. The copies
// transformers makes to and from the heads' layout are traced as it makes them (the
// convolution's output read as [B T, H, w], each gate's [H, B T, w] back to [B, T, W]).
// Under tensor parallelism (family_recurrent_gemma.cpp's plan) linear_x and linear_y are
// column-parallel: W splits into contiguous blocks, whole heads per rank when tp divides H, so
// the convolution (per channel), the gates (per head) and the scan (per channel) run on the rank's
// channels without communication, and linear_out is row-parallel. The convolution's and the
// RG-LRU's parameters are held whole on every rank (a style splits Linear modules only).
#pragma once

#include <memory>
#include <string>

#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// What a RecurrentGemma decoder layer calls: x [B, T, h] and the position ids [1, T] (the
// recurrence restarts where a position is 0; the attention rotates by them).
class TemporalBlock : public Module {
 public:
  using Module::Module;
  virtual Tensor run(const Tensor& x, const Tensor& position_ids) = 0;
};

// The recurrent block of `c` (linear_* fields set), typed "<prefix>RecurrentBlock" with its
// RG-LRU "<prefix>Rglru" (prefix "RecurrentGemma").
std::shared_ptr<TemporalBlock> make_rg_lru_block(const ModelConfig& c, const std::string& prefix,
                                                 const TensorOptions& o);

}  // namespace shardplan::tensor::models
