// Gemma 3n's language model (tensor/models/family_gemma3n_text.cpp) under the planner: its
// tensor-parallel plan applied to the attention, the MLP and the two tables, with AltUp, LAuReL
// and the per-layer gates replicated; and its pipeline stages, between which the AltUp copies
// travel. Counts written out by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "planner/search/planner.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/gemma3n_text_models_test.cpp's tiny config: h 64, 4 heads and 2 kv heads
// of 16, MLP 96, layers [sliding, full, sliding, full] of which the last two share keys and
// values, P 8 over 128 rows, 3 AltUp copies, LAuReL rank 4, V 128 tied; layer 0's MLP sparse.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "gemma3n_text", "vocab_size": 128, "hidden_size": 64,
    "intermediate_size": [96, 96, 96, 96], "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 128,
    "num_kv_shared_layers": 2, "altup_num_inputs": 3, "laurel_rank": 4,
    "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "torch_dtype": "bfloat16"
  })"),
                                    "tiny gemma3n_text");
}

// TP rank 0 of 2: q, k, v and o (12,288) halved and q_norm, k_norm (32) whole: 6,176 (a shared
// layer: q and o 8,192 halved and q_norm: 4,112); the MLP 18,432 / 2 = 9,216; replicated: four
// norms 256, AltUp 356, LAuReL 576, the per-layer gate, projection and norm 1,088: 2,276.
//   own layer     6,176 + 9,216 + 2,276                                             = 17,668
//   shared layer  4,112 + 9,216 + 2,276                                             = 15,604
//   model         token table (tied) 8,192 / 2, norm 64, per-layer table 4,096 / 2, its
//                 projection 2,048 and norm 8, AltUp projections 4 x 4,096          = 24,648
//   total         2 x 17,668 + 2 x 15,604 + 24,648                                  = 91,192
TEST(Gemma3nTextParallel, TinyTensorParallelRankByHand) {
  const int64_t replicated = 256 + 356 + 576 + 1'088;
  const int64_t own = (4'096 + 2'048 + 2'048 + 4'096) / 2 + 32 + 18'432 / 2 + replicated;
  const int64_t shared = (4'096 + 4'096) / 2 + 16 + 18'432 / 2 + replicated;
  const int64_t model = 8'192 / 2 + 64 + 4'096 / 2 + 2'048 + 8 + 4 * 4'096;
  EXPECT_EQ(own, 17'668);
  EXPECT_EQ(shared, 15'604);
  EXPECT_EQ(model, 24'648);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * own + 2 * shared + model);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 91'192);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 91'192);   // even splits: both ranks alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 154'680);     // the whole model
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 0);  // dense
}

// E4B on 2 ranks (h 2,048, 8 heads and 2 kv heads of 256, MLP 16,384, 35 layers of which the last
// 15 share, P 256 over 262,144 rows, 4 copies, rank 64, V 262,400):
//   replicated   norms 8,192 + AltUp 12,368 + LAuReL 264,192 + per-layer 1,050,624 = 1,335,376
//   own layer    10,485,760 / 2 + 512 + 100,663,296 / 2 + 1,335,376                = 56,910,416
//   shared layer 8,388,608 / 2 + 256 + 100,663,296 / 2 + 1,335,376                 = 55,861,584
//   model        537,395,200 / 2 + 2,048 + 2,348,810,240 / 2 + 18,350,080 + 256
//                + 25,165,824                                                      = 1,486,620,928
//   total        20 x 56,910,416 + 15 x 55,861,584 + 1,486,620,928                 = 3,462,753,008
TEST(Gemma3nTextParallel, E4BOnTwoRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("gemma-3n-e4b");
  const int64_t replicated = 8'192 + 12'368 + 264'192 + 1'050'624;
  const int64_t own = 10'485'760 / 2 + 512 + 100'663'296 / 2 + replicated;
  const int64_t shared = 8'388'608 / 2 + 256 + 100'663'296 / 2 + replicated;
  const int64_t model =
      537'395'200 / 2 + 2'048 + int64_t{2'348'810'240} / 2 + 18'350'080 + 256 + 25'165'824;
  EXPECT_EQ(own, 56'910'416);
  EXPECT_EQ(shared, 55'861'584);
  EXPECT_EQ(model, 1'486'620'928);
  EXPECT_EQ(tp_rank_parameters(c, 2), 20 * own + 15 * shared + model);
  EXPECT_EQ(tp_rank_parameters(c, 2), 3'462'753'008);
  EXPECT_EQ(tp_rank_parameters(c, 1), 6'835'235'568);
}

// The sparse layer traced at 16 tokens under tp 2: q/k/v, gate and up are column-parallel, o_proj
// and down_proj row-parallel; AltUp's and LAuReL's projections and the per-layer gate stay whole
// (replicated); the sliding window of 8 bounds the attention; keys and values of 2 heads of 16 +
// 16 channels in bfloat16 (16 x 2 x 32 x 2 bytes).
TEST(Gemma3nTextParallel, SparseLayerSplitsAttentionAndMlpOnly) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  EXPECT_EQ(t.attention_window, 8);
  EXPECT_TRUE(t.sliding);
  EXPECT_EQ(t.kv_bytes, 16 * 2 * 32 * 2);
  int column = 0, row = 0, whole = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.op != "linear" || t.part[i] != Part::kBlock) continue;
    column += t.split[i] == OpSplit::kColumn;
    row += t.split[i] == OpSplit::kRow;
    whole += t.split[i] == OpSplit::kReplicated;
  }
  EXPECT_EQ(column, 5);  // q, k, v, gate, up
  EXPECT_EQ(row, 2);     // o, down
  // The router twice, prediction_coefs, correction_coefs, linear_left, linear_right, the
  // per-layer gate and projection.
  EXPECT_EQ(whole, 8);
}

// Between two pipeline stages go the 4 AltUp copies of the hidden state, not one: 4,096 tokens x
// 4 x 2,048 x 2 bytes (bf16) a micro-batch.
TEST(Gemma3nTextParallel, StagesSendEveryAltUpCopy) {
  const tensor::ModelConfig c = tensor::find_model_config("gemma-3n-e4b");
  Planner p(c, collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 2, .seq = 4096, .global_batch = 8}, {});
  ParallelConfig cfg;
  cfg.pp = 2;
  cfg.dp = 1;
  cfg.micro_batch = 1;
  Bill bill;
  (void)p.estimate(cfg, DimOrder::kTpInner, &bill);
  int sends = 0;
  for (const BillCollective& b : bill.collectives) {
    if (b.kind != collectives::CollectiveKind::kSendRecv) continue;
    EXPECT_EQ(b.bytes, int64_t{4096} * 4 * 2048 * 2);
    ++sends;
  }
  EXPECT_EQ(sends, 1);
}

}  // namespace
}  // namespace shardplan::planner
