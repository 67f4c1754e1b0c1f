// BitNet's tensor-parallel plan (tensor/models/family_bitnet.cpp: Megatron's split of the Llama
// projections) applied to BitNet b1.58 2B4T, against counts written out by hand from its config
// (h 2,560, 20 query heads and 5 key-value heads of 128, MLP 6,912, 30 layers, vocabulary 128,256
// tied), and the sub-norms in the traced layer: between the column- and row-parallel projections,
// on each rank's heads (MLP channels).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// On 5 ranks (one key-value head each): q, k, v and o_proj split by heads, gate, up and down by
// the MLP width, the tied embedding (and lm_head, the same tensor, once) by vocabulary rows; the
// four norms of a layer (attn_sub_norm and ffn_sub_norm included) and the final norm whole.
// Neither the MLP's 6,912 channels nor the 128,256 rows are a multiple of 5: as torch.chunk
// splits them, ranks 0-3 hold 1,383 channels and 25,652 rows, rank 4 the rest, 1,380 and 25,648.
//   attention: (2 x 2,560 x 2,560 + 2 x 640 x 2,560) / 5 = 3,276,800 on every rank
//   replicated: attn_sub_norm 2,560 + ffn_sub_norm 6,912 + two layer norms 5,120 = 14,592 a layer;
//   final norm 2,560
//   rank 0: 25,652 x 2,560 + 30 x (3,276,800 + 3 x 1,383 x 2,560 + 14,592) + 2,560
//         = 65,669,120 + 30 x 13,912,832 + 2,560 = 483,056,640
//   rank 4: 25,648 x 2,560 + 30 x (3,276,800 + 3 x 1,380 x 2,560 + 14,592) + 2,560
//         = 65,658,880 + 30 x 13,889,792 + 2,560 = 482,355,200
TEST(BitnetTensorParallel, TwoBFourTSplitsHeadsMlpAndVocabulary) {
  const tensor::ModelConfig c = tensor::find_model_config("bitnet-b1.58-2b-4t");
  EXPECT_EQ(tp_rank_parameters(c, 5), 483'056'640);
  EXPECT_EQ(tp_rank_parameters(c, 5, 3), 483'056'640);
  EXPECT_EQ(tp_rank_parameters(c, 5, 4), 482'355'200);
  EXPECT_EQ(tp_rank_parameters(c, 1), 2'412'820'480);  // the whole model, tied once
  // The ranks together hold the model once and the replicated parts (30 x 14,592 + 2,560 =
  // 440,320) four more times.
  EXPECT_EQ(4 * tp_rank_parameters(c, 5) + tp_rank_parameters(c, 5, 4),
            2'412'820'480 + 4 * 440'320);
}

// tp must divide the 20 query heads, and divide the 5 key-value heads or be a multiple of them.
TEST(BitnetTensorParallel, TpDividesTheHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("bitnet-b1.58-2b-4t");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 5), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 10), "");
  EXPECT_EQ(
      dim(kTpDim).refuses(c, s, 4),
      "--tp 4 and the model's 5 key/value heads: expected a divisor of 5 or a multiple of it");
}

// The traced layer's split: q, k, v, gate and up column-parallel, o_proj and down_proj
// row-parallel; each sub-norm reads the sharded activation between them (1 / tp of its work; the
// all-reduce of its sum of squares is not priced), the layer's two pre-norms are replicated.
TEST(BitnetTensorParallel, SubNormsRunOnTheShardedHalf) {
  const tensor::ModelConfig c =
      tensor::parse_model_config(nlohmann::json{{"model_type", "bitnet"},
                                                {"vocab_size", 128},
                                                {"hidden_size", 64},
                                                {"intermediate_size", 96},
                                                {"num_hidden_layers", 2},
                                                {"num_attention_heads", 4},
                                                {"num_key_value_heads", 2}},
                                 "tiny.json");
  const TraceKey key{.micro_batch = 1, .seq = 64, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  int columns = 0, rows = 0, sub_norms = 0, layer_norms = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || t.part[i] != Part::kBlock) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (op.op == "linear") {
      const bool row = fqn.ends_with("o_proj") || fqn.ends_with("down_proj");
      EXPECT_EQ(t.split[i], row ? OpSplit::kRow : OpSplit::kColumn) << fqn;
      ++(row ? rows : columns);
    }
    if (op.op == "rms_norm" && fqn.ends_with("_sub_norm")) {
      EXPECT_EQ(t.split[i], OpSplit::kSharded) << fqn;
      ++sub_norms;
    }
    if (op.op == "rms_norm" && fqn.ends_with("layernorm")) {
      EXPECT_EQ(t.split[i], OpSplit::kReplicated) << fqn;
      ++layer_norms;
    }
  }
  EXPECT_EQ(columns, 5);
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(sub_norms, 2);
  EXPECT_EQ(layer_norms, 2);
}

}  // namespace
}  // namespace shardplan::planner
