#include "collectives/redistribute_cost.h"

#include <memory>

#include "base/error.h"

namespace shardplan::collectives {

CollectiveCall collective_call(const RedistributeStep& step, const collectives::GroupLinks& links) {
  const std::optional<CollectiveKind> kind = collective_kind(step.op);
  SP_CHECK(kind.has_value(), "redistribute step ", step, " runs no collective");
  SP_CHECK(links.group_size == step.group_size, "redistribute step on mesh dim ", step.mesh_dim,
           " has ", step.group_size, " ranks but its links describe groups of ", links.group_size);
  return CollectiveCall{*kind, step.group_size, step.bytes_per_rank, links};
}

namespace {

double step_time_s(const RedistributeStep& step,
                   std::span<const collectives::GroupLinks> dim_links) {
  if (!step.communicates()) return 0;
  SP_CHECK(step.mesh_dim >= 0 && step.mesh_dim < static_cast<int64_t>(dim_links.size()),
           "redistribute: no links for mesh dim ", step.mesh_dim, " (", dim_links.size(),
           " mesh dims described)");
  return collective_cost(collective_call(step, dim_links[static_cast<size_t>(step.mesh_dim)]))
      .time_s;
}

}  // namespace

PlanPrice price_plan(const RedistributePlan& plan,
                     std::span<const collectives::GroupLinks> dim_links) {
  SP_CHECK(static_cast<int64_t>(dim_links.size()) == plan.source.mesh.ndim(),
           "redistribute: links for ", dim_links.size(), " mesh dims, expected one per dim of the ",
           plan.source.mesh.ndim(), "-d mesh");
  PlanPrice out;
  for (const RedistributeStep& step : plan.steps) {
    if (!step.communicates()) {
      out.steps.emplace_back();
      continue;
    }
    const CollectiveCost c =
        collective_cost(collective_call(step, dim_links[static_cast<size_t>(step.mesh_dim)]));
    out.total_time_s += c.time_s;
    out.steps.emplace_back(c);
  }
  return out;
}

StepCostFn link_time_cost(std::vector<collectives::GroupLinks> dim_links) {
  // Shared so copies of the function (std::function copies its target) do not copy the links.
  auto links = std::make_shared<const std::vector<collectives::GroupLinks>>(std::move(dim_links));
  return [links](const RedistributeStep& step) { return step_time_s(step, *links); };
}

}  // namespace shardplan::collectives
