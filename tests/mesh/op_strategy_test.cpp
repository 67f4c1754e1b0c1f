// Candidate lists written out by hand (docs/semantics.md §5.2-5.5) and the Cartesian product /
// shardability filter; bad input.
#include "mesh/op_strategy.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;

const Placement R = Replicate{};
const Placement P = Partial{};
Placement S(int64_t d) { return Shard{d}; }

DimStrategy ds(std::vector<Placement> out, std::vector<Placement> in) {
  return {std::move(out), std::move(in)};
}

TEST(OpStrategy, MmMatchesSpecList) {
  // docs/semantics.md §5.2: mm "mk,kn->mn": [R,R,R]; [P,S1,S0]; [S0,S0,R]; [S1,R,S1].
  const std::vector<DimStrategy> want{ds({R}, {R, R}), ds({P}, {S(1), S(0)}), ds({S(0)}, {S(0), R}),
                                      ds({S(1)}, {R, S(1)})};
  EXPECT_EQ(single_dim_strategies(OpCall("mm", {{8, 16}, {16, 32}})), want);
}

TEST(OpStrategy, BmmMatchesSpecList) {
  // docs/semantics.md §5.2: bmm: [R,R,R]; [S0,S0,S0]; [P,S2,S1]; [S1,S1,R]; [S2,R,S2].
  const std::vector<DimStrategy> want{ds({R}, {R, R}), ds({S(0)}, {S(0), S(0)}),
                                      ds({P}, {S(2), S(1)}), ds({S(1)}, {S(1), R}),
                                      ds({S(2)}, {R, S(2)})};
  EXPECT_EQ(single_dim_strategies(OpCall("bmm", {{4, 8, 16}, {4, 16, 32}})), want);
}

TEST(OpStrategy, LinearWeightIsOutByIn) {
  // linear(x (B, in), w (out, in), b (out)): y = x w^T. Colwise = w S0 -> y S1 with bias S0;
  // rowwise = x S1, w S1 -> Partial, bias Partial (each rank adds a share).
  const std::vector<DimStrategy> want{ds({R}, {R, R, R}), ds({P}, {S(1), S(1), P}),
                                      ds({S(0)}, {S(0), R, R}), ds({S(1)}, {R, S(0), S(0)})};
  EXPECT_EQ(single_dim_strategies(OpCall("linear", {{4, 16}, {32, 16}, {32}})), want);
}

TEST(OpStrategy, MmOn2dMeshIs16Candidates) {
  // 4 per mesh dim, squared; every dim has >= 4 elements, so the filter keeps all 16
  // (docs/semantics.md §5.2).
  const auto c = candidate_strategies(OpCall("mm", {{8, 16}, {16, 32}}), DeviceMesh({2, 2}));
  ASSERT_EQ(c.size(), 16u);
  // Mesh dim 0 varies slowest: candidate 1 is [R, P] on the output, 4 is [P, R].
  EXPECT_EQ(c[1].outputs[0], (std::vector<Placement>{R, P}));
  EXPECT_EQ(c[4].outputs[0], (std::vector<Placement>{P, R}));
  EXPECT_EQ(c[5].inputs[0], (std::vector<Placement>{S(1), S(1)}));
}

TEST(OpStrategy, ShardabilityFilterDropsOverShardedDims) {
  // m = 3 cannot take 4 shards ([S0,S0] on the output), k = 2 cannot either ([P,P]): 16 - 2.
  const auto c = candidate_strategies(OpCall("mm", {{3, 2}, {2, 32}}), DeviceMesh({2, 2}));
  EXPECT_EQ(c.size(), 14u);
  for (const auto& s : c) {
    EXPECT_NE(s.outputs[0], (std::vector<Placement>{S(0), S(0)}));
    EXPECT_NE(s.outputs[0], (std::vector<Placement>{P, P}));
  }
}

