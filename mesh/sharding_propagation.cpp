#include "mesh/sharding_propagation.h"

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "base/error.h"

namespace shardplan::mesh {

double estimated_redistribute_bytes(const ShardSpec& current,
                                    const std::vector<Placement>& target) {
  SP_CHECK(target.size() == current.placements.size(), "redistribute cost: ", target.size(),
           " target placements for a ", current.placements.size(), "-d mesh");
  constexpr double kRefused = std::numeric_limits<double>::infinity();
  const MeshCoord origin(static_cast<size_t>(current.mesh.ndim()), 0);
  double b = static_cast<double>(local_bytes(current, origin));  // bytes held per rank now
  double cost = 0;
  for (size_t md = 0; md < target.size(); ++md) {
    const Placement& from = current.placements[md];
    const Placement& to = target[md];
    if (from == to) continue;
    const auto n = static_cast<double>(current.mesh.size(static_cast<int64_t>(md)));
    if (from.is_any_shard()) {
      if (to.is_replicate()) {  // all_gather
        cost += b * (n - 1);
        b *= n;
      } else if (to.is_any_shard()) {  // all_to_all
        cost += b * (n - 1) / n;
      } else {
        return kRefused;  // Shard -> Partial
      }
    } else if (from.is_partial()) {
      if (to.is_replicate()) {  // all_reduce
        cost += 2 * b * (n - 1) / n;
      } else if (to.is_any_shard()) {  // reduce_scatter
        cost += b * (n - 1) / n;
        b /= n;
      } else {
        return kRefused;  // Partial(a) -> Partial(b)
      }
    } else if (to.is_any_shard()) {  // Replicate -> Shard: a local chunk
      b /= n;
    }  // Replicate -> Partial: local (zeros or value/n), free
  }
  return cost;
}

size_t select_min_cost(const std::vector<std::vector<double>>& costs,
                       const std::vector<bool>& matches_current) {
  SP_CHECK(!costs.empty(), "sharding propagation: no candidate strategy survived the ",
           "shardability filter");
  SP_ASSERT(matches_current.size() == costs.size());
  if (costs.size() == 1) return 0;
  std::vector<double> total;
  for (const auto& c : costs) {
    double t = 0;
    for (double x : c) t += x;
    total.push_back(t);
  }
  size_t best = 0;
  bool any_negative = false;
  for (size_t i = 0; i < total.size(); ++i) {
    if (total[i] < 0 && (!any_negative || total[i] < total[best])) best = i, any_negative = true;
  }
  if (any_negative) return best;
  std::optional<size_t> matching_zero, first_zero;
  for (size_t i = 0; i < total.size(); ++i) {
    if (total[i] != 0) continue;
    if (matches_current[i]) matching_zero = i;  // the last one wins
    if (!first_zero) first_zero = i;
  }
  if (matching_zero) return *matching_zero;
  if (first_zero) return *first_zero;
  best = 0;
  for (size_t i = 1; i < total.size(); ++i) {
    if (total[i] < total[best]) best = i;
  }
  SP_CHECK(std::isfinite(total[best]), "sharding propagation: every candidate needs a refused ",
           "transition (Shard -> Partial or Partial(a) -> Partial(b))");
  return best;
}

bool Propagation::needs_redistribution() const {
  for (double c : input_costs) {
    if (c != 0) return true;
  }
  return false;
}

namespace {

// The reason a strict view cannot run on `in` without moving it.
std::string strict_view_reason(const OpCall& call, const ShardSpec& in,
                               const std::vector<Placement>& required) {
  for (size_t md = 0; md < in.placements.size(); ++md) {
    const Placement& p = in.placements[md];
    if (p == required[md] || !p.is_shard()) continue;
    int64_t shards = 1;
    for (size_t k = 0; k < in.placements.size(); ++k) {
      if (in.placements[k].is_shard(p.shard_dim())) shards *= in.mesh.size(static_cast<int64_t>(k));
    }
    std::string why = detail::view_keep_refusal(call, p.shard_dim(), shards);
    if (!why.empty()) return why;
  }
  return "the input placements would have to change";
}

}  // namespace

Propagation propagate(OpCall call, const std::vector<ShardSpec>& inputs,
                      const RedistributeCostFn& cost) {
  SP_CHECK(!inputs.empty(), "op '", call.op, "': sharding propagation needs at least one input");
  if (call.inputs.empty()) {
    for (const auto& s : inputs) call.inputs.push_back(s.shape);
  }
  SP_CHECK(call.inputs.size() == inputs.size(), "op '", call.op, "': ", call.inputs.size(),
           " input shapes but ", inputs.size(), " sharded inputs");
  const DeviceMesh& mesh = inputs[0].mesh;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SP_CHECK(inputs[i].mesh == mesh, "op '", call.op, "': input ", i, " is on ",
             to_string(inputs[i].mesh), " but input 0 on ", to_string(mesh),
             " (cross-mesh ops are not supported)");
    SP_CHECK(inputs[i].shape == call.inputs[i], "op '", call.op, "': input ", i, " spec shape ",
             inputs[i].shape, " differs from the call's ", call.inputs[i]);
  }
  const std::vector<shardplan::DimVector> out_shapes = output_shapes(call);
  std::vector<OpStrategy> cands = candidate_strategies(call, mesh);
  // Pointwise ops follow an input rather than shopping for the cheapest layout (§5.3): relu of a
  // Partial input is all-reduced to Replicate, not reduce-scattered. Keep the candidates with the
  // followed output (all of them if shardability removed those).
  std::vector<std::vector<Placement>> current;
  for (const auto& s : inputs) current.push_back(s.placements);
  if (auto followed = detail::pointwise_followed_output(call, current, mesh)) {
    std::vector<OpStrategy> kept;
    for (const OpStrategy& s : cands) {
      if (s.outputs[0] == *followed) kept.push_back(s);
    }
    if (!kept.empty()) cands = std::move(kept);
  }
  // Views likewise keep the shards they can and gather the rest (never re-shard another dim).
  if (auto followed = detail::view_followed_input(call, current[0], mesh)) {
    std::vector<OpStrategy> kept;
    for (const OpStrategy& s : cands) {
      if (s.inputs[0] == *followed) kept.push_back(s);
    }
    if (!kept.empty()) cands = std::move(kept);
  }

