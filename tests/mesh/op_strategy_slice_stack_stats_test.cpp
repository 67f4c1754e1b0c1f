// Candidate lists written out by hand for expand, select, narrow, slice, chunk, unbind, stack,
// unflatten, argmax, var and cross_entropy ([out..., in...] per mesh dim), their output shapes,
// propagation on sharded inputs, and bad input (as_strided refused by name).
#include <gtest/gtest.h>

#include "base/error.h"
#include "mesh/op_strategy.h"
#include "mesh/sharding_propagation.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;

const Placement R = Replicate{};
const Placement P = Partial{};
const Placement Pavg = Partial{ReduceOp::kAvg};
Placement S(int64_t d) { return Shard{d}; }

DimStrategy ds(std::vector<Placement> out, std::vector<Placement> in) {
  return {std::move(out), std::move(in)};
}

std::string error_of(const OpCall& call) {
  try {
    single_dim_strategies(call);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OpStrategyGaps, ExpandKeepsOnlyDimsThatKeepTheirSize) {
  // (3, 1, 5) -> (2, 3, 4, 5): dim 0 of the output is new, input dim 1 is broadcast 1 -> 4; input
  // dims 0 and 2 land on output dims 1 and 3.
  const OpCall call("expand", {{3, 1, 5}}, {2, -1, 4, 5});
  EXPECT_EQ(output_shapes(call)[0], (DimVector{2, 3, 4, 5}));
  EXPECT_EQ(single_dim_strategies(call),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(1)}, {S(0)}), ds({S(3)}, {S(2)}),
                                      ds({P}, {P})}));
}

TEST(OpStrategyGaps, SelectReplicatesTheIndexedDim) {
  // (4, 6, 8).select(1, 2) -> (4, 8): dims 0 and 2 follow (2 -> 1), dim 1 has no candidate.
  OpCall call("select", {{4, 6, 8}});
  call.dim = 1;
  call.start = 2;
  EXPECT_EQ(output_shapes(call)[0], (DimVector{4, 8}));
  EXPECT_EQ(single_dim_strategies(call),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(2)}),
                                      ds({P}, {P})}));
}

TEST(OpStrategyGaps, NarrowAndSliceReplicateTheIndexedDimUnlessWhole) {
  OpCall nar("narrow", {{4, 6}});
  nar.dim = -1;
  nar.start = 1;
  nar.length = 3;
  EXPECT_EQ(output_shapes(nar)[0], (DimVector{4, 3}));
  EXPECT_EQ(single_dim_strategies(nar),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({P}, {P})}));
  // A whole-dim narrow still replicates: narrow(1, 0, 6) on a rank's 3 columns would overrun.
  nar.start = 0;
  nar.length = 6;
  EXPECT_EQ(single_dim_strategies(nar).size(), 3u);
  // slice(0, 1, None, 2) of (7, 6): rows 1, 3, 5 -> (3, 6).
  OpCall sl("slice", {{7, 6}});
  sl.dim = 0;
  sl.start = 1;
  sl.step = 2;
  EXPECT_EQ(output_shapes(sl)[0], (DimVector{3, 6}));
  EXPECT_EQ(single_dim_strategies(sl),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(1)}, {S(1)}), ds({P}, {P})}));
  // Python clamping: slice(-3, 100) keeps the last 3 rows; slice(-100, 100) is the identity and
  // keeps dim 0's shard too.
  sl.start = -3;
  sl.end = 100;
  sl.step = 1;
  EXPECT_EQ(output_shapes(sl)[0], (DimVector{3, 6}));
  sl.start = -100;
  EXPECT_EQ(output_shapes(sl)[0], (DimVector{7, 6}));
  EXPECT_EQ(single_dim_strategies(sl),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(1)}),
                                      ds({P}, {P})}));
}

