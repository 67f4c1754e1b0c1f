// Selection among candidates: the worked examples of docs/semantics.md (§5.2, §5.3, §5.5), the
// priority rule of _select_min_cost_strategy, strict views, the default cost and a plugged-in cost.
#include "mesh/sharding_propagation.h"

#include <gtest/gtest.h>

#include <limits>

#include "base/error.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;
using tensor::DType;

const Placement R = Replicate{};
const Placement P = Partial{};
Placement S(int64_t d) { return Shard{d}; }

ShardSpec spec(DimVector shape, const DeviceMesh& m, std::vector<Placement> ps) {
  return make_shard_spec(shape, DType::kFloat32, m, std::move(ps));
}

const DeviceMesh kMesh4({4});

TEST(ShardingPropagation, MmRowShardedTimesReplicatedIsFree) {
  // §5.2: x[S0] (8,16) @ w[R] (16,32) -> [S0,S0,R], cost 0.
  const Propagation p =
      propagate(OpCall("mm"), {spec({8, 16}, kMesh4, {S(0)}), spec({16, 32}, kMesh4, {R})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{S(0)});
  EXPECT_EQ(p.outputs[0].shape, (DimVector{8, 32}));
  EXPECT_EQ(p.total_cost, 0.0);
  EXPECT_FALSE(p.needs_redistribution());
}

TEST(ShardingPropagation, ColwiseAndRowwiseLinear) {
  // §5.2 colwise: x R, weight (out,in) S0 -> output S(-1); rowwise: x S(-1), weight S1 -> Partial.
  const Propagation col =
      propagate(OpCall("linear"), {spec({2, 16}, kMesh4, {R}), spec({32, 16}, kMesh4, {S(0)})});
  EXPECT_EQ(col.outputs[0].placements, std::vector<Placement>{S(1)});
  EXPECT_FALSE(col.needs_redistribution());
  const Propagation row =
      propagate(OpCall("linear"), {spec({2, 16}, kMesh4, {S(1)}), spec({32, 16}, kMesh4, {S(1)})});
  EXPECT_EQ(row.outputs[0].placements, std::vector<Placement>{P});
  EXPECT_FALSE(row.needs_redistribution());
}

TEST(ShardingPropagation, PointwiseSpecExamples) {
  // add(a[S0] (4,8), b[R] (8,)) -> out S0, b stays R.
  Propagation p = propagate(OpCall("add"), {spec({4, 8}, kMesh4, {S(0)}), spec({8}, kMesh4, {R})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{S(0)});
  EXPECT_EQ(p.strategy.inputs[1], std::vector<Placement>{R});
  EXPECT_EQ(p.total_cost, 0.0);
  // add(a[R] (4,8), b[S0] (8,)) follows b -> out S1, a needs R -> S1 (a local chunk, cost 0).
  p = propagate(OpCall("add"), {spec({4, 8}, kMesh4, {R}), spec({8}, kMesh4, {S(0)})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{S(1)});
  EXPECT_EQ(p.strategy.inputs[0], std::vector<Placement>{S(1)});
  EXPECT_EQ(p.total_cost, 0.0);
  // relu(x[P]) -> out R, the input all-reduced: 2 (n-1)/n of 4*8*4 bytes.
  p = propagate(OpCall("relu"), {spec({4, 8}, kMesh4, {P})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{R});
  EXPECT_DOUBLE_EQ(p.total_cost, 2.0 * 128 * 3 / 4);
  // add(a[P], b[R]): b goes R -> P (b/n per rank, free) and the sum stays Partial.
  p = propagate(OpCall("add"), {spec({4, 8}, kMesh4, {P}), spec({4, 8}, kMesh4, {R})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{P});
  EXPECT_EQ(p.strategy.inputs[1], std::vector<Placement>{P});
  // mul(a[P], b[P]): Partial * Partial is not a candidate; the followed Partial output keeps one
  // factor Partial and all-reduces the other.
  p = propagate(OpCall("mul"), {spec({4, 8}, kMesh4, {P}), spec({4, 8}, kMesh4, {P})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{P});
  EXPECT_EQ(p.strategy.inputs[0], std::vector<Placement>{P});
  EXPECT_EQ(p.strategy.inputs[1], std::vector<Placement>{R});
}

TEST(ShardingPropagation, StrictViewErrorsWhereReshapeGathers) {
  // §5.5: x (8,4)[S0].view(32) -> S0 free; x (4,8)[S1].reshape(32) -> all_gather then R;
  // .view(32) errors.
  Propagation p = propagate(OpCall("view", {}, {32}), {spec({8, 4}, kMesh4, {S(0)})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{S(0)});
  p = propagate(OpCall("reshape", {}, {32}), {spec({4, 8}, kMesh4, {S(1)})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{R});
  EXPECT_DOUBLE_EQ(p.total_cost, 4.0 * 2 * 4 * 3);  // all_gather: 3 peers' (4,2) fp32 shards
  try {
    propagate(OpCall("view", {}, {32}), {spec({4, 8}, kMesh4, {S(1)})});
    FAIL() << "expected a strict-view error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Attempted to flatten multiple dimensions"),
              std::string::npos)
        << e.what();
  }
  // (16,)[S0] on 8 ranks: .view(4,4) cannot keep the shard (4 % 8 != 0); reshape replicates.
  const DeviceMesh m8({8});
  EXPECT_THROW(propagate(OpCall("view", {}, {4, 4}), {spec({16}, m8, {S(0)})}), Error);
  p = propagate(OpCall("reshape", {}, {4, 4}), {spec({16}, m8, {S(0)})});
  EXPECT_EQ(p.outputs[0].placements, std::vector<Placement>{R});
  // Uneven flatten: 6 rows on 4 ranks.
  try {
    propagate(OpCall("view", {}, {24}), {spec({6, 4}, kMesh4, {S(0)})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unevenly sharded dimension 0"), std::string::npos)
        << e.what();
  }
}

TEST(ShardingPropagation, SelectionPriorityRule) {
  const double inf = std::numeric_limits<double>::infinity();
  // One candidate: taken whatever it costs.
  EXPECT_EQ(select_min_cost({{inf}}, {false}), 0u);
  // (a) a negative total wins, the most negative one.
  EXPECT_EQ(select_min_cost({{0}, {-1}, {-3}, {2}}, {true, false, false, false}), 2u);
  // (b) the LAST zero-cost candidate matching the current placements.
  EXPECT_EQ(select_min_cost({{0}, {0}, {0}, {1}}, {false, true, true, false}), 2u);
  // (c) else the first zero-cost candidate.
  EXPECT_EQ(select_min_cost({{5}, {0, 0}, {0}}, {false, false, false}), 1u);
  // (d) else the first minimum of the sums.
  EXPECT_EQ(select_min_cost({{3, 1}, {2, 1}, {1, 2}}, {false, false, false}), 1u);
  EXPECT_THROW(select_min_cost({{inf}, {inf}}, {false, false}), Error);
  EXPECT_THROW(select_min_cost({}, {}), Error);
}

TEST(ShardingPropagation, DefaultCostBytes) {
  // (8,16) fp32 = 512 bytes on a (2,2) mesh.
  const DeviceMesh m({2, 2});
  const ShardSpec s = spec({8, 16}, m, {S(0), S(1)});  // 128 bytes per rank
  // S1 -> R on dim 1: all_gather of one peer's 128 bytes.
  EXPECT_DOUBLE_EQ(estimated_redistribute_bytes(s, {S(0), R}), 128.0);
  // Both dims to R, left to right: 128 (dim 0) then 256 (dim 1, shards now 256 bytes).
  EXPECT_DOUBLE_EQ(estimated_redistribute_bytes(s, {R, R}), 128.0 + 256.0);
  // P -> S0 reduce_scatter of 512 bytes over 2: 256; then R -> S1 local.
  EXPECT_DOUBLE_EQ(estimated_redistribute_bytes(spec({8, 16}, m, {P, R}), {S(0), S(1)}), 256.0);
  // Refused transitions are infinite.
  EXPECT_EQ(estimated_redistribute_bytes(s, {P, S(1)}), std::numeric_limits<double>::infinity());
  EXPECT_EQ(estimated_redistribute_bytes(spec({8, 16}, m, {P, R}), {Partial{ReduceOp::kMax}, R}),
            std::numeric_limits<double>::infinity());
}

TEST(ShardingPropagation, PluggableCostChangesTheChoice) {
  // x[S1] (8,16) @ w[S0] (16,32): default cost keeps the contraction split (Partial, cost 0).
  const std::vector<ShardSpec> in{spec({8, 16}, kMesh4, {S(1)}), spec({16, 32}, kMesh4, {S(0)})};
  EXPECT_EQ(propagate(OpCall("mm"), in).outputs[0].placements, std::vector<Placement>{P});
  // A flat cost of 1 per move: the candidate that matches the inputs still costs 0 (the cost
  // function is only asked about inputs that move).
  int calls = 0;
  auto cost = [&](const ShardSpec&, const std::vector<Placement>&) {
    ++calls;
    return 1.0;
  };
  EXPECT_EQ(propagate(OpCall("mm"), in, cost).outputs[0].placements, std::vector<Placement>{P});
  EXPECT_GT(calls, 0);
  // A cost that rewards replicating (-1 per input moved to R): [R,R,R] totals -2, rule (a).
  auto negative = [](const ShardSpec&, const std::vector<Placement>& t) {
    return t[0] == R ? -1.0 : 1.0;
  };
  EXPECT_EQ(propagate(OpCall("mm"), in, negative).outputs[0].placements, std::vector<Placement>{R});
}

TEST(ShardingPropagation, BadInput) {
  EXPECT_THROW(propagate(OpCall("mm"), {}), Error);
  // Cross-mesh.
  EXPECT_THROW(
      propagate(OpCall("mm"), {spec({8, 16}, kMesh4, {R}), spec({16, 32}, DeviceMesh({2}), {R})}),
      Error);
  // Call shapes that disagree with the ShardSpecs.
  EXPECT_THROW(propagate(OpCall("mm", {{8, 16}, {16, 8}}),
                         {spec({8, 16}, kMesh4, {R}), spec({16, 32}, kMesh4, {R})}),
               Error);
  try {
    propagate(OpCall("frobnicate"), {spec({8}, kMesh4, {R})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'frobnicate'"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardplan::mesh
