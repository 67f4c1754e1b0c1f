// The ranks of a layout grouped into classes that share a local shape (and so a byte count),
// computed from the per-dim chunk sizes without walking the ranks: a 10^10-rank mesh is
// summarised in microseconds (docs/semantics.md §2.7 "Shard classes").
//   LayoutShape l = layout_shape({8191, 4096}, {16, 8, 128}, parse_placements("S0,S1,S0"));
//   std::vector<ShardClass> c = shard_classes(l);   // counts add up to 16,384
//   LocalShard s = rank_shard(l, {3, 1, 7});         // one rank, any mesh size
//
// Note [Shard classes]
// A tensor dim d is split only by the mesh dims whose placement shards it (M_d), so its local
// size and offset depend on the coordinates on M_d alone. Nested plain shards chunk the parent
// chunk as torch.chunk does: chunk size c = ceil(n / k), the first floor(n / c) chunks full, then
// at most one partial chunk, then empty ones; so each level has at most three distinct sizes and
// a dim's sizes are found level by level, counting how many coordinates give each. A StridedShard
// dim is enumerated over its M_d coordinates with the exact ShardSpec rules (at most 2^20 of
// them). The classes are the products of the per-dim sizes, each count multiplied by the ranks of
// the mesh dims that shard nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/dim_vector.h"
#include "mesh/placement.h"
#include "mesh/shard_spec.h"

namespace shardplan::mesh {

// The largest mesh the summaries accept (10^15 ranks, far beyond int32 rank ids).
inline constexpr int64_t kMaxSummarisedRanks = 1'000'000'000'000'000;
// The most coordinates a StridedShard dim may be enumerated over.
inline constexpr int64_t kMaxStridedCombinations = int64_t{1} << 20;
// How many of a class's coordinates it lists (its first ranks in row-major order).
inline constexpr size_t kShownCoords = 3;

struct LayoutShape {
  shardplan::DimVector shape;       // global tensor
  std::vector<int64_t> mesh_shape;  // any size up to kMaxSummarisedRanks ranks
  std::vector<Placement> placements;
  int64_t ranks = 1;  // product of mesh_shape
};

// Checks the layout as make_shard_spec does (one placement per mesh dim, shard dims in range,
// split factors >= 1) plus the rank count (no overflow, at most kMaxSummarisedRanks), without
// building the mesh. Throws shardplan::Error naming the bad value.
LayoutShape layout_shape(std::span<const int64_t> shape, std::span<const int64_t> mesh_shape,
                         std::vector<Placement> placements);

struct ShardClass {
  shardplan::DimVector local_shape;
  int64_t count = 0;                  // ranks with this local shape
  std::vector<int64_t> first_coord;   // the class's first rank in row-major mesh order
  shardplan::DimVector first_offset;  // that rank's global offset
  std::vector<std::vector<int64_t>> coords;  // its first kShownCoords ranks (first_coord first)
};

// Classes in the order of their first rank. Their counts add up to l.ranks.
std::vector<ShardClass> shard_classes(const LayoutShape& l);

// The shard of the rank at `coord` (row-major position = rank).
LocalShard rank_shard(const LayoutShape& l, std::span<const int64_t> coord);

// Row-major coordinate of `rank` and back.
std::vector<int64_t> coord_of_rank(const LayoutShape& l, int64_t rank);
int64_t rank_of_coord(const LayoutShape& l, std::span<const int64_t> coord);

}  // namespace shardplan::mesh
