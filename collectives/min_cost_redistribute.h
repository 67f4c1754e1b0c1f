// The minimum-cost redistribution planner: a shortest path over placement states (the idea of
// PyTorch's DTensorRedistributePlanner, docs/semantics.md §3.4), solved with Boost.Graph's
// Dijkstra under a cost function of one step.
//   RedistributePlan p = plan_min_cost_redistribute(spec, parse_placements("S1,S1,S1"));
//   auto t = plan_min_cost_redistribute(spec, target, link_time_cost(mesh_dim_links(topo, shape)));
// Default cost: bytes moved per rank. redistribute_cost.h prices a step in seconds on a mesh dim's
// links instead.
#pragma once

#include <functional>
#include <span>

#include "collectives/redistribute_plan.h"

namespace shardplan::collectives {

// The cost of one step; must be >= 0 (and finite). Local steps may cost something too (a clone).
using StepCostFn = std::function<double(const RedistributeStep&)>;

// Bytes one rank sends in the step, the nccl-tests way: bytes_per_rank * busbw_factor
// (all_reduce 2(n-1)/n, all_gather / reduce_scatter / all_to_all (n-1)/n); 0 for local steps.
double bytes_moved_cost(const RedistributeStep& step);

// Sum of `cost` over the plan's steps.
double plan_cost(const RedistributePlan& plan, const StepCostFn& cost);

// Dijkstra from the source placements to the target over states = one placement per mesh dim.
// Edges are the one-step changes make_step accepts (each level changes only as the innermost
// split of its tensor dims, so every state is a layout a ShardSpec describes, in the default
// left-to-right shard order), weighted by `cost`; equal costs prefer fewer steps. A mesh dim's
// candidates are Replicate, every (strided) shard in the source or the target, and its source
// Partial; a size-1 mesh dim has only its source and target placement (its placement changes no
// data). The greedy plan's states are among these up to size-1 dims, whose detours through
// Replicate are noops, so the result never costs more than plan_redistribute's under the same
// cost function (given noops cost >= 0). Throws what checked_target throws, and
// shardplan::Error for a negative or NaN cost.
RedistributePlan plan_min_cost_redistribute(const mesh::ShardSpec& source,
                                            std::span<const mesh::Placement> target,
                                            const StepCostFn& cost = bytes_moved_cost);

}  // namespace shardplan::collectives
