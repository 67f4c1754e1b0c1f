// cwm (modular_cwm.py): Llama's layer without any attention bias, head_dim 128 by default, a window
// on three layers of four (the first of each four attends in full), llama3 RoPE at base 1e6 by
// default. Hand formulas written here from CwmForCausalLM's modules. h hidden, V vocabulary, F MLP
// width, H heads, K kv heads, d head_dim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

nlohmann::json tiny_cwm() {
  return {{"model_type", "cwm"},      {"vocab_size", 1000},     {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 16},         {"sliding_window", 32},
          {"torch_dtype", "bfloat16"}};
}

TEST(CwmModels, ThirtyTwoBIsItsConfigClasssDefaults) {
  // CwmConfig's defaults (facebook/cwm, "a 32-billion-parameter ... dense" model): V 128,256
  // untied, h 6,144, 64 layers of 48 heads of 128 (8 kv heads), F 21,504, no biases.
  const int64_t V = 128256, h = 6144, q = 48 * 128, kv = 8 * 128, F = 21504;
  const int64_t layer = 2 * h * q + 2 * h * kv + 3 * h * F + 2 * h;
  EXPECT_EQ(layer, 484'454'400);
  const int64_t total = 2 * V * h + 64 * layer + h;
  EXPECT_EQ(total, 32'581'097'472);  // "32B"
  const nlohmann::json j = {{"model_type", "cwm"},      {"vocab_size", 128256},
                            {"hidden_size", 6144},      {"intermediate_size", 21504},
                            {"num_hidden_layers", 64},  {"num_attention_heads", 48},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "cwm defaults");
  EXPECT_EQ(c.num_key_value_heads, 8);  // CwmConfig's, not the head count
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.sliding_window, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 16);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // 16 full layers (0, 4, ..., 60) and 48 sliding ones.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "dense");
  EXPECT_EQ(describe(s.kinds[1]), "sliding 8192 dense");
  EXPECT_EQ(s.count(0), 16);
  EXPECT_EQ(s.count(1), 48);
  EXPECT_EQ(s.first_layer(1), 1);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(CwmModels, TinyMatchesTheHandTotalAndLlamasNames) {
  // V 1000, h 64, F 128, 4 layers of 4 heads of 16 (2 kv heads), untied:
  //   embed 1000 x 64 = 64,000; lm_head 64,000
  //   per layer: q 64 x 64 = 4,096; k 64 x 32 = 2,048; v 2,048; o 4,096 (12,288)
  //              MLP 3 x 64 x 128 = 24,576; two norms 128            -> 36,992
  //   4 layers 147,968; final norm 64                                -> 276,032
  const ModelConfig c = parse_model_config(tiny_cwm(), "tiny cwm");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "CwmForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 276'032);
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kFull, AttentionType::kSliding,
                                        AttentionType::kSliding, AttentionType::kSliding}));
  EXPECT_EQ(describe(layer_kind(c, 0)), "dense");
  EXPECT_EQ(describe(layer_kind(c, 1)), "sliding 32 dense");
  // Full and sliding layers have the same parameters: Llama's, no biases anywhere.
  for (const char* layer : {"model.layers.0.", "model.layers.1."}) {
    SCOPED_TRACE(layer);
    EXPECT_EQ(
        names_under(*m, layer),
        (std::vector<std::string>{
            "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
            "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
            "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  }
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.q_proj.weight").sizes(),
            DimVector({64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.down_proj.weight").sizes(), DimVector({64, 128}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").sizes(), DimVector({1000, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Every parameter starts as PreTrainedModel._init_weights fills it.
  for (const NamedInit& p : parameter_inits(*m, c)) {
    SCOPED_TRACE(p.name);
    if (p.name.ends_with("norm.weight")) {
      EXPECT_EQ(p.init, (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
    } else {
      EXPECT_EQ(p.init.kind, ParameterInit::Kind::kNormal);
      EXPECT_DOUBLE_EQ(p.init.b, 0.02);
    }
  }
}

TEST(CwmModels, MlpBiasAndHeadDimDefault) {
  nlohmann::json j = tiny_cwm();
  j["mlp_bias"] = true;
  j.erase("head_dim");  // CwmConfig's 128, whatever hidden / heads is
  const ModelConfig c = parse_model_config(j, "mlp_bias");
  EXPECT_EQ(c.head_dim, 128);
  const ModulePtr m = build_model(c);
  // Attention at head_dim 128: q, o 64 x 512 each, k, v 64 x 256 each = 98,304.
  // MLP 24,576 + biases 128 + 128 + 64 = 24,896; norms 128        -> 123,328 a layer
  // 4 x 123,328 + 128,000 + 64 = 621,376.
  EXPECT_EQ(m->parameters_numel(), 621'376);
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp."),
            (std::vector<std::string>{"gate_proj.weight", "gate_proj.bias", "up_proj.weight",
                                      "up_proj.bias", "down_proj.weight", "down_proj.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attention_bias is no CwmConfig field: nothing reads it.
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "attention_bias"))->parameters_numel(), 621'376);
}

TEST(CwmModels, RopeAsConvertRopeParamsToDictReadsIt) {
  nlohmann::json j = tiny_cwm();
  // A top-level rope_theta does not replace the class's llama3 base (setdefault).
  j["rope_theta"] = 5e5;
  const ModelConfig legacy = parse_model_config(j, "theta only");
  ASSERT_TRUE(legacy.rope_scaling.has_value());
  EXPECT_EQ(legacy.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(legacy.rope_theta, 1e6);
  EXPECT_EQ(parse_model_config(to_hf_json(legacy), "round trip"), legacy);
  // A rope_scaling of its own takes the top-level base.
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const ModelConfig linear = parse_model_config(j, "linear");
  ASSERT_TRUE(linear.rope_scaling.has_value());
  EXPECT_EQ(linear.rope_scaling->rope_type, "linear");
  EXPECT_DOUBLE_EQ(linear.rope_theta, 5e5);
  // rope_parameters of type default: no scaling, and it survives the round trip.
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};
  const ModelConfig plain = parse_model_config(j, "plain");
  EXPECT_FALSE(plain.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(plain.rope_theta, 1e4);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
}

TEST(CwmModels, LayerTypesAndWindowAsCwmConfigChecksThem) {
  nlohmann::json j = tiny_cwm();
  j["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  const ModelConfig listed = parse_model_config(j, "listed");
  EXPECT_EQ(listed.layer_types[0], AttentionType::kSliding);
  EXPECT_EQ(listed.layer_types[1], AttentionType::kFull);
  EXPECT_EQ(parse_model_config(to_hf_json(listed), "round trip"), listed);
  j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
  EXPECT_THAT([&] { parse_model_config(j, "chunked"); },
              ThrowsMessage<Error>(HasSubstr("chunked_attention, which CwmModel does not mask")));
  j.erase("layer_types");
  j["sliding_window"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null window"); },
              ThrowsMessage<Error>(HasSubstr("field 'sliding_window': is null; CwmConfig's")));
  j["sliding_window"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "zero window"); },
              ThrowsMessage<Error>(HasSubstr("field 'sliding_window': 0, expected > 0")));
  j = tiny_cwm();
  j["head_dim"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null head_dim"); },
              ThrowsMessage<Error>(HasSubstr("field 'head_dim': is null")));
  j = tiny_cwm();
  j["num_key_value_heads"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null kv"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads': is null")));
  // LlamaConfig.validate_architecture: hidden_size a multiple of the heads, head_dim or not.
  j = tiny_cwm();
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 2;
  EXPECT_THAT([&] { parse_model_config(j, "heads"); },
              ThrowsMessage<Error>(HasSubstr("64 is not a multiple of the 6 attention heads")));
}

}  // namespace
}  // namespace shardplan::tensor
