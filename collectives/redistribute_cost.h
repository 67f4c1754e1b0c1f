// Pricing a redistribution plan on a mesh's links: each communicating step becomes a
// CollectiveCall on its mesh dim's GroupLinks and is priced by collective_cost (cost_model.h);
// local steps are free. The planner's cost function and the CLI share it.
//   auto links = collectives::mesh_dim_links(topo, spec.mesh.shape());
//   PlanPrice p = price_plan(plan_redistribute(spec, target), links);   // p.total_time_s
//   plan_min_cost_redistribute(spec, target, link_time_cost(links));   // fastest plan
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/min_cost_redistribute.h"
#include "collectives/topology.h"

namespace shardplan::collectives {

// The collective a communicating step runs on `links` (bytes = step.bytes_per_rank, nccl-tests'
// S). Throws shardplan::Error for a local step or when links.group_size != step.group_size.
CollectiveCall collective_call(const RedistributeStep& step, const collectives::GroupLinks& links);

struct PlanPrice {
  std::vector<std::optional<CollectiveCost>> steps;  // one per plan step; none for local steps
  double total_time_s = 0;                           // steps run one after another
};

// Throws shardplan::Error when `dim_links` does not have one entry per mesh dim of the plan.
PlanPrice price_plan(const RedistributePlan& plan,
                     std::span<const collectives::GroupLinks> dim_links);

// Seconds of one step on its mesh dim's links (0 for local steps): the cost function for
// plan_min_cost_redistribute. Keeps its own copy of the links.
StepCostFn link_time_cost(std::vector<collectives::GroupLinks> dim_links);

}  // namespace shardplan::collectives
