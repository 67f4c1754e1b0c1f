// starcoder2 (BigCode's StarCoder2) against hand formulas written here from transformers 5's
// modeling_starcoder2.py. h hidden, V vocabulary, F MLP width, q = heads x head_dim, kv = kv heads
// x head_dim, every Linear with a bias (use_bias):
//   self_attn  q_proj [q, h] + [q], k_proj, v_proj [kv, h] + [kv], o_proj [h, q] + [h]
//   mlp        c_fc [F, h] + [F], c_proj [h, F] + [h] (no gate)
//   norms      input_layernorm, post_attention_layernorm and model.norm: nn.LayerNorm [h] + [h]
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using Names = std::vector<std::string>;

TEST(Starcoder2Models, StarCoder2ThreeBMatchesTheHandTotal) {
  // StarCoder2-3B: V 49,152 tied, h 3,072, 30 layers of 24 heads of 128 (2 kv heads), F 12,288.
  const int64_t V = 49152, h = 3072, q = 24 * 128, kv = 2 * 128, F = 12288;
  const int64_t attention = 2 * (h * q + q) + 2 * (h * kv + kv) - q + h;  // o_proj's bias is [h]
  const int64_t layer = attention + (h * F + F) + (F * h + h) + 2 * 2 * h;
  const int64_t total = V * h + 30 * layer + 2 * h;
  EXPECT_EQ(total, 3'030'371'328);  // "3B"
  const ModelConfig c = find_model_config("starcoder2-3b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Starcoder2ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                   "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                   "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.c_fc.weight",
                   "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
                   "input_layernorm.weight", "input_layernorm.bias",
                   "post_attention_layernorm.weight", "post_attention_layernorm.bias"}));
  EXPECT_EQ(names_under(*m, "model.norm."), (Names{"weight", "bias"}));
  // Every layer slides within the 4,096-token window.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kSliding);
  EXPECT_EQ(stack.kinds[0].window, 4096);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "starcoder2"}, {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 128},   {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2},   {"embedding_dropout", 0.1}, {"residual_dropout", 0.1},
          {"torch_dtype", "bfloat16"}};
}

// Ops named `op` in the module `module` itself.
int64_t ops_in(const OpGraph& g, const std::string& op, const std::string& module) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op && node.module == module;
  return n;
}

TEST(Starcoder2Models, TrainingDropsOutTheEmbeddingsAndEachHalf) {
  // A training build: one dropout after the embedding and one on each half's output per layer
  // (Starcoder2Model's embedding_dropout; residual_dropout after o_proj and after c_proj).
  const ModulePtr m =
      build_model(parse_model_config(tiny(), "tiny"), {.dtype = std::nullopt, .training = true});
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_EQ(ops_in(g, "dropout", "model"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "model.layers.0"), 2);
  EXPECT_EQ(ops_in(g, "gelu", "model.layers.1.mlp"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  // Not training: no dropout at all.
  const ModulePtr eval = build_model(parse_model_config(tiny(), "tiny"));
  int64_t dropouts = 0;
  const OpGraph eval_graph = trace_model_forward(*eval, 2, 8);
  for (const OpNode& node : eval_graph.nodes()) {
    dropouts += node.op == "dropout";
  }
  EXPECT_EQ(dropouts, 0);
}

}  // namespace
}  // namespace shardplan::tensor
