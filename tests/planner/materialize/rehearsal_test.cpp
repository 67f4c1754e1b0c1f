// Note [Rehearsal] (planner/materialize/rehearsal.h) without a launcher: the group each bill
// collective spans, worked out by hand on the meshes the planner writes, and the refusal of a
// plan with nothing to rehearse. The timed runs are under mpirun (tests/cli/
// gpu_loop_mpi_smoke.cmake).
#include "planner/materialize/rehearsal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

BillCollective on(const char* dim, int64_t group) {
  BillCollective c;
  c.what = std::string(dim) + " test";
  c.mesh_dim = dim;
  c.group_size = group;
  return c;
}

// Mesh [pp 2, dp 4, ep 1, cp 2, tp 2]: a dense weight's data-parallel group is dp x cp = 8 ranks,
// an expert's dp alone; an ep all-to-all of 2 over an ep dim of 1 spans cp; pp and tp are their
// own dims.
TEST(Rehearsal, GroupDimsMultiplyToTheGroupSize) {
  const std::vector<int64_t> shape = {2, 4, 1, 2, 2};
  EXPECT_EQ(group_dims(shape, on("dp", 4)), (std::vector<size_t>{kDpDim}));
  EXPECT_EQ(group_dims(shape, on("dp", 8)), (std::vector<size_t>{kDpDim, kCpDim}));
  EXPECT_EQ(group_dims(shape, on("ep", 2)), (std::vector<size_t>{kEpDim, kCpDim}));
  EXPECT_EQ(group_dims(shape, on("ep", 4)), (std::vector<size_t>{kEpDim, kCpDim, kTpDim}));
  EXPECT_EQ(group_dims(shape, on("tp", 2)), (std::vector<size_t>{kTpDim}));
  EXPECT_EQ(group_dims(shape, on("pp", 2)), (std::vector<size_t>{kPpDim}));
  EXPECT_THAT([&] { (void)group_dims(shape, on("tp", 4)); },
              ThrowsMessage<Error>(HasSubstr("spans 4 ranks on 'tp'")));
  EXPECT_THAT([&] { (void)group_dims(shape, on("xp", 2)); },
              ThrowsMessage<Error>(HasSubstr("on mesh dim 'xp'")));
}

// Each call moves at least one element per rank (run_call), so the buffers hold what the call
// touches, worked out here per kind for n ranks and b bill bytes: all-reduce max(1, b / 4)
// floats; all-gather and all-to-all n x max(1, b / n) bytes; reduce-scatter n x max(1, b / 4 / n)
// floats; broadcast max(1, b).
TEST(Rehearsal, BuffersHoldWhatTheSmallestCallTouches) {
  for (const int64_t n : {1, 2, 3, 8, 64}) {
    for (const int64_t b : {0, 1, 3, 4, 7, 8, 10, 31, 100, 4096, 4097}) {
      BillCollective c = on("dp", n);
      c.bytes = b;
      const int64_t floats = std::max<int64_t>(1, b / 4);
      const int64_t touched =
          std::max({4 * floats, n * std::max<int64_t>(1, b / n),
                    4 * n * std::max<int64_t>(1, floats / n), std::max<int64_t>(1, b)});
      EXPECT_GE(rehearsal_buffer_bytes(c), touched) << n << " ranks, " << b << " bytes";
      EXPECT_LE(rehearsal_buffer_bytes(c), std::max<int64_t>(b, 4 * n));
    }
  }
}

TEST(Rehearsal, APlanWithoutCollectivesIsRefused) {
  PlanFile f;
  collectives::SelfCommunicator world;
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  EXPECT_THAT([&] { (void)rehearse(f, world, {}, *host, {}); },
              ThrowsMessage<Error>(HasSubstr("no collectives to rehearse")));
}

}  // namespace
}  // namespace shardplan::planner
