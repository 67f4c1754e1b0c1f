// Shard classes (mesh/shard_classes.h) against a walk over every rank of a real ShardSpec: on
// random meshes, uneven and empty shards and strided shards, every rank is counted once, each
// class's members share its local shape, its first coordinate is its first rank, and rank_shard
// equals local_shape_and_offset everywhere.
#include "mesh/shard_classes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "base/error.h"
#include "mesh/device_mesh.h"

namespace shardplan::mesh {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

void expect_matches_walk(const std::vector<int64_t>& shape, const std::vector<int64_t>& mesh_shape,
                         const std::vector<Placement>& placements) {
  SCOPED_TRACE(::testing::Message()
               << "shape " << ::testing::PrintToString(shape) << " mesh "
               << ::testing::PrintToString(mesh_shape) << " placements " << to_string(placements));
  const ShardSpec spec =
      make_shard_spec(shape, tensor::DType::kBFloat16, DeviceMesh(mesh_shape), placements);
  const LayoutShape l = layout_shape(shape, mesh_shape, placements);
  // The walk: per local shape, the ranks' count and the first rank.
  std::map<std::vector<int64_t>, std::pair<int64_t, int64_t>> walk;
  std::map<std::vector<int64_t>, std::vector<std::vector<int64_t>>> first_ranks;
  for (int64_t r = 0; r < spec.mesh.size(); ++r) {
    const MeshCoord c = *spec.mesh.coordinate_of(r);
    const LocalShard s = local_shape_and_offset(spec, c);
    EXPECT_EQ(rank_shard(l, c.vec()), s) << "rank " << r;
    EXPECT_EQ(coord_of_rank(l, r), c.vec());
    auto [it, fresh] = walk.try_emplace(s.shape.vec(), std::make_pair(0, r));
    ++it->second.first;
    std::vector<std::vector<int64_t>>& firsts = first_ranks[s.shape.vec()];
    if (firsts.size() < kShownCoords) firsts.push_back(c.vec());
  }
  const std::vector<ShardClass> classes = shard_classes(l);
  int64_t total = 0;
  ASSERT_EQ(classes.size(), walk.size());
  for (const ShardClass& c : classes) {
    total += c.count;
    const auto it = walk.find(c.local_shape.vec());
    ASSERT_NE(it, walk.end());
    EXPECT_EQ(c.count, it->second.first);
    EXPECT_EQ(rank_of_coord(l, c.first_coord), it->second.second);
    EXPECT_EQ(c.coords, first_ranks[c.local_shape.vec()]);
    EXPECT_EQ(local_shape_and_offset(spec, c.first_coord).offset, c.first_offset);
  }
  EXPECT_EQ(total, spec.mesh.size());
  for (size_t i = 1; i < classes.size(); ++i) {
    EXPECT_LT(rank_of_coord(l, classes[i - 1].first_coord),
              rank_of_coord(l, classes[i].first_coord));
  }
}

TEST(ShardClasses, HandPickedLayouts) {
  // 10 rows on 2 x 2 ranks: 5 rows each; 5 columns over 2: 3 and 2.
  expect_matches_walk({10, 5}, {2, 2}, parse_placements("S0,S1"));
  // 8191 rows over 16 then 128 (nested), 4096 columns over 8: uneven and empty shards.
  expect_matches_walk({8191, 4096}, {16, 8, 128}, parse_placements("S0,S1,S0"));
  // More shards than elements: empty shards at offset = size.
  expect_matches_walk({3, 2}, {5, 2}, parse_placements("S0,R"));
  expect_matches_walk({}, {3, 2}, parse_placements("R,P"));
  expect_matches_walk({7, 6}, {2, 3}, parse_placements("SS0:3,S0"));
  expect_matches_walk({0, 4}, {4}, parse_placements("S0"));
}

TEST(ShardClasses, RandomLayoutsMatchTheWalk) {
  std::mt19937_64 rng(20261124);
  for (int trial = 0; trial < 300; ++trial) {
    const int nd = static_cast<int>(rng() % 3) + 1;
    const int md = static_cast<int>(rng() % 3) + 1;
    std::vector<int64_t> shape, mesh_shape;
    for (int d = 0; d < nd; ++d) shape.push_back(static_cast<int64_t>(rng() % 23));
    for (int m = 0; m < md; ++m) mesh_shape.push_back(static_cast<int64_t>(rng() % 6) + 1);
    std::vector<Placement> p;
    for (int m = 0; m < md; ++m) {
      const int kind = static_cast<int>(rng() % 5);
      const int64_t dim = static_cast<int64_t>(rng() % static_cast<uint64_t>(nd));
      if (kind == 0) {
        p.push_back(Placement::replicate());
      } else if (kind == 1) {
        p.push_back(Placement::partial());
      } else if (kind == 4) {
        p.push_back(Placement::strided_shard(dim, static_cast<int64_t>(rng() % 3) + 1));
      } else {
        p.push_back(Placement::shard(dim));
      }
    }
    // Layouts ShardSpec refuses (a strided shard it does not support there) are not layouts.
    try {
      (void)make_shard_spec(shape, tensor::DType::kBFloat16, DeviceMesh(mesh_shape), p);
    } catch (const Error&) {
      continue;
    }
    expect_matches_walk(shape, mesh_shape, p);
  }
}

TEST(ShardClasses, HugeMeshesWithoutWalking) {
  // 10^10 ranks: 4 columns over 100,000 ranks leave 4 ranks with one column and the rest empty.
  const LayoutShape l = layout_shape(
      std::vector<int64_t>{4, 4}, std::vector<int64_t>{100000, 100000}, parse_placements("R,S1"));
  const std::vector<ShardClass> c = shard_classes(l);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].local_shape.vec(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(c[0].count, 4 * int64_t{100000});
  EXPECT_EQ(c[1].local_shape.vec(), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(c[1].count, 99996 * int64_t{100000});
  EXPECT_EQ(c[1].first_coord, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(c[1].first_offset.vec(), (std::vector<int64_t>{0, 4}));  // empty: offset = size
  EXPECT_EQ(rank_shard(l, std::vector<int64_t>{99999, 3}).offset.vec(),
            (std::vector<int64_t>{0, 3}));
  // 10^15 ranks is the limit; more, or an overflow, is one line.
  EXPECT_NO_THROW(layout_shape(std::vector<int64_t>{8}, std::vector<int64_t>{1000000, 1000000000},
                               parse_placements("S0,R")));
  EXPECT_THAT(
      [] {
        (void)layout_shape(std::vector<int64_t>{8}, std::vector<int64_t>{1000000, 1000000001},
                           parse_placements("S0,R"));
      },
      ThrowsMessage<Error>(HasSubstr("expected at most 10^15")));
  EXPECT_THAT(
      [] {
        (void)layout_shape(std::vector<int64_t>{8},
                           std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40},
                           parse_placements("S0,R"));
      },
      ThrowsMessage<Error>(HasSubstr("more than")));
}

}  // namespace
}  // namespace shardplan::mesh
