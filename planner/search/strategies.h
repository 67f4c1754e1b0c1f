// The named strategies `shardplan compare` ranks, as filters over the planner's candidates, and
// the defaults `shardplan estimate` fills unpinned dimensions with (docs/user-guide.md "compare").
//   ddp      data parallelism only (tp = pp = cp = 1, ZeRO 0)
//   zero1    ... with optimizer states sharded over dp (ZeRO-1)
//   zero2    ... and gradients (ZeRO-2)
//   fsdp     ... and parameters (ZeRO-3 / FSDP)
//   tp       tensor parallelism (tp > 1) with plain data parallelism, no pipeline
//   fsdp+tp  tensor parallelism with FSDP over dp, no pipeline
//   3d       tensor x pipeline x data parallelism (tp > 1, pp > 1, ZeRO 0 or 1)
//   ep       expert parallelism (ep > 1) with any tp, pp and ZeRO: MoE models
//   auto     every candidate: a superset of the others, so never slower than the best of them
// Each is searched at its best settings (micro-batch, recomputation, sequence parallelism,
// interleaving); context parallelism only in auto, expert parallelism in ep and auto.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/candidate/parallel_config.h"
#include "planner/search/planner.h"

namespace shardplan::planner {

struct Strategy {
  std::string name;
  std::function<bool(const ParallelConfig&)> keep;
  std::string needs;  // what the strategy requires of the job, for "cannot fit" rows
};

// "ddp,fsdp,auto" -> the strategies in that order; throws shardplan::Error naming an unknown name
// (with the nearest one) or an empty list.
std::vector<Strategy> parse_strategies(std::string_view list);
// What compare ranks without --strategies: every strategy, ep only for an MoE model.
std::string default_strategies(const tensor::ModelConfig& model);

// The configuration `estimate` prices: pinned dimensions as given; tp, pp, cp, ep 1, dp the rest
// of the GPUs, ZeRO 0, micro-batch 1, no recomputation, one chunk per stage, sequence
// parallelism when tp > 1. Throws shardplan::Error when the pins leave no whole dp.
ParallelConfig default_config(const TrainingSetup& setup, const Pins& pins, Precision precision);

}  // namespace shardplan::planner
