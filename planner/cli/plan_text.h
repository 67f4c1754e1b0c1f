// How the verbs that rank plans (plan, estimate, compare) write one plan as text.
//   config_text(c)        // "tp 8 pp 4 dp 2 cp 1 zero 1 mb 1 recompute none v 2 sp"
//   throughput_text(p, r) // "1,234 tokens/s/GPU, 512 TFLOP/s/GPU"
#pragma once

#include <cstdint>
#include <string>

#include "planner/candidate/parallel_config.h"
#include "planner/search/planner.h"

namespace shardplan::cli {

// " (3 layers per chunk)" under partial recomputation, "" when every layer recomputes or none.
std::string recompute_layers_text(int64_t n);
// The degrees and choices of a configuration, the dimensions that split further only where they
// do.
std::string config_text(const planner::ParallelConfig& c);
// Tokens per second per GPU and model TFLOP/s per GPU (what MFU multiplies the peak by).
std::string throughput_text(const planner::Planner& p, const planner::PlanResult& r);

}  // namespace shardplan::cli
