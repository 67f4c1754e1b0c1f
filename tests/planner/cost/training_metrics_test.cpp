// Model FLOPs and MFU (planner/cost/training_metrics.h), written out by hand for GPT-2 small
// (124,439,808 parameters with the tied output layer counted once, the published size; 12 layers,
// hidden 768).
#include "planner/cost/training_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

TEST(TrainingMetrics, GptTwoModelFlopsPerToken) {
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  EXPECT_EQ(parameter_count(gpt2), 124'439'808);
  // 6 N = 746,638,848; 12 L h s = 12 x 12 x 768 x 1024 = 113,246,208.
  EXPECT_DOUBLE_EQ(model_flops_per_token(gpt2, 1024), 746'638'848.0 + 113'246'208.0);
  EXPECT_THROW(model_flops_per_token(gpt2, 0), Error);
}

TEST(TrainingMetrics, MixtureOfExpertsCountsTheExpertsATokenUses) {
  const tensor::ModelConfig mixtral = tensor::find_model_config("mixtral-8x7b");
  // 32 layers of 8 experts, each w1, w2, w3 of 4096 x 14336; a token uses 2 of the 8
  // (Jiang et al. 2024: 47B parameters, 13B active).
  const int64_t expert = int64_t{3} * 4096 * 14336;
  const int64_t total = parameter_count(mixtral);
  EXPECT_EQ(active_parameter_count(mixtral), total - 32 * 8 * expert + 32 * 2 * expert);
  EXPECT_NEAR(static_cast<double>(active_parameter_count(mixtral)), 12.9e9, 0.1e9);
  // Dense models: every parameter is active.
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  EXPECT_EQ(active_parameter_count(gpt2), parameter_count(gpt2));
}

