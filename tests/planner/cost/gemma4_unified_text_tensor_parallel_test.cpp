// Gemma 4 12B's language model (tensor/models/family_gemma4_unified_text.cpp) under the planner:
// its tensor-parallel plan applied (what a rank holds, against counts written out by hand), the
// splits of a traced sliding and full layer, and the tp rule for its heads, whose full layers
// have a single key-value head of 512 (attention_k_eq_v).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/gemma4_unified_text_models_test.cpp's tiny config: h 64, 4 heads, layers
// [sliding, full, sliding, full]; sliding 2 kv heads of 16, full 1 kv head of 32 and no v_proj;
// MLP 96; vocabulary 128 tied.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "gemma4_unified_text", "vocab_size": 128, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
    "num_global_key_value_heads": 1, "attention_k_eq_v": true, "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "torch_dtype": "bfloat16"
  })"),
                                    "tiny gemma4_unified_text");
}

// TP rank 0 of 2: q, k, v and o split (q and o by heads, k and v by key-value rows), the MLP by
// its width, the token table (tied to lm_head) by vocabulary rows; q_norm, k_norm and the four
// norms replicated.
//   sliding  (4,096 + 2,048 + 2,048 + 4,096) / 2 + 32 + 18,432 / 2 + 256  = 15,648
//   full     (8,192 + 2,048 + 8,192) / 2 + 64 + 18,432 / 2 + 256         = 18,752
//   model    8,192 / 2 + 64                                               =  4,160
//   total    2 x 15,648 + 2 x 18,752 + 4,160                              = 72,960
TEST(Gemma4UnifiedTextTensorParallel, TinyRankByHand) {
  const int64_t sliding = (4'096 + 2'048 + 2'048 + 4'096) / 2 + 32 + 18'432 / 2 + 256;
  const int64_t full = (8'192 + 2'048 + 8'192) / 2 + 64 + 18'432 / 2 + 256;
  EXPECT_EQ(sliding, 15'648);
  EXPECT_EQ(full, 18'752);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * sliding + 2 * full + 4'160);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 72'960);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 72'960);   // even splits: both ranks alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 144'640);     // the whole model
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 0);  // dense
}

// Gemma 4 12B on 8 ranks (h 3,840, 16 heads; sliding 8 kv heads of 256, full 1 of 512 with no
// v_proj; MLP 15,360; vocabulary 262,144 tied). The full layers' single key-value head is split
// as multi-query attention's (64 of its 512 rows a rank).
//   sliding  (15,728,640 + 2 x 7,864,320 + 15,728,640) / 8 + 512 + 176,947,200 / 8 + 15,360
//            = 28,032,512
//   full     (31,457,280 + 1,966,080 + 31,457,280) / 8 + 1,024 + 22,118,400 + 15,360
//            = 30,244,864
//   model    1,006,632,960 / 8 + 3,840 = 125,832,960
//   total    40 x 28,032,512 + 8 x 30,244,864 + 125,832,960 = 1,489,092,352
TEST(Gemma4UnifiedTextTensorParallel, TwelveBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("gemma-4-12b");
  const int64_t sliding =
      (15'728'640 + 2 * 7'864'320 + 15'728'640) / 8 + 512 + 176'947'200 / 8 + 15'360;
  const int64_t full = (31'457'280 + 1'966'080 + 31'457'280) / 8 + 1'024 + 22'118'400 + 15'360;
  EXPECT_EQ(sliding, 28'032'512);
  EXPECT_EQ(full, 30'244'864);
  EXPECT_EQ(40 * sliding + 8 * full + 125'832'960, 1'489'092'352);
  EXPECT_EQ(tp_rank_parameters(c, 8), 1'489'092'352);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 1'489'092'352);
  EXPECT_EQ(tp_rank_parameters(c, 1), 11'907'350'272);  // the whole language model
}

// A sliding layer traced at 4,096 tokens: q, k, v, gate and up column-parallel, o_proj and
// down_proj row-parallel; its keys and values (8 heads of 256 + 256 channels, bfloat16) are what
// a context-parallel ring passes, its window 1,024. A full layer: no v_proj (the values are
// k_proj's, split with it), one key-value head of 512 + 512.
TEST(Gemma4UnifiedTextTensorParallel, TracedLayersSplitAttentionAndMlp) {
  const tensor::ModelConfig c = tensor::find_model_config("gemma-4-12b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const auto linears = [](const TracedModel& t, OpSplit split) {
    int n = 0;
    for (size_t i = 0; i < t.step.ops.size(); ++i) {
      n += t.step.ops[i].op == "linear" && t.part[i] == Part::kBlock && t.split[i] == split;
    }
    return n;
  };
  const TracedModel sliding = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_TRUE(sliding.sliding);
  EXPECT_EQ(sliding.attention_window, 1024);
  EXPECT_EQ(sliding.kv_bytes, 4096 * 8 * (256 + 256) * 2);
  EXPECT_EQ(linears(sliding, OpSplit::kColumn), 5);  // q, k, v, gate, up
  EXPECT_EQ(linears(sliding, OpSplit::kRow), 2);     // o, down
  EXPECT_EQ(linears(sliding, OpSplit::kReplicated), 0);
  const TracedModel full = trace_one_block(c, tensor::layer_kind(c, 5), key);
  EXPECT_FALSE(full.sliding);
  EXPECT_EQ(full.kv_bytes, 4096 * 1 * (512 + 512) * 2);
  EXPECT_EQ(linears(full, OpSplit::kColumn), 4);  // q, k, gate, up
  EXPECT_EQ(linears(full, OpSplit::kRow), 2);
}

// tp must divide the 16 heads; the 8 sliding-layer key-value heads and the full layers' one
// divide it or are a multiple of it.
TEST(Gemma4UnifiedTextTensorParallel, TpDividesTheHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("gemma-4-12b");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), ::testing::HasSubstr("16 attention heads"));
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 32), ::testing::HasSubstr("16 attention heads"));
}

}  // namespace
}  // namespace shardplan::planner
