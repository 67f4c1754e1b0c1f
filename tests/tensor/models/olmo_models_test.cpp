// olmo (OLMo v1) against hand formulas written here from transformers 5's modeling_olmo.py. h
// hidden, V vocabulary, F MLP width, H heads and kv key-value heads of d (q = H d, k = kv d):
//   self_attn  q_proj [q, h], k_proj and v_proj [k, h], o_proj [h, q]; biases [q], [k], [k], [h]
//              with attention_bias
//   mlp        gate_proj, up_proj [F, h], down_proj [h, F] (never a bias)
//   norms      input_layernorm, post_attention_layernorm and model.norm: OlmoLayerNorm, no
//              parameters (eps 1e-5, float32)
//   model      embed_tokens [V, h], lm_head [V, h] unless tied
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
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
  return {{"model_type", "olmo"},         {"vocab_size", 128},        {"hidden_size", 64},
          {"intermediate_size", 96},      {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2},     {"attention_bias", true},   {"clip_qkv", 8.0},
          {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
}

TEST(OlmoModels, TinyConfigByHand) {
  // d = 64 / 4 = 16, q = 64, k = 2 x 16 = 32.
  // Attention weights: q 64 x 64 = 4,096, k 32 x 64 = 2,048, v 2,048, o 64 x 64 = 4,096 = 12,288;
  // biases (attention_bias) 64 + 32 + 32 + 64 = 192: 12,480.
  // MLP 3 x 64 x 96 = 18,432. Norms 0. A layer: 30,912; two: 61,824.
  // Embedding 128 x 64 = 8,192, lm_head 8,192 (untied): 78,208.
  const int64_t attention = 4096 + 2048 + 2048 + 4096 + 64 + 32 + 32 + 64;
  EXPECT_EQ(attention, 12'480);
  const int64_t layer = attention + 3 * 64 * 96;
  EXPECT_EQ(layer, 30'912);
  const int64_t total = 2 * layer + 128 * 64 + 128 * 64;
  EXPECT_EQ(total, 78'208);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);  // RoPE over the whole head
  EXPECT_EQ(c.pad_token_id, 1);                    // OlmoConfig's default
  ASSERT_TRUE(c.clip_qkv.has_value());
  EXPECT_DOUBLE_EQ(*c.clip_qkv, 8.0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "OlmoForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                   "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                   "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.gate_proj.weight",
                   "mlp.up_proj.weight", "mlp.down_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.down_proj.weight").sizes(), DimVector({64, 96}));
  // The norms are modules without parameters, named as transformers names them.
  EXPECT_EQ(names_under(*m, "model.norm."), Names{});
  EXPECT_EQ(m->get_submodule("model.norm").type_name(), "OlmoLayerNorm");
  EXPECT_EQ(m->get_submodule("model.layers.0.input_layernorm").type_name(), "OlmoLayerNorm");
  EXPECT_EQ(m->get_submodule("model.layers.0.post_attention_layernorm").type_name(),
            "OlmoLayerNorm");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "OlmoAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "OlmoMLP");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "OlmoRotaryEmbedding");
  // The embedding's pad_token_id row starts at zero (nn.Embedding's padding_idx = 1).
  std::map<std::string, ParameterInit> inits;
  for (const NamedInit& i : parameter_inits(*m, c)) inits[i.name] = i.init;
  EXPECT_EQ(inits.at("model.embed_tokens.weight").zero_row, 1);
  EXPECT_EQ(inits.at("model.layers.0.self_attn.o_proj.bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));

  // Round trip, with and without the class's defaults.
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  j["attention_bias"] = false;
  j["clip_qkv"] = nullptr;
  j["pad_token_id"] = nullptr;
  const ModelConfig plain = parse_model_config(j, "plain.json");
  EXPECT_FALSE(plain.clip_qkv.has_value());
  EXPECT_FALSE(plain.pad_token_id.has_value());
  // Tied and bias-free: 78,208 - 8,192 (lm_head) - 2 x 192 (biases) = 69,632.
  EXPECT_EQ(build_model(plain)->parameters_numel(), 78'208 - 8'192 - 2 * 192);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
}

TEST(OlmoModels, NormsRunInFloat32AndClipClampsQKV) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // OlmoLayerNorm: x.float(), layer_norm without weight or bias, .to(bfloat16).
  for (const char* norm : {"model.layers.0.input_layernorm",
                           "model.layers.0.post_attention_layernorm", "model.norm"}) {
    SCOPED_TRACE(norm);
    EXPECT_EQ(ops_in(g, "layer_norm", norm), 1);
    EXPECT_EQ(ops_in(g, "to", norm), 2);
  }
  // clip_qkv: each of the q, k and v projections clamped (transformers' clamp_, traced as a
  // maximum with -clip and a minimum with clip).
  EXPECT_EQ(ops_in(g, "maximum", "model.layers.0.self_attn"), 3);
  EXPECT_EQ(ops_in(g, "minimum", "model.layers.0.self_attn"), 3);
  nlohmann::json j = tiny();
  j["clip_qkv"] = nullptr;
  const OpGraph plain = trace_model_forward(*build_model(parse_model_config(j, "plain")), 2, 8);
  EXPECT_EQ(ops_in(plain, "maximum", "model.layers.0.self_attn"), 0);
  // A float32 model casts nothing around its norms.
  j["torch_dtype"] = "float32";
  const OpGraph f32 = trace_model_forward(*build_model(parse_model_config(j, "f32")), 2, 8);
  EXPECT_EQ(ops_in(f32, "to", "model.layers.0.input_layernorm"), 0);
  EXPECT_EQ(ops_in(f32, "layer_norm", "model.layers.0.input_layernorm"), 1);
}

TEST(OlmoModels, HeadDimFromTheFileAndWhatIsRefused) {
  // OlmoAttention takes a file's head_dim (getattr(config, "head_dim", h // H)): q 4 x 32 = 128.
  nlohmann::json j = tiny();
  j["head_dim"] = 32;
  const ModulePtr m = build_model(parse_model_config(j, "wide heads"));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            DimVector({128, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.o_proj.weight").sizes(),
            DimVector({64, 128}));
  j = tiny();
  j["clip_qkv"] = -1.0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("clip_qkv")));
  j = tiny();
  j["pad_token_id"] = 128;  // nn.Embedding's padding_idx must be a row
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("pad_token_id")));
}

TEST(OlmoModels, Olmo1BAnd7BMatchTheHandTotals) {
  // OLMo-1B-hf: V 50,304 tied, h 2,048, 16 layers of 16 heads (MHA), F 8,192.
  const int64_t layer_1b = 4 * 2048 * 2048 + 3 * 2048 * 8192;
  EXPECT_EQ(layer_1b, 67'108'864);
  const int64_t total_1b = 16 * layer_1b + 50304 * 2048;
  EXPECT_EQ(total_1b, 1'176'764'416);  // "1B" (1.18B)
  const nlohmann::json one_b = {{"model_type", "olmo"},      {"vocab_size", 50304},
                                {"hidden_size", 2048},       {"intermediate_size", 8192},
                                {"num_hidden_layers", 16},   {"num_attention_heads", 16},
                                {"num_key_value_heads", 16}, {"max_position_embeddings", 2048},
                                {"attention_bias", false},   {"clip_qkv", nullptr},
                                {"rope_theta", 10000.0},     {"tie_word_embeddings", true}};
  EXPECT_EQ(build_model(parse_model_config(one_b, "OLMo-1B-hf"))->parameters_numel(), total_1b);
  // OLMo-7B-hf: V 50,304 untied, h 4,096, 32 layers of 32 heads (MHA), F 11,008.
  const int64_t layer_7b = 4 * 4096 * 4096 + 3 * 4096 * 11008;
  const int64_t total_7b = 32 * layer_7b + 2 * 50304 * 4096;
  EXPECT_EQ(total_7b, 6'888'095'744);  // "7B" (6.89B)
  const ModelConfig c = find_model_config("olmo-7b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "OlmoForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total_7b);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

}  // namespace
}  // namespace shardplan::tensor
