#include "planner/materialize/dry_run.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/error.h"
#include "planner/candidate/candidate_mesh.h"

namespace shardplan::planner {
namespace {

// Mixed-radix index of the coordinates `coord` takes on `dims` (sizes from `shape`).
int64_t sub_index(std::span<const int64_t> coord, std::span<const int64_t> dims,
                  std::span<const int64_t> shape) {
  int64_t index = 0;
  for (const int64_t d : dims) index = index * shape[d] + coord[d];
  return index;
}

// The coordinate with that index on the positions `positions` of `sizes` (others 0).
void unravel_into(int64_t index, std::span<const int64_t> sizes, std::span<const size_t> positions,
                  std::vector<int64_t>& out) {
  std::fill(out.begin(), out.end(), 0);
  for (size_t k = positions.size(); k-- > 0;) {
    const size_t pos = positions[k];
    out[pos] = index % sizes[pos];
    index /= sizes[pos];
  }
}

// For tensor dim `dim` of parameter `i`: the shards along it, over every coordinate of the mesh
// dims that shard it, must be disjoint and cover [0, size) (their product then tiles the tensor:
// each mesh dim shards one tensor dim). Returns the number of coordinates checked.
int64_t check_dim_tiling(const MaterialLayout& l, size_t i, int64_t dim) {
  const MaterialParameter& m = l.parameters()[i];
  const std::vector<int64_t>& sub_sizes = m.spec.mesh.shape();
  std::vector<size_t> positions;
  for (size_t k = 0; k < m.shard_dims.size(); ++k) {
    if (m.spec.placements[k].shard_dim() == dim) positions.push_back(k);
  }
  int64_t combos = 1;
  for (const size_t pos : positions) combos *= sub_sizes[pos];
  std::vector<mesh::IndexRange> all;
  std::vector<int64_t> sub(m.shard_dims.size(), 0);
  for (int64_t c = 0; c < combos; ++c) {
    unravel_into(c, sub_sizes, positions, sub);
    const LocalParameter part = l.local_part(i, sub);
    for (const mesh::IndexRange& r : part.ranges[static_cast<size_t>(dim)]) all.push_back(r);
  }
  std::sort(all.begin(), all.end(),
            [](const mesh::IndexRange& a, const mesh::IndexRange& b) { return a.begin < b.begin; });
  const int64_t size = m.plan->shape[static_cast<size_t>(dim)];
  int64_t next = 0;
  for (const mesh::IndexRange& r : all) {
    if (r.size() == 0) continue;
    SP_CHECK(r.begin == next, "parameter '", m.plan->name, "' dim ", dim, ": shards ",
             r.begin < next ? "overlap" : "leave a gap", " at index ", std::min(r.begin, next),
             " (expected shards that cover 0..", size, " once)");
    next = r.end;
  }
  SP_CHECK(next == size, "parameter '", m.plan->name, "' dim ", dim, ": shards cover 0..", next,
           " of ", size);
  return combos;
}

}  // namespace

DryRunReport dry_run(const MaterialLayout& l, int64_t device_memory_bytes) {
  DryRunReport out;
  const mesh::DeviceMesh& dm = l.mesh();
  const std::vector<int64_t>& shape = dm.shape();
  const std::vector<MaterialParameter>& params = l.parameters();
  out.ranks = dm.size();
  out.parameters = static_cast<int64_t>(params.size());
  out.device_memory_bytes = device_memory_bytes;

  // Launch ranks: each of 0 .. world-1 exactly once.
  std::vector<int64_t> ranks = dm.ranks();
  std::sort(ranks.begin(), ranks.end());
  for (size_t r = 0; r < ranks.size(); ++r) {
    SP_CHECK(ranks[r] == static_cast<int64_t>(r), "the plan's mesh does not hold launch rank ", r,
             " exactly once");
  }
  // Communicator groups: dim d splits the world into world / size groups of `size` ranks.
  for (size_t d = 0; d < shape.size(); ++d) {
    out.groups.push_back({dm.dim_names()[d], shape[d], out.ranks / shape[d]});
  }

  // Init streams: one per parameter, keyed on its name; two names with one key would draw the
  // same numbers.
  std::map<uint64_t, const std::string*> keys;
  for (const MaterialParameter& m : params) {
    const auto [it, fresh] = keys.emplace(m.fill.tensor_key, &m.plan->name);
    SP_CHECK(fresh, "parameters '", *it->second, "' and '", m.plan->name,
             "' hash to the same init stream key");
    out.elements += m.numel;
  }

  // Per parameter: tiling per tensor dim, and the bytes of every distinct shard.
  std::vector<std::vector<int64_t>> shard_bytes(params.size());
  std::vector<std::vector<int64_t>> by_stage(static_cast<size_t>(shape[kPpDim]));
  for (size_t i = 0; i < params.size(); ++i) {
    const MaterialParameter& m = params[i];
    for (int64_t dim = 0; dim < static_cast<int64_t>(m.plan->shape.size()); ++dim) {
      out.shards_checked += check_dim_tiling(l, i, dim);
    }
    const std::vector<int64_t>& sub_sizes = m.spec.mesh.shape();
    int64_t n = 1;
    for (const int64_t s : sub_sizes) n *= s;
    std::vector<size_t> all_positions(sub_sizes.size());
    for (size_t k = 0; k < all_positions.size(); ++k) all_positions[k] = k;
    std::vector<int64_t> sub(sub_sizes.size(), 0);
    shard_bytes[i].resize(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) {
      unravel_into(c, sub_sizes, all_positions, sub);
      shard_bytes[i][static_cast<size_t>(c)] = l.local_part(i, sub).bytes;
    }
    SP_CHECK(m.plan->stage >= 0 && m.plan->stage < shape[kPpDim], "parameter '", m.plan->name,
             "' is on stage ", m.plan->stage, ", expected 0..", shape[kPpDim] - 1);
    by_stage[static_cast<size_t>(m.plan->stage)].push_back(static_cast<int64_t>(i));
  }

  // Every rank's bytes, summed from the tables; ranks grouped by (stage, bytes).
  std::map<std::pair<int64_t, int64_t>, RankClass> classes;
  std::vector<int64_t> coord(shape.size(), 0);
  for (int64_t pos = 0; pos < out.ranks; ++pos) {
    int64_t rest = pos;
    for (size_t d = shape.size(); d-- > 0;) {
      coord[d] = rest % shape[d];
      rest /= shape[d];
    }
    const std::vector<int64_t>& on_stage = by_stage[static_cast<size_t>(coord[kPpDim])];
    int64_t bytes = 0;
    int64_t held = 0;
    for (const int64_t i : on_stage) {
      const MaterialParameter& m = params[static_cast<size_t>(i)];
      ++held;
      bytes += shard_bytes[static_cast<size_t>(i)]
                          [static_cast<size_t>(sub_index(coord, m.shard_dims, shape))];
    }
    const int64_t rank = dm.rank_at(coord);
    SP_CHECK(device_memory_bytes <= 0 || bytes <= device_memory_bytes, "rank ", rank,
             " would allocate ", bytes, " bytes of parameters, more than its device's ",
             device_memory_bytes);
    RankClass& c = classes[{coord[kPpDim], -bytes}];
    c.stage = coord[kPpDim];
    c.bytes = bytes;
    c.parameters = held;
    ++c.count;
    if (c.first_ranks.size() < 3) c.first_ranks.push_back(rank);
    out.max_bytes = std::max(out.max_bytes, bytes);
  }
  for (auto& [key, c] : classes) out.classes.push_back(std::move(c));
  return out;
}

}  // namespace shardplan::planner
