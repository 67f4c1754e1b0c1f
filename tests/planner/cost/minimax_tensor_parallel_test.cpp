// MiniMax's tensor-parallel plan (tensor/models/family_minimax.cpp) applied: what a TP rank holds,
// against counts written out by hand, and the lightning attention split by whole heads in the
// traced layer (Note [Lightning attention trace] in tensor/models/lightning_attention.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/minimax_models_test.cpp's tiny model: three lightning layers and one
// softmax layer, h 64, 4 heads of 16 (2 kv heads), 4 experts of 32, vocabulary 1,000.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json{{"model_type", "minimax"},
                                                   {"vocab_size", 1000},
                                                   {"hidden_size", 64},
                                                   {"intermediate_size", 32},
                                                   {"num_hidden_layers", 4},
                                                   {"num_attention_heads", 4},
                                                   {"num_key_value_heads", 2},
                                                   {"head_dim", 16},
                                                   {"num_local_experts", 4},
                                                   {"num_experts_per_tok", 2},
                                                   {"block_size", 16},
                                                   {"layer_types",
                                                    {"linear_attention", "linear_attention",
                                                     "linear_attention", "full_attention"}}},
                                    "tiny.json");
}

// On 2 ranks:
//   embed_tokens and lm_head by vocabulary: 1,000 x 64 / 2 = 32,000 each
//   lightning layer: qkv_proj 192 x 64 / 2 = 6,144; output_gate, out_proj 64 x 64 / 2 = 2,048
//                    each; its norm 64 (replicated); two layer norms 128; router 4 x 64 = 256;
//                    experts (gate_up_proj's halves and down_proj's input split) 3 x 4 x 32 x 64 /
//                    2 = 12,288: 22,976
//   softmax layer:   q, o 64 x 64 / 2 = 2,048 each; k, v 32 x 64 / 2 = 1,024 each; norms 128;
//                    router 256; experts 12,288: 18,816
//   32,000 x 2 + 3 x 22,976 + 18,816 + final norm 64 = 151,808
TEST(MiniMaxTensorParallel, TinyOnTwoRanks) {
  const tensor::ModelConfig c = tiny();
  EXPECT_EQ(tp_rank_parameters(c, 2), 151'808);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 151'808);
  EXPECT_EQ(tp_rank_parameters(c, 1), 301'824);
}

// MiniMax-Text-01 on 8 ranks (h 6,144, 64 heads of 128, 8 kv heads, 32 experts of 9,216,
// vocabulary 200,064):
//   embed_tokens and lm_head: 200,064 x 6,144 / 8 = 153,649,152 each
//   lightning layer: qkv_proj 3 x 8,192 x 6,144 / 8 = 18,874,368; output_gate, out_proj
//                    6,291,456 each; norm 8,192; layer norms 12,288; router 196,608; experts
//                    3 x 32 x 9,216 x 6,144 / 8 = 679,477,248: 711,151,616
//   softmax layer:   q, o 6,291,456 each; k, v 786,432 each (one kv head a rank); norms 12,288;
//                    router 196,608; experts 679,477,248: 693,841,920
//   2 x 153,649,152 + 70 x 711,151,616 + 10 x 693,841,920 + 6,144 = 57,026,336,768
TEST(MiniMaxTensorParallel, TextZeroOneOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("minimax-text-01");
  EXPECT_EQ(tp_rank_parameters(c, 8), 57'026'336'768);
}

// The lightning layer traced and split at tp 2: qkv_proj and output_gate column-parallel, the
// blocked op on each rank's heads (a [256 x 16] tile per head and block: 4 heads, 2 a rank), its
// full-width norm on the sharded heads, out_proj row-parallel; no keys for a context-parallel
// ring and no attention core to scale.
TEST(MiniMaxTensorParallel, LightningLayerSplitsByWholeHeads) {
  const tensor::ModelConfig c = tiny();
  const TraceKey key{.micro_batch = 1, .seq = 256, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);
  int ops = 0, columns = 0, rows = 0, norms = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    EXPECT_FALSE(t.score_op[i]) << op.op;
    const std::string fqn = op.call >= 0 ? t.step.calls[static_cast<size_t>(op.call)].fqn : "";
    if (op.op == "lightning_attention") {
      ++ops;
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      const GemmShape g = local_gemm_shape(t, i, {.tp = 2});
      EXPECT_EQ(g.batch, 2);
      EXPECT_EQ(g.m, 256);
      EXPECT_EQ(g.n, 16);
      EXPECT_EQ(g.k, 2 * (16 + 256));  // 4 d (d + B) per token and head over 2 m n
    }
    if (op.op == "linear" &&
        (fqn.ends_with("self_attn.qkv_proj") || fqn.ends_with("self_attn.output_gate"))) {
      EXPECT_EQ(t.split[i], OpSplit::kColumn) << fqn;
      ++columns;
    }
    if (op.op == "linear" && fqn.ends_with("self_attn.out_proj")) {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      ++rows;
    }
    if (op.op == "rms_norm" && fqn.ends_with("self_attn.norm")) {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      ++norms;
    }
  }
  EXPECT_EQ(ops, 1);
  EXPECT_EQ(columns, 2);
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(norms, 1);
  // The softmax layer's keys and values: 2 kv heads of 16 channels, bf16, 256 tokens.
  const TracedModel full = trace_one_block(c, tensor::layer_kind(c, 3), key);
  EXPECT_EQ(full.kv_bytes, 256 * 2 * (16 + 16) * 2);
}

}  // namespace
}  // namespace shardplan::planner
