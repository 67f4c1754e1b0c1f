// Note [Link sweeps] (planner/materialize/link_sweep.h) without a launcher: which of a plan's
// groups rehearse sweeps, worked out by hand from the mesh and the ranks per node, and the
// reading of a rehearsal document into calibrate's inputs, hostile fields included. The sweeps
// themselves run under mpirun (tests/cli/gpu_loop_mpi_smoke.cmake).
#include "planner/materialize/link_sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "planner/candidate/parallel_dims.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

BillCollective on(const char* dim, int64_t group, int64_t bytes) {
  BillCollective c;
  c.what = std::string(dim) + " test";
  c.mesh_dim = dim;
  c.group_size = group;
  c.bytes = bytes;
  c.calls = 1;
  return c;
}

// pp 2 x dp 2 x tp 2 on nodes of 4: mesh order [pp, dp, ep, cp, tp] puts rank 0's tp group on
// ranks {0, 1}, its dp group on {0, 2} (both on node 0) and its pp group on {0, 4} (nodes 0 and
// 1, one rank each).
PlanFile three_d_plan() {
  PlanFile f;
  f.config.pp = 2;
  f.config.dp = 2;
  f.config.tp = 2;
  f.collectives = {on("tp", 2, 1 << 10), on("dp", 2, 64 << 20), on("pp", 2, 3 << 20)};
  return f;
}

TEST(LinkSweep, PicksTheLargestGroupInANodeAndTheThinnestAcrossNodes) {
  const std::vector<LinkSweep> s = link_sweep_groups(three_d_plan(), 4);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[0].intra);
  EXPECT_EQ(s[0].dims, (std::vector<size_t>{kTpDim}));  // tp and dp tie at 2: first used wins
  EXPECT_EQ(s[0].log.ranks, 2);
  EXPECT_EQ(s[0].log.nodes, 1);
  EXPECT_FALSE(s[1].intra);
  EXPECT_EQ(s[1].dims, (std::vector<size_t>{kPpDim}));
  EXPECT_EQ(s[1].log.nodes, 2);
  EXPECT_EQ(s[1].log.ranks_per_node, 1);
  // On nodes of 2 the dp group {0, 2} spans two nodes too: pp {0, 4} and dp both have one rank
  // per node on 2 nodes, and the first one used is kept; the fabric group is tp.
  const std::vector<LinkSweep> two = link_sweep_groups(three_d_plan(), 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].dims, (std::vector<size_t>{kTpDim}));
  EXPECT_EQ(two[1].dims, (std::vector<size_t>{kDpDim}));
  // One rank per node: nothing inside a node to sweep.
  const std::vector<LinkSweep> one = link_sweep_groups(three_d_plan(), 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FALSE(one[0].intra);
}

nlohmann::json doc() {
  return nlohmann::json::parse(R"({
    "format": "shardplan.rehearsal", "backend": "nccl", "collectives": [],
    "links": [{"link": "intra", "group_dims": ["tp"], "kind": "all_reduce", "ranks": 8,
               "nodes": 1, "ranks_per_node": 8,
               "rows": [{"bytes": 8, "time_s": 2e-5}, {"bytes": 67108864, "time_s": 4e-4}]}]})");
}

TEST(LinkSweep, ARehearsalDocumentBecomesCalibrateInputs) {
  const std::vector<collectives::CalibrationInput> in =
      rehearsal_link_inputs(doc(), "r.json", collectives::Library::kNccl);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].link, collectives::CalibratedLink::kIntra);
  EXPECT_EQ(in[0].log.ranks, 8);
  ASSERT_EQ(in[0].log.rows.size(), 2u);
  EXPECT_EQ(in[0].log.rows[1].bytes, 67108864);
  EXPECT_EQ(in[0].log.rows[1].count, 16777216);
  EXPECT_DOUBLE_EQ(in[0].log.rows[1].out_of_place_us, 400);
  EXPECT_THAT(in[0].log.origin, HasSubstr("r.json"));
}

TEST(LinkSweep, AHostileRehearsalDocumentNamesTheField) {
  auto refused = [](const nlohmann::json& j, const char* what,
                    collectives::Library lib = collectives::Library::kNccl) {
    SCOPED_TRACE(what);
    EXPECT_THAT([&] { (void)rehearsal_link_inputs(j, "r.json", lib); },
                ThrowsMessage<Error>(HasSubstr(what)));
  };
  refused(doc(), "expected 'mpi'", collectives::Library::kMpi);
  nlohmann::json j = doc();
  j["format"] = "shardplan.plan";
  refused(j, "format");
  j = doc();
  j["links"] = nlohmann::json::array();
  refused(j, "no link sweeps");
  j = doc();
  j["links"][0]["rows"][0]["time_s"] = 0;
  refused(j, "links[0].rows[0].time_s");
  j = doc();
  j["links"][0]["rows"][0]["time_s"] = 1e-300;  // would overflow the fit's 1 / t^2 weights
  refused(j, "1e-9 to 1e6");
  j = doc();
  j["links"][0]["ranks"] = int64_t{1} << 21;  // beyond the ranks any job can have
  refused(j, "links[0].ranks");
  j = doc();
  j["links"][0]["rows"][0]["bytes"] = 6;
  refused(j, "multiple of 4");
  j = doc();
  j["links"][0]["ranks"] = 1;
  refused(j, "links[0].ranks");
  j = doc();
  j["links"][0]["link"] = "nvlink";
  refused(j, "expected intra or inter");
  j = doc();
  j["links"][0]["kind"] = "all_gather";
  refused(j, "expected all_reduce");
  j = doc();
  j["links"][0]["rows"].erase(1);
  refused(j, "at least two sizes");
  j = doc();
  j["links"][0]["extra"] = 1;
  refused(j, "extra");
  j = doc();
  j["links"][0]["group_dims"] = {"zz"};
  refused(j, "field 'links[0].group_dims': 'zz' is not a mesh dim, expected some of pp, dp");
  j = doc();
  j["links"][0]["group_dims"] = nlohmann::json::array();
  refused(j, "field 'links[0].group_dims': expected the mesh dims");
  j = doc();
  j["links"].push_back(j["links"][0]);  // merged into one fit unseen, were it read
  refused(j, "field 'links[1].link': a second intra sweep, expected one per link");
}

// Every field replaced by hostile values, removed, or joined by an unknown key, then mutated copies
// of the document: read, or refused with shardplan::Error naming the field, nothing else.
TEST(LinkSweep, MutatedRehearsalDocumentsAreReadOrRefused) {
  const test::Reader r{"rehearsal",
                       [](const nlohmann::json& j) {
                         (void)rehearsal_link_inputs(j, "r.json", collectives::Library::kNccl);
                       },
                       doc(),
                       {""},  // the rest of the rehearsal document is not calibrate's to check
                       {"collectives"}};
  test::sweep_fields(r);
  EXPECT_GT(test::fuzz(r, 400, 2026), 100);
}

}  // namespace
}  // namespace shardplan::planner
