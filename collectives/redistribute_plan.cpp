#include "collectives/redistribute_plan.h"

#include <algorithm>

#include "base/error.h"
#include "tensor/dtype.h"

namespace shardplan::collectives {

using mesh::Placement;

int64_t RedistributePlan::num_collectives() const {
  return std::count_if(steps.begin(), steps.end(),
                       [](const RedistributeStep& s) { return s.communicates(); });
}

std::ostream& operator<<(std::ostream& os, const RedistributePlan& p) {
  os << to_string(p.source.placements) << " -> " << to_string(p.target.placements) << ": "
     << p.steps.size() << " steps, " << p.num_collectives() << " collectives";
  for (const RedistributeStep& s : p.steps) os << "\n  " << s;
  return os;
}

nlohmann::ordered_json to_json(const RedistributePlan& p) {
  nlohmann::ordered_json j;
  j["steps"] = nlohmann::ordered_json::array();
  for (const RedistributeStep& s : p.steps) j["steps"].push_back(to_json(s));
  j["collectives"] = p.num_collectives();
  return j;
}

mesh::ShardSpec checked_target(const mesh::ShardSpec& source, std::span<const Placement> target) {
  // make_shard_spec checks the length and the dims, and normalises Shard(-1).
  mesh::ShardSpec out = mesh::make_shard_spec(source.shape, source.strides, source.dtype,
                                              source.mesh, {target.begin(), target.end()});
  for (size_t md = 0; md < out.placements.size(); ++md) {
    if (auto why = refused_transition(source.placements[md], out.placements[md])) {
      SP_FAIL("redistribute [", to_string(source.placements), "] -> [", to_string(out.placements),
              "]: mesh dim ", md, ": ", *why);
    }
  }
  return out;
}

namespace {

// Whether mesh dims before `mesh_dim` split tensor dim d the same way in `a` and `b`
// (docs/semantics.md §3.3's "misaligned nested sharding" test; placements compared exactly, so S(0)
// and SS(0, 2) differ).
bool same_outer_levels(std::span<const Placement> a, std::span<const Placement> b, size_t mesh_dim,
                       int64_t d) {
  for (size_t j = 0; j < mesh_dim; ++j) {
    const bool sa = a[j].is_any_shard() && a[j].shard_dim() == d;
    const bool sb = b[j].is_any_shard() && b[j].shard_dim() == d;
    if (sa != sb || (sa && a[j] != b[j])) return false;
  }
  return true;
}

}  // namespace

RedistributePlan plan_redistribute(const mesh::ShardSpec& source,
                                   std::span<const Placement> target) {
  RedistributePlan plan;
  plan.target = checked_target(source, target);
  plan.source = source;
  const std::vector<Placement>& tgt = plan.target.placements;
  std::vector<Placement> cur = source.placements;
  const int64_t itemsize = tensor::itemsize(source.dtype);
  auto emit = [&](size_t md, const Placement& dst) {
    plan.steps.push_back(*detail::step_on(source.shape, itemsize, source.mesh.shape(), cur,
                                          static_cast<int64_t>(md), dst,
                                          detail::OnRefusal::kThrow));
    cur[md] = dst;
  };

  const bool has_shard =
      std::any_of(cur.begin(), cur.end(), [](const Placement& p) { return p.is_any_shard(); });
  if (has_shard) {
    // Pass 1, inner -> outer: inner levels leave first, so each outer level is the innermost split
    // of its dim by the time it changes.
    for (size_t md = cur.size(); md-- > 0;) {
      Placement interim = tgt[md];
      if (interim.is_any_shard() && !same_outer_levels(cur, tgt, md, interim.shard_dim())) {
        interim = mesh::Replicate{};
      }
      if (cur[md].is_any_shard() && interim.is_any_shard() && cur[md] != interim &&
          (cur[md].is_strided_shard() || interim.is_strided_shard())) {
        interim = mesh::Replicate{};
      }
      if (cur[md] != interim) emit(md, interim);
    }
  }
  // Pass 2, outer -> inner: new splits are applied left to right, as the layout nests them.
  for (size_t md = 0; md < cur.size(); ++md) {
    if (cur[md] != tgt[md]) emit(md, tgt[md]);
  }
  return plan;
}

}  // namespace shardplan::collectives
