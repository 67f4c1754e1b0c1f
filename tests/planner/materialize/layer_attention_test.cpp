// layer_attention: the fused attention calls rehearse lists for scripts/time_attention.py (Note
// [Rehearsed attention]), their shapes worked out by hand from the models' config.json.
#include "planner/materialize/layer_attention.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/candidate/stack_profile.h"
#include "tests/planner/materialize/pinned_plan.h"

namespace shardplan::planner {
namespace {

// The H100's dense bf16 peak (dgx-h100's cluster file): no call runs faster than its FLOPs there.
constexpr double kH100Peak = 989.4e12;

void expect_call(const AttentionCall& c, int64_t batch, int64_t heads, int64_t kv_heads,
                 int64_t queries, int64_t keys, int64_t head_dim, int64_t value_dim, bool causal,
                 const std::string& what) {
  EXPECT_EQ(c.batch, batch) << what;
  EXPECT_EQ(c.heads, heads) << what;
  EXPECT_EQ(c.kv_heads, kv_heads) << what;
  EXPECT_EQ(c.queries, queries) << what;
  EXPECT_EQ(c.keys, keys) << what;
  EXPECT_EQ(c.head_dim, head_dim) << what;
  EXPECT_EQ(c.value_dim, value_dim) << what;
  EXPECT_EQ(c.causal, causal) << what;
  // The FLOPs the kernel performs: 2 L S (E + Ev) per batch x head, half of it under a causal
  // mask; at most the peak, and (a large call) at least a third of it.
  const double flops = 2.0 * static_cast<double>(batch * heads) * static_cast<double>(queries) *
                       static_cast<double>(keys) * static_cast<double>(head_dim + value_dim) /
                       (causal ? 2 : 1);
  EXPECT_GE(c.predicted_forward_s, flops / kH100Peak) << what;
  EXPECT_LE(c.predicted_forward_s, 3 * flops / kH100Peak) << what;
  // Note [Attention backward rate]: 2 / 0.8 forwards for the gradients, 0.5 recomputing Q K^T.
  EXPECT_NEAR(c.predicted_backward_s, 3.0 * c.predicted_forward_s, 1e-12) << what;
}

TEST(LayerAttention, LlamaThreeEightBIsOneCausalSquarePerRank) {
  // 32 query and 8 key/value heads of 128 (config.json); tp 8: 4 and 1 per rank, 4096 tokens.
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, /*tp=*/8, /*pp=*/2, /*cp=*/1, 1, /*dp=*/4);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  ASSERT_EQ(calls.size(), 1u);
  expect_call(calls[0], plan.config.micro_batch, 4, 1, 4096, 4096, 128, 128, true, "llama3-8b");
  EXPECT_EQ(calls[0].stands_for, "a causal square");
}

TEST(LayerAttention, ContextParallelQueriesMeetHalfTheRingsKeys) {
  // cp 2: each rank holds 2048 of the 4096 tokens and attends all 4096 keys over the ring, half
  // of which a causal mask leaves: one unmasked call of 2048 x 2048 does that work. tp 4: 8 and 2.
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, /*tp=*/4, /*pp=*/1, /*cp=*/2, 1, /*dp=*/8);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  ASSERT_EQ(calls.size(), 1u);
  expect_call(calls[0], plan.config.micro_batch, 8, 2, 2048, 2048, 128, 128, false, "cp 2");
  EXPECT_NE(calls[0].stands_for.find("ring"), std::string::npos) << calls[0].stands_for;
}

TEST(LayerAttention, GemmaTwoSlidesOnHalfItsLayers) {
  // Gemma 2 9B: 16 query and 8 key/value heads of 256, a 4096-token window on the even layers.
  // At 8192 tokens a sliding layer's queries each meet 4096 keys (a band, no mask to skip); a
  // full layer is the causal square of 8192. tp 2: 8 and 4 heads.
  const PlanFile plan = plan_of("gemma-2-9b", 16, 8192, /*tp=*/2, /*pp=*/1, /*cp=*/1);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  ASSERT_EQ(calls.size(), 2u);
  const int64_t b = plan.config.micro_batch;
  const AttentionCall& sliding = calls[0].causal ? calls[1] : calls[0];
  const AttentionCall& full = calls[0].causal ? calls[0] : calls[1];
  expect_call(sliding, b, 8, 4, 8192, 4096, 256, 256, false, "sliding");
  expect_call(full, b, 8, 4, 8192, 8192, 256, 256, true, "full");
}

