// OPT's tensor-parallel plan (tensor/models/family_opt.cpp) applied: what a TP rank holds, by
// hand from each config (Megatron's split: q, k, v, fc1 by output columns, out_proj and fc2 by
// input rows with their biases replicated, the tied embedding by vocabulary rows; the position
// table, OPT-350m's project_in / project_out and the LayerNorms replicated), and which traced ops
// of one block are split and reduced.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// OPT-66B on 8 ranks (h 9,216, F 36,864, vocab 50,272 tied, 2,048 positions, 64 layers):
//   embed_tokens 50,272 / 8 = 6,284 rows x 9,216 = 57,913,344; embed_positions 2,050 x 9,216 =
//   18,892,800 and the final LayerNorm 18,432 replicated
//   per layer: q, k, v 3 x (h^2 + h) / 8 = 31,853,952; out_proj h^2 / 8 + its bias h =
//   10,626,048; fc1 (h F + F) / 8 = 42,471,936; fc2 F h / 8 + h = 42,476,544; two LayerNorms
//   36,864: 127,465,344
//   64 x 127,465,344 + 57,913,344 + 18,892,800 + 18,432 = 8,234,606,592
TEST(OptTensorParallel, Opt66BOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("opt-66b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 8'234'606'592);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 8'234'606'592);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 65'719'701'504);    // the whole model
}

// OPT-350m on 2 ranks (h 1,024, F 4,096, d 512, 24 post-norm layers, no final LayerNorm):
//   embed_tokens 25,136 rows x 512 = 12,869,632; embed_positions 2,099,200; project_out and
//   project_in 524,288 each, replicated
//   per layer: q, k, v 3 x (h^2 + h) / 2 = 1,574,400; out_proj h^2 / 2 + h = 525,312; fc1
//   (h F + F) / 2 = 2,099,200; fc2 F h / 2 + h = 2,098,176; LayerNorms 4,096: 6,301,184
//   24 x 6,301,184 + 12,869,632 + 2,099,200 + 1,048,576 = 167,245,824
TEST(OptTensorParallel, Opt350mKeepsItsProjectionsWhole) {
  const nlohmann::json j = {{"model_type", "opt"},
                            {"vocab_size", 50272},
                            {"hidden_size", 1024},
                            {"ffn_dim", 4096},
                            {"num_hidden_layers", 24},
                            {"num_attention_heads", 16},
                            {"max_position_embeddings", 2048},
                            {"do_layer_norm_before", false},
                            {"word_embed_proj_dim", 512}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "opt-350m");
  EXPECT_EQ(tp_rank_parameters(c, 2), 167'245'824);
  EXPECT_EQ(tp_rank_parameters(c, 1), 331'196'416);
}

// One OPT-66B block at tp 8: q, k, v and fc1 column-parallel, out_proj and fc2 row-parallel, the
// attention and ReLU on the split heads and columns; per micro-batch forward two all-reduces of
// the [2,048 x 9,216] bf16 activations (after out_proj and fc2), and in backward two more, one per
// column-parallel region's input (the normed input that q, k and v share, and fc1's).
TEST(OptTensorParallel, OneBlockSplitsLikeMegatron) {
  const TracedModel t = trace_one_block(tensor::find_model_config("opt-66b"),
                                        {.micro_batch = 1,
                                         .seq = 2048,
                                         .recompute = tensor::RecomputePolicy::kNone,
                                         .attention = tensor::AttentionImpl::kFlash,
                                         .dtype = tensor::DType::kBFloat16});
  int columns = 0, rows = 0, attention = 0, relu = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (t.part[i] != Part::kBlock) continue;
    const std::string fqn =
        op.call >= 0 ? t.step.calls[static_cast<size_t>(op.call)].fqn : std::string();
    if (op.op == "linear") {
      const bool column = fqn.ends_with("q_proj") || fqn.ends_with("k_proj") ||
                          fqn.ends_with("v_proj") || fqn.ends_with("fc1");
      EXPECT_EQ(t.split[i], column ? OpSplit::kColumn : OpSplit::kRow) << fqn;
      (column ? columns : rows) += 1;
    }
    if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      ++attention;
    }
    if (op.op == "relu") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      ++relu;
    }
  }
  EXPECT_EQ(columns, 4);
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(relu, 1);
  const ComputeModel a = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), Precision::kBf16);
  const PartWork block = rank_work(t, a, {.tp = 8}).block();
  const int64_t bytes = int64_t{2048} * 9216 * 2;
  ASSERT_EQ(block.tp_forward.size(), 2u);
  ASSERT_EQ(block.tp_backward.size(), 2u);
  for (const CommItem& c : block.tp_forward) {
    EXPECT_EQ(c.kind, collectives::CollectiveKind::kAllReduce);
    EXPECT_EQ(c.bytes, bytes);
  }
  for (const CommItem& c : block.tp_backward) EXPECT_EQ(c.bytes, bytes);
}

}  // namespace
}  // namespace shardplan::planner
