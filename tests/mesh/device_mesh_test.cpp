// DeviceMesh against the facts of docs/semantics.md §1 (coordinates, groups, slicing,
// flattening) and hand-worked layouts; bad input gives one shardplan::Error each.
#include "mesh/device_mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "base/error.h"

namespace shardplan::mesh {
namespace {

using Ranks = std::vector<int64_t>;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const shardplan::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceMesh, RowMajorCoordinatesOfSpecExamples) {
  // docs/semantics.md §1.2: (2,4): rank 6 -> (1,2), rank 3 -> (0,3); (2,2,2): rank 5 -> (1,0,1).
  const DeviceMesh m({2, 4});
  EXPECT_EQ(*m.coordinate_of(6), (MeshCoord{1, 2}));
  EXPECT_EQ(*m.coordinate_of(3), (MeshCoord{0, 3}));
  EXPECT_EQ(*DeviceMesh({2, 2, 2}).coordinate_of(5), (MeshCoord{1, 0, 1}));
  EXPECT_EQ(m.rank_at(MeshCoord{1, 2}), 6);
  EXPECT_EQ(m.ranks(), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(m.is_row_major_arange());
  EXPECT_EQ(m.size(), 8);
  EXPECT_EQ(m.size(-1), 4);
  EXPECT_EQ(m.ndim(), 2);
}

TEST(DeviceMesh, RankOutsideTheMeshHasNoCoordinate) {
  EXPECT_FALSE(DeviceMesh({2, 4}).coordinate_of(8).has_value());
  EXPECT_FALSE(DeviceMesh({2, 4}).coordinate_of(-1).has_value());
  // Ranks 4 and 9 only: 5 sits between them but is not a member.
  const DeviceMesh gap = DeviceMesh::from_ranks({2}, {4, 9});
  EXPECT_FALSE(gap.coordinate_of(5).has_value());
  EXPECT_EQ(*gap.coordinate_of(9), (MeshCoord{1}));
}

TEST(DeviceMesh, GroupsPerDimAreTheRowsWithThatDimLast) {
  // docs/semantics.md §1.4, mesh [[0,1,2,3],[4,5,6,7]]: dim 0 groups {0,4},{1,5},{2,6},{3,7}; dim 1
  // {0..3},{4..7}.
  const DeviceMesh m({2, 4});
  EXPECT_EQ(m.num_groups(0), 4);
  EXPECT_EQ(m.num_groups(1), 2);
  for (int64_t g = 0; g < 4; ++g) EXPECT_EQ(m.group_ranks_by_index(0, g), (Ranks{g, g + 4}));
  EXPECT_EQ(m.group_ranks_by_index(1, 1), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(m.group_ranks(0, 6), (Ranks{2, 6}));
  EXPECT_EQ(m.group_ranks(1, 6), (Ranks{4, 5, 6, 7}));
  EXPECT_NE(error_of([&] { m.group_ranks(0, 8); }).find("rank 8 is not in"), std::string::npos);
}

TEST(DeviceMesh, SliceByNameKeepsTheCallersOtherCoordinates) {
  // docs/semantics.md §1.5: (2,4) (dp,tp): ["tp"] on 0-3 -> [0,1,2,3], on 4-7 -> [4,5,6,7]; ["dp"]
  // on 1 -> [1,5].
  const DeviceMesh m({2, 4}, {"dp", "tp"});
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(m.slice({"tp"}, r).ranks(), (Ranks{0, 1, 2, 3}));
  for (int64_t r = 4; r < 8; ++r) EXPECT_EQ(m.slice({"tp"}, r).ranks(), (Ranks{4, 5, 6, 7}));
  const DeviceMesh dp = m.slice({"dp"}, 1);
  EXPECT_EQ(dp.ranks(), (Ranks{1, 5}));
  EXPECT_EQ(dp.dim_names(), (std::vector<std::string>{"dp"}));
  EXPECT_EQ(*dp.coordinate_of(5), (MeshCoord{1}));
  // All dims in order: the mesh itself.
  EXPECT_EQ(m.slice({"dp", "tp"}, 3), m);
}

TEST(DeviceMesh, SliceInAnotherOrderTransposes) {
  // Our choice: reordered names give the submesh with dims in the requested order.
  const DeviceMesh t = DeviceMesh({2, 4}, {"dp", "tp"}).slice({"tp", "dp"}, 0);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(t.ranks(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(*t.coordinate_of(6), (MeshCoord{2, 1}));
}

TEST(DeviceMesh, SliceOfThreeDimsFixesTheRest) {
  // (2,2,2) (dp,cp,tp): ["dp","cp"] for rank 5 (coord 1,0,1) fixes tp=1 -> [[1,3],[5,7]].
  const DeviceMesh s = DeviceMesh({2, 2, 2}, {"dp", "cp", "tp"}).slice({"dp", "cp"}, 5);
  EXPECT_EQ(s.ranks(), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(s.slice({"cp"}, 7).ranks(), (Ranks{5, 7}));  // slicing a submesh works too
}

TEST(DeviceMesh, FlattenDpCpGivesStrideTwoGroups) {
  // docs/semantics.md §1.6: flatten (dp,cp) of (2,2,2) (dp,cp,tp): ranks 0,2,4,6 -> [0,2,4,6];
  // 1,3,5,7 -> odd.
  const DeviceMesh m({2, 2, 2}, {"dp", "cp", "tp"});
  const DeviceMesh f = m.flatten_dims(std::vector<std::string>{"dp", "cp"});
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(f.dim_names(), (std::vector<std::string>{"dp_cp", "tp"}));
  for (int64_t r : {0, 2, 4, 6}) EXPECT_EQ(f.slice({"dp_cp"}, r).ranks(), (Ranks{0, 2, 4, 6}));
  for (int64_t r : {1, 3, 5, 7}) EXPECT_EQ(f.slice({"dp_cp"}, r).ranks(), (Ranks{1, 3, 5, 7}));
  // PyTorch's mesh["dp","cp"]._flatten(): the same 1-d mesh.
  const DeviceMesh sub = m.slice({"dp", "cp"}, 3).flatten();
  EXPECT_EQ(sub.ranks(), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(sub.dim_names(), (std::vector<std::string>{"dp_cp"}));
  EXPECT_TRUE(sub.is_strided());
}

TEST(DeviceMesh, FlattenAgainstTheLayoutFallsBackToARankList) {
  // (tp, dp) of (2,4): coordinate tp*2 + dp -> rank dp*4 + tp: 0,4,1,5,2,6,3,7 (not strided).
  const DeviceMesh f =
      DeviceMesh({2, 4}, {"dp", "tp"}).flatten_dims(std::vector<std::string>{"tp", "dp"}, "x");
  EXPECT_EQ(f.ranks(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_FALSE(f.is_strided());
  EXPECT_EQ(*f.coordinate_of(5), (MeshCoord{3}));
  EXPECT_EQ(f.dim_names(), (std::vector<std::string>{"x"}));
}

TEST(DeviceMesh, ExplicitRanksThatAreStridedAreRecognised) {
  // A transposed arange is affine (offset 0, strides (1,2)) and equals the strided description.
  const DeviceMesh t = DeviceMesh::from_ranks({2, 2}, {0, 2, 1, 3});
  EXPECT_TRUE(t.is_strided());
  EXPECT_EQ(t, DeviceMesh::from_strides({2, 2}, 0, {1, 2}));
  EXPECT_EQ(DeviceMesh::from_ranks({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}), DeviceMesh({2, 4}));
  EXPECT_EQ(DeviceMesh::from_ranks({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}).hash(),
            DeviceMesh({2, 4}).hash());
  EXPECT_NE(t, DeviceMesh({2, 2}));
  // An arbitrary permutation stays a list; coordinates are found by search.
  const DeviceMesh p = DeviceMesh::from_ranks({2, 2}, {3, 1, 0, 2});
  EXPECT_FALSE(p.is_strided());
  EXPECT_EQ(*p.coordinate_of(0), (MeshCoord{1, 0}));
  EXPECT_EQ(p.group_ranks(1, 0), (Ranks{0, 2}));
}

TEST(DeviceMesh, MillionRankMeshIsStoredWithoutARankList) {
  const DeviceMesh m({100, 100, 100});
  EXPECT_TRUE(m.is_strided());
  EXPECT_EQ(*m.coordinate_of(999'999), (MeshCoord{99, 99, 99}));
  EXPECT_EQ(*m.coordinate_of(123'456), (MeshCoord{12, 34, 56}));
  EXPECT_EQ(m.group_ranks(0, 123'456).back(), 990'000 + 3456);
  EXPECT_EQ(m.slice_dims({1}, 123'456).ranks().front(), 120'056);
}

TEST(DeviceMesh, RandomLayoutsRoundTripEveryCoordinate) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<int64_t> shape(1 + rng() % 4);
    for (auto& s : shape) s = 1 + rng() % 5;
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    Ranks ranks(static_cast<size_t>(n));
    std::iota(ranks.begin(), ranks.end(), int64_t{10});
    if (iter % 2) std::shuffle(ranks.begin(), ranks.end(), rng);
    const DeviceMesh m = DeviceMesh::from_ranks(shape, ranks);
    EXPECT_EQ(m.ranks(), ranks);
    for (int64_t i = 0; i < n; ++i) {
      const MeshCoord c = *m.coordinate_of(ranks[static_cast<size_t>(i)]);
      EXPECT_EQ(m.rank_at(c), ranks[static_cast<size_t>(i)]);
      for (int64_t d = 0; d < m.ndim(); ++d) {
        // The rank's index in its dim-d group is its coordinate there (get_local_rank).
        EXPECT_EQ(m.group_ranks(d, ranks[static_cast<size_t>(i)])[static_cast<size_t>(c[d])],
                  ranks[static_cast<size_t>(i)]);
      }
    }
    const nlohmann::json j = m;
    EXPECT_EQ(j.get<DeviceMesh>(), m);
  }
}

TEST(DeviceMesh, JsonForms) {
  EXPECT_EQ(nlohmann::json(DeviceMesh({2, 4}, {"dp", "tp"})),
            nlohmann::json::parse(R"({"shape":[2,4],"dim_names":["dp","tp"]})"));
  const DeviceMesh sub = DeviceMesh({2, 4}).slice_dims({0}, 3);  // ranks 3, 7
  EXPECT_EQ(nlohmann::json(sub),
            nlohmann::json::parse(R"({"shape":[2],"offset":3,"strides":[4]})"));
  EXPECT_EQ(nlohmann::json(sub).get<DeviceMesh>(), sub);
  const DeviceMesh p = DeviceMesh::from_ranks({3}, {2, 0, 1});
  EXPECT_EQ(nlohmann::json(p), nlohmann::json::parse(R"({"shape":[3],"ranks":[2,0,1]})"));
}

TEST(DeviceMesh, PrintsNestedRanksAndNames) {
  EXPECT_EQ(to_string(DeviceMesh({2, 2}, {"dp", "tp"})),
            "DeviceMesh([[0, 1], [2, 3]], dim_names=(dp, tp))");
  EXPECT_EQ(to_string(DeviceMesh({1000})), "DeviceMesh(shape=[1000], ranks=arange)");
}

TEST(DeviceMeshErrors, EachBadInputNamesTheValue) {
  auto has = [](const std::string& msg, const char* part) {
    return msg.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of([] { DeviceMesh({2, 0}); }), "has size 0"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh({2, 2}, {"dp", "dp"}); }), "'dp' appears twice"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh({2, 2}, {"dp"}); }), "1 names for a 2-d mesh"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh::from_ranks({2, 2}, {0, 1, 2}); }), "rank list has 3"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh::from_ranks({2}, {1, 1}); }), "rank 1 appears"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh::from_ranks({2}, {0, -3}); }), "-3"));
  EXPECT_TRUE(has(error_of([] {
                    DeviceMesh::from_strides({2, 3}, 0, {3, 2});
                  }),
                  "not a valid layout"));
  const DeviceMesh m({2, 4}, {"dp", "tp"});
  EXPECT_TRUE(has(error_of([&] { m.slice({"pp"}, 0); }), "'pp' is unknown"));
  EXPECT_TRUE(has(error_of([&] { m.slice({"tp", "tp"}, 0); }), "requested twice"));
  EXPECT_TRUE(has(error_of([&] { m.slice({"tp"}, 99); }), "rank 99 is not in"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh({2, 4}).slice({"tp"}, 0); }), "no dim names"));
  EXPECT_TRUE(has(error_of([&] { m.size(2); }), "mesh dim 2 out of range"));
  EXPECT_TRUE(has(error_of([] { DeviceMesh({int64_t{1} << 40, int64_t{1} << 40}); }), "2^63"));
}

}  // namespace
}  // namespace shardplan::mesh
