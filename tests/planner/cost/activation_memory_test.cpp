// Korthikanti et al. 2022's activation formulas (planner/cost/activation_memory.h) worked out by
// hand for GPT-3 175B, and the traced block the planner prices (planner/cost/block_cost.h) checked
// against them for every tensor-parallel size, sequence parallelism and recomputation policy.
#include "planner/cost/activation_memory.h"

#include <gtest/gtest.h>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

using tensor::RecomputePolicy;

// GPT-3 175B: s = 2048, h = 12288, a = 96, so s b h = 25,165,824 and 5 a s / h = 80.
constexpr double kSbh = 2048.0 * 12288;

ActivationFormula gpt3(int64_t t, bool sp, RecomputePolicy rc) {
  return {.s = 2048,
          .b = 1,
          .h = 12288,
          .a = 96,
          .layers = 96,
          .t = t,
          .p = 1,
          .vocab = 51200,
          .sequence_parallel = sp,
          .recompute = rc};
}

TEST(ActivationFormula, TableTwoByHandForGptThree) {
  // No parallelism: 34 + 80 = 114 s b h.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(1, false, RecomputePolicy::kNone)), 114 * kSbh);
  // t = 8: 10 + 24/8 + 80/8 = 23; with SP 34/8 + 10 = 14.25.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(8, false, RecomputePolicy::kNone)), 23 * kSbh);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(8, true, RecomputePolicy::kNone)), 14.25 * kSbh);
  // Selective: 10 + 3 = 13; with SP 34/8 = 4.25.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(8, false, RecomputePolicy::kSelective)), 13 * kSbh);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(8, true, RecomputePolicy::kSelective)), 4.25 * kSbh);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt3(8, false, RecomputePolicy::kFull)), 2 * kSbh);
  // §5: selective recomputation saves 70 % of GPT-3's activations (34 of 114 kept).
  EXPECT_NEAR(1 - layer_activation_bytes(gpt3(1, false, RecomputePolicy::kSelective)) /
                      layer_activation_bytes(gpt3(1, false, RecomputePolicy::kNone)),
              0.70, 0.005);
}

TEST(ActivationFormula, FirstStageByHand) {
  // p = 1, t = 8, SP + selective: 96 layers x 4.25 + embedding mask 1/8 + output layer
  // 4 (1 + 51200 / 12288) / 8 = 408 + 0.125 + 2.5833... s b h.
  ActivationFormula f = gpt3(8, true, RecomputePolicy::kSelective);
  EXPECT_NEAR(first_stage_activation_bytes(f) / kSbh, 408 + 0.125 + 4 * (1 + 51200.0 / 12288) / 8,
              1e-9);
  // p = 8, interleaved with 2 chunks: 408 x (1 + 7 / 16) + 8 / 8, no output layer term.
  f.p = 8;
  f.interleave = 2;
  EXPECT_NEAR(first_stage_activation_bytes(f) / kSbh, 408 * (1 + 7.0 / 16) + 1, 1e-9);
  // Plain 1F1B: L layers' worth whatever p is.
  f.interleave = 1;
  EXPECT_NEAR(first_stage_activation_bytes(f) / kSbh, 408 + 1, 1e-9);
}

// The traced GPT block (Hugging Face GPT-2 code with dropout, math attention) saves exactly the
// paper's tensors plus what the paper leaves out: each of the two layer norms' fp32 mean and
// rstd, 2 x 2 x s b x 4 bytes, split along the sequence under SP.
TEST(ActivationFormula, TracedBlockMatchesTheFormula) {
  const tensor::ModelConfig cfg = tensor::find_model_config("megatron-gpt-1.7");
  const ComputeModel a = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-a100-80g")), Precision::kBf16);
  const int64_t s = 2048;
  for (RecomputePolicy rc :
       {RecomputePolicy::kNone, RecomputePolicy::kSelective, RecomputePolicy::kFull}) {
    const TracedModel t = trace_one_block(
        cfg,
        {.micro_batch = 1, .seq = s, .recompute = rc, .attention = tensor::AttentionImpl::kMath});
    for (int64_t tp : {1, 2, 4, 8}) {
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        const RankWork w = rank_work(t, a, {.tp = tp, .sequence_parallel = sp});
        const ActivationFormula f{
            .s = s, .b = 1, .h = 2304, .a = 24, .t = tp, .sequence_parallel = sp, .recompute = rc};
        const int64_t ln_stats = rc == RecomputePolicy::kFull ? 0 : 2 * 2 * s * 4 / (sp ? tp : 1);
        // Within a byte: 5 a s / (h t) is not an integer here (106.67 / t).
        EXPECT_NEAR(static_cast<double>(w.block().retained_bytes - ln_stats),
                    layer_activation_bytes(f), 1.0)
            << "recompute " << tensor::to_string(rc) << " tp " << tp << " sp " << sp;
      }
    }
  }
}

}  // namespace
}  // namespace shardplan::planner
