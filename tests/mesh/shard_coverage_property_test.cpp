// Property: for random shapes, meshes (1-d to 4-d, dim sizes 1..8) and placements, the shards of
// every replica group tile the global tensor: each global element is held by exactly one rank of
// the group. A replica group is the set of ranks that agree on their coordinates along the mesh
// dims that do not shard (Replicate, Partial); DTensor's full_tensor() concatenates exactly those.
// Also: each shard's local shape is the size of its index sets, and a plain shard's global offset
// is where its one index range starts (the empty-shard sentinel aside).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "mesh/shard_spec.h"

namespace shardplan::mesh {
namespace {

struct Case {
  std::vector<int64_t> shape;
  std::vector<int64_t> mesh_shape;
  std::vector<Placement> placements;
};

Case random_case(std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Case c;
  const int64_t ndim = uniform(1, 3);
  for (int64_t d = 0; d < ndim; ++d) c.shape.push_back(uniform(0, 9));
  const int64_t mdim = uniform(1, 4);
  for (int64_t i = 0; i < mdim; ++i) c.mesh_shape.push_back(uniform(1, 8));
  for (int64_t i = 0; i < mdim; ++i) {
    const int64_t kind = uniform(0, 9);
    if (kind < 6) {
      c.placements.push_back(Placement::shard(uniform(0, ndim - 1)));
    } else if (kind < 8) {
      c.placements.push_back(Placement::replicate());
    } else {
      c.placements.push_back(Placement::partial());
    }
  }
  // Sometimes the FSDP-over-TP layout: StridedShard(d, split = size of a later mesh dim) on an
  // earlier mesh dim, plain Shard(d) on that later one (docs/semantics.md §2.5).
  if (mdim >= 2 && uniform(0, 3) == 0) {
    const int64_t later = uniform(1, mdim - 1);
    const int64_t earlier = uniform(0, later - 1);
    const int64_t d = uniform(0, ndim - 1);
    c.placements[static_cast<size_t>(later)] = Placement::shard(d);
    c.placements[static_cast<size_t>(earlier)] =
        Placement::strided_shard(d, c.mesh_shape[static_cast<size_t>(later)]);
  }
  return c;
}

// Row-major enumeration of all coordinates of `shape`.
std::vector<std::vector<int64_t>> all_coords(const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> c(shape.size(), 0);
  while (true) {
    out.push_back(c);
    size_t i = shape.size();
    while (i > 0) {
      --i;
      if (++c[i] < shape[i]) break;
      c[i] = 0;
      if (i == 0) return out;
    }
    if (shape.empty()) return out;
  }
}

TEST(ShardCoverageProperty, EveryReplicaGroupHoldsEachElementExactlyOnce) {
  std::mt19937_64 rng(20261123);
  int checked = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const Case c = random_case(rng);
    const ShardSpec spec =
        make_shard_spec(c.shape, tensor::DType::kFloat32, DeviceMesh(c.mesh_shape), c.placements);
    SCOPED_TRACE(::testing::Message() << spec);
    int64_t numel = 1;
    for (int64_t s : c.shape) numel *= s;
    // Row-major element id -> how many ranks of each replica group hold it.
    std::map<std::vector<int64_t>, std::vector<int>> held;
    for (const auto& coord : all_coords(c.mesh_shape)) {
      std::vector<int64_t> group_key;
      for (size_t i = 0; i < coord.size(); ++i) {
        group_key.push_back(c.placements[i].is_any_shard() ? -1 : coord[i]);
      }
      auto [it, fresh] = held.try_emplace(group_key, std::vector<int>(static_cast<size_t>(numel)));
      std::vector<int>& counts = it->second;
      const auto ranges = global_index_ranges(spec, coord);
      const LocalShard local = local_shape_and_offset(spec, coord);
      ASSERT_EQ(ranges.size(), c.shape.size());
      // Index sets per dim, and the local shape they imply.
      std::vector<std::vector<int64_t>> sets(c.shape.size());
      for (size_t d = 0; d < c.shape.size(); ++d) {
        for (const IndexRange& r : ranges[d]) {
          ASSERT_LE(0, r.begin);
          ASSERT_LE(r.begin, r.end);
          ASSERT_LE(r.end, c.shape[d]);
          for (int64_t x = r.begin; x < r.end; ++x) sets[d].push_back(x);
        }
        ASSERT_EQ(static_cast<int64_t>(sets[d].size()), local.shape[d]) << "dim " << d;
        if (ranges[d].size() == 1 && local.shape[d] > 0) {
          EXPECT_EQ(local.offset[d], ranges[d][0].begin) << "dim " << d;
        }
      }
      // The Cartesian product of the sets, as row-major element ids.
      std::vector<int64_t> ids{0};
      for (size_t d = 0; d < sets.size(); ++d) {
        std::vector<int64_t> next;
        for (int64_t base : ids) {
          for (int64_t x : sets[d]) next.push_back(base * c.shape[d] + x);
        }
        ids = std::move(next);
      }
      if (sets.empty()) ids = {0};
      for (int64_t id : ids) ++counts[static_cast<size_t>(id)];
    }
    for (const auto& [key, counts] : held) {
      for (size_t id = 0; id < counts.size(); ++id) {
        ASSERT_EQ(counts[id], 1) << "element " << id << " in the replica group";
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 1500);
}

}  // namespace
}  // namespace shardplan::mesh
