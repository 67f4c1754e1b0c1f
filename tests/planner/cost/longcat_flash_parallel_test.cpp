// LongCat-Flash (tensor/models/family_longcat_flash.cpp) under the planner: its tensor-parallel
// plan applied to both attention blocks, both MLPs and the experts of each layer, and the token
// all-to-all of its MoE, which only the picks of computing experts cross (Note
// [Zero-computation experts] in tensor/models/models.h). Counts written out by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/longcat_flash_models_test.cpp's tiny config: h 64, 4 heads, rq 16,
// rkv 32, d 16, r 8, v 16, F 96, Fe 32, 4 routed and 2 zero experts, top 3, 2 layers, V 1000.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "longcat_flash", "vocab_size": 1000, "hidden_size": 64,
    "ffn_hidden_size": 96, "expert_ffn_hidden_size": 32, "num_layers": 2,
    "num_attention_heads": 4, "kv_lora_rank": 32, "q_lora_rank": 16, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16, "v_head_dim": 16, "head_dim": 8, "n_routed_experts": 4,
    "zero_expert_num": 2, "moe_topk": 3, "max_position_embeddings": 128,
    "torch_dtype": "bfloat16"
  })"),
                                    "tiny longcat_flash");
}

// TP rank 0 of 2 on the tiny config: in each attention block q_a_proj 1,024, q_a_layernorm 16,
// kv_a_proj_with_mqa 2,560 and kv_a_layernorm 32 replicated, q_b_proj 1,536 / 2, kv_b_proj
// 4,096 / 2, o_proj 4,096 / 2 (8,496 a block); each MLP 18,432 / 2; four norms 256 and the
// router 384 replicated; the experts 32,768 / 2 (gate and up halves each split, the zero
// experts' idle slices with them):
//   layer  2 * 8,496 + 2 * 9,216 + 256 + 384 + 16,384                              = 52,448
//   total  2 * 52,448 + embedding 32,000 + lm_head 32,000 + final norm 64           = 168,960
TEST(LongcatFlashParallel, TinyTensorParallelRankByHand) {
  const int64_t block = 1024 + 16 + 1536 / 2 + 2560 + 32 + 4096 / 2 + 4096 / 2;
  EXPECT_EQ(block, 8'496);
  const int64_t layer = 2 * block + 2 * 18432 / 2 + 256 + 384 + 32768 / 2;
  EXPECT_EQ(layer, 52'448);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * layer + 2 * 32'000 + 64);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 168'960);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 322'048);     // the whole model
}

// LongCat-Flash-Chat on 8 ranks (h 6,144, 64 heads, rq 1,536, rkv 512, F 12,288, Fe 2,048,
// 512 + 256 experts, V 131,072, 28 layers):
//   attention block  q_a_proj 9,437,184 + 1,536 + kv_a_proj_with_mqa 3,538,944 + 512 replicated;
//                    (q_b_proj 18,874,368 + kv_b_proj 8,388,608 + o_proj 50,331,648) / 8
//                                                                               =     22,677,504
//   layer            2 * 22,677,504 + 2 * 226,492,416 / 8 + 4 * 6,144 + router 4,718,592
//                    + experts 25,769,803,776 / 8                               =  3,327,946,752
//   total            28 layers + 2 * 131,072 * 6,144 / 8 + 6,144                = 93,383,841,792
TEST(LongcatFlashParallel, ChatOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("longcat-flash-chat");
  const int64_t block =
      9'437'184 + 1'536 + 3'538'944 + 512 + (18'874'368 + 8'388'608 + 50'331'648) / 8;
  EXPECT_EQ(block, 22'677'504);
  const int64_t layer =
      2 * block + 2 * 226'492'416 / 8 + 4 * 6'144 + 4'718'592 + 25'769'803'776 / 8;
  EXPECT_EQ(layer, 3'327'946'752);
  EXPECT_EQ(tp_rank_parameters(c, 8), 28 * layer + 2 * int64_t{131072} * 6144 / 8 + 6144);
  EXPECT_EQ(tp_rank_parameters(c, 8), 93'383'841'792);
  // One layer's experts: 768 gate_up slices and 512 down slices, split within by tp.
  EXPECT_EQ(expert_parameters_per_layer(c, 1), 25'769'803'776);
  EXPECT_EQ(expert_parameters_per_layer(c, 8), 25'769'803'776 / 8);
}

// The dispatch all-to-all carries a token once per computing expert it reaches: k E / (E + Z) =
// 3 x 4 / 6 = 2 of its 3 picks. One micro-batch of 16 tokens in bfloat16: 16 x 2 x 64 x 2 bytes.
TEST(LongcatFlashParallel, OnlyPicksOfComputingExpertsAreDispatched) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  EXPECT_EQ(t.moe_dispatch_bytes, 16 * 2 * 64 * 2);
}

}  // namespace
}  // namespace shardplan::planner
