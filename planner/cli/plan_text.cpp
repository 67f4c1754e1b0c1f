#include "planner/cli/plan_text.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "planner/cli/text_format.h"
#include "tensor/training.h"

namespace shardplan::cli {

std::string recompute_layers_text(int64_t n) {
  if (n <= 0) return "";
  return " (" + std::to_string(n) + (n == 1 ? " layer" : " layers") + " per chunk)";
}

std::string config_text(const planner::ParallelConfig& c) {
  std::ostringstream os;
  os << "tp " << c.tp << " pp " << c.pp << " dp " << c.dp << " cp " << c.cp;
  if (c.ep > 1) os << " ep " << c.ep;
  if (c.etp > 0 && c.etp != c.tp) os << " etp " << c.etp;
  os << " zero " << c.zero << " mb " << c.micro_batch << " recompute "
     << tensor::to_string(c.recompute);
  os << recompute_layers_text(c.recompute_layers);
  if (c.virtual_stages > 1) os << " v " << c.virtual_stages;
  if (c.sequence_parallel) os << " sp";
  return os.str();
}

std::string throughput_text(const planner::Planner& p, const planner::PlanResult& r) {
  const double per_gpu = r.tokens_per_s / static_cast<double>(p.setup().gpus);
  std::ostringstream os;
  os << with_commas(static_cast<int64_t>(std::llround(per_gpu))) << " tokens/s/GPU, " << std::fixed
     << std::setprecision(0) << r.mfu * p.context().compute.peak_flops / 1e12 << " TFLOP/s/GPU";
  return os.str();
}

}  // namespace shardplan::cli
