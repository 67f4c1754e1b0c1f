#include "collectives/min_cost_redistribute.h"

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/dtype.h"

namespace shardplan::collectives {

using mesh::Placement;

double bytes_moved_cost(const RedistributeStep& step) {
  const std::optional<CollectiveKind> kind = collective_kind(step.op);
  if (!kind) return 0;
  return static_cast<double>(step.bytes_per_rank) * busbw_factor(*kind, step.group_size);
}

double plan_cost(const RedistributePlan& plan, const StepCostFn& cost) {
  double total = 0;
  for (const RedistributeStep& s : plan.steps) total += cost(s);
  return total;
}

namespace {

// A search state is a mixed-radix number: digit md indexes options[md].
// Bound on the states built: (N+2)^M for N tensor dims and M mesh dims stays far below it for any
// real mesh (4 mesh dims, 8 tensor dims: 10^4); beyond it the caller should use the greedy plan.
constexpr int64_t kMaxStates = int64_t{1} << 20;

// Path length: total cost, then number of steps (so free detours are never taken).
using Dist = std::pair<double, int64_t>;

struct StateSpace {
  std::vector<std::vector<Placement>> options;  // per mesh dim
  std::vector<int64_t> radix;                   // place value of each digit
  int64_t size = 1;

  void decode(int64_t index, std::vector<Placement>* out) const {
    for (size_t md = 0; md < options.size(); ++md) {
      (*out)[md] = options[md][static_cast<size_t>((index / radix[md]) %
                                                   static_cast<int64_t>(options[md].size()))];
    }
  }
  int64_t digit(int64_t index, size_t md) const {
    return (index / radix[md]) % static_cast<int64_t>(options[md].size());
  }
  int64_t encode(std::span<const Placement> ps) const {
    int64_t index = 0;
    for (size_t md = 0; md < options.size(); ++md) {
      const auto& o = options[md];
      const auto it = std::find(o.begin(), o.end(), ps[md]);
      SP_ASSERT(it != o.end(), "placement not among the options of its mesh dim");
      index += (it - o.begin()) * radix[md];
    }
    return index;
  }
};

StateSpace make_state_space(const mesh::ShardSpec& source, const mesh::ShardSpec& target) {
  // Shared candidates: Replicate and every (strided) shard named by the source or the target.
  std::vector<Placement> shared = {mesh::Replicate{}};
  for (const auto* ps : {&source.placements, &target.placements}) {
    for (const Placement& p : *ps) {
      if (p.is_any_shard() && std::find(shared.begin(), shared.end(), p) == shared.end()) {
        shared.push_back(p);
      }
    }
  }
  StateSpace s;
  const size_t m = source.placements.size();
  s.options.resize(m);
  s.radix.resize(m);
  for (size_t md = 0; md < m; ++md) {
    std::vector<Placement>& o = s.options[md];
    const Placement& src = source.placements[md];
    const Placement& dst = target.placements[md];
    if (source.mesh.shape()[md] == 1) {
      // Every placement lays data out alike over one rank: only the endpoints matter.
      o = {src};
      if (dst != src) o.push_back(dst);
    } else {
      // A Partial can only be left (nothing re-enters it), so only the source's is a state.
      if (src.is_partial()) o.push_back(src);
      o.insert(o.end(), shared.begin(), shared.end());
    }
  }
  // Last mesh dim = least significant digit.
  for (size_t md = m; md-- > 0;) {
    s.radix[md] = s.size;
    SP_CHECK(s.size <= kMaxStates / static_cast<int64_t>(s.options[md].size()),
             "min-cost redistribute: more than ", kMaxStates, " placement states for [",
             to_string(source.placements), "] -> [", to_string(target.placements),
             "]; use the greedy planner");
    s.size *= static_cast<int64_t>(s.options[md].size());
  }
  return s;
}

}  // namespace

RedistributePlan plan_min_cost_redistribute(const mesh::ShardSpec& source,
                                            std::span<const Placement> target,
                                            const StepCostFn& cost) {
  RedistributePlan plan;
  plan.target = checked_target(source, target);
  plan.source = source;
  if (plan.target.placements == source.placements) return plan;

  const StateSpace space = make_state_space(source, plan.target);
  const int64_t itemsize = tensor::itemsize(source.dtype);
  const std::span<const int64_t> shape = source.shape;
  const std::span<const int64_t> mesh_shape = source.mesh.shape();
  const size_t m = space.options.size();

  // Every state's one-step changes, in source-state order (what the CSR constructor wants).
  std::vector<std::pair<int64_t, int64_t>> edges;
  std::vector<Dist> weights;
  std::vector<Placement> state(m);
  for (int64_t u = 0; u < space.size; ++u) {
    space.decode(u, &state);
    for (size_t md = 0; md < m; ++md) {
      const int64_t here = space.digit(u, md);
      for (size_t o = 0; o < space.options[md].size(); ++o) {
        const Placement& dst = space.options[md][o];
        if (static_cast<int64_t>(o) == here || dst.is_partial()) continue;
        const std::optional<RedistributeStep> step =
            detail::step_on(shape, itemsize, mesh_shape, state, static_cast<int64_t>(md), dst,
                            detail::OnRefusal::kSkip);
        if (!step) continue;
        const double c = cost(*step);
        SP_CHECK(c >= 0 && !std::isnan(c), "min-cost redistribute: the cost function gave ", c,
                 " for step ", *step, "; expected a cost >= 0");
        edges.emplace_back(u, u + (static_cast<int64_t>(o) - here) * space.radix[md]);
        weights.push_back({c, 1});
      }
    }
  }

  using Graph =
      boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                         boost::no_property, int64_t, int64_t>;
  const Graph g(boost::edges_are_sorted, edges.begin(), edges.end(),
                static_cast<int64_t>(space.size));
  std::vector<Dist> dist(static_cast<size_t>(space.size));
  std::vector<int64_t> pred(static_cast<size_t>(space.size));
  const auto vindex = boost::get(boost::vertex_index, g);
  const Dist inf{std::numeric_limits<double>::infinity(), std::numeric_limits<int64_t>::max()};
  const int64_t from = space.encode(source.placements);
  const int64_t to = space.encode(plan.target.placements);
  boost::dijkstra_shortest_paths(
      g, from,
      boost::predecessor_map(boost::make_iterator_property_map(pred.begin(), vindex))
          .distance_map(boost::make_iterator_property_map(dist.begin(), vindex))
          .weight_map(
              boost::make_iterator_property_map(weights.begin(), boost::get(boost::edge_index, g)))
          .distance_compare(std::less<Dist>())
          .distance_combine([inf](const Dist& a, const Dist& b) {
            // Saturating, so an unreached vertex's infinity never overflows the step count.
            if (a.second == inf.second || b.second == inf.second) return inf;
            return Dist{a.first + b.first, a.second + b.second};
          })
          .distance_inf(inf)
          .distance_zero(Dist{0, 0}));
  // Replicate is reachable from anything and reaches anything, so the target always is.
  SP_ASSERT(pred[static_cast<size_t>(to)] != to, "min-cost redistribute: target unreachable");

  std::vector<int64_t> path = {to};
  while (path.back() != from) path.push_back(pred[static_cast<size_t>(path.back())]);
  space.decode(from, &state);
  for (size_t i = path.size() - 1; i-- > 0;) {
    const int64_t u = path[i + 1], v = path[i];
    size_t md = 0;
    while (space.digit(u, md) == space.digit(v, md)) ++md;
    const Placement& dst = space.options[md][static_cast<size_t>(space.digit(v, md))];
    plan.steps.push_back(*detail::step_on(shape, itemsize, mesh_shape, state,
                                          static_cast<int64_t>(md), dst,
                                          detail::OnRefusal::kThrow));
    state[md] = dst;
  }
  return plan;
}

}  // namespace shardplan::collectives