TEST(OpStrategyGaps, ChunkAndUnbindLikeSplit) {
  // chunk(7 rows, 3) -> 3, 3, 1; chunk(5, 4) -> 2, 2, 1 (3 pieces, fewer than asked).
  OpCall ch("chunk", {{7, 4}});
  ch.chunks = 3;
  EXPECT_EQ(output_shapes(ch), (std::vector<DimVector>{{3, 4}, {3, 4}, {1, 4}}));
  EXPECT_EQ(single_dim_strategies(ch),
            (std::vector<DimStrategy>{ds({R, R, R}, {R}), ds({S(1), S(1), S(1)}, {S(1)}),
                                      ds({P, P, P}, {P})}));
  OpCall ch5("chunk", {{5}});
  ch5.chunks = 4;
  EXPECT_EQ(output_shapes(ch5), (std::vector<DimVector>{{2}, {2}, {1}}));
  // unbind(dim 1) of (2, 3, 4): three (2, 4) outputs; input dim 2 lands on output dim 1.
  OpCall ub("unbind", {{2, 3, 4}});
  ub.dim = 1;
  EXPECT_EQ(output_shapes(ub), (std::vector<DimVector>(3, DimVector{2, 4})));
  EXPECT_EQ(single_dim_strategies(ub),
            (std::vector<DimStrategy>{ds({R, R, R}, {R}), ds({S(0), S(0), S(0)}, {S(0)}),
                                      ds({S(1), S(1), S(1)}, {S(2)}), ds({P, P, P}, {P})}));
}

TEST(OpStrategyGaps, StackIsCatOnANewDim) {
  // stack of two (4, 6) on dim 1 -> (4, 2, 6): input dim 0 stays, dim 1 moves to 2.
  OpCall st("stack", {{4, 6}, {4, 6}});
  st.dim = 1;
  EXPECT_EQ(output_shapes(st)[0], (DimVector{4, 2, 6}));
  EXPECT_EQ(single_dim_strategies(st),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(0)}, {S(0), S(0)}),
                                      ds({S(2)}, {S(1), S(1)}), ds({P}, {P, P})}));
  st.dim = -1;  // new last dim: (4, 6, 2)
  EXPECT_EQ(output_shapes(st)[0], (DimVector{4, 6, 2}));
  EXPECT_EQ(single_dim_strategies(st)[2], ds({S(1)}, {S(1), S(1)}));
}

TEST(OpStrategyGaps, UnflattenIsAStrictView) {
  // (12, 5) unflatten(0, (4, -1)) -> (4, 3, 5): dim 0 keeps its shard when 4 divides by the
  // shards (docs/semantics.md §5.5 split rule), dim 1 lands on 2.
  const OpCall call("unflatten", {{12, 5}}, {4, -1});
  EXPECT_EQ(output_shapes(call)[0], (DimVector{4, 3, 5}));
  EXPECT_EQ(single_dim_strategies(call, 2),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(2)}, {S(1)}),
                                      ds({P}, {P})}));
  EXPECT_EQ(single_dim_strategies(call, 3),  // 4 % 3 != 0
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(2)}, {S(1)}), ds({P}, {P})}));
  EXPECT_TRUE(is_strict_view("unflatten"));
  // Propagation refuses to gather for it, with the view's reason.
  const DeviceMesh mesh({3});
  const ShardSpec x = make_shard_spec(DimVector{12, 5}, tensor::DType::kFloat32, mesh, {S(0)});
  try {
    propagate(call, {x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Attempted to split the sharded dimension 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(OpStrategyGaps, ArgmaxAndVarReplicateReducedDims) {
  // No Partial anywhere: neither is linear in its input nor combinable from per-rank results.
  OpCall am("argmax", {{4, 6, 2}}, {1});
  EXPECT_EQ(output_shapes(am)[0], (DimVector{4, 2}));
  EXPECT_EQ(single_dim_strategies(am),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(2)})}));
  am.keepdim = true;
  EXPECT_EQ(single_dim_strategies(am),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(2)}, {S(2)})}));
  EXPECT_EQ(single_dim_strategies(OpCall("argmax", {{4, 6}})),  // all dims: only Replicate
            (std::vector<DimStrategy>{ds({R}, {R})}));
  EXPECT_EQ(output_shapes(OpCall("argmax", {{4, 6}}))[0], DimVector{});
  OpCall var("var", {{4, 6, 2}}, {0, 2});
  EXPECT_EQ(output_shapes(var)[0], (DimVector{6}));
  EXPECT_EQ(single_dim_strategies(var),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(1)})}));
}

