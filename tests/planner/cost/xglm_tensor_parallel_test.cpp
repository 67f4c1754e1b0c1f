// XGLM's tensor-parallel plan (tensor/models/family_xglm.cpp) applied: what a TP rank holds, by
// hand from the shipped config (Megatron's split: q, k, v, fc1 by output columns, out_proj and fc2
// by input rows with their biases replicated, the tied embedding by vocabulary rows; the sinusoid
// buffer and the LayerNorms replicated), and which traced ops of one block are split and reduced.
#include <gtest/gtest.h>

#include <string>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// XGLM-7.5B on 8 ranks (d 4,096, F 16,384, vocab 256,008 tied, 32 layers):
//   embed_tokens 256,008 / 8 = 32,001 rows x 4,096 = 131,076,096; the final LayerNorm 8,192
//   replicated; the sinusoid table is a buffer, no parameter
//   per layer: q, k, v 3 x (d^2 + d) / 8 = 6,292,992; out_proj d^2 / 8 + its bias d = 2,101,248;
//   fc1 (d F + F) / 8 = 8,390,656; fc2 F d / 8 + d = 8,392,704; two LayerNorms 16,384:
//   25,193,984
//   32 x 25,193,984 + 131,076,096 + 8,192 = 937,291,776
TEST(XglmTensorParallel, Xglm75BOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("xglm-7.5b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 937'291'776);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 937'291'776);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 7'492'771'840);   // the whole model
}

// One XGLM-7.5B block at tp 8: q, k, v and fc1 column-parallel, out_proj and fc2 row-parallel,
// the attention and the GELU on the split heads and columns; per micro-batch forward two
// all-reduces of the [2,048 x 4,096] bf16 activations (after out_proj and fc2), and in backward
// two more, one per column-parallel region's input (the normed input that q, k and v share, and
// fc1's).
TEST(XglmTensorParallel, OneBlockSplitsLikeMegatron) {
  const TracedModel t = trace_one_block(tensor::find_model_config("xglm-7.5b"),
                                        {.micro_batch = 1,
                                         .seq = 2048,
                                         .recompute = tensor::RecomputePolicy::kNone,
                                         .attention = tensor::AttentionImpl::kFlash,
                                         .dtype = tensor::DType::kBFloat16});
  int columns = 0, rows = 0, attention = 0, gelu = 0;
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
    if (op.op == "gelu") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      ++gelu;
    }
  }
  EXPECT_EQ(columns, 4);
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(gelu, 1);
  const ComputeModel a = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), Precision::kBf16);
  const PartWork block = rank_work(t, a, {.tp = 8}).block();
  const int64_t bytes = int64_t{2048} * 4096 * 2;
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
