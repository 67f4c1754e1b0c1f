// ZAYA1's tensor-parallel plan (tensor/models/family_zaya.cpp) applied: what a TP rank holds of
// ZAYA1-base, counted by hand, and how the planner splits one traced block of the compressed
// convolutional attention (docs/cost-model.md §8, Note [Tracing one block at full width]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// ZAYA1-base on 2 ranks (h 2,048, 8 heads and 2 key-value heads of 128, C = 1,280 convolution
// channels, router width 256, 16 experts of 2,048, V 262,272 tied, 40 layers):
//   embed_tokens by vocabulary rows (lm_head tied): 262,272 x 2,048 / 2 = 268,566,528
//   per layer: q_proj 1,024 x 2,048 / 2, k_proj 256 x 2,048 / 2, the value halves 128 x 2,048 / 2
//              each, o_proj 2,048 x 1,024 / 2: 2,621,440; replicated: the convolutions 1,280 x 2 +
//              1,280 and 1,280 x 128 x 2 + 1,280 (332,800) and temp 2; the router 660,736 (and
//              router_states_scale 256 from layer 1 on); experts 3 x 16 x 2,048 x 2,048 / 2 =
//              100,663,296; norms 4,096 and residual scalings 16,384 -> 104,298,754
//   268,566,528 + 40 x 104,298,754 + 39 x 256 + 3 x 2,048 = 4,440,532,816
TEST(ZayaTensorParallel, Zaya1BaseOnTwoRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("zaya1-base");
  const int64_t layer = 2'621'440 + 332'802 + 660'736 + 100'663'296 + 4'096 + 16'384;
  EXPECT_EQ(layer, 104'298'754);
  EXPECT_EQ(tp_rank_parameters(c, 2), 268'566'528 + 40 * layer + 39 * 256 + 3 * 2'048);
  EXPECT_EQ(tp_rank_parameters(c, 2), 4'440'532'816);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 4'440'532'816);  // even splits: both ranks alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 8'840'488'784);     // the whole model
  EXPECT_EQ(expert_parameters_per_layer(c, 2), 100'663'296);
}

// One traced block of a tiny ZAYA (h 64, 4 heads and 2 key-value heads of 16, router 16, 4
// experts of 32) at tp 2: q, k and the value halves column-parallel (64, 32, 16 and 16 output
// features, half a rank), o_proj row-parallel (64 input features, 32 a rank), the convolutions
// and the attention core on half of the heads' channels, the router replicated.
TEST(ZayaTensorParallel, TracedBlockSplitsTheCcaByHeads) {
  const nlohmann::json j = {{"model_type", "zaya"},
                            {"vocab_size", 128},
                            {"hidden_size", 64},
                            {"num_hidden_layers", 2},
                            {"num_attention_heads", 4},
                            {"num_key_value_heads", 2},
                            {"head_dim", 16},
                            {"num_experts", 4},
                            {"moe_intermediate_size", 32},
                            {"router_hidden_size", 16},
                            {"max_position_embeddings", 256}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny-zaya");
  const TracedModel t = trace_one_block(c, {.micro_batch = 2, .seq = 16});
  const RankSplit split{.tp = 2};
  int seen = 0, convolutions = 0, delayed = 0;
  const std::string a = "model.layers.0.self_attn";
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    SCOPED_TRACE(fqn + " " + op.op);
    if (op.op == "conv1d") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      ++convolutions;
      continue;
    }
    if (op.matmul_flops <= 0) continue;
    const GemmShape g = local_gemm_shape(t, i, split);
    if (fqn == a + ".qkv_proj.q_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 32);
      ++seen;
    } else if (fqn == a + ".qkv_proj.k_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 16);
      ++seen;
    } else if (fqn == a + ".qkv_proj.v_proj_current" || fqn == a + ".qkv_proj.v_proj_delayed") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 8);
      delayed += fqn.ends_with("delayed");
      ++seen;
    } else if (fqn == a + ".o_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      EXPECT_EQ(g.k, 32);
      ++seen;
    } else if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(g.batch, 2 * 4 / 2);
      ++seen;
    } else if (fqn.starts_with("model.layers.0.mlp.gate")) {
      EXPECT_EQ(t.split[i], OpSplit::kReplicated);
    }
  }
  // q, k, v_proj_current, v_proj_delayed twice (the tokens, then the zero token), o_proj, the core.
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(delayed, 2);
  EXPECT_EQ(convolutions, 2);
}

}  // namespace
}  // namespace shardplan::planner
