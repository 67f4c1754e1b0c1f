// BioGPT's tensor-parallel plan (tensor/models/family_biogpt.cpp) applied: what a TP rank holds,
// by hand from the shipped config (Megatron's split: q, k, v, fc1 by output columns, out_proj and
// fc2 by input rows with their biases replicated, the tied embedding by vocabulary rows; the
// position table and the LayerNorms replicated), which degrees the 25 heads allow, and which
// traced ops of one block are split and reduced.
#include <gtest/gtest.h>

#include <string>

#include "collectives/cluster.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// BioGPT-Large on 5 ranks (h 1,600, F 6,400, vocabulary 57,717 tied, 2,048 positions, 48 layers
// of 25 heads: 5 each). 57,717 is no multiple of 5: as torch.chunk splits it, ranks 0-3 hold
// 11,544 rows and rank 4 the rest, 11,541.
//   per layer: q, k, v 3 x (h^2 + h) / 5 = 1,536,960; out_proj h^2 / 5 + its bias h = 513,600;
//   fc1 (h F + F) / 5 = 2,049,280; fc2 F h / 5 + h = 2,049,600; two LayerNorms 6,400:
//   6,155,840; 48 layers 295,480,320
//   replicated outside the layers: embed_positions 2,050 x 1,600 = 3,280,000, the final
//   LayerNorm 3,200
//   rank 0: 295,480,320 + 11,544 x 1,600 + 3,283,200 = 317,233,920
//   rank 4: 295,480,320 + 11,541 x 1,600 + 3,283,200 = 317,229,120
TEST(BioGptTensorParallel, BioGptLargeOnFiveRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("biogpt-large");
  EXPECT_EQ(tp_rank_parameters(c, 5), 317'233'920);
  EXPECT_EQ(tp_rank_parameters(c, 5, 3), 317'233'920);
  EXPECT_EQ(tp_rank_parameters(c, 5, 4), 317'229'120);
  EXPECT_EQ(tp_rank_parameters(c, 1), 1'571'188'800);  // the whole model, tied once
  // The ranks together hold the model once and the replicated parts four more times: per layer
  // out_proj's and fc2's biases and the two LayerNorms, 9,600, and the 3,283,200 outside.
  EXPECT_EQ(4 * tp_rank_parameters(c, 5) + tp_rank_parameters(c, 5, 4),
            1'571'188'800 + 4 * (48 * 9'600 + 3'283'200));
}

// Whole heads per rank: tp must divide the 25 heads.
TEST(BioGptTensorParallel, TpDividesTheHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("biogpt-large");
  const TrainingSetup s{.gpus = 64, .seq = 2048, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 5), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 4),
            "--tp 4 does not divide the model's 25 attention heads, expected a divisor of 25");
}

// One BioGPT-Large block at tp 5: q, k, v and fc1 column-parallel, out_proj and fc2 row-parallel,
// the attention and the GELU on the split heads and columns; per micro-batch forward two
// all-reduces of the [2,048 x 1,600] bf16 activations (after out_proj and fc2), and in backward
// two more, one per column-parallel region's input (the normed input that q, k and v share, and
// fc1's).
TEST(BioGptTensorParallel, OneBlockSplitsLikeMegatron) {
  const TracedModel t = trace_one_block(tensor::find_model_config("biogpt-large"),
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
  const PartWork block = rank_work(t, a, {.tp = 5}).block();
  const int64_t bytes = int64_t{2048} * 1600 * 2;
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