TEST(OpStrategy, PointwiseBroadcastAndLinearity) {
  // add(a (4,8), b (8,)): out S0 -> b broadcast on dim 0 -> R; out S1 -> b S0; P+P.
  EXPECT_EQ(single_dim_strategies(OpCall("add", {{4, 8}, {8}})),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(0)}, {S(0), R}),
                                      ds({S(1)}, {S(1), S(0)}), ds({P}, {P, P})}));
  // mul: one Partial factor times a Replicate one, either side; never Partial * Partial.
  EXPECT_EQ(single_dim_strategies(OpCall("mul", {{4, 8}, {4, 1}})),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(0)}, {S(0), S(0)}),
                                      ds({S(1)}, {S(1), R}), ds({P}, {P, R}), ds({P}, {R, P})}));
  // relu is not linear: no Partial candidate.
  EXPECT_EQ(single_dim_strategies(OpCall("relu", {{4, 8}})),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(1)})}));
  // maximum keeps Partial(max).
  const auto mx = single_dim_strategies(OpCall("maximum", {{4}, {4}}));
  EXPECT_EQ(mx.back(),
            ds({Partial{ReduceOp::kMax}}, {Partial{ReduceOp::kMax}, Partial{ReduceOp::kMax}}));
}

TEST(OpStrategy, ReductionsGivePartial) {
  OpCall sum("sum", {{4, 6, 2}}, {1});
  EXPECT_EQ(single_dim_strategies(sum),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(2)}),
                                      ds({P}, {S(1)}), ds({P}, {P})}));
  OpCall amax("amax", {{4, 6}}, {-1});
  amax.keepdim = true;
  const Placement Pmax = Partial{ReduceOp::kMax};
  EXPECT_EQ(single_dim_strategies(amax),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({Pmax}, {S(1)}),
                                      ds({Pmax}, {Pmax})}));
  EXPECT_EQ(output_shapes(amax)[0], (DimVector{4, 1}));
}

TEST(OpStrategy, EmbeddingListWithMaskedPartial) {
  // [out, weight, indices] (§5.4): R; colwise [S(2), S1, R]; rowwise [P, S0, R] (masked);
  // batch [S(d), R, S(d)] per indices dim.
  EXPECT_EQ(single_dim_strategies(OpCall("embedding", {{100, 16}, {2, 5}})),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(2)}, {S(1), R}), ds({P}, {S(0), R}),
                                      ds({S(0)}, {R, S(0)}), ds({S(1)}, {R, S(1)})}));
}

TEST(OpStrategy, NormsSoftmaxAttentionShardOnlyFreeDims) {
  OpCall ln("layer_norm", {{2, 8, 16}, {16}, {16}});
  EXPECT_EQ(single_dim_strategies(ln),
            (std::vector<DimStrategy>{ds({R}, {R, R, R}), ds({S(0)}, {S(0), R, R}),
                                      ds({S(1)}, {S(1), R, R})}));
  OpCall sm("softmax", {{2, 8, 16}});
  sm.dim = -1;
  EXPECT_EQ(single_dim_strategies(sm),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({S(1)}, {S(1)})}));
  // Attention (B, H, L, E): batch and heads only.
  OpCall at("scaled_dot_product_attention", {{2, 8, 16, 4}, {2, 8, 16, 4}, {2, 8, 16, 4}});
  EXPECT_EQ(single_dim_strategies(at),
            (std::vector<DimStrategy>{ds({R}, {R, R, R}), ds({S(0)}, {S(0), S(0), S(0)}),
                                      ds({S(1)}, {S(1), S(1), S(1)})}));
}

TEST(OpStrategy, GqaHeadsSplitOnlyWhenKvHeadsDivide) {
  // 8 query heads over 2 kv heads: 2 ways keeps groups whole, 4 ways would split a kv head.
  OpCall at("scaled_dot_product_attention", {{1, 8, 16, 4}, {1, 2, 16, 4}, {1, 2, 16, 4}});
  auto heads_split = [&](const DeviceMesh& m) {
    for (const auto& s : candidate_strategies(at, m)) {
      if (s.inputs[0][0] == S(1)) return true;
    }
    return false;
  };
  EXPECT_TRUE(heads_split(DeviceMesh({2})));
  EXPECT_FALSE(heads_split(DeviceMesh({4})));
}

