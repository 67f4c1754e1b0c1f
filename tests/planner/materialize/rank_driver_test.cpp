// The materialize rank driver (planner/materialize/rank_driver.h) on one rank without a launcher:
// a plan read from its file, allocated, filled and verified, every byte accounted for; bad input
// refused before anything is allocated.
#include "planner/materialize/rank_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/communicator.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"
#include "tests/planner/materialize/tiny_llama.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;

using testing::tiny_llama;

// plan.json of the fastest plan for `gpus` ranks of cpu-local, in a fresh folder.
std::string write_plan(int64_t gpus, const std::string& name) {
  Planner p(tiny_llama(), collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = gpus, .seq = 64, .global_batch = 8}, {});
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardplan_rank_driver_" + name);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "plan.json").string();
  std::ofstream(path) << plan_to_json(plan_file(p, p.search({}, 1).top.at(0), "tiny")).dump();
  return path;
}

Launch one_rank() {
  Launch l;
  l.world = std::make_unique<collectives::SelfCommunicator>();
  l.split = [](const mesh::DeviceMesh& m) {
    collectives::MeshCommunicators c;
    c.world = std::make_unique<collectives::SelfCommunicator>();
    for (size_t d = 0; d < m.shape().size(); ++d) {
      c.dims.push_back(std::make_unique<collectives::SelfCommunicator>());
    }
    return c;
  };
  l.abort = [](int) { FAIL() << "a one-rank job throws instead of aborting"; };
  l.error_line = [](const std::string& line) { ADD_FAILURE() << line; };
  return l;
}

TEST(RankDriver, OneRankHoldsTheWholeModelAndVerifies) {
  MaterializeRequest req;
  req.plan = write_plan(1, "one");
  req.verify = true;
  Launch launch = one_rank();
  int64_t last_done = -1, total = 0;
  const MaterializeReport r = run_ranks(req, launch, [&](int64_t done, int64_t t) {
    last_done = done;
    total = t;
  });
  ASSERT_FALSE(r.bad_input);
  ASSERT_EQ(r.ranks.size(), 1u);
  // Parameters, by hand: embedding and head 1001 x 64 each; per layer q 64x64, k and v 32x64
  // (2 KV heads of 16), o 64x64, gate and up 96x64, down 64x96, two norms of 64; final norm 64.
  const int64_t per_layer = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 96 * 64 + 2 * 64;
  const int64_t params = 2 * 1001 * 64 + 2 * per_layer + 64;
  EXPECT_EQ(r.ranks[0].bytes, params * 2);  // the config's torch_dtype, bfloat16
  EXPECT_EQ(r.ranks[0].tensors, 2 + 2 * 9 + 1);
  EXPECT_EQ(r.ranks[0].read_bytes, 0);
  EXPECT_EQ(last_done, total);
  ASSERT_TRUE(r.verify.has_value());
  EXPECT_EQ(r.verify->failures, 0);
  EXPECT_EQ(r.verify->covered, 21);
}

TEST(RankDriver, BadInputOnOneRankIsAnErrorBeforeAllocating) {
  MaterializeRequest req;
  req.plan = write_plan(2, "two");
  Launch launch = one_rank();
  try {
    (void)run_ranks(req, launch, {});
    FAIL() << "a 2-rank plan ran on one rank";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the plan is for 2 ranks"));
    EXPECT_THAT(e.what(), HasSubstr("expected a launch with -np 2"));
  }
  req.device = "gpu";
  EXPECT_THROW(
      {
        try {
          (void)run_ranks(req, launch, {});
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "--device 'gpu', expected cpu or cuda");
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace shardplan::planner
