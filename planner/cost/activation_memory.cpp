#include "planner/cost/activation_memory.h"

#include "base/error.h"

namespace shardplan::planner {

double layer_activation_bytes(const ActivationFormula& f) {
  SP_CHECK(f.s >= 1 && f.b >= 1 && f.h >= 1 && f.a >= 1 && f.t >= 1,
           "activation formula: s, b, h, a and t must be positive");
  const double sbh = static_cast<double>(f.s) * static_cast<double>(f.b) * static_cast<double>(f.h);
  const double t = static_cast<double>(f.t);
  const double scores =
      5.0 * static_cast<double>(f.a) * static_cast<double>(f.s) / (static_cast<double>(f.h) * t);
  switch (f.recompute) {
    case tensor::RecomputePolicy::kFull:
      // Only the layer input; under sequence parallelism it is itself split along the sequence.
      return f.sequence_parallel ? 2 * sbh / t : 2 * sbh;
    case tensor::RecomputePolicy::kSelective:
      return f.sequence_parallel ? sbh * 34 / t : sbh * (10 + 24 / t);
    case tensor::RecomputePolicy::kNone:
      break;
  }
  return f.sequence_parallel ? sbh * (34 / t + scores) : sbh * (10 + 24 / t + scores);
}

double first_stage_activation_bytes(const ActivationFormula& f) {
  SP_CHECK(f.layers >= 1 && f.p >= 1 && f.interleave >= 1,
           "activation formula: layers, p and interleave must be positive");
  const double sbh = static_cast<double>(f.s) * static_cast<double>(f.b) * static_cast<double>(f.h);
  const double t = static_cast<double>(f.t), p = static_cast<double>(f.p);
  const double interleave =
      f.interleave > 1 ? 1 + (p - 1) / (p * static_cast<double>(f.interleave)) : 1.0;
  double total = layer_activation_bytes(f) * static_cast<double>(f.layers) * interleave;
  total += sbh * p / t;  // embedding dropout mask
  if (f.p == 1) {
    total += 4 * sbh * (1 + static_cast<double>(f.vocab) / static_cast<double>(f.h)) / t;
  }
  return total;
}

}  // namespace shardplan::planner
