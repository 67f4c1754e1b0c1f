// Sharding propagation (docs/semantics.md §5.1): given an op call and the current layout of its
// inputs, pick one candidate strategy of op_strategy.h by the cost of moving the inputs to it, and
// derive the output layouts.
//   ShardSpec x = make_shard_spec({8, 16}, DType::kFloat32, mesh4, {Shard{0}});
//   ShardSpec w = make_shard_spec({16, 32}, DType::kFloat32, mesh4, {Replicate{}});
//   Propagation p = propagate(OpCall{"mm"}, {x, w});   // out [S0], cost 0, no redistribution
// The cost function is pluggable: the default estimates the bytes each rank receives; the planner
// passes one priced with collectives (mesh/ cannot include collectives/).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "mesh/op_strategy.h"
#include "mesh/shard_spec.h"

namespace shardplan::mesh {

// Cost of redistributing `current` to `target` placements (one per mesh dim). Must be >= 0, or
// +infinity for a transition that is refused (Shard -> Partial, Partial(a) -> Partial(b)).
using RedistributeCostFn =
    std::function<double(const ShardSpec& current, const std::vector<Placement>& target)>;

// The default cost: bytes one rank receives when the mesh dims are converted left to right
// (all_gather: (n-1) shards; all_reduce: 2(n-1)/n of the buffer; reduce_scatter and all_to_all:
// (n-1)/n; Replicate -> Shard and Replicate -> Partial are local: 0), starting from the largest
// local shard (torch.chunk's first). An estimate for choosing between candidates, not a plan:
// collectives/ gives exact plans.
double estimated_redistribute_bytes(const ShardSpec& current, const std::vector<Placement>& target);

// _select_min_cost_strategy (docs/semantics.md §5.1.3): `costs[c][i]` is candidate c's cost for
// input i and `matches_current[c]` says whether its required inputs equal the current ones. One
// candidate: it. Otherwise, on the summed costs: (a) the most negative total if any is negative;
// (b) the LAST zero-total candidate that matches the current placements; (c) the first zero-total
// candidate; (d) the first minimum. Throws if there is no candidate or every total is infinite.
size_t select_min_cost(const std::vector<std::vector<double>>& costs,
                       const std::vector<bool>& matches_current);

struct Propagation {
  OpStrategy strategy;              // the chosen candidate
  std::vector<ShardSpec> outputs;   // global output shapes on the mesh with its output placements
  std::vector<double> input_costs;  // per input, cost of moving it to the required placements
  double total_cost = 0;
  // Index of the choice among the candidates weighed: candidate_strategies(call, mesh), for
  // pointwise ops narrowed to those with the followed input's output placements.
  size_t chosen = 0;
  size_t num_candidates = 0;
  // True when some input must change placement before the local op runs.
  bool needs_redistribution() const;
};

// Propagates `call` over `inputs` (one ShardSpec per tensor input, all on one mesh; call.inputs
// may be left empty and is then filled from them, else it must match their shapes). Strict views
// (`view`) throw a shardplan::Error instead of redistributing, naming the op, shapes and the reason
// ("Attempted to flatten unevenly sharded dimension ..."). Output dtypes follow input 0.
Propagation propagate(OpCall call, const std::vector<ShardSpec>& inputs,
                      const RedistributeCostFn& cost = estimated_redistribute_bytes);

}  // namespace shardplan::mesh