TEST(OpStrategyGaps, CrossEntropyShardsBatchAndSequenceNotClasses) {
  // [out, input, target(, weight)]. Input (N=4, C=10, L=6), class indices target (4, 6).
  OpCall none("cross_entropy", {{4, 10, 6}, {4, 6}});
  none.reduction = "none";
  EXPECT_EQ(output_shapes(none)[0], (DimVector{4, 6}));
  EXPECT_EQ(single_dim_strategies(none),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(0)}, {S(0), S(0)}),
                                      ds({S(1)}, {S(2), S(1)})}));
  // sum: Partial(sum); mean: Partial(avg); probabilities target (same shape as input) sharded on
  // the input's dims.
  OpCall sum("cross_entropy", {{4, 10}, {4, 10}});
  sum.reduction = "sum";
  EXPECT_EQ(output_shapes(sum)[0], DimVector{});
  EXPECT_EQ(single_dim_strategies(sum),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({P}, {S(0), S(0)})}));
  OpCall mean("cross_entropy", {{4, 10}, {4}, {10}});
  mean.reduction = "sum";
  EXPECT_EQ(single_dim_strategies(mean),
            (std::vector<DimStrategy>{ds({R}, {R, R, R}), ds({P}, {S(0), S(0), R})}));
  mean.inputs.pop_back();
  mean.reduction = "mean";
  EXPECT_EQ(single_dim_strategies(mean),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({Pavg}, {S(0), S(0)})}));
  // Weighted mean of class indices: no sharded candidate; of probabilities: still the row mean.
  mean.inputs.push_back({10});
  EXPECT_EQ(single_dim_strategies(mean), (std::vector<DimStrategy>{ds({R}, {R, R, R})}));
  mean.inputs[1] = {4, 10};
  EXPECT_EQ(single_dim_strategies(mean),
            (std::vector<DimStrategy>{ds({R}, {R, R, R}), ds({Pavg}, {S(0), S(0), R})}));
  // 1-d input (classes only): nothing to shard.
  EXPECT_EQ(single_dim_strategies(OpCall("cross_entropy", {{10}, {}})).size(), 1u);
  // Mean over 5 rows on 2 ranks (3 and 2) is not the average of the ranks' means: filtered.
  OpCall uneven("cross_entropy", {{5, 10}, {5}});
  EXPECT_EQ(candidate_strategies(uneven, DeviceMesh({2})).size(), 1u);
  EXPECT_EQ(candidate_strategies(OpCall("cross_entropy", {{6, 10}, {6}}), DeviceMesh({2})).size(),
            2u);
}