TEST(OpStrategy, ViewRulesFollowSpecExamples) {
  // Mesh (4,): (8,4) -> (32) keeps S0 (leftmost and even); (4,8) -> (32) cannot keep S1;
  // (16,) -> (4,4) keeps S0 (4 % 4 == 0); on 8 ranks it cannot (4 % 8 != 0).
  EXPECT_EQ(single_dim_strategies(OpCall("view", {{8, 4}}, {32}), 4),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({P}, {P})}));
  EXPECT_EQ(single_dim_strategies(OpCall("view", {{16}}, {4, 4}), 4),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(0)}, {S(0)}), ds({P}, {P})}));
  EXPECT_EQ(single_dim_strategies(OpCall("view", {{16}}, {4, 4}), 8),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({P}, {P})}));
  // Uneven leftmost dim of a flatten: 6 rows over 4 ranks cannot stay sharded.
  EXPECT_EQ(single_dim_strategies(OpCall("reshape", {{6, 4}}, {-1}), 4).size(), 2u);
  // Several mesh dims on one dim: 4 % (2*2) == 0 keeps [S0,S0]; 6 % 4 != 0 refuses it even though
  // each mesh dim alone (6 % 2) would pass.
  auto has_s0s0 = [](const OpCall& c) {
    for (const auto& s : candidate_strategies(c, DeviceMesh({2, 2}))) {
      if (s.inputs[0] == std::vector<Placement>{S(0), S(0)}) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_s0s0(OpCall("view", {{4, 3}}, {12})));
  EXPECT_FALSE(has_s0s0(OpCall("view", {{6, 3}}, {18})));
  // transpose just re-indexes.
  OpCall tr("transpose", {{4, 6}});
  tr.dim = 0;
  tr.dim1 = 1;
  EXPECT_EQ(single_dim_strategies(tr),
            (std::vector<DimStrategy>{ds({R}, {R}), ds({S(1)}, {S(0)}), ds({S(0)}, {S(1)}),
                                      ds({P}, {P})}));
}

TEST(OpStrategy, CatAndSplit) {
  OpCall cat("cat", {{4, 2}, {4, 3}});
  cat.dim = 1;
  EXPECT_EQ(single_dim_strategies(cat),
            (std::vector<DimStrategy>{ds({R}, {R, R}), ds({S(0)}, {S(0), S(0)}), ds({P}, {P, P})}));
  EXPECT_EQ(output_shapes(cat)[0], (DimVector{4, 5}));
  OpCall split("split", {{6, 4}}, {2, 4});
  const auto sp = single_dim_strategies(split);
  EXPECT_EQ(sp[1], ds({S(1), S(1)}, {S(1)}));
  EXPECT_EQ(output_shapes(split), (std::vector<DimVector>{{2, 4}, {4, 4}}));
}

TEST(OpStrategy, MissingStrategyNamesTheOp) {
  try {
    single_dim_strategies(OpCall("fft_rfft", {{8}}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fft_rfft' has no sharding strategy"), std::string::npos)
        << e.what();
  }
}

TEST(OpStrategy, BadInputIsOneClearError) {
  EXPECT_THROW(single_dim_strategies(OpCall("mm", {{8, 16}, {15, 32}})), Error);  // k mismatch
  EXPECT_THROW(single_dim_strategies(OpCall("mm", {{8, 16}})), Error);            // arity
  EXPECT_THROW(single_dim_strategies(OpCall("add", {{4, 3}, {4, 2}})), Error);    // broadcast
  EXPECT_THROW(single_dim_strategies(OpCall("view", {{4, 3}}, {5})), Error);      // numel
  EXPECT_THROW(single_dim_strategies(OpCall("sum", {{4, 3}}, {2})), Error);       // dim range
  EXPECT_THROW(single_dim_strategies(OpCall("matmul", {{2, 4, 3, 5}, {4, 5, 6}})), Error);
  OpCall sp("split", {{6, 4}}, {2, 3});
  EXPECT_THROW(single_dim_strategies(sp), Error);  // pieces do not add up
  try {
    single_dim_strategies(OpCall("embedding", {{10}, {3}}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight must be 2-d"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardplan::mesh
