// helium (Kyutai's Helium 1), vaultgemma (Google's VaultGemma) and ministral (Ministral 8B)
// against hand formulas written here from transformers 5's modular_helium.py,
// modular_vaultgemma.py and modular_ministral.py. h hidden, V vocabulary, H heads and K key-value
// heads of d, the MLP I wide:
//   helium      Llama's layer; q, k, v biased by attention_bias, o_proj [h, h] never; untied
//   vaultgemma  Gemma 2's layer without post_attention_layernorm and post_feedforward_layernorm:
//               input_layernorm and pre_feedforward_layernorm ((1 + w) RMSNorms); tied
//   ministral   Mistral's layer without biases, the window on the layers layer_types names
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
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
using Names = std::vector<std::string>;

TEST(HeliumModels, Helium1MatchesTheHandTotal) {
  // HeliumConfig's defaults (kyutai/helium-1-preview): V 48,000 untied, h 2,560, 24 layers of 20
  // heads of 128 (MHA), MLP 7,040.
  const int64_t V = 48000, h = 2560, layer = 4 * h * h + 3 * h * 7040 + 2 * h;
  const int64_t total = 2 * V * h + 24 * layer + h;
  EXPECT_EQ(total, 2'172'643'840);
  const ModelConfig c = find_model_config("helium-1-2b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "HeliumForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(c.rope_theta, 1e5);
  EXPECT_EQ(c.norm_eps, 1e-8);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attention_bias: q, k and v, never o_proj.
  nlohmann::json j = to_hf_json(first_layers(c, 1));
  j["attention_bias"] = true;
  const ModulePtr b = build_model(parse_model_config(j, "helium.json"));
  EXPECT_EQ(names_under(*b, "model.layers.0.self_attn."),
            (Names{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                   "v_proj.bias", "o_proj.weight"}));
  j.erase("num_key_value_heads");  // HeliumConfig's 20, not the head count
  j["num_attention_heads"] = 40;
  j["head_dim"] = 64;
  EXPECT_EQ(parse_model_config(j, "helium.json").num_key_value_heads, 20);
  j["num_attention_heads"] = 20;
  j["head_dim"] = int64_t{1} << 62;  // the product overflows int64: refused, not wrapped
  EXPECT_THAT([&] { parse_model_config(j, "helium.json"); },
              ThrowsMessage<Error>(HasSubstr("o_proj reads hidden_size")));
  j["head_dim"] = 64;  // 20 x 64 != 2,560: o_proj [h, h] would not fit
  EXPECT_THAT([&] { parse_model_config(j, "helium.json"); },
              ThrowsMessage<Error>(HasSubstr("o_proj reads hidden_size")));
}

TEST(VaultGemmaModels, GemmaTwoWithoutThePostNorms) {
  // VaultGemmaConfig's defaults (Gemma 2 2B's sizes): V 256,000 tied, h 2,304, 26 layers of 8
  // heads and 4 kv heads of 256, MLP 9,216, two norms a layer: Gemma 2 2B's 2,614,341,888 less
  // 26 x 2 x 2,304.
  const int64_t h = 2304, attention = 2 * h * 8 * 256 + 2 * h * 4 * 256;
  const int64_t total = 256000 * h + 26 * (attention + 3 * h * 9216 + 2 * h) + h;
  EXPECT_EQ(total, 2'614'341'888 - 26 * 2 * 2304);
  const ModelConfig c = find_model_config("vaultgemma");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "VaultGemmaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                   "mlp.down_proj.weight", "input_layernorm.weight",
                   "pre_feedforward_layernorm.weight"}));
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  nlohmann::json no_kv = to_hf_json(c);
  no_kv.erase("num_key_value_heads");  // Gemma2Config's 4
  EXPECT_EQ(parse_model_config(no_kv, "v.json").num_key_value_heads, 4);
  nlohmann::json zero = to_hf_json(c);
  zero["num_attention_heads"] = 0;  // refused by validate(), not a division by zero
  EXPECT_THAT([&] { parse_model_config(zero, "v.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_attention_heads'")));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  EXPECT_EQ(init.at("model.layers.0.pre_feedforward_layernorm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));  // scales by (1 + w)
}

TEST(MinistralModels, LayerTypesMixSlidingAndFullLayers) {
  // MinistralConfig's defaults (Mistral 7B's sizes): V 32,000 untied, h 4,096, 32 layers of 32
  // heads and 8 kv heads of 128, MLP 14,336; every layer sliding (4,096) without layer_types.
  const int64_t h = 4096, layer = 2 * h * h + 2 * h * 1024 + 3 * h * 14336 + 2 * h;
  const ModelConfig c = find_model_config("ministral");
  EXPECT_EQ(build_model(c)->parameters_numel(), 2 * 32000 * h + 32 * layer + h);
  EXPECT_EQ(build_model(c)->type_name(), "MinistralForCausalLM");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    EXPECT_EQ(layer_kind(c, i).attention, AttentionType::kSliding) << i;
  }
  nlohmann::json j = to_hf_json(first_layers(c, 4));
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  const ModelConfig mixed = parse_model_config(j, "ministral.json");
  EXPECT_EQ(layer_kind(mixed, 1).attention, AttentionType::kFull);
  EXPECT_EQ(layer_kind(mixed, 2).window, 4096);
  EXPECT_EQ(parse_model_config(to_hf_json(mixed), "round trip"), mixed);  // the mix survives
  nlohmann::json no_kv = j;
  no_kv.erase("num_key_value_heads");  // MistralConfig's 8, not the head count
  EXPECT_EQ(parse_model_config(no_kv, "ministral.json").num_key_value_heads, 8);
  no_kv["num_key_value_heads"] = nullptr;  // None: __post_init__ takes the head count
  EXPECT_EQ(parse_model_config(no_kv, "ministral.json").num_key_value_heads, 32);
  j["sliding_window"] = nullptr;  // no window: every layer full
  j.erase("layer_types");
  EXPECT_TRUE(parse_model_config(j, "ministral.json").layer_types.empty());
}

}  // namespace
}  // namespace shardplan::tensor
