// What the optimizer step of one training iteration costs a rank: FLOPs and HBM traffic of Adam
// over the parameter elements the rank updates (all of them under plain DP, 1/dp of them under
// ZeRO 1-3), for the mixed-precision recipe of planner/cost/model_state_memory.h.
//   OptimizerStep s = adam_step(2128, MixedPrecision::adam_16bit());
//   s.flops;  // 13 * 2128          s.bytes;  // 28 * 2128
#pragma once

#include <cstdint>

#include "planner/cost/model_state_memory.h"

namespace shardplan::planner {

struct OptimizerStep {
  double flops = 0;
  int64_t bytes = 0;  // read + written
  bool operator==(const OptimizerStep&) const = default;
};

// FLOPs torch.optim.Adam spends per parameter element (Note [Adam's step] in optimizer_step.cpp).
double adam_flops_per_param();

// HBM bytes per parameter element of Adam's step under `precision` (same Note).
int64_t adam_bytes_per_param(const MixedPrecision& precision);

// Adam's step over `params` elements. Throws shardplan::Error for negative counts or a byte total
// that overflows int64.
OptimizerStep adam_step(int64_t params, const MixedPrecision& precision);

}  // namespace shardplan::planner
