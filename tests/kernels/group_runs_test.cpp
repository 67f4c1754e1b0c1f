// The CUDA fill's contiguous path, run on the CPU: group_runs' tasks over a region, each filled
// with fill_group as the CUDA kernel does (Note [Group runs] in kernels/internal/group_runs.h),
// must cover every element exactly once and give the bytes of the scalar reference fill_one
// (FillIsa::kScalar), for every element type and fill kind, over whole tensors, row and column
// shards whose edges cut Philox groups, 3-d boxes, global indices past 2^32, and empty tasks.
#include "kernels/internal/group_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/fill_element.h"
#include "kernels/internal/dispatch.h"
#include "kernels/internal/fill_simd.h"
#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using internal::GroupRuns;
using internal::GroupTask;
using testing::Box;

// What fill_groups_kernel writes, task by task; `hits` counts the writes per buffer element.
template <ElementType T>
void fill_by_tasks(const GroupRuns& runs, const FillParams& p, unsigned char* dst,
                   std::vector<int>* hits) {
  using S = typename detail::Storage<T>::type;
  constexpr int kLanes = kGroupSize<T>;
  for (int64_t t = 0; t < runs.tasks; ++t) {
    GroupTask task;
    if (!internal::group_task<kLanes>(runs, t, &task)) continue;
    ASSERT_GE(task.first_lane, 0);
    ASSERT_LE(task.end_lane, kLanes);
    ASSERT_LT(task.first_lane, task.end_lane);
    S values[kLanes];
    fill_group<T>(values, p, task.group);
    for (int lane = task.first_lane; lane < task.end_lane; ++lane) {
      const int64_t offset = task.dst_offset + (lane - task.first_lane);
      std::memcpy(dst + offset * static_cast<int64_t>(sizeof(S)), &values[lane], sizeof(S));
      ++(*hits)[static_cast<size_t>(offset)];
    }
  }
}

// The box's buffer holds exactly its elements (dense dst strides) in these tests.
void expect_tasks_equal_reference(const Box& box, const std::string& what) {
  const internal::CompactRegion compact = internal::compact_region(box.region());
  for (const testing::TypeAndKind& tk : testing::all_type_kind_pairs()) {
    if (tk.type == ElementType::kComplex64) continue;  // not group-fillable (fill_one per element)
    const FillSpec spec = testing::test_spec(tk.type, tk.kind);
    const std::string name = what + " " + testing::pair_name(tk);
    auto expected = testing::make_buffer(tk.type, box.numel());
    internal::fill_cpu_on(internal::FillIsa::kScalar, 1, expected.data(), tk.type, box.region(),
                          spec);
    auto got = testing::make_buffer(tk.type, box.numel());
    std::vector<int> hits(static_cast<size_t>(box.numel()), 0);
    internal::dispatch_element_type(tk.type, [&](auto tag) {
      constexpr ElementType kType = decltype(tag)::value;
      if constexpr (kGroupFillable<kType>) {
        const std::optional<GroupRuns> runs = internal::group_runs(compact, kGroupSize<kType>);
        // One element, or one column: size-1 dims are dropped, no unit-stride run is left, and the
        // kernel fills element by element.
        ASSERT_EQ(runs.has_value(), box.numel() > 1 && box.sizes.back() > 1) << name;
        if (!runs) {
          got = expected;
          std::fill(hits.begin(), hits.end(), 1);
          return;
        }
        EXPECT_LE(runs->tasks, 2 * box.numel()) << name;
        fill_by_tasks<kType>(*runs, make_fill_params(tk.type, spec), got.data(), &hits);
      }
    });
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << name << " element " << i;
    ASSERT_EQ(got, expected) << name;
  }
}

TEST(GroupRuns, WholeTensorsOfEveryLength) {
  for (const int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1001}) {
    expect_tasks_equal_reference(Box{{n}, {1}, {1}, 0}, "1-d n=" + std::to_string(n));
  }
}