TEST(TrainingMetrics, PerLayerEmbeddingTableIsALookupNotWork) {
  // Gemma 4 E2B: 4,628,569,344 parameters, of which the per-layer table is 262,144 rows x 35
  // layers x 256 = 2,348,810,240, read one row per token. Attention: 28 sliding layers of 8 heads
  // of 256 and 7 full layers of 8 heads of 512 (global_head_dim), not 35 x hidden 1536.
  const tensor::ModelConfig e2b = tensor::find_model_config("gemma-4-e2b");
  EXPECT_EQ(parameter_count(e2b), 4'628'569'344);
  const double attention = 6.0 * (28 * 8 * (256 + 256) + 7 * 8 * (512 + 512)) * 4096;
  EXPECT_DOUBLE_EQ(attention_flops_per_token(e2b, 4096), attention);
  EXPECT_DOUBLE_EQ(model_flops_per_token(e2b, 4096),
                   6.0 * (4'628'569'344.0 - 2'348'810'240.0) + attention);
}

// Note [Weights shared across layers]: Zamba2's hybrid layers take turns at shared blocks, whose
// weights are listed once but multiplied by in every layer that runs them. A tiny Zamba2 with
// hybrid layers 1, 3 and 4 on blocks 0, 1, 0 (h 32, attention over 2h = 64): a block is q, k, v
// [64, 64], o_proj [32, 64], gate_up_proj [96, 32], down_proj [32, 48] and norms of 64 and 32,
// 19,040 parameters, which layer 4 runs a second time. A block also holds the LoRA adapters of
// the layers that use it (rank 8 on q, k, v and gate_up_proj: 3 x (8 x 64 + 64 x 8) + 8 x 32 +
// 96 x 8 = 4,096 each), and a layer counts its block whole, both of block 0's adapters with it
// where it runs its own: the rule's excess, block 0's two adapters once more (8,192 here;
// Zamba2-7B's 72 adapters counted beyond their own layer, about 0.3 B of its 11 B per token,
// docs/cost-model.md 2.4).
TEST(TrainingMetrics, SharedBlocksCountOncePerLayerThatRunsThem) {
  const nlohmann::json j = {
      {"model_type", "zamba2"},
      {"vocab_size", 128},
      {"hidden_size", 32},
      {"num_hidden_layers", 6},
      {"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
      {"num_attention_heads", 4},
      {"intermediate_size", 48},
      {"num_mem_blocks", 2},
      {"adapter_rank", 8},
      {"use_shared_attention_adapter", true},
      {"use_mem_rope", true},
      {"n_mamba_heads", 4},
      {"mamba_ngroups", 2},
      {"mamba_d_state", 8},
      {"torch_dtype", "bfloat16"}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny.json");
  const int64_t block = 3 * 64 * 64 + 32 * 64 + 96 * 32 + 32 * 48 + 64 + 32;
  EXPECT_EQ(block, 19'040);
  const int64_t adapters = 3 * (8 * 64 + 64 * 8) + 8 * 32 + 96 * 8;
  EXPECT_EQ(adapters, 4'096);
  EXPECT_DOUBLE_EQ(model_flops_per_token(c, 256),
                   6.0 * static_cast<double>(parameter_count(c) + block + 2 * adapters) +
                       attention_flops_per_token(c, 256));
}

// PaLM's 12 L H Q s (Chowdhery et al. 2022, Appendix B) counts the heads' width, which is the
// hidden size for GPT-2 (12 x 64 = 768) but not for Qwen3-0.6B (16 heads of 128 = 2,048 against
// hidden 1,024), and only the layers that score keys.
TEST(TrainingMetrics, AttentionCountsTheHeadsWidthOfLayersThatScoreKeys) {
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  EXPECT_DOUBLE_EQ(attention_flops_per_token(gpt2, 1024), 12.0 * 12 * 768 * 1024);
  const tensor::ModelConfig qwen3 = tensor::find_model_config("qwen3-0.6b");
  ASSERT_EQ(qwen3.num_attention_heads * qwen3.head_dim, 2048);
  EXPECT_DOUBLE_EQ(attention_flops_per_token(qwen3, 4096), 12.0 * 28 * 16 * 128 * 4096);
  // Qwen3-Next-80B-A3B: 48 layers, Gated DeltaNet on three of four (no scores), full attention
  // of 16 heads of 256 on the other 12.
  const tensor::ModelConfig next = tensor::find_model_config("qwen3-next-80b-a3b");
  EXPECT_DOUBLE_EQ(attention_flops_per_token(next, 4096), 12.0 * 12 * 16 * 256 * 4096);
  // DeepSeek-V3's latent attention: 61 layers of 128 heads scoring over 128 + 64 channels and
  // returning 128 (Liu et al. 2024, DeepSeek-V3 report, §4.2 hyper-parameters).
  const tensor::ModelConfig v3 = tensor::find_model_config("deepseek-v3");
  EXPECT_DOUBLE_EQ(attention_flops_per_token(v3, 4096), 6.0 * 61 * 128 * (192 + 128) * 4096);
  EXPECT_THROW(attention_flops_per_token(gpt2, 0), Error);
  // LongCat-Flash: two latent attentions a layer (self_attn.0, self_attn.1), 28 layers of 64
  // heads scoring over 128 + 64 channels and returning 128.
  const tensor::ModelConfig longcat = tensor::find_model_config("longcat-flash-chat");
  EXPECT_DOUBLE_EQ(attention_flops_per_token(longcat, 4096),
                   2 * 6.0 * 28 * 64 * (192 + 128) * 4096);
}

TEST(TrainingMetrics, MfuIsModelFlopsOverPeakTime) {
  // 859,885,056 FLOPs per token x 2^20 tokens in 0.5 s on 8 GPUs of 989 TFLOP/s:
  // 9.0166e14 / (8 x 989e12 x 0.5) = 0.227920...
  const double f = 859'885'056.0;
  EXPECT_NEAR(mfu(f, 1 << 20, 8, 989e12, 0.5), f * 1048576 / (8 * 989e12 * 0.5), 1e-15);
  EXPECT_NEAR(mfu(f, 1 << 20, 8, 989e12, 0.5), 0.22792, 1e-5);
  EXPECT_THAT([&] { (void)mfu(f, 1, 8, 989e12, 0); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("positive FLOPs per token")));
}

}  // namespace
}  // namespace shardplan::planner
