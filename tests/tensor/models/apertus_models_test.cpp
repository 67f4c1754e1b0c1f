// apertus (Swiss AI's Apertus) against hand formulas written here from transformers 5's
// modeling_apertus.py and activations.py (XIELUActivation). h hidden, V vocabulary, F MLP width,
// hd head_dim: Llama's attention with per-head q_norm, k_norm [hd]; mlp up_proj [F, h], down_proj
// [h, F] and act_fn (xIELU: alpha_p, alpha_n [1]; buffers beta, eps); norms attention_layernorm
// and feedforward_layernorm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/ops.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

TEST(ApertusModels, Apertus8BMatchesTheHandTotal) {
  // Apertus-8B: V 131,072 untied, h 4,096, 32 layers of 32 heads of 128 (8 kv heads), F 21,504
  // (up and down only), two xIELU scalars per layer.
  const int64_t V = 131072, h = 4096, hd = 128, q = 32 * hd, kv = 8 * hd, F = 21504;
  const int64_t layer = 2 * h * q + 2 * h * kv + 2 * hd + 2 * h * F + 2 + 2 * h;
  const int64_t total = 2 * V * h + 32 * layer + h;
  EXPECT_EQ(total, 8'053'338'176);
  const ModelConfig c = find_model_config("apertus-8b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "ApertusForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(
      names_under(*m, "model.layers.0."),
      (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
             "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
             "mlp.up_proj.weight", "mlp.down_proj.weight", "mlp.act_fn.alpha_p",
             "mlp.act_fn.alpha_n", "attention_layernorm.weight", "feedforward_layernorm.weight"}));
  // beta and eps are persistent scalar buffers: the checkpoint holds them.
  EXPECT_EQ(m->get_buffer("model.layers.0.mlp.act_fn.beta").dim(), 0);
  EXPECT_EQ(m->get_buffer("model.layers.0.mlp.act_fn.eps").dim(), 0);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny_apertus() {
  return {{"model_type", "apertus"},  {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(ApertusModels, XieluIsOneFusedOpThatSavesItsInput) {
  // Per MLP: up_proj [B, S, F] -> xielu (8 FLOPs an element: the sign test, the select and the
  // longer branch of six) -> down_proj; the backward keeps xielu's input alone.
  const ModulePtr m = build_model(parse_model_config(tiny_apertus(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  int64_t seen = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "xielu") continue;
    ++seen;
    EXPECT_EQ(n.module, "model.layers." + std::to_string(seen - 1) + ".mlp.act_fn");
    EXPECT_DOUBLE_EQ(n.flops, 8.0 * 2 * 8 * 96);
  }
  EXPECT_EQ(seen, 2);
  TraceOptions o;
  o.input = empty({2, 8}, {.dtype = DType::kInt64});
  const TrainingStep st = trace_training_step(*m, o);
  int64_t saved = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "xielu") continue;
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].what, "input");
    EXPECT_TRUE(op.rule_known);
    ++saved;
  }
  EXPECT_EQ(saved, 2);
}

TEST(ApertusModels, XieluElsewhereIsBuiltOrRefusedByTheMlp) {
  // Llama's MLP registers ACT2FN's module as act_fn too (after its three projections).
  nlohmann::json j = tiny_apertus();
  j["model_type"] = "llama";
  j["hidden_act"] = "xielu";
  const ModulePtr llama = build_model(parse_model_config(j, "llama.json"));
  EXPECT_EQ(names_under(*llama, "model.layers.0.mlp."),
            (Names{"gate_proj.weight", "up_proj.weight", "down_proj.weight", "act_fn.alpha_p",
                   "act_fn.alpha_n"}));
  // GPT-2's MLP does not build it: tracing it is one clear error, not a wrong model.
  const nlohmann::json gpt2 = {{"model_type", "gpt2"},
                               {"vocab_size", 100},
                               {"n_embd", 32},
                               {"n_layer", 1},
                               {"n_head", 2},
                               {"n_positions", 64},
                               {"activation_function", "xielu"}};
  const ModulePtr m = build_model(parse_model_config(gpt2, "gpt2.json"));
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 4); },
              ThrowsMessage<Error>(HasSubstr("hidden_act 'xielu' has learned parameters")));
}

TEST(ApertusModels, XieluOpChecksItsParameters) {
  const Tensor x = empty({2, 3}, {.dtype = DType::kBFloat16});
  const Tensor one = empty({1}, {.dtype = DType::kBFloat16});
  EXPECT_EQ(xielu(x, one, one).sizes(), x.sizes());
  EXPECT_THAT([&] { xielu(x, empty({2}), one); },
              ThrowsMessage<Error>(HasSubstr("alpha_p and alpha_n of one element")));
  EXPECT_THAT([&] { xielu(empty({2}, {.dtype = DType::kInt64}), one, one); },
              ThrowsMessage<Error>(HasSubstr("floating point")));
}

}  // namespace
}  // namespace shardplan::tensor
