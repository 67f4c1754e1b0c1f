// stablelm (StableLM-3B-4E1T, StableLM 2) against hand formulas written here from transformers 5's
// modeling_stablelm.py and the published size of StableLM-3B-4E1T (Stability AI's model card:
// 2,795,443,200). h hidden, V vocabulary, F MLP width, H heads and kv key-value heads of
// d = h / H (k = kv d):
//   self_attn  q_proj [h, h], k_proj and v_proj [k, h], biases [h], [k], [k] with use_qkv_bias;
//              o_proj [h, h] never a bias; with qk_layernorm q_layernorm.norms.<0..H-1>.weight and
//              k_layernorm.norms.<0..kv-1>.weight [d] (bias-free nn.LayerNorm per head)
//   mlp        gate_proj, up_proj [F, h], down_proj [h, F] (no biases)
//   norms      input_layernorm, post_attention_layernorm (not with use_parallel_residual) and
//              model.norm: nn.LayerNorm [h] + [h]
//   model      embed_tokens [V, h], lm_head [V, h] unless tied (no bias)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

nlohmann::json tiny() {
  return {{"model_type", "stablelm"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"partial_rotary_factor", 0.25},
          {"use_qkv_bias", true},
          {"qk_layernorm", true},
          {"use_parallel_residual", true},
          {"hidden_dropout", 0.1},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(StablelmModels, TinyConfigByHand) {
  // d = 16, k = 32, rotated width int(16 x 0.25) = 4.
  // Attention: weights 4,096 + 2,048 + 2,048 + 4,096 = 12,288, q/k/v biases 64 + 32 + 32 = 128
  // (o_proj none): 12,416; q_layernorm 4 heads x 16 = 64, k_layernorm 2 x 16 = 32: 96.
  // MLP 3 x 64 x 96 = 18,432. input_layernorm 64 + 64 = 128 (parallel: no second norm).
  // A layer: 12,416 + 96 + 18,432 + 128 = 31,072; two: 62,144.
  // Model: embed_tokens 8,192, norm 128, lm_head 8,192: 78,656.
  const int64_t layer = 12'416 + 96 + 18'432 + 128;
  EXPECT_EQ(layer, 31'072);
  const int64_t total = 2 * layer + 8'192 + 128 + 8'192;
  EXPECT_EQ(total, 78'656);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_TRUE(c.use_parallel_residual);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "StableLmForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(
      names_under(*m, "model.layers.0."),
      (Names{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
             "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
             "self_attn.o_proj.weight", "self_attn.q_layernorm.norms.0.weight",
             "self_attn.q_layernorm.norms.1.weight", "self_attn.q_layernorm.norms.2.weight",
             "self_attn.q_layernorm.norms.3.weight", "self_attn.k_layernorm.norms.0.weight",
             "self_attn.k_layernorm.norms.1.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
             "mlp.down_proj.weight", "input_layernorm.weight", "input_layernorm.bias"}));
  EXPECT_EQ(names_under(*m, "model.norm."), (Names{"weight", "bias"}));
  EXPECT_EQ(names_under(*m, "lm_head."), (Names{"weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_layernorm.norms.1.weight").sizes(),
            DimVector({16}));
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn.q_layernorm").type_name(),
            "StableLmLayerNormPerHead");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "StableLmAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "StableLmMLP");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "StableLmRotaryEmbedding");
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({2}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Sequential layers add post_attention_layernorm: 128 more a layer (78,912).
  nlohmann::json j = tiny();
  j["use_parallel_residual"] = false;
  const ModelConfig seq = parse_model_config(j, "sequential");
  const ModulePtr sm = build_model(seq);
  EXPECT_EQ(sm->parameters_numel(), 78'656 + 2 * 128);
  EXPECT_EQ(names_under(*sm, "model.layers.0.post_attention_layernorm."),
            (Names{"weight", "bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(seq), "round trip"), seq);
  // The class's defaults: no q/k/v biases, no q/k norms, sequential: 78,656 - 2 x (128 + 96) +
  // 2 x 128 = 78,464.
  j = tiny();
  j.erase("use_qkv_bias");
  j.erase("qk_layernorm");
  j.erase("use_parallel_residual");
  EXPECT_EQ(build_model(parse_model_config(j, "defaults"))->parameters_numel(), 78'464);
}

TEST(StablelmModels, PerHeadNormsAndTheMlpOnlyDropout) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // One LayerNorm per head of q (4) and of k (2), each in its own module, then a cat per side.
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.self_attn.q_layernorm.norms.3"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.self_attn.k_layernorm.norms.1"), 1);
  EXPECT_EQ(ops_in(g, "cat", "model.layers.0.self_attn.q_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "cat", "model.layers.0.self_attn.k_layernorm"), 1);
  // x + attn(n) + mlp(n) on one input_layernorm.
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  // Training: hidden_dropout on the MLP's output only, parallel or not.
  const OpGraph t =
      trace_model_forward(*build_model(c, {.dtype = std::nullopt, .training = true}), 2, 8);
  EXPECT_EQ(ops_in(t, "dropout", "model.layers.0"), 1);
  nlohmann::json j = tiny();
  j["use_parallel_residual"] = false;
  const ModelConfig seq = parse_model_config(j, "sequential");
  const OpGraph ts =
      trace_model_forward(*build_model(seq, {.dtype = std::nullopt, .training = true}), 2, 8);
  EXPECT_EQ(ops_in(ts, "dropout", "model.layers.0"), 1);
  EXPECT_EQ(ops_in(ts, "dropout", "model"), 0);  // no embedding dropout in StableLM
}

TEST(StablelmModels, ClassDefaultsAndWhatIsRefused) {
  nlohmann::json j = tiny();
  j.erase("num_key_value_heads");
  j.erase("partial_rotary_factor");
  j["num_attention_heads"] = 32;
  j["hidden_size"] = 512;
  const ModelConfig c = parse_model_config(j, "defaults");
  EXPECT_EQ(c.num_key_value_heads, 32);  // StableLmConfig's 32, not "the head count"
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  // A null num_key_value_heads fails StableLmConfig's int type.
  j["num_key_value_heads"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("num_key_value_heads")));
  // head_dim is always hidden / heads.
  j = tiny();
  j["head_dim"] = 32;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("head_dim")));
  j["head_dim"] = 16;  // the same width: accepted
  EXPECT_EQ(parse_model_config(j, "same").head_dim, 16);
}

TEST(StablelmModels, StableLm3b4e1tMatchesThePublishedSize) {
  // V 50,304 untied, h 2,560, 32 layers of 32 heads (MHA) of 80, F 6,912, no q/k/v biases,
  // sequential layers with two LayerNorms; RoPE on int(80 x 0.25) = 20 channels.
  const int64_t h = 2560, V = 50304, F = 6912;
  const int64_t layer = 4 * h * h + 3 * h * F + 2 * 2 * h;
  EXPECT_EQ(layer, 79'308'800);
  const int64_t total = 32 * layer + 2 * V * h + 2 * h;
  EXPECT_EQ(total, 2'795'443'200);  // the model card's "2,795,443,200"
  const ModelConfig c = find_model_config("stablelm-3b-4e1t");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "StableLmForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({10}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(StablelmModels, NoHeadsIsRefusedNamingTheField) {
  // The head-width check divides by the head count: a file with none (found by fuzz_model_config,
  // a division by zero under UBSan) gets validate()'s error, not a crash.
  for (const int heads : {0, -4}) {
    nlohmann::json j = tiny();
    j["num_attention_heads"] = heads;
    EXPECT_THAT([&] { parse_model_config(j, "heads.json"); },
                ThrowsMessage<Error>(HasSubstr("field 'num_attention_heads'")));
  }
}

}  // namespace
}  // namespace shardplan::tensor
