// DiffLlama (tensor/models/family_diffllama.cpp) under the planner: its tensor-parallel plan
// (Note [DiffLlama tensor parallelism]: q, k and v split as two halves each, so a rank holds
// whole differential heads) and the traced layer's dataflow through both attention calls. Counts
// written out by hand.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/diffllama_models_test.cpp's tiny model: h 64, V 128 untied, 2 layers of 4
// heads and 2 key-value heads of 16, MLP 96.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json{{"model_type", "diffllama"},
                                                   {"vocab_size", 128},
                                                   {"hidden_size", 64},
                                                   {"intermediate_size", 96},
                                                   {"num_hidden_layers", 2},
                                                   {"num_attention_heads", 4},
                                                   {"num_key_value_heads", 2},
                                                   {"max_position_embeddings", 256},
                                                   {"torch_dtype", "bfloat16"}},
                                    "tiny.json");
}

// TP rank 0 of 2, a layer: q and o 4,096 / 2 each, k and v 2,048 / 2 each, the lambdas 64
// (replicated), the MLP 18,432 / 2, the norms 128: 15,552; two layers, embed_tokens and lm_head
// 8,192 / 2 each, norm 64: 39,360.
TEST(DiffLlamaTensorParallel, TinyOnTwoRanks) {
  const int64_t layer = (4096 + 2048 + 2048 + 4096) / 2 + 64 + 18432 / 2 + 128;
  EXPECT_EQ(layer, 15'552);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * layer + 4096 + 4096 + 64);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 39'360);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 39'360);   // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 78'272);      // the whole model
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 0);  // dense
}

// The shipped config (DiffLlamaConfig's defaults) on 8 ranks: a layer 16,777,216 / 8 +
// 256 + 50,331,648 / 8 + 4,096 = 8,392,960; 16 of them, embed_tokens and lm_head 65,536,000 / 8
// each, norm 2,048.
TEST(DiffLlamaTensorParallel, ShippedConfigOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("diffllama-1b");
  const int64_t layer = 16'777'216 / 8 + 256 + 50'331'648 / 8 + 4096;
  EXPECT_EQ(layer, 8'392'960);
  EXPECT_EQ(tp_rank_parameters(c, 8), 16 * layer + 2 * 65'536'000 / 8 + 2048);
  EXPECT_EQ(tp_rank_parameters(c, 8), 150'673'408);
  EXPECT_EQ(tp_rank_parameters(c, 1), 1'204'885'504);
}

// q_proj, k_proj and v_proj _StridedShard(0, 2): each half of their rows over the ranks; o_proj
// Shard(1) (whole differential heads of its input); the lambdas and norms replicated.
TEST(DiffLlamaTensorParallel, ProjectionsSplitByHalvesOfTheHeads) {
  const tensor::ModelConfig c = tiny();
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  const mesh::DeviceMesh dm({2}, {"tp"});
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  std::map<std::string, mesh::ParameterSharding> by;
  for (const auto& p : mesh::parallelize_module(*m, dm, rules, pc)) by.emplace(p.fqn, p);
  using P = std::vector<mesh::Placement>;
  const std::string b = "model.layers.1.";
  auto at = [&](const std::string& name) { return by.at(name).spec.placements; };
  for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
    EXPECT_EQ(at(b + "self_attn." + proj + ".weight"), (P{mesh::StridedShard{0, 2}})) << proj;
  }
  EXPECT_EQ(at(b + "self_attn.o_proj.weight"), (P{mesh::Shard{1}}));
  EXPECT_EQ(at(b + "mlp.gate_proj.weight"), (P{mesh::Shard{0}}));
  EXPECT_EQ(at(b + "mlp.down_proj.weight"), (P{mesh::Shard{1}}));
  for (const char* replicated :
       {"self_attn.lambda_q1", "self_attn.lambda_k1", "self_attn.lambda_q2", "self_attn.lambda_k2",
        "input_layernorm.weight", "post_attention_layernorm.weight"}) {
    EXPECT_EQ(at(b + replicated), (P{mesh::Replicate{}})) << replicated;
  }
  EXPECT_EQ(at("model.embed_tokens.weight"), (P{mesh::Shard{0}}));
  EXPECT_EQ(at("lm_head.weight"), (P{mesh::Shard{0}}));
}

// The traced layer at tp 2 (16 tokens): q, k, v and the MLP's gate and up column-parallel, o_proj
// and down_proj row-parallel; both attention calls on the rank's 2 of the 4 heads; the
// differential combination and its norm on the sharded outputs; the lambdas' scalar work
// replicated.
TEST(DiffLlamaTensorParallel, TracedLayerSplitsBothAttentionCalls) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  const std::string b = "model.layers.0.";
  const std::map<std::string, OpSplit> linear = {
      {b + "self_attn.q_proj", OpSplit::kColumn}, {b + "self_attn.k_proj", OpSplit::kColumn},
      {b + "self_attn.v_proj", OpSplit::kColumn}, {b + "self_attn.o_proj", OpSplit::kRow},
      {b + "mlp.gate_proj", OpSplit::kColumn},    {b + "mlp.up_proj", OpSplit::kColumn},
      {b + "mlp.down_proj", OpSplit::kRow}};
  std::map<std::string, int> seen;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with(b)) continue;  // the embedding and lm_head around the layer
    if (op.op == "linear") {
      ++seen[fqn];
      EXPECT_EQ(t.split[i], linear.at(fqn)) << fqn;
    } else if (op.op == "scaled_dot_product_attention") {
      ++seen["attention"];
      EXPECT_TRUE(t.score_op[i]);
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(local_gemm_shape(t, i, {.tp = 2}).batch, 2);  // 4 heads, 2 a rank
    } else if (op.op == "rms_norm" && fqn == b + "self_attn.groupnorm") {
      ++seen["groupnorm"];
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
    } else if (op.op == "exp") {
      ++seen["exp"];
      EXPECT_EQ(t.split[i], OpSplit::kReplicated);  // lambda from the [d] vectors
    }
  }
  std::map<std::string, int> want = {{"attention", 2}, {"groupnorm", 1}, {"exp", 2}};
  for (const auto& entry : linear) want[entry.first] = 1;
  EXPECT_EQ(seen, want);
  // The keys and values a context-parallel ring passes, for each of the two calls: 2 key heads
  // of 16 and the 2 tiled value heads of 16, 16 tokens, bf16.
  EXPECT_EQ(t.kv_bytes, 2 * 16 * 2 * (16 + 16) * 2);
}

}  // namespace
}  // namespace shardplan::planner