TEST(GroupRuns, RowShardsWhoseEdgesCutGroups) {
  // Rows [begin, begin + rows) of a [10, 7] tensor: starts at 7 * begin, rarely a multiple of 4.
  for (const int64_t begin : {0, 1, 2, 3, 5}) {
    expect_tasks_equal_reference(testing::sub_box({10, 7}, {begin, 0}, {4, 7}),
                                 "rows from " + std::to_string(begin));
  }
}

TEST(GroupRuns, ColumnShardsAreRowsOfRuns) {
  // Columns [c, c + w) of a [6, 11] tensor (tensor parallelism's Shard(1)): 6 runs of w, each
  // starting on a different lane of its group.
  for (const int64_t c : {0, 1, 3, 4, 6}) {
    for (const int64_t w : {1, 2, 5}) {
      expect_tasks_equal_reference(testing::sub_box({6, 11}, {0, c}, {6, w}),
                                   "cols " + std::to_string(c) + "+" + std::to_string(w));
    }
  }
  // Aligned rows (global row stride a multiple of 4 and 2): one task per group, none empty.
  const Box aligned = testing::sub_box({5, 16}, {0, 8}, {5, 8});
  const auto runs = internal::group_runs(internal::compact_region(aligned.region()), 4);
  ASSERT_TRUE(runs.has_value());
  EXPECT_EQ(runs->tasks, 10);
  expect_tasks_equal_reference(aligned, "aligned columns");
}

TEST(GroupRuns, ThreeDimensionalBoxesAndBigIndices) {
  expect_tasks_equal_reference(testing::sub_box({4, 5, 9}, {1, 2, 3}, {3, 2, 5}), "3-d box");
  expect_tasks_equal_reference(testing::sub_box({3, 6, 2, 7}, {1, 1, 0, 2}, {2, 4, 2, 3}),
                               "4-d box");
  // A shard of a tensor with 2^33 + 6 elements per row: global indices and groups past 2^32.
  Box big{{3, 6}, {6, 1}, {(int64_t{1} << 33) + 6, 1}, (int64_t{1} << 33) - 2};
  expect_tasks_equal_reference(big, "past 2^32");
}

TEST(GroupRuns, RegionsWithoutAContiguousInnerRunFallBack) {
  // Transposed (inner global stride 6) and strided buffers: the kernel fills element by element.
  const Box transposed{{6, 4}, {4, 1}, {1, 6}, 0};
  EXPECT_FALSE(internal::group_runs(internal::compact_region(transposed.region()), 4));
  const Box strided{{5}, {2}, {1}, 0};
  EXPECT_FALSE(internal::group_runs(internal::compact_region(strided.region()), 4));
  const Box empty{{0, 3}, {3, 1}, {3, 1}, 0};
  EXPECT_FALSE(internal::group_runs(internal::compact_region(empty.region()), 4));
}

TEST(GroupRuns, AGroupIsTheSameValuesAsItsElements) {
  // fill_group's lanes against fill_one at group * G + lane, for groups past 2^32 too.
  for (const testing::TypeAndKind& tk : testing::all_type_kind_pairs()) {
    if (tk.type == ElementType::kComplex64) continue;
    const FillParams p = make_fill_params(tk.type, testing::test_spec(tk.type, tk.kind));
    internal::dispatch_element_type(tk.type, [&](auto tag) {
      constexpr ElementType kType = decltype(tag)::value;
      if constexpr (kGroupFillable<kType>) {
        using S = typename detail::Storage<kType>::type;
        for (const uint64_t group : {uint64_t{0}, uint64_t{1}, uint64_t{977}, uint64_t{1} << 33}) {
          S lanes[kGroupSize<kType>];
          fill_group<kType>(lanes, p, group);
          for (int lane = 0; lane < kGroupSize<kType>; ++lane) {
            S one;
            fill_one<kType>(&one, p, group * kGroupSize<kType> + static_cast<uint64_t>(lane));
            ASSERT_EQ(std::memcmp(&one, &lanes[lane], sizeof(S)), 0)
                << testing::pair_name(tk) << " group " << group << " lane " << lane;
          }
        }
      }
    });
  }
}

}  // namespace
}  // namespace shardplan::kernels
