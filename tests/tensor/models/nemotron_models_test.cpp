// nemotron (NVIDIA Nemotron-4, Minitron) against hand formulas written here from transformers 5's
// configuration_nemotron.py and modeling_nemotron.py. h hidden, V vocabulary, F MLP width,
// q = heads x head_dim, kv = kv heads x head_dim; no biases unless attention_bias / mlp_bias:
//   self_attn  q_proj [q, h], k_proj, v_proj [kv, h], o_proj [h, q]
//   mlp        up_proj [F, h], down_proj [h, F] (no gate; relu2)
//   norms      input_layernorm, post_attention_layernorm and model.norm: NemotronLayerNorm1P,
//              weight [h] and bias [h], scaling by weight + 1
// and RoPE over int(head_dim x partial_rotary_factor) channels (0.5 by default).
// (Would sit in tests/tensor/models/nemotron_models_test.cpp.)
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

// A tiny config exercising every Nemotron part.
nlohmann::json tiny() {
  return {{"model_type", "nemotron"}, {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 256}, {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(NemotronModels, TinyConfigMatchesTheHandTotal) {
  // h 64, 4 heads of 16 (q 64), 2 kv heads (kv 32), F 256, V 1,000 untied, 2 layers, no biases:
  //   q_proj 64*64 = 4,096; k_proj 64*32 = 2,048; v_proj 2,048; o_proj 4,096 -> 12,288
  //   up_proj 64*256 = 16,384; down_proj 256*64 = 16,384                    -> 32,768
  //   two 1P LayerNorms 2 * (64 + 64)                                        ->    256
  //   layer 45,312; 2 layers 90,624; embed 64,000; model.norm 128; lm_head 64,000
  const int64_t layer = 12288 + 32768 + 256;
  EXPECT_EQ(layer, 45312);
  const int64_t total = 64000 + 2 * layer + 128 + 64000;
  EXPECT_EQ(total, 218752);
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.initializer_range, 0.0134);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.mlp_bias);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "NemotronForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "model.layers.0."), (Shapes{{"self_attn.q_proj.weight", {64, 64}},
                                                         {"self_attn.k_proj.weight", {32, 64}},
                                                         {"self_attn.v_proj.weight", {32, 64}},
                                                         {"self_attn.o_proj.weight", {64, 64}},
                                                         {"mlp.up_proj.weight", {256, 64}},
                                                         {"mlp.down_proj.weight", {64, 256}},
                                                         {"input_layernorm.weight", {64}},
                                                         {"input_layernorm.bias", {64}},
                                                         {"post_attention_layernorm.weight", {64}},
                                                         {"post_attention_layernorm.bias", {64}}}));
  EXPECT_EQ(names_under(*m, "model.norm."), (Names{"weight", "bias"}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{4}));  // 8 rotated
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Both bias flags on: + 2 x (64 + 32 + 32 + 64 + 256 + 64) = + 1,024, Jais 2's tiny total.
  nlohmann::json biased = tiny();
  biased["attention_bias"] = true;
  biased["mlp_bias"] = true;
  const ModelConfig b = parse_model_config(biased, "biased");
  const ModulePtr bm = build_model(b);
  EXPECT_EQ(bm->parameters_numel(), 219776);
  EXPECT_EQ(names_under(*bm, "model.layers.0.self_attn."),
            (Names{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                   "v_proj.bias", "o_proj.weight", "o_proj.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(b), "round trip"), b);
}

TEST(NemotronModels, MinitronFourBMatchesTheHandTotal) {
  // Minitron-4B-Base as a TensorRT-LLM unit test quotes its config: V 256,000 untied, h 3,072,
  // 32 layers of 24 heads of 128 (8 kv heads), F 9,216, kv_channels 128, half of each head rotated.
  const int64_t V = 256000, h = 3072, q = 24 * 128, kv = 8 * 128, F = 9216;
  const int64_t layer = 2 * h * q + 2 * h * kv + 2 * h * F + 4 * h;
  const int64_t total = 2 * V * h + 32 * layer + 2 * h;
  EXPECT_EQ(total, 4'190'509'056);
  const nlohmann::json j = {{"model_type", "nemotron"},
                            {"vocab_size", V},
                            {"hidden_size", h},
                            {"intermediate_size", F},
                            {"num_hidden_layers", 32},
                            {"num_attention_heads", 24},
                            {"num_key_value_heads", 8},
                            {"kv_channels", 128},
                            {"norm_eps", 1e-5},
                            {"rope_theta", 10000},
                            {"partial_rotary_factor", 0.5},
                            {"hidden_act", "relu2"},
                            {"initializer_range", 0.0134},
                            {"tie_word_embeddings", false},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "minitron-4b");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(NemotronModels, KeyValueHeadsAreRequiredAndKvChannelsIsNotHeadDim) {
  nlohmann::json j = tiny();
  j.erase("num_key_value_heads");  // NemotronConfig leaves it None: no model
  EXPECT_THAT([&] { parse_model_config(j, "nemotron.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads'")));
  j["num_key_value_heads"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "nemotron.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads'")));
  j["num_key_value_heads"] = 2;
  j["kv_channels"] = 16;  // = 64 / 4: what transformers builds anyway
  EXPECT_EQ(parse_model_config(j, "nemotron.json").head_dim, 16);
  j["kv_channels"] = 32;  // not read by transformers: refused without a head_dim of 32
  EXPECT_THAT([&] { parse_model_config(j, "nemotron.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'kv_channels'")));
  j["head_dim"] = 32;  // heads of 32: q 128 wide, read from head_dim
  const ModelConfig wide = parse_model_config(j, "nemotron.json");
  EXPECT_EQ(wide.head_dim, 32);
  EXPECT_EQ(build_model(wide)->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            DimVector({128, 64}));
}

TEST(NemotronModels, RotaryFactorFromTheFileOrItsRopeParameters) {
  nlohmann::json j = tiny();
  j["partial_rotary_factor"] = 1.0;  // the top-level key over the class's 0.5
  EXPECT_EQ(parse_model_config(j, "n.json").partial_rotary_factor, 1.0);
  // rope_parameters' own factor wins over the top-level key (convert_rope_params_to_dict's
  // setdefault).
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  const ModelConfig c = parse_model_config(j, "n.json");
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(build_model(c)->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{2}));
}

TEST(NemotronModels, OnePlusNormsAndSquaredReluAreTraced) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  EXPECT_EQ(m->get_parameter("model.layers.0.input_layernorm.weight").sizes(), DimVector({64}));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  // weight + 1, then the layer norm, in the norm module itself.
  EXPECT_EQ(ops_in(g, "add", "model.layers.0.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.norm"), 1);
  EXPECT_EQ(ops_in(g, "relu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.0.mlp"), 1);
}

TEST(NemotronModels, InitStartsTheOnePlusNormsAtOne) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  std::map<std::string, std::string> type;
  for (const NamedInit& p : parameter_inits(*m, c)) {
    init[p.name] = p.init;
    type[p.name] = p.module_type;
  }
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(type.at("model.norm.weight"), "NemotronLayerNorm1P");
  EXPECT_EQ(init.at("model.norm.weight"), one);  // not 0: transformers' ones_ (scale 2 at start)
  EXPECT_EQ(init.at("model.layers.0.input_layernorm.bias"), zero);
  // NemotronConfig's initializer_range 0.0134.
  EXPECT_EQ(init.at("model.layers.1.mlp.down_proj.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.0134}));
  EXPECT_EQ(init.at("lm_head.weight"), (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.0134}));
}

}  // namespace
}  // namespace shardplan::tensor
