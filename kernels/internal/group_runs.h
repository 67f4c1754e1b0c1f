// The CUDA fill's fast path as a list of tasks, one per Philox group of one contiguous run, so
// that a thread draws one block for a whole group (Note [Element random bits] in
// kernels/random_fill.h) and stores it with one vector store. Host and device code; the CPU tests
// walk every task (tests/kernels/group_runs_test.cpp) since CI has no GPU.
//   std::optional<GroupRuns> g = group_runs(compact_region(region), kGroupSize<T>);
//   GroupTask task;
//   if (g && group_task<kGroupSize<T>>(*g, t, &task)) fill_group<T>(values, params, task.group);
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/host_device.h"
#include "kernels/internal/region_walk.h"

namespace shardplan::kernels::internal {

// Note [Group runs]
// A region whose innermost dim has buffer and global stride 1 is rows of `run` elements, each
// contiguous in memory and in global index (a whole tensor, a row shard, a column shard). Row r
// starts at global index s_r and covers groups floor(s_r / G) .. floor((s_r + run - 1) / G); task
// (r, k) is the k-th of those groups, with the lanes that fall inside the row. Every row gets the
// same number of tasks, ceil(run / G) when every row starts on a group boundary and one more
// otherwise (a task past the row's end is empty), so a task's row is one division away. Each
// element of the region belongs to exactly one non-empty task: rows are disjoint in the buffer
// and a row's groups are disjoint in global index. A shard whose rows cut groups recomputes the
// cut groups' blocks and keeps its own lanes, which is what makes its values the whole tensor's.
struct GroupRuns {
  CompactRegion region;  // ndim >= 1; innermost dst and global strides 1
  int64_t run = 0;       // elements per row
  int64_t rows = 0;
  int64_t tasks_per_row = 0;
  int64_t tasks = 0;  // rows * tasks_per_row
  int group = 1;      // elements per Philox group
};

struct GroupTask {
  uint64_t group;  // the Philox group: its lane 0 is global element group * G
  int first_lane;  // lanes [first_lane, end_lane) are in the row
  int end_lane;
  int64_t dst_offset;  // buffer offset (elements) of lane first_lane
};

// The tasks of `r` in groups of `group` elements, or nullopt when its innermost dim is not
// contiguous in the buffer and in global index (the caller then fills element by element).
inline std::optional<GroupRuns> group_runs(const CompactRegion& r, int group) {
  if (r.ndim < 1 || r.numel == 0 || group < 1) return std::nullopt;
  const int inner = r.ndim - 1;
  if (r.dst_strides[inner] != 1 || r.global_strides[inner] != 1) return std::nullopt;
  GroupRuns g;
  g.region = r;
  g.group = group;
  g.run = r.sizes[inner];
  g.rows = r.numel / g.run;
  if (g.rows == 1) {
    const int64_t first = r.global_offset / group;
    const int64_t last = (r.global_offset + g.run - 1) / group;
    g.tasks_per_row = last - first + 1;
  } else {
    bool aligned = r.global_offset % group == 0;
    for (int k = 0; k < inner; ++k) aligned = aligned && r.global_strides[k] % group == 0;
    g.tasks_per_row = (g.run + group - 1) / group + (aligned ? 0 : 1);
  }
  g.tasks = g.rows * g.tasks_per_row;  // <= 2 * numel: no overflow
  return g;
}

// Task t (0 <= t < g.tasks): false when it holds no element of its row. kGroup == g.group, a
// constant so that dividing by it is a shift (a 64-bit division by a variable is ~70 GPU
// instructions, as much as a group's Philox block).
template <int kGroup>
SHARDPLAN_HD SHARDPLAN_INLINE bool group_task(const GroupRuns& g, int64_t t, GroupTask* out) {
  const CompactRegion& r = g.region;
  int64_t row = 0;
  int64_t k = t;
  if (g.rows != 1) {
    // 32-bit division where it fits (the common case): a 64-bit one costs several times more.
    if (((static_cast<uint64_t>(t) | static_cast<uint64_t>(g.tasks_per_row)) >> 32) == 0) {
      row = static_cast<uint32_t>(t) / static_cast<uint32_t>(g.tasks_per_row);
    } else {
      row = t / g.tasks_per_row;
    }
    k = t - row * g.tasks_per_row;
  }
  // The row's outer multi-index, last outer dim fastest; the outermost needs no division.
  int64_t dst_row = 0;
  int64_t global_row = r.global_offset;
  int64_t rest = row;
  for (int d = r.ndim - 2; d >= 1; --d) {
    const int64_t i = rest % r.sizes[d];
    rest /= r.sizes[d];
    dst_row += i * r.dst_strides[d];
    global_row += i * r.global_strides[d];
  }
  if (r.ndim >= 2) {
    dst_row += rest * r.dst_strides[0];
    global_row += rest * r.global_strides[0];
  }
  const int64_t group = global_row / kGroup + k;  // global_row >= 0
  const int64_t lane0 = group * kGroup;
  const int64_t begin = lane0 > global_row ? lane0 : global_row;
  const int64_t row_end = global_row + g.run;
  const int64_t end = lane0 + kGroup < row_end ? lane0 + kGroup : row_end;
  if (begin >= end) return false;
  out->group = static_cast<uint64_t>(group);
  out->first_lane = static_cast<int>(begin - lane0);
  out->end_lane = static_cast<int>(end - lane0);
  out->dst_offset = dst_row + (begin - global_row);
  return true;
}

}  // namespace shardplan::kernels::internal
