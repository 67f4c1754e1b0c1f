// Worked vectors of docs/semantics.md §2.2-2.6 (several from PyTorch's tests and docstrings) and
// vectors derived by hand below, each with the arithmetic written out.
#include "mesh/shard_spec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tensor/ops.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;
using tensor::DType;

ShardSpec spec_of(std::vector<int64_t> shape, std::vector<int64_t> mesh_shape,
                  const char* placements, DType dtype = DType::kFloat32) {
  return make_shard_spec(shape, dtype, DeviceMesh(mesh_shape), parse_placements(placements));
}

// Local shape and offset of every rank, in rank order (row-major mesh).
std::vector<LocalShard> all_ranks(const ShardSpec& s) {
  std::vector<LocalShard> out;
  for (int64_t r = 0; r < s.mesh.size(); ++r) out.push_back(local_shape_and_offset_for_rank(s, r));
  return out;
}

LocalShard ls(DimVector shape, DimVector offset) { return {std::move(shape), std::move(offset)}; }

TEST(ChunkPiece, TorchChunkSizesLeaveTrailingChunksEmpty) {
  // docs/semantics.md §2.2: c = ceil(n/k); n=5,k=4 -> 2,2,1,0; n=6,k=4 -> 2,2,2,0; n=13,k=4 ->
  // 4,4,4,1; n=7,k=3 -> 3,3,1.
  auto sizes = [](int64_t n, int64_t k) {
    std::vector<int64_t> out;
    for (int64_t r = 0; r < k; ++r) out.push_back(chunk_piece(n, k, r).size);
    return out;
  };
  EXPECT_EQ(sizes(5, 4), (std::vector<int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(sizes(6, 4), (std::vector<int64_t>{2, 2, 2, 0}));
  EXPECT_EQ(sizes(13, 4), (std::vector<int64_t>{4, 4, 4, 1}));
  EXPECT_EQ(sizes(7, 3), (std::vector<int64_t>{3, 3, 1}));
  // start == n gives size 0 at offset n (n=6, k=4, r=3: start 6).
  EXPECT_EQ(chunk_piece(6, 4, 3).offset, 6);
}

TEST(ChunkPiece, SizesAndMeshesNearInt64DoNotOverflow) {
  // start + c passed int64: --shape 9223372036854775807 --dtype bool --mesh 2 --placements S0
  // (seen while triaging a fuzz_cli_args finding, reproduced with the harness). c = 2^62.
  constexpr int64_t kMax = INT64_MAX;
  EXPECT_EQ(chunk_piece(kMax, 2, 1).size, (int64_t{1} << 62) - 1);
  EXPECT_EQ(chunk_piece(kMax, 2, 1).offset, int64_t{1} << 62);
  // c * r passes int64 for the last ranks of a mesh dim of 3 * 2^61 ranks (c = 2): empty chunks.
  const int64_t k = int64_t{3} << 61;
  EXPECT_EQ(chunk_piece(kMax, k, k - 1).size, 0);
  EXPECT_EQ(chunk_piece(kMax, k, k - 1).offset, kMax);
  EXPECT_EQ(chunk_piece(kMax, k, (int64_t{1} << 62) - 1).size, 1);  // the last non-empty chunk
  EXPECT_EQ(chunk_piece(kMax, k, (int64_t{1} << 62) - 1).offset, kMax - 1);
}

TEST(LocalShape, V1EvenNestedRowsGoRowMajorOverTheMesh) {
  // V1: (8,4) on (2,4) [S0,S0]: every rank one row, rank r holds row r.
  const auto got = all_ranks(spec_of({8, 4}, {2, 4}, "S0,S0"));
  for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(got[r], ls({1, 4}, {r, 0})) << "rank " << r;
}

TEST(LocalShape, V2UnevenShardLeavesTrailingRanksEmptyWithSentinelOffset) {
  EXPECT_EQ(all_ranks(spec_of({5}, {4}, "S0")),
            (std::vector<LocalShard>{ls({2}, {0}), ls({2}, {2}), ls({1}, {4}), ls({0}, {5})}));
}

TEST(LocalShape, V3EmptyLastShardOffsetIsTheGlobalSize) {
  EXPECT_EQ(all_ranks(spec_of({6}, {4}, "S0")),
            (std::vector<LocalShard>{ls({2}, {0}), ls({2}, {2}), ls({2}, {4}), ls({0}, {6})}));
}

TEST(LocalShape, V6TwoMeshDimsOnDimOneApplyLeftToRight) {
  // (2,5) on (2,2) [S1,S1]: level 1 splits 5 into 3|2, level 2 splits 3 into 2|1 and 2 into 1|1.
  EXPECT_EQ(all_ranks(spec_of({2, 5}, {2, 2}, "S1,S1")),
            (std::vector<LocalShard>{ls({2, 2}, {0, 0}), ls({2, 1}, {0, 2}), ls({2, 1}, {0, 3}),
                                     ls({2, 1}, {0, 4})}));
}

TEST(LocalShape, V10StridedShardPutsTpFirstThenFsdp) {
  // (8,8) on (2,2) [SS(0,2), S0]: r0 rows 0-1, r1 rows 4-5, r2 rows 2-3, r3 rows 6-7.
  const ShardSpec s = spec_of({8, 8}, {2, 2}, "SS0:2,S0");
  const std::vector<int64_t> first_row = {0, 4, 2, 6};
  for (int64_t r = 0; r < 4; ++r) {
    const MeshCoord c = *s.mesh.coordinate_of(r);
    const auto ranges = global_index_ranges(s, c);
    ASSERT_EQ(ranges[0].size(), 1u) << "rank " << r;
    EXPECT_EQ(ranges[0][0], (IndexRange{first_row[r], first_row[r] + 2})) << "rank " << r;
    EXPECT_EQ(ranges[1], (std::vector<IndexRange>{{0, 8}}));
    EXPECT_EQ(local_shape_and_offset(s, c), ls({2, 8}, {first_row[r], 0}));
  }
  // The plain nested layout for comparison: 0-1, 2-3, 4-5, 6-7.
  const auto plain = all_ranks(spec_of({8, 8}, {2, 2}, "S0,S0"));
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(plain[r].offset[0], 2 * r);
}

TEST(LocalShape, StridedShardCostDoesNotGrowWithTheSplitFactor) {
  // fuzz_cli_args timed out on --shape 9,6,4 --mesh 2 --placements SS0:72957295: every one of
  // the 72957295 pieces was listed per rank. 9 pieces of one row are non-empty; sub-chunk 0 of a
  // one-row piece is the row, sub-chunk 1 is empty.
  for (const char* p : {"SS0:72957295", "SS0:9223372036854775807"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(all_ranks(spec_of({9, 6, 4}, {2}, p)),
              (std::vector<LocalShard>{ls({9, 6, 4}, {0, 0, 0}), ls({0, 6, 4}, {9, 0, 0})}));
  }
  // Nested and uneven, against the listed ranges: (11,) on (2,3) [SS(0,3), S0]. Pieces of 4, 4,
  // 3; rank (a, b) takes sub-chunk a of 2 of each piece (2, 2, 2 rows / 2, 2, 1 rows), then chunk
  // b of 3 of those 6 / 5 positions.
  const ShardSpec s = spec_of({11}, {2, 3}, "SS0:3,S0");
  for (int64_t r = 0; r < 6; ++r) {
    const MeshCoord c = *s.mesh.coordinate_of(r);
    const auto ranges = global_index_ranges(s, c);
    int64_t size = 0;
    for (const IndexRange& x : ranges[0]) size += x.size();
    const LocalShard got = local_shape_and_offset(s, c);
    EXPECT_EQ(got.shape[0], size) << "rank " << r;
    EXPECT_EQ(got.offset[0], ranges[0].empty() ? 11 : ranges[0][0].begin) << "rank " << r;
  }
  // Rank 4 = (1, 1): rows {2, 3, 6, 7, 10} of the first level, then positions 2-3: rows 6, 7.
  EXPECT_EQ(local_shape_and_offset_for_rank(s, 4), ls({2}, {6}));
}

TEST(LocalShape, V12SevenRowsOnThreeRanks) {
  EXPECT_EQ(all_ranks(spec_of({7, 3}, {3}, "S0")),
            (std::vector<LocalShard>{ls({3, 3}, {0, 0}), ls({3, 3}, {3, 0}), ls({1, 3}, {6, 0})}));
}

TEST(LocalShape, V14ReplicateThenShardDependsOnlyOnTheTpCoordinate) {
  const auto got = all_ranks(spec_of({4, 6}, {2, 3}, "R,S1"));
  for (int64_t r = 0; r < 6; ++r) EXPECT_EQ(got[r], ls({4, 2}, {0, 2 * (r % 3)})) << "rank " << r;
}

TEST(LocalShape, NestedUnevenIsNotTheFlatSplit) {
  // docs/semantics.md §2.3: (10) on (2,2) [S0,S0] -> 3,2,3,2 rows at 0,3,5,8 (the flat split would
  // be 3,3,3,1).
  EXPECT_EQ(all_ranks(spec_of({10}, {2, 2}, "S0,S0")),
            (std::vector<LocalShard>{ls({3}, {0}), ls({2}, {3}), ls({3}, {5}), ls({2}, {8})}));
}

TEST(LocalShape, IssueCliExampleTenByFiveBf16) {
  // The issue's CLI example: (10,5) bf16 on 2x2 [S0,S0] -> rank 0 (3,5) at (0,0), 3*5*2 = 30 bytes.
  const ShardSpec s = spec_of({10, 5}, {2, 2}, "S0,S0", DType::kBFloat16);
  EXPECT_EQ(local_shape_and_offset(s, MeshCoord{0, 0}), ls({3, 5}, {0, 0}));
  EXPECT_EQ(local_bytes(s, MeshCoord{0, 0}), 30);
  EXPECT_EQ(local_bytes(s, MeshCoord{1, 1}), 2 * 5 * 2);
}

TEST(LocalShape, NonMemberRankGetsShapeZeroAndEmptyOffset) {
  const ShardSpec s = make_shard_spec(DimVector{8}, DType::kFloat32,
                                      DeviceMesh::from_ranks({2}, {4, 9}), parse_placements("S0"));
  EXPECT_EQ(local_shape_and_offset_for_rank(s, 0), ls({0}, {}));
  EXPECT_EQ(local_shape_and_offset_for_rank(s, 9), ls({4}, {4}));
}

TEST(LocalStrides, EvenShardDividesLargerStrides) {
  // docs/semantics.md §2.4: global (4,8,4) strides (32,1,8), [S2] on 2 ranks -> local (4,8,2)
  // strides (16,1,8).
  const ShardSpec s = make_shard_spec(DimVector{4, 8, 4}, DimVector{32, 1, 8}, DType::kFloat32,
                                      DeviceMesh({2}), parse_placements("S2"));
  EXPECT_EQ(local_shape(s, MeshCoord{1}), (DimVector{4, 8, 2}));
  EXPECT_EQ(local_strides(s, MeshCoord{1}), (DimVector{16, 1, 8}));
}

TEST(ShardSpecValidation, NegativeDimIsNormalised) {
  EXPECT_EQ(spec_of({4, 6}, {2}, "S-1").placements[0], Placement::shard(1));
}

// The message of the shardplan::Error `f` throws ("no error" if none), to check it names the
// values.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const shardplan::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ShardSpecValidation, WrongPlacementCountNamesBothCounts) {
  const std::string m = error_of([] { spec_of({4}, {2, 2}, "S0"); });
  EXPECT_NE(m.find("[S0] have 1 entries for a 2-d mesh"), std::string::npos) << m;
}

TEST(ShardSpecValidation, ShardOfAMissingDimNamesTheDimAndShape) {
  const std::string m = error_of([] { spec_of({4, 6}, {2}, "S2"); });
  EXPECT_NE(m.find("tensor dim 2"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 6]"), std::string::npos) << m;
  EXPECT_NE(error_of([] { spec_of({4, 6}, {2}, "S-3"); }), "no error");
  EXPECT_NE(error_of([] { spec_of({}, {2}, "S0"); }), "no error");
}

TEST(ShardSpecValidation, UnshardableRequestSaysHowManyShards) {
  const ShardSpec s = spec_of({3, 8}, {2, 2}, "S0,S0");
  EXPECT_FALSE(is_shardable(s));
  const std::string m = error_of([&] { check_shardable(s); });
  EXPECT_NE(m.find("tensor dim 0 of size 3"), std::string::npos) << m;
  EXPECT_NE(m.find("into 4 shards"), std::string::npos) << m;
  // Strided shard needs shards * split_factor: 8 >= 2*2*2 but 7 < 8.
  EXPECT_TRUE(is_shardable(spec_of({8}, {2, 2}, "SS0:2,S0")));
  EXPECT_FALSE(is_shardable(spec_of({7}, {2, 2}, "SS0:2,S0")));
}

TEST(ShardSpecValidation, OverflowingByteCountIsAnError) {
  EXPECT_NE(error_of([] { spec_of({int64_t{1} << 40, int64_t{1} << 22}, {2}, "S0"); }), "no error");
  EXPECT_NE(error_of([] { spec_of({-1, 2}, {2}, "S0"); }), "no error");
}

TEST(ShardSpecValidation, OverflowingElementCountIsAnErrorBeforeStridesAreBuilt) {
  // Found by fuzz_cli_args (--shape 8,61024x1024x1024x102101024x...): the contiguous strides of
  // a shape were multiplied out before the shape was checked, a signed overflow.
  const std::string m = error_of([] { spec_of({int64_t{1} << 32, int64_t{1} << 32}, {2}, "S0"); });
  EXPECT_NE(m.find("shard spec: shape [4294967296, 4294967296] has more elements than int64 can "
                   "count"),
            std::string::npos)
      << m;
}

TEST(ShardSpecJson, RoundTripsAndTakesShapeFromAMetaTensor) {
  const tensor::Tensor t = tensor::empty({6, 4}, {DType::kFloat16});
  const ShardSpec s =
      make_shard_spec(t, DeviceMesh({2, 3}, {"dp", "tp"}), parse_placements("S0,S1"));
  EXPECT_EQ(s.strides, (DimVector{4, 1}));
  EXPECT_EQ(s.dtype, DType::kFloat16);
  const nlohmann::json j = s;
  EXPECT_EQ(j["placements"], nlohmann::json::parse(R"(["S0","S1"])"));
  EXPECT_EQ(j.get<ShardSpec>(), s);
  EXPECT_EQ(hash_value(j.get<ShardSpec>()), hash_value(s));
}

}  // namespace
}  // namespace shardplan::mesh