TEST(OpStrategyGaps, PropagationKeepsShardsItCanAndGathersTheIndexedDim) {
  const DeviceMesh mesh({2});
  // select over the sharded dim: the input is gathered (Replicate), not re-sharded on another dim.
  OpCall sel("select", {{4, 6}});
  sel.dim = 0;
  const ShardSpec rows = make_shard_spec(DimVector{4, 6}, tensor::DType::kFloat32, mesh, {S(0)});
  Propagation p = propagate(sel, {rows});
  EXPECT_EQ(p.strategy.inputs[0], std::vector<Placement>{R});
  EXPECT_EQ(p.strategy.outputs[0], std::vector<Placement>{R});
  EXPECT_TRUE(p.needs_redistribution());
  // select of another dim keeps the shard at no cost.
  sel.dim = 1;
  p = propagate(sel, {rows});
  EXPECT_EQ(p.strategy.outputs[0], std::vector<Placement>{S(0)});
  EXPECT_FALSE(p.needs_redistribution());
  // expand of a Partial input stays Partial; of a shard on a broadcast dim gathers.
  const ShardSpec part =
      make_shard_spec(DimVector{4, 1}, tensor::DType::kFloat32, mesh, {Placement(P)});
  p = propagate(OpCall("expand", {}, {3, 4, 5}), {part});
  EXPECT_EQ(p.strategy.outputs[0], std::vector<Placement>{P});
  EXPECT_EQ(p.outputs[0].shape, (DimVector{3, 4, 5}));
  // stack of row-sharded inputs on a new dim 0: the shard moves to dim 1.
  OpCall st("stack");
  st.dim = 0;
  p = propagate(st, {rows, rows});
  EXPECT_EQ(p.strategy.outputs[0], std::vector<Placement>{S(1)});
  EXPECT_FALSE(p.needs_redistribution());
}

TEST(OpStrategyGaps, BadInputIsOneClearError) {
  // as_strided: refused by name with the reason.
  const std::string as = error_of(OpCall("as_strided", {{4, 4}}, {2, 2}));
  EXPECT_NE(as.find("'as_strided' has no sharding strategy"), std::string::npos) << as;
  EXPECT_NE(as.find("global storage"), std::string::npos) << as;
  EXPECT_NE(error_of(OpCall("expand", {{3, 2}}, {3, 4})).find("only size-1 dims expand"),
            std::string::npos);
  EXPECT_NE(error_of(OpCall("expand", {{3, 2}}, {2})).find("number of sizes"), std::string::npos);
  OpCall sel("select", {{4, 6}});
  sel.start = 4;
  EXPECT_NE(error_of(sel).find("index 4 out of range"), std::string::npos) << error_of(sel);
  OpCall nar("narrow", {{4, 6}});
  nar.start = 2;
  nar.length = 3;
  EXPECT_NE(error_of(nar).find("exceeds dim 0 of size 4"), std::string::npos) << error_of(nar);
  EXPECT_NE(error_of(OpCall("select", {{}})).find("0-d tensor"), std::string::npos);
  OpCall sl("slice", {{4}});
  sl.step = 0;
  EXPECT_NE(error_of(sl).find("step must be positive"), std::string::npos);
  OpCall ch("chunk", {{4}});
  ch.chunks = 0;
  EXPECT_NE(error_of(ch).find("chunks must be > 0"), std::string::npos);
  EXPECT_NE(error_of(OpCall("stack", {{2, 3}, {3, 2}})).find("every input must have shape"),
            std::string::npos);
  EXPECT_NE(error_of(OpCall("unflatten", {{12}}, {5, -1})).find("is invalid for input of size 12"),
            std::string::npos)
      << error_of(OpCall("unflatten", {{12}}, {5, -1}));
  EXPECT_NE(error_of(OpCall("argmax", {{4, 6}}, {0, 1})).find("reduces one dim or all"),
            std::string::npos);
  EXPECT_NE(error_of(OpCall("argmax", {{0, 6}}, {0})).find("empty dim 0"), std::string::npos);
  EXPECT_NE(error_of(OpCall("cross_entropy", {{4, 10}, {5}})).find("must be class indices"),
            std::string::npos);
  OpCall ce("cross_entropy", {{4, 10}, {4}, {9}});
  EXPECT_NE(error_of(ce).find("one per class"), std::string::npos);
  ce.inputs.pop_back();
  ce.reduction = "avg";
  EXPECT_NE(error_of(ce).find("reduction 'avg'"), std::string::npos);
}

}  // namespace
}  // namespace shardplan::mesh
