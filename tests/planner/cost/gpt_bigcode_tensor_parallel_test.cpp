// gpt_bigcode's tensor-parallel plan (tensor/models/family_gpt_bigcode.cpp) applied: what a TP
// rank holds of StarCoder, counted by hand, and how the planner splits one traced block of a
// multi-query model (docs/cost-model.md §8, Note [Tracing one block at full width]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// StarCoder on 8 ranks (h 6,144, one key/value head of 128, F 24,576, V 49,152 tied, P 8,192,
// 40 layers; biases everywhere). c_attn [6,400, 6,144] is split evenly by rows (the plan's
// comment: Megatron-LM would hold 768 query rows and the whole 256 key/value rows instead):
//   wte by vocabulary rows: 49,152 / 8 x 6,144 = 37,748,736 (lm_head tied); wpe 50,331,648
//   per layer: c_attn 800 x 6,144 + 800 = 4,916,000; attn.c_proj 6,144 x 768 = 4,718,592 plus
//              its bias 6,144 (row-parallel: replicated); c_fc 3,072 x 6,144 + 3,072 =
//              18,877,440; mlp.c_proj 6,144 x 3,072 = 18,874,368 plus bias 6,144; ln_1, ln_2
//              24,576 -> 47,423,264
//   37,748,736 + 50,331,648 + 40 x 47,423,264 + ln_f 12,288 = 1,985,023,232
TEST(GptBigCodeTensorParallel, StarCoderOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("starcoder");
  const int64_t layer = 4'916'000 + 4'718'592 + 6'144 + 18'877'440 + 18'874'368 + 6'144 + 24'576;
  EXPECT_EQ(layer, 47'423'264);
  EXPECT_EQ(tp_rank_parameters(c, 8), 37'748'736 + 50'331'648 + 40 * layer + 12'288);
  EXPECT_EQ(tp_rank_parameters(c, 8), 1'985'023'232);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 1'985'023'232);  // every split even
  EXPECT_EQ(tp_rank_parameters(c, 1), 15'517'456'384);    // the whole model
}

// Without multi_query c_attn's rows are per head ([q k v] of each), so the plain split gives each
// rank whole heads: a tiny model of 4 heads of 16 (h 64, F 256, V 1,000 tied, P 128, 2 layers) on
// 2 ranks holds c_attn 96 x 64 + 96 = 6,240, attn.c_proj 64 x 32 + 64 = 2,112, c_fc 128 x 64 +
// 128 = 8,320, mlp.c_proj 64 x 128 + 64 = 8,256, norms 256 -> 25,184 a layer; wte 500 x 64 =
// 32,000, wpe 8,192, ln_f 128: 32,000 + 8,192 + 2 x 25,184 + 128 = 90,688.
TEST(GptBigCodeTensorParallel, WithoutMultiQueryEachRankHoldsWholeHeads) {
  const nlohmann::json j = {{"model_type", "gpt_bigcode"},
                            {"vocab_size", 1000},
                            {"n_embd", 64},
                            {"n_layer", 2},
                            {"n_head", 4},
                            {"n_positions", 128},
                            {"n_inner", 256},
                            {"multi_query", false}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny-mha");
  EXPECT_EQ(tp_rank_parameters(c, 2), 90'688);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 90'688);
}

// One traced block of a tiny multi-query model at tp 4: c_attn column-parallel (96 output
// features, 24 a rank), the attention core on a quarter of the (batch x query heads), c_proj and
// mlp.c_proj row-parallel (64 and 256 input features, 16 and 64 a rank).
TEST(GptBigCodeTensorParallel, TracedBlockSplitsTheFusedProjectionByColumns) {
  const nlohmann::json j = {{"model_type", "gpt_bigcode"},
                            {"vocab_size", 1000},
                            {"n_embd", 64},
                            {"n_layer", 2},
                            {"n_head", 4},
                            {"n_positions", 128},
                            {"n_inner", 256}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny-mqa");
  const TracedModel t = trace_one_block(c, {.micro_batch = 2, .seq = 16});
  const RankSplit split{.tp = 4};
  int seen = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.matmul_flops <= 0 || op.call < 0) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    SCOPED_TRACE(fqn + " " + op.op);
    const GemmShape g = local_gemm_shape(t, i, split);
    if (fqn == "transformer.h.0.attn.c_attn") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 24);
      ++seen;
    } else if (fqn == "transformer.h.0.attn.c_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      EXPECT_EQ(g.k, 16);
      ++seen;
    } else if (fqn == "transformer.h.0.mlp.c_fc") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 64);
      ++seen;
    } else if (fqn == "transformer.h.0.mlp.c_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      EXPECT_EQ(g.k, 64);
      ++seen;
    } else if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(g.batch, 2 * 4 / 4);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 5);
  // The keys and values a context-parallel ring passes: one head of 16 + 16 channels, bf16.
  EXPECT_EQ(t.kv_bytes, 2 * 16 * 1 * (16 + 16) * 2);
}

}  // namespace
}  // namespace shardplan::planner
