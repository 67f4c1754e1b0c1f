// MiniMax-M3's language model (tensor/models/family_minimax_m3_vl_text.cpp) under the planner:
// its tensor-parallel plan applied to the attention, the fused gate_up projections of the dense
// MLPs and the shared expert, and the experts, with the indexer and the router replicated; and
// its block-sparse layers priced through DeepSeek Sparse Attention's path (the indexer's scoring
// over every key, the attention over the keys of the picked blocks). Counts written out by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/minimax_m3_vl_text_models_test.cpp's tiny config: h 64, 4 heads and 2
// key-value heads of 16, layer 0 dense (D 96) with full attention, layers 1 and 2 MoE (4 experts
// of 32, top 2, a shared expert of 48) with an indexer of 2 heads of 8 picking 2 blocks of 4 keys,
// V 1000.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "minimax_m3_vl_text", "vocab_size": 1000, "hidden_size": 64,
    "intermediate_size": 32, "dense_intermediate_size": 96, "shared_intermediate_size": 48,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rotary_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "layer_types": ["full_attention", "minimax_m3_sparse", "minimax_m3_sparse"],
    "index_n_heads": 2, "index_head_dim": 8, "index_block_size": 4, "index_topk_blocks": 2,
    "index_local_blocks": 1, "max_position_embeddings": 128, "torch_dtype": "bfloat16"
  })"),
                                    "tiny minimax_m3_vl_text");
}

// TP rank 0 of 2: q, k, v and o (12,288) halved, q_norm and k_norm (32) replicated: 6,176; the
// indexer replicated: 1,552; the dense MLP 18,432 / 2 = 9,216; the MoE block's router 256
// replicated, experts 24,576 / 2 = 12,288 (each expert's gate and up halves split alike), shared
// expert 9,216 / 2 = 4,608 ([gate; up] split as two parts); two norms 128 a layer.
//   layer 0   6,176 + 9,216 + 128                                                    = 15,520
//   layers 1-2  6,176 + 1,552 + 256 + 12,288 + 4,608 + 128                            = 25,008
//   total     15,520 + 2 * 25,008 + embedding 32,000 + lm_head 32,000 + norm 64       = 129,600
TEST(MinimaxM3VlTextParallel, TinyTensorParallelRankByHand) {
  const int64_t attention = (64 * 64 + 2 * 64 * 32 + 64 * 64) / 2 + 32;
  EXPECT_EQ(attention, 6'176);
  const int64_t layer0 = attention + 18'432 / 2 + 128;
  const int64_t sparse_layer = attention + 1'552 + 256 + 24'576 / 2 + 9'216 / 2 + 128;
  EXPECT_EQ(layer0, 15'520);
  EXPECT_EQ(sparse_layer, 25'008);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), layer0 + 2 * sparse_layer + 2 * 32'000 + 64);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 129'600);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 129'600);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 255'040);     // the whole model
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 24'576 / 2);
}

// MiniMax-M3 on 4 ranks (one key-value head each; h 6,144, 64 heads, 128 experts of 3,072, a
// shared expert of 3,072, dense MLPs of 12,288 on the first 3 layers, V 200,064, 60 layers):
//   attention   (6,144 * 8,192 * 2 + 6,144 * 512 * 2) / 4 + q/k norms 256       =     26,738,944
//   indexer     replicated                                                       =      3,932,416
//   dense layer 26,738,944 + 3,932,416 + 226,492,416 / 4 + 12,288                =     87,306,752
//   sparse layer 26,738,944 + 3,932,416 + router 786,432 + experts 7,247,757,312 / 4
//               + shared 56,623,104 / 4 + 12,288                                 =  1,857,565,184
//   total       3 * 87,306,752 + 57 * 1,857,565,184 + 2 * 200,064 * 6,144 / 4 + 6,144
//                                                                                = 106,757,738,496
TEST(MinimaxM3VlTextParallel, FlagshipOnFourRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("minimax-m3");
  const int64_t attention = (int64_t{6144} * 8192 * 2 + int64_t{6144} * 512 * 2) / 4 + 256;
  EXPECT_EQ(attention, 26'738'944);
  const int64_t dense_layer = attention + 3'932'416 + 226'492'416 / 4 + 12'288;
  const int64_t sparse_layer =
      attention + 3'932'416 + 786'432 + 7'247'757'312 / 4 + 56'623'104 / 4 + 12'288;
  EXPECT_EQ(dense_layer, 87'306'752);
  EXPECT_EQ(sparse_layer, 1'857'565'184);
  EXPECT_EQ(tp_rank_parameters(c, 4),
            3 * dense_layer + 57 * sparse_layer + 2 * int64_t{200064} * 6144 / 4 + 6144);
  EXPECT_EQ(tp_rank_parameters(c, 4), 106'757'738'496);
  EXPECT_EQ(expert_parameters_per_layer(c, 4), 1'811'939'328);
}

// A sparse layer traced at 16 tokens: its attention is bounded by the 2 blocks of 4 keys (a band
// of 8, as DeepSeek Sparse Attention's top-k), the indexer's scoring reads every key; keys and
// values of 2 heads of 16 + 16 channels in bfloat16 (16 x 2 x 32 x 2 bytes); the dispatch of
// each token to its 2 experts (16 x 2 x 64 x 2 bytes).
TEST(MinimaxM3VlTextParallel, SparseLayerIsPricedAsTheIndexerAndItsBand) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 1),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  EXPECT_EQ(t.attention_window, 8);
  EXPECT_TRUE(t.sliding);
  int indexer = 0, windowed = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    indexer += indexer_attention(t, i);
    windowed += windowed_attention(t, i);
  }
  EXPECT_EQ(indexer, 1);
  EXPECT_EQ(windowed, 1);
  EXPECT_EQ(t.kv_bytes, 16 * 2 * 32 * 2);
  EXPECT_EQ(t.moe_dispatch_bytes, 16 * 2 * 64 * 2);
  // The dense full-attention layer has neither.
  const TracedModel dense =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  EXPECT_EQ(dense.attention_window, 0);
  EXPECT_EQ(dense.moe_dispatch_bytes, 0);
}

}  // namespace
}  // namespace shardplan::planner
