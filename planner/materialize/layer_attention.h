// The attention core of one decoder layer of each kind of a plan, as calls of a fused attention
// kernel that do one rank's work, each with the cost model's time: what `shardplan rehearse
// --device cuda` lists for scripts/time_attention.py to time with PyTorch's kernel, and what
// `calibrate --rehearsal` then compares (docs/launching.md "Rehearsal").
//   for (const AttentionCall& c : layer_attention(plan, stack.attention_kernel)) ...
//
// Note [Rehearsed attention]
// The layer GEMMs (Note [Layer GEMMs]) leave the attention core out: it is one fused kernel
// (FlashAttention, cuDNN's), which shardplan does not ship; PyTorch's
// F.scaled_dot_product_attention runs the kernel the stacks assume (Note [Attention kernels]), so
// rehearse states the calls and scripts/time_attention.py times them on the same GPU. Each layer
// kind is traced as the planner traces it (micro-batch, sequence / cp, heads / tp); its fused
// attention op becomes one call doing the rank's share of the work:
//   * a causal square (no window, or one as wide as the sequence; cp 1): the call itself;
//   * a sliding window W narrower than the keys: L queries against W keys, no mask (the band a
//     windowed kernel computes, L W per head);
//   * Llama 4's chunks of C dividing the rank's L tokens: L / C causal squares of C, as a batch;
//   * under context parallelism (or a ragged chunk): the rank's L queries against half the K keys
//     it attends over the ring, no mask: the work a causal mask leaves, in one call (the ring's
//     steps and their overlap are the collectives' rehearsal, not this call's).
// Heads are the rank's (heads / tp, key/value heads / tp and at least one); a replicated
// attention keeps all its heads, and under sequence parallelism runs the rank's 1 / tp of the
// queries against every key. The lightning indexer's scoring (Note [Lightning indexer trace])
// is left out: it runs DeepSeek's own kernel (FP8), which PyTorch has not, so timing PyTorch's
// attention at its shapes would check nothing the plan assumes. Predicted seconds are
// fused_attention_seconds at the call's shape with the cluster's attention rate and the plan's
// stack's kernel (Note [Attention kernels]), without the stack's era factor, as the GEMMs are
// priced: the rehearsal checks the ceiling. The backward includes the recomputed Q K^T, as a
// timed backward does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/candidate/stack_profile.h"
#include "planner/plan/plan_file.h"

namespace shardplan::planner {

struct AttentionCall {
  std::string layer;       // the kind, as describe(LayerKind) words it
  std::string stands_for;  // how the call does the rank's work (Note [Rehearsed attention])
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t queries = 1;
  int64_t keys = 1;
  int64_t head_dim = 1;
  int64_t value_dim = 1;
  bool causal = true;
  double predicted_forward_s = 0;
  double predicted_backward_s = 0;  // the recomputed Q K^T included
};

// Note [Rehearsed attention], one call per layer kind with a fused attention op, in the stack's
// order. Throws shardplan::Error when the plan's model cannot be traced.
std::vector<AttentionCall> layer_attention(const PlanFile& plan, AttentionKernel kernel);

// The calls as rehearse's `compute.attention_calls`: every field above, named as
// scripts/time_attention.py and calibrate's attention rows read them (queries as "seq").
nlohmann::ordered_json attention_calls_json(const std::vector<AttentionCall>& calls);

}  // namespace shardplan::planner
