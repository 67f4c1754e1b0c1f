// `compare --clusters A,B,C --gpus N1,N2,...`: the same job priced on every cluster at every GPU
// count, with what it costs (docs/user-guide.md "Which cluster"):
//   shardplan compare --model llama3-70b --clusters dgx-h100,hgx-h200 --gpus 64,128
//       --seq 4k --global-batch 256 --price-per-gpu-hour 2.5 --tokens 15T [--svg s.svg]
// One row per (cluster, GPU count, strategy): the best plan of the strategy (auto unless
// --strategies says), its throughput in total and per GPU, the scaling efficiency against the
// cluster's smallest GPU count, and, when a price per GPU-hour is known (--price-per-gpu-hour, or
// the cluster file's price_per_gpu_hour_usd), the cost per million tokens; with --tokens, the days
// and dollars to train that many tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "planner/cli/cli_common.h"
#include "planner/cli/plan_args.h"

namespace shardplan::cli {

struct SweepOptions {
  std::string strategies;       // "" = auto
  std::optional<double> price;  // --price-per-gpu-hour, USD, overrides the files'
  int64_t tokens = 0;           // --tokens: a training budget (0: none)
  std::string svg;              // --svg: the scaling chart ("" = none)
};

void run_compare_sweep(CliContext& ctx, const PlanArgs& a, const SweepOptions& o);

// Cost of a million tokens at `tokens_per_s` on `gpus` GPUs at `price` USD per GPU-hour.
double cost_per_million_tokens(double price, int64_t gpus, double tokens_per_s);

}  // namespace shardplan::cli
