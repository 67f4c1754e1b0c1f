// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", §4,
// Table 2, Eq. 5-6): activation bytes of a GPT layer and of the first pipeline stage under tensor
// and sequence parallelism and recomputation, in 16-bit activations with 1-byte dropout masks
// (docs/cost-model.md §2.1). The planner measures activations from the trace; these published
// formulas are what the trace is checked against.
//   ActivationFormula f{.s = 2048, .b = 1, .h = 12288, .a = 96, .layers = 96, .t = 8};
//   layer_activation_bytes(f);   // s b h (10 + 24/t + 5 a s / (h t))
#pragma once

#include <cstdint>

#include "tensor/training.h"

namespace shardplan::planner {

struct ActivationFormula {
  int64_t s = 1;           // sequence length
  int64_t b = 1;           // micro-batch
  int64_t h = 1;           // hidden size
  int64_t a = 1;           // attention heads
  int64_t layers = 1;      // L
  int64_t t = 1;           // tensor-parallel size
  int64_t p = 1;           // pipeline-parallel size
  int64_t vocab = 0;       // v
  int64_t interleave = 1;  // model chunks per stage (> 1: interleaved; the paper's m)
  bool sequence_parallel = false;
  tensor::RecomputePolicy recompute = tensor::RecomputePolicy::kNone;
};

// Table 2: one layer's activations in bytes.
//   none:      s b h (34 + 5 a s / h)                 with t = 1
//              s b h (10 + 24 / t + 5 a s / (h t))    tensor parallel
//              s b h (34 / t + 5 a s / (h t))         tensor + sequence parallel
//   selective: s b h (10 + 24 / t), or s b h 34 / t with sequence parallelism
//   full:      2 s b h (only the layer's input), 2 s b h / t with sequence parallelism (the
//              input is then split along the sequence: the paper's "2 s b h L / t" variant)
double layer_activation_bytes(const ActivationFormula& f);

// Eq. 5-6 and §4.3: the first stage holds p micro-batches of L / p layers (L layers' worth), times
// 1 + (p - 1) / (p m) under the interleaved schedule with m chunks per stage, plus the embedding
// dropout mask s b h p / t and, when p = 1, the output layer's 4 s b h (1 + v / h) / t.
double first_stage_activation_bytes(const ActivationFormula& f);

}  // namespace shardplan::planner
