// Redistribution plans against docs/semantics.md §3: the greedy order and CommDebugMode
// counts of §3.6, the padding worked examples of §3.1 (bytes computed by hand below), the graph
// planner trace of §3.4, refused transitions and bad input.
#include "collectives/redistribute_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "collectives/dtensor_compat.h"
#include "collectives/min_cost_redistribute.h"
#include "collectives/redistribute_cost.h"

namespace shardplan::collectives {
namespace {

using mesh::DeviceMesh;
using mesh::parse_placements;
using tensor::DType;

mesh::ShardSpec spec(std::vector<int64_t> shape, std::vector<int64_t> mesh_shape,
                     const char* placements, DType dtype = DType::kFloat32) {
  return mesh::make_shard_spec(shape, dtype, DeviceMesh(std::move(mesh_shape)),
                               parse_placements(placements));
}

// "md1 S1->R all_gather; md0 S0->S1 all_to_all" (the table notation of docs/semantics.md §3.6).
std::string trace(const RedistributePlan& p) {
  std::string out;
  for (const RedistributeStep& s : p.steps) {
    out += (out.empty() ? "" : "; ") + std::string("md") + std::to_string(s.mesh_dim) + ' ' +
           to_string(s.src) + "->" + to_string(s.dst) + ' ' + std::string(to_string(s.op));
  }
  return out;
}

RedistributePlan greedy(const mesh::ShardSpec& s, const char* to) {
  return plan_redistribute(s, parse_placements(to));
}

struct CountCase {
  const char* from;
  const char* to;
  std::vector<int64_t> shape;
  const char* plan;
  int64_t collectives;
};

// docs/semantics.md §3.6, 2-d mesh (2,2): the plan column and the count.
TEST(RedistributeGreedy, SpecTable2dMeshPlansAndCounts) {
  const std::vector<CountCase> cases = {
      {"S0,S1", "S0,S0", {8, 8}, "md1 S1->S0 all_to_all", 1},
      {"S0,S1",
       "S1,S0",
       {8, 8},
       "md1 S1->R all_gather; md0 S0->S1 all_to_all; md1 R->S0 local_chunk",
       2},
      {"S0,S0",
       "S1,S1",
       {8, 8},
       "md1 S0->R all_gather; md0 S0->S1 all_to_all; md1 R->S1 local_chunk",
       2},
      {"S0,S2",
       "S1,S0",
       {8, 8, 8},
       "md1 S2->R all_gather; md0 S0->S1 all_to_all; md1 R->S0 local_chunk",
       2},
      {"S1,S1", "S1,S2", {8, 8, 8}, "md1 S1->S2 all_to_all", 1},
      {"S0,S0",
       "R,S0",
       {8, 8},
       "md1 S0->R all_gather; md0 S0->R all_gather; md1 R->S0 local_chunk",
       2},
      {"S0,S0", "S0,R", {8, 8}, "md1 S0->R all_gather", 1},
      {"P,P", "R,R", {8, 8}, "md0 P->R all_reduce; md1 P->R all_reduce", 2},
      {"P,R", "S0,R", {8, 8}, "md0 P->S0 reduce_scatter", 1},
  };
  for (const CountCase& c : cases) {
    const RedistributePlan p = greedy(spec(c.shape, {2, 2}, c.from), c.to);
    EXPECT_EQ(trace(p), c.plan) << c.from << " -> " << c.to;
    EXPECT_EQ(p.num_collectives(), c.collectives) << c.from << " -> " << c.to;
  }
}

// docs/semantics.md §3.6, 1-d mesh of 4, sizes 12, 13, 14 on either dim (uneven included).
TEST(RedistributeGreedy, SpecCounts1dMesh) {
  for (int64_t n : {12, 13, 14}) {
    for (const char* sd : {"S0", "S1"}) {
      const mesh::ShardSpec s = spec({n, n}, {4}, sd);
      EXPECT_EQ(greedy(s, "R").num_collectives(), 1);
      EXPECT_EQ(greedy(s, sd).num_collectives(), 0);
      EXPECT_EQ(greedy(spec({n, n}, {4}, "R"), sd).num_collectives(), 0);
      EXPECT_EQ(greedy(spec({n, n}, {4}, "P"), sd).num_collectives(), 1);
    }
    EXPECT_EQ(trace(greedy(spec({n, n}, {4}, "P"), "R")), "md0 P->R all_reduce");
    EXPECT_EQ(greedy(spec({n, n}, {4}, "R"), "R").steps.size(), 0u);
    EXPECT_EQ(greedy(spec({n, n}, {4}, "P"), "P").steps.size(), 0u);
    EXPECT_EQ(trace(greedy(spec({n, n}, {4}, "S0"), "S1")), "md0 S0->S1 all_to_all");
    EXPECT_EQ(trace(greedy(spec({n, n}, {4}, "S1"), "S0")), "md0 S1->S0 all_to_all");
  }
}

// docs/semantics.md §3.6: mesh (4,1), any change on the size-1 dim communicates nothing.
TEST(RedistributeGreedy, SizeOneMeshDimIsNoop) {
  for (const char* to : {"S0,S1", "S0,S0", "S0,R"}) {
    const RedistributePlan p = greedy(spec({8, 8}, {4, 1}, "S0,S1"), to);
    EXPECT_EQ(p.num_collectives(), 0) << to;
    for (const RedistributeStep& s : p.steps) EXPECT_EQ(s.op, StepOp::kNoop) << to;
  }
  EXPECT_EQ(trace(greedy(spec({8, 8}, {4, 1}, "S0,P"), "S0,R")), "md1 P->R noop");
}

// docs/semantics.md §3.4, greedy trace on mesh (2,2,2): S(0)[0]S(0)[1]S(0)[2] ->
// S(1)[0]S(1)[1]S(1)[2].
TEST(RedistributeGreedy, SpecOrderedTrace3dMesh) {
  EXPECT_EQ(trace(greedy(spec({8, 8}, {2, 2, 2}, "S0,S0,S0"), "S1,S1,S1")),
            "md2 S0->R all_gather; md1 S0->R all_gather; md0 S0->S1 all_to_all; "
            "md1 R->S1 local_chunk; md2 R->S1 local_chunk");
}

// Issue #157585 (docs/semantics.md §3.6 note): S0S0 -> RS0 needs 2 all_gathers, S0S0 -> S0R only 1.
TEST(RedistributeGreedy, Issue157585Counts) {
  const mesh::ShardSpec s = spec({8, 8}, {2, 2}, "S0,S0");
  EXPECT_EQ(greedy(s, "R,S0").num_collectives(), 2);
  EXPECT_EQ(greedy(s, "S0,R").num_collectives(), 1);
}

// docs/semantics.md §3.1's padding examples on mesh (4,), float32 (4 bytes), worked by hand.
TEST(RedistributeBytes, SpecPaddingExamples) {
  // S(0) -> R, n = 5: pieces 2,2,1,0 padded to 2 -> gathered 8 elements = 32 bytes per rank.
  RedistributeStep s = greedy(spec({5}, {4}, "S0"), "R").steps.at(0);
  EXPECT_EQ(s.op, StepOp::kAllGather);
  EXPECT_EQ(s.bytes_per_rank, 8 * 4);
  EXPECT_EQ(s.local_shape_before.vec(), std::vector<int64_t>{2});
  EXPECT_EQ(s.local_shape_after.vec(), std::vector<int64_t>{5});
  // P -> S(0), n = 5: input chunked 2,2,1,0, each padded to 2 -> 8 elements in.
  s = greedy(spec({5}, {4}, "P"), "S0").steps.at(0);
  EXPECT_EQ(s.op, StepOp::kReduceScatter);
  EXPECT_EQ(s.bytes_per_rank, 8 * 4);
  EXPECT_EQ(s.local_shape_after.vec(), std::vector<int64_t>{2});
  // S(0) -> S(1) on (5,5): local (2,5) padded to (2, 2*4) = 16 elements sent.
  s = greedy(spec({5, 5}, {4}, "S0"), "S1").steps.at(0);
  EXPECT_EQ(s.op, StepOp::kAllToAll);
  EXPECT_EQ(s.bytes_per_rank, 2 * 8 * 4);
  EXPECT_EQ(s.local_shape_before.vec(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(s.local_shape_after.vec(), (std::vector<int64_t>{5, 2}));
  // P -> R: the whole (5,5) buffer; R -> S(1): the rank keeps (5,2).
  EXPECT_EQ(greedy(spec({5, 5}, {4}, "P"), "R").steps.at(0).bytes_per_rank, 25 * 4);
  s = greedy(spec({5, 5}, {4}, "R"), "S1").steps.at(0);
  EXPECT_EQ(s.op, StepOp::kLocalChunk);
  EXPECT_EQ(s.bytes_per_rank, 10 * 4);
}

// Nested levels: (10,6) bf16 on mesh (2,3) [S0,S1] -> [R,S1]: md0 gathers dim 0 (10 = 5+5) while
// dim 1 stays split 2-way per rank: coordinate 0 holds (5,2), gathers 2 x (5,2) = 20 elements.
TEST(RedistributeBytes, OtherMeshDimsShrinkTheBuffer) {
  const RedistributePlan p = greedy(spec({10, 6}, {2, 3}, "S0,S1", DType::kBFloat16), "R,S1");
  ASSERT_EQ(trace(p), "md0 S0->R all_gather");
  EXPECT_EQ(p.steps[0].bytes_per_rank, 2 * 5 * 2 * 2);
  EXPECT_EQ(p.steps[0].local_shape_after.vec(), (std::vector<int64_t>{10, 2}));
  // (7,) on mesh (2,2) [S0,S0]: level 0 gives 4,3; level 1 of 4 gives 2,2. md1 S0->R gathers
  // c = 2 per rank over 2 ranks = 4 elements of 4 bytes.
  const RedistributePlan q = greedy(spec({7}, {2, 2}, "S0,S0"), "S0,R");
  EXPECT_EQ(q.steps.at(0).bytes_per_rank, 4 * 4);
  EXPECT_EQ(q.steps.at(0).local_shape_after.vec(), std::vector<int64_t>{4});
}

// A strided shard's largest piece is not always in coordinate 0's group. (7,) on mesh (2,3)
// [S0, SS(0,3)]: md0 splits 4 | 3. The 4-row group cuts 4 into pieces 2,2,0 and each into 3:
// its rank 0 holds 1+1+0 = 2 rows; the 3-row group cuts 1,1,1: its rank 0 holds 3 rows. Gathering
// md1 pads to 3 in that group: 3 ranks x 3 rows x 4 bytes.
TEST(RedistributeBytes, StridedShardLargestGroup) {
  const RedistributeStep s = make_step(spec({7}, {2, 3}, "S0,SS0:3"), 1, mesh::Replicate{});
  EXPECT_EQ(s.op, StepOp::kAllGather);
  EXPECT_EQ(s.bytes_per_rank, 3 * 3 * 4);
  EXPECT_EQ(s.local_shape_before.vec(), std::vector<int64_t>{2});  // coordinate 0's
}

// docs/semantics.md §3.1 / test_redistribute_to_partial: which targets with Partial are accepted.
TEST(RedistributeRefused, PartialTargets) {
  const mesh::ShardSpec ps = spec({8, 8}, {2, 2}, "P,S0");
  EXPECT_EQ(trace(greedy(ps, "P,S1")), "md1 S0->S1 all_to_all");
  const mesh::ShardSpec sp = spec({8, 8}, {2, 2}, "S0,Pprod");
  EXPECT_EQ(trace(greedy(sp, "R,Pprod")), "md0 S0->R all_gather");
  auto message = [](const mesh::ShardSpec& s, const char* to) {
    try {
      plan_redistribute(s, parse_placements(to));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(spec({8, 8}, {2, 2}, "S0,R"), "S0,P").find("Replicate -> Partial"),
            std::string::npos);
  EXPECT_NE(message(sp, "R,P").find("Partial(a) -> Partial(b)"), std::string::npos);
  EXPECT_NE(message(sp, "R,P").find("mesh dim 1"), std::string::npos);
  EXPECT_NE(message(spec({8}, {2}, "S0"), "P").find("Shard -> Partial"), std::string::npos);
  // The min-cost planner refuses the same.
  EXPECT_THROW(plan_min_cost_redistribute(sp, parse_placements("R,P")), Error);
}

TEST(RedistributeRefused, BadInput) {
  const mesh::ShardSpec s = spec({8, 8}, {2, 2}, "S0,R");
  EXPECT_THROW(greedy(s, "R"), Error);        // one placement for a 2-d mesh
  EXPECT_THROW(greedy(s, "S2,R"), Error);     // tensor has no dim 2
  EXPECT_THROW(greedy(s, "SS0:0,R"), Error);  // split_factor < 1
  // One step cannot gather mesh dim 0 while mesh dim 1 still splits the same tensor dim.
  const mesh::ShardSpec ss = spec({8, 8}, {2, 2}, "S0,S0");
  EXPECT_THROW(make_step(ss, 0, mesh::Replicate{}), Error);
  EXPECT_EQ(make_step(ss, 1, mesh::Replicate{}).op, StepOp::kAllGather);
  // A strided shard is not re-split by all_to_all.
  EXPECT_THROW(make_step(spec({8, 8}, {2}, "SS0:2"), 0, mesh::Shard{1}), Error);
  EXPECT_THROW(make_step(ss, 2, mesh::Replicate{}), Error);  // no mesh dim 2
  // A negative cost is refused.
  EXPECT_THROW(plan_min_cost_redistribute(s, parse_placements("R,S1"),
                                          [](const RedistributeStep&) { return -1.0; }),
               Error);
}

// Negative dims are normalised like Shard(-1) everywhere.
TEST(RedistributeGreedy, NegativeTargetDim) {
  const RedistributePlan p = greedy(spec({4, 6}, {2}, "S0"), "S-1");
  EXPECT_EQ(trace(p), "md0 S0->S1 all_to_all");
  EXPECT_TRUE(p.target.placements[0].is_shard(1));
}

// _StridedShard (docs/semantics.md §2.5): FSDP-over-TP [SS(0,2), S(0)] back to replicated and back.
TEST(RedistributeGreedy, StridedShardGoesThroughReplicate) {
  const mesh::ShardSpec s = spec({8, 8}, {2, 2}, "SS0:2,S0");
  EXPECT_EQ(trace(greedy(s, "R,R")), "md1 S0->R all_gather; md0 SS0:2->R all_gather");
  EXPECT_EQ(trace(greedy(s, "S0,S0")),
            "md1 S0->R all_gather; md0 SS0:2->R all_gather; md0 R->S0 local_chunk; "
            "md1 R->S0 local_chunk");
  EXPECT_EQ(trace(greedy(spec({8, 8}, {2, 2}, "R,R"), "SS0:2,S0")),
            "md0 R->SS0:2 local_chunk; md1 R->S0 local_chunk");
}

// docs/semantics.md §3.4: with DTensor's one-step costs (all_gather on the gathered bytes;
// all_to_all priced as an all_gather of the unscaled shard + 1.0 us) the graph planner goes through
// RRR on a small tensor, where greedy uses an all_to_all.
TEST(RedistributeMinCost, SpecGraphTraceWithDTensorCosts) {
  const std::vector<collectives::GroupLinks> links =
      dtensor::dtensor_mesh_links(std::vector<int64_t>{2, 2, 2}, 8);
  const StepCostFn dtensor_cost = [&](const RedistributeStep& s) {
    if (!s.communicates()) return 0.0;
    CollectiveCall c = collective_call(s, links[static_cast<size_t>(s.mesh_dim)]);
    double us = 0;
    if (s.op == StepOp::kAllToAll) {
      c.kind = CollectiveKind::kAllGather;
      us = dtensor::kAllToAllPenaltyUs;
    }
    return collective_cost(c).time_s + us * 1e-6;
  };
  const mesh::ShardSpec s = spec({8, 8}, {2, 2, 2}, "S0,S0,S0");
  const RedistributePlan g =
      plan_min_cost_redistribute(s, parse_placements("S1,S1,S1"), dtensor_cost);
  EXPECT_EQ(trace(g),
            "md2 S0->R all_gather; md1 S0->R all_gather; md0 S0->R all_gather; "
            "md0 R->S1 local_chunk; md1 R->S1 local_chunk; md2 R->S1 local_chunk");
  // Counting bytes instead, the all_to_all (half the bytes of a gather) wins, as greedy does.
  EXPECT_EQ(trace(plan_min_cost_redistribute(s, parse_placements("S1,S1,S1"))),
            trace(greedy(s, "S1,S1,S1")));
}

// A plan of one all_gather priced with DTensor's constants gives docs/semantics.md §4.4's 49.773 us
// (fp32 1024x1024 on mesh (8,), 8 GPUs per host).
TEST(RedistributeCost, SpecWorkedNumber) {
  const RedistributePlan p = greedy(spec({1024, 1024}, {8}, "S0"), "R");
  const PlanPrice price = price_plan(p, dtensor::dtensor_mesh_links(std::vector<int64_t>{8}, 8));
  ASSERT_EQ(price.steps.size(), 1u);
  ASSERT_TRUE(price.steps[0].has_value());
  EXPECT_NEAR(price.total_time_s * 1e6, 49.773, 0.001);
  // R -> S(0) is free (docs/semantics.md §4.4).
  EXPECT_EQ(price_plan(greedy(spec({1024, 1024}, {8}, "R"), "S0"),
                       dtensor::dtensor_mesh_links(std::vector<int64_t>{8}, 8))
                .total_time_s,
            0.0);
  EXPECT_THROW(price_plan(p, dtensor::dtensor_mesh_links(std::vector<int64_t>{2, 4}, 8)), Error);
}

// bytes_moved_cost: nccl-tests' bus factors on the buffer, worked by hand.
TEST(RedistributeCost, BytesMoved) {
  // all_gather of 8 x 4 B over 4 ranks: each rank sends 3/4 of 32 B.
  EXPECT_DOUBLE_EQ(bytes_moved_cost(greedy(spec({5}, {4}, "S0"), "R").steps.at(0)), 24.0);
  // all_reduce of 100 B over 4: 2 * 3/4 * 100.
  EXPECT_DOUBLE_EQ(bytes_moved_cost(greedy(spec({5, 5}, {4}, "P"), "R").steps.at(0)), 150.0);
  EXPECT_DOUBLE_EQ(bytes_moved_cost(greedy(spec({5, 5}, {4}, "R"), "S0").steps.at(0)), 0.0);
}

TEST(RedistributeStepJson, RoundTrip) {
  const RedistributePlan p = greedy(spec({5, 5}, {2, 2}, "S0,S1", DType::kBFloat16), "S1,S0");
  ASSERT_EQ(p.steps.size(), 3u);
  for (const RedistributeStep& s : p.steps) {
    EXPECT_EQ(redistribute_step_from_json(nlohmann::json::parse(to_json(s).dump())), s);
  }
  nlohmann::json bad = nlohmann::json::parse(to_json(p.steps[0]).dump());
  bad["op"] = "broadcast";
  EXPECT_THROW(redistribute_step_from_json(bad), Error);
  bad.erase("op");
  EXPECT_THROW(redistribute_step_from_json(bad), Error);
  EXPECT_EQ(parse_step_op("all_to_all"), StepOp::kAllToAll);
}

}  // namespace
}  // namespace shardplan::collectives
