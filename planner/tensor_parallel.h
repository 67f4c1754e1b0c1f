// A model family's tensor-parallel plan as parallel-style rules (tensor/models/family.h
// ModelFamily::tp_plan, mesh/parallel_style.h), and what one rank then holds of the parameters.
//   std::vector<mesh::StyleRule> rules = tensor_parallel_rules(family_of(cfg));
//   int64_t n = tp_rank_parameters(cfg, 8);   // parameters on TP rank 0 of 8 (all layers)
#pragma once

#include <cstdint>
#include <vector>

#include "mesh/parallel_style.h"
#include "tensor/models/family.h"

namespace shardplan::planner {

// The family's rules with their styles parsed. Throws shardplan::Error naming the family when it
// has no plan ("model family gpt2 has no tensor-parallel plan yet, expected --tp 1").
std::vector<mesh::StyleRule> tensor_parallel_rules(const tensor::ModelFamily& family);

// Parameters (tied ones once) that TP rank `rank` of `tp` holds: the model built from `c` on meta,
// laid out by parallelize_module on a one-dim mesh named "tp", each parameter's local shape from
// its ShardSpec. tp = 1 is the whole model.
int64_t tp_rank_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t rank = 0);

}  // namespace shardplan::planner