TEST(LayerAttention, LlamaFourChunksAreABatchOfSquares) {
  // Llama 4 Scout: 40 query and 8 key/value heads of 128; RoPE layers attend within chunks of
  // 8192 (attention_chunk_size), so 16384 tokens are 2 causal squares of 8192, the NoPE layers
  // one square of 16384. tp 8: 5 and 1 heads.
  const PlanFile plan =
      plan_of("llama4-scout", 64, 16384, /*tp=*/8, /*pp=*/1, /*cp=*/1, /*ep=*/8, 0, 64);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  const int64_t b = plan.config.micro_batch;
  int chunked = 0, full = 0;
  for (const AttentionCall& c : calls) {
    if (c.queries == 8192) {
      expect_call(c, 2 * b, 5, 1, 8192, 8192, 128, 128, true, c.layer);
      EXPECT_EQ(c.stands_for, "2 chunks of 8192, each a causal square");
      ++chunked;
    } else {
      expect_call(c, b, 5, 1, 16384, 16384, 128, 128, true, c.layer);
      ++full;
    }
  }
  EXPECT_GE(chunked, 1);
  EXPECT_GE(full, 1);
}

TEST(LayerAttention, LatentAttentionHasNarrowerValues) {
  // DeepSeek-V2-Lite: 16 heads, queries and keys of 128 + 64 channels, values of 128; the
  // latent's up projection gives every head its own key and value. tp 2: 8 heads.
  const PlanFile plan = plan_of("deepseek-v2-lite", 16, 4096, /*tp=*/2, /*pp=*/1, /*cp=*/1);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  ASSERT_FALSE(calls.empty());
  for (const AttentionCall& c : calls) {
    expect_call(c, plan.config.micro_batch, 8, 8, 4096, 4096, 192, 128, true, c.layer);
  }
}

TEST(LayerAttention, SparseAttentionReadsTheIndexersTopKAndTheIndexerIsLeftOut) {
  // DeepSeek-V3.2 at tp 8: the attention's 128 heads are 16 per rank, each of the 4,096 queries
  // against the indexer's top 2,048 keys (a band, no mask to skip); the lightning indexer's
  // scoring (DeepSeek's kernel) is not among the calls.
  const PlanFile plan = plan_of("deepseek-v3.2", 1024, 4096, /*tp=*/8, /*pp=*/16, /*cp=*/1,
                                /*ep=*/8, 0, 4096);
  const std::vector<AttentionCall> calls = layer_attention(plan, AttentionKernel::kFused);
  ASSERT_EQ(calls.size(), 2u);  // the dense and the MoE kind
  for (const AttentionCall& c : calls) {
    expect_call(c, plan.config.micro_batch, 16, 16, 4096, 2048, 192, 128, false, c.layer);
  }
}

TEST(LayerAttention, TheStacksKernelSetsTheRate) {
  // torchtitan's FlashAttention-2 reaches attention_kernel_rate of the fused kernel on Hopper
  // (Note [Attention kernels]): its calls take 1 / that rate as long.
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, 8, 2, 1, 1, 4);
  const AttentionCall fused = layer_attention(plan, AttentionKernel::kFused).at(0);
  const AttentionCall flash2 = layer_attention(plan, AttentionKernel::kFlash2).at(0);
  const double rate = attention_kernel_rate(AttentionKernel::kFlash2, collectives::Arch::kHopper);
  ASSERT_LT(rate, 1.0);
  EXPECT_NEAR(flash2.predicted_forward_s, fused.predicted_forward_s / rate,
              1e-9 * fused.predicted_forward_s);
}

TEST(LayerAttention, JsonNamesTheFieldsCalibrateReads) {
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, 8, 2, 1, 1, 4);
  const nlohmann::ordered_json j =
      attention_calls_json(layer_attention(plan, AttentionKernel::kFused));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["seq"], 4096);
  EXPECT_EQ(j[0]["keys"], 4096);
  EXPECT_EQ(j[0]["heads"], 4);
  EXPECT_EQ(j[0]["kv_heads"], 1);
  EXPECT_EQ(j[0]["causal"], true);
  EXPECT_GT(j[0]["predicted_forward_s"].get<double>(), 0);
}

}  // namespace
}  // namespace shardplan::planner
