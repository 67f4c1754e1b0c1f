#include "planner/cost/optimizer_step.h"

#include "base/checked.h"
#include "base/error.h"

namespace shardplan::planner {

// Note [Adam's step]
// torch.optim.Adam (single-tensor path) per element: exp_avg.lerp_(g, 1-b1) is 3 FLOPs;
// exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) 4; denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) +
// eps 3; p.addcdiv_(exp_avg, denom, -step_size) 3; the bias corrections are per-step scalars: 13 in
// all. Traffic: it reads the gradient, the weights it updates (the fp32 master copy when there is
// one) and both moments, and writes the weights and moments back, plus the 16-bit working copy when
// a master copy exists. Mixed-precision Adam: 2 + 4 + 8 read, 4 + 8 + 2 written = 28 bytes.
double adam_flops_per_param() {
  constexpr double kAdamFlops = 3 + 4 + 3 + 3;
  return kAdamFlops;
}

int64_t adam_bytes_per_param(const MixedPrecision& p) {
  const int64_t weights = p.master_bytes > 0 ? p.master_bytes : p.param_bytes;
  return p.grad_bytes + 2 * (weights + p.optimizer_state_bytes) +
         (p.master_bytes > 0 ? p.param_bytes : 0);
}

OptimizerStep adam_step(int64_t params, const MixedPrecision& precision) {
  SP_CHECK(params >= 0, "adam_step: ", params, " parameters, expected a non-negative count");
  OptimizerStep s;
  s.flops = adam_flops_per_param() * static_cast<double>(params);
  SP_CHECK(mul_into(params, adam_bytes_per_param(precision), s.bytes), "adam_step: bytes of ",
           params, " parameters overflow int64");
  return s;
}

}  // namespace shardplan::planner
