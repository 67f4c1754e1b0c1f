// Note [Rehearsal] (planner/materialize/rehearsal.h) without a launcher: the group each bill
// collective spans, worked out by hand on the meshes the planner writes, and the refusal of a
// plan with nothing to rehearse. The timed runs are under mpirun (tests/cli/
// gpu_loop_mpi_smoke.cmake).
#include "planner/materialize/rehearsal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(Rehearsal, APlanWithoutCollectivesIsRefused) {
  PlanFile f;
  collectives::SelfCommunicator world;
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  EXPECT_THAT([&] { (void)rehearse(f, world, {}, *host, {}); },
              ThrowsMessage<Error>(HasSubstr("no collectives to rehearse")));
}

}  // namespace
}  // namespace shardplan::planner
