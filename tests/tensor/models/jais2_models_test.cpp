// jais2 (Jais 2) against hand formulas written here from transformers 5's modular_jais2.py and
// configuration_jais2.py. h hidden, V vocabulary, F MLP width, q = heads x head_dim, kv = kv heads
// x head_dim; attention_bias and mlp_bias are TRUE by default:
//   self_attn  q_proj [q, h] + [q], k_proj, v_proj [kv, h] + [kv], o_proj [h, q] + [h]
//   mlp        up_proj [F, h] + [F], down_proj [h, F] + [h] (no gate; relu2)
//   norms      input_layernorm, post_attention_layernorm and model.norm: nn.LayerNorm [h] + [h]
// (Would sit in tests/tensor/models/jais2_models_test.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::Shapes;
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// A tiny config: biases by the class's
// defaults (on), untied.
nlohmann::json tiny() {
  return {{"model_type", "jais2"},    {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 256}, {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(Jais2Models, TinyConfigMatchesTheHandTotal) {
  // h 64, 4 heads of 16 (q 64), 2 kv heads (kv 32), F 256, V 1,000 untied, 2 layers:
  //   q_proj 64*64 + 64 = 4,160; k_proj 64*32 + 32 = 2,080; v_proj 2,080; o_proj 4,160 -> 12,480
  //   up_proj 64*256 + 256 = 16,640; down_proj 256*64 + 64 = 16,448              -> 33,088
  //   two LayerNorms 2 * (64 + 64)                                                ->    256
  //   layer 45,824; 2 layers 91,648; embed 64,000; model.norm 128; lm_head 64,000
  const int64_t layer = 12480 + 33088 + 256;
  EXPECT_EQ(layer, 45824);
  const int64_t total = 64000 + 2 * layer + 128 + 64000;
  EXPECT_EQ(total, 219776);
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Jais2ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "model.layers.0."), (Shapes{{"self_attn.q_proj.weight", {64, 64}},
                                                         {"self_attn.q_proj.bias", {64}},
                                                         {"self_attn.k_proj.weight", {32, 64}},
                                                         {"self_attn.k_proj.bias", {32}},
                                                         {"self_attn.v_proj.weight", {32, 64}},
                                                         {"self_attn.v_proj.bias", {32}},
                                                         {"self_attn.o_proj.weight", {64, 64}},
                                                         {"self_attn.o_proj.bias", {64}},
                                                         {"mlp.up_proj.weight", {256, 64}},
                                                         {"mlp.up_proj.bias", {256}},
                                                         {"mlp.down_proj.weight", {64, 256}},
                                                         {"mlp.down_proj.bias", {64}},
                                                         {"input_layernorm.weight", {64}},
                                                         {"input_layernorm.bias", {64}},
                                                         {"post_attention_layernorm.weight", {64}},
                                                         {"post_attention_layernorm.bias", {64}}}));
  EXPECT_EQ(names_under(*m, "model.norm."), (Names{"weight", "bias"}));
  EXPECT_EQ(names_under(*m, "lm_head."), (Names{"weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Without biases: 2 x (64 + 32 + 32 + 64 + 256 + 64) = 1,024 fewer.
  nlohmann::json plain = tiny();
  plain["attention_bias"] = false;
  plain["mlp_bias"] = false;
  const ModelConfig p = parse_model_config(plain, "plain");
  EXPECT_EQ(build_model(p)->parameters_numel(), total - 1024);
  EXPECT_EQ(parse_model_config(to_hf_json(p), "round trip"), p);
  // Tied: lm_head is the embedding, counted once.
  nlohmann::json tied = tiny();
  tied["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(tied, "tied"))->parameters_numel(), total - 64000);
}

TEST(Jais2Models, ClassDefaultsMatchTheHandTotal) {
  // Jais2Config's defaults (the docstring's inceptionai/Jais-2-8B-Chat): V 150,272 untied,
  // h 3,328, 32 layers of 26 heads of 128 (kv heads = heads), F 26,624, every bias on.
  const int64_t V = 150272, h = 3328, q = 26 * 128, F = 26624;
  const int64_t attention = 4 * h * q + 3 * q + h;
  const int64_t layer = attention + (2 * h * F + F + h) + 4 * h;
  const int64_t total = 2 * V * h + 32 * layer + 2 * h;
  EXPECT_EQ(total, 8'090'401'280);  // "8B"
  const nlohmann::json j = {{"model_type", "jais2"},    {"vocab_size", V},
                            {"hidden_size", h},         {"intermediate_size", F},
                            {"num_hidden_layers", 32},  {"num_attention_heads", 26},
                            {"torch_dtype", "bfloat16"}};  // no num_key_value_heads: the heads
  const ModelConfig c = parse_model_config(j, "jais-2-8b");
  EXPECT_EQ(c.num_key_value_heads, 26);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
}

TEST(Jais2Models, HeadsMustDivideHiddenSizeEvenWithHeadDim) {
  // Jais2Config.validate_architecture raises on hidden_size % heads != 0 whatever head_dim says.
  nlohmann::json j = tiny();
  j["num_attention_heads"] = 3;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 16;
  EXPECT_THAT([&] { parse_model_config(j, "jais2.json"); },
              ThrowsMessage<Error>(HasSubstr("is not a multiple of the 3 attention heads")));
  // A head_dim of its own is used as is when the heads divide hidden_size.
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = 4;
  j["head_dim"] = 32;
  const ModelConfig wide = parse_model_config(j, "jais2.json");
  EXPECT_EQ(build_model(wide)->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            DimVector({128, 64}));
}

TEST(Jais2Models, LayerNormsAndSquaredReluAreTraced) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.norm"), 1);
  EXPECT_EQ(ops_in(g, "relu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.mlp"), 0);  // no gate
}

TEST(Jais2Models, InitIsPreTrainedModelsGeneric) {
  nlohmann::json j = tiny();
  j["pad_token_id"] = 0;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("model.layers.0.self_attn.o_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.o_proj.bias"), zero);
  EXPECT_EQ(init.at("model.layers.0.mlp.down_proj.bias"), zero);
  EXPECT_EQ(init.at("model.layers.1.post_attention_layernorm.weight"), one);
  EXPECT_EQ(init.at("model.norm.bias"), zero);
  EXPECT_EQ(init.at("model.embed_tokens.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02, 0}));  // pad row 0 zero
}

}  // namespace
}  // namespace shardplan::tensor