  std::vector<std::vector<double>> costs;
  std::vector<bool> matches;
  for (const OpStrategy& s : cands) {
    std::vector<double> c;
    bool same = true;
    for (size_t i = 0; i < inputs.size(); ++i) {
      same = same && s.inputs[i] == inputs[i].placements;
      c.push_back(s.inputs[i] == inputs[i].placements ? 0.0 : cost(inputs[i], s.inputs[i]));
    }
    costs.push_back(std::move(c));
    matches.push_back(same);
  }
  Propagation r;
  r.num_candidates = cands.size();
  r.chosen = select_min_cost(costs, matches);
  r.strategy = cands[r.chosen];
  r.input_costs = costs[r.chosen];
  for (double c : r.input_costs) r.total_cost += c;

  if (is_strict_view(call.op) && r.strategy.inputs[0] != inputs[0].placements) {
    std::ostringstream os;
    os << "op '" << call.op << "': cannot view " << call.inputs[0] << " as " << out_shapes[0]
       << " with placements [" << to_string(inputs[0].placements)
       << "] without redistribution: " << strict_view_reason(call, inputs[0], r.strategy.inputs[0])
       << " (use reshape)";
    throw Error(os.str());
  }
  for (size_t o = 0; o < out_shapes.size(); ++o) {
    r.outputs.push_back(
        make_shard_spec(out_shapes[o], inputs[0].dtype, mesh, r.strategy.outputs[o]));
  }
  return r;
}

}  // namespace shardplan::mesh
