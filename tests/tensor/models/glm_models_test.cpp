// glm (modular_glm.py): glm4's attention (q, k, v biases, none on o; half of each head rotated)
// and fused gate_up_proj, on Llama's pre-norm layer (two norms, where glm4 has four). Hand
// formulas written here from GlmForCausalLM's modules. h hidden, V vocabulary, F MLP width, H
// heads, K kv heads, d head_dim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

nlohmann::json tiny_glm() {
  return {{"model_type", "glm"},      {"vocab_size", 1000},     {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 16},         {"pad_token_id", 0},
          {"torch_dtype", "bfloat16"}};
}

TEST(GlmModels, NineBIsItsConfigClasssDefaults) {
  // GlmConfig's defaults ("glm-4-9b-chat style"): V 151,552 untied, h 4,096, 40 layers of 32
  // heads of 128 (2 kv heads), F 13,696; q, k, v biases; gate_up_proj [2F, h]; two norms a layer.
  const int64_t V = 151552, h = 4096, q = 32 * 128, kv = 2 * 128, F = 13696;
  const int64_t attention = h * q + q + 2 * (h * kv + kv) + q * h;
  const int64_t layer = attention + 2 * F * h + F * h + 2 * h;
  EXPECT_EQ(layer, 203'960'832);
  const int64_t total = 2 * V * h + 40 * layer + h;
  EXPECT_EQ(total, 9'399'951'360);  // glm4's 9,400,279,040 less its 40 x 2 post norms of 4,096
  const nlohmann::json j = {{"model_type", "glm"},      {"vocab_size", 151552},
                            {"hidden_size", 4096},      {"intermediate_size", 13696},
                            {"num_hidden_layers", 40},  {"num_attention_heads", 32},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "glm defaults");
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1.5625e-7);
  EXPECT_EQ(c.pad_token_id, 151329);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GlmModels, TinyMatchesTheHandTotalWithTwoNormsALayer) {
  // V 1000, h 64, F 96, 2 layers of 4 heads of 16 (2 kv heads), untied, attention_bias true:
  //   embed 64,000; lm_head 64,000
  //   per layer: q 4,096 + 64; k 2,048 + 32; v 2,048 + 32; o 4,096          (12,416)
  //              gate_up 2 x 96 x 64 = 12,288; down 96 x 64 = 6,144; norms 128 -> 30,976
  //   2 layers 61,952; final norm 64                                           -> 190,016
  const ModelConfig c = parse_model_config(tiny_glm(), "tiny glm");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "GlmForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 190'016);
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                "self_attn.o_proj.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.gate_up_proj.weight").sizes(),
            DimVector({192, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.k_proj.bias").sizes(), DimVector({32}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Two RMSNorms of [B, S, h] per layer in the trace (glm4 has four); the MLP's GEMMs
  // 2 T h 2F + 2 T F h.
  const OpGraph g = trace_model_forward(*m, 1, 8);
  EXPECT_EQ(ops_under(g, "rms_norm", "model.layers.1"), 2);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.1.mlp").matmul_flops,
                   2.0 * 8 * 64 * 192 + 2.0 * 8 * 96 * 64);
  // The same file read as glm4 has the two post norms more: 2 x 2 x 64 = 256 parameters.
  nlohmann::json j4 = tiny_glm();
  j4["model_type"] = "glm4";
  EXPECT_EQ(build_model(parse_model_config(j4, "glm4"))->parameters_numel(), 190'016 + 256);
  // PreTrainedModel._init_weights: norms one, the rest normal(0, 0.02), biases zero, and the
  // embedding's padding row (pad_token_id 0) zero.
  for (const NamedInit& p : parameter_inits(*m, c)) {
    SCOPED_TRACE(p.name);
    if (p.name.ends_with("norm.weight")) {
      EXPECT_EQ(p.init, (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
    } else if (p.name.ends_with(".bias")) {
      EXPECT_EQ(p.init, (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
    } else {
      EXPECT_EQ(p.init.kind, ParameterInit::Kind::kNormal);
    }
    if (p.name == "model.embed_tokens.weight") {
      EXPECT_EQ(p.init.zero_row, 0);
    }
  }
}

TEST(GlmModels, ConfigFieldsAsGlmConfigReadsThem) {
  nlohmann::json j = tiny_glm();
  j["attention_bias"] = false;
  // No biases: 190,016 - 2 x (64 + 32 + 32) = 189,760.
  const ModelConfig plain = parse_model_config(j, "no bias");
  EXPECT_EQ(build_model(plain)->parameters_numel(), 189'760);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
  // partial_rotary_factor: the file's top-level value, one in rope_parameters over it, and a
  // null one rotating every channel (no factor reaches rope_parameters).
  j = tiny_glm();
  j["partial_rotary_factor"] = 0.25;
  EXPECT_DOUBLE_EQ(parse_model_config(j, "quarter").partial_rotary_factor, 0.25);
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}};
  EXPECT_DOUBLE_EQ(parse_model_config(j, "rope_parameters").partial_rotary_factor, 0.5);
  j.erase("rope_parameters");
  j["partial_rotary_factor"] = nullptr;
  const ModelConfig full = parse_model_config(j, "null factor");
  EXPECT_DOUBLE_EQ(full.partial_rotary_factor, 1.0);
  EXPECT_EQ(parse_model_config(to_hf_json(full), "round trip"), full);
  // head_dim is GlmConfig's 128 when absent, whatever hidden / heads is; null is refused.
  j = tiny_glm();
  j.erase("head_dim");
  EXPECT_EQ(parse_model_config(j, "absent").head_dim, 128);
  j["head_dim"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null head_dim"); },
              ThrowsMessage<Error>(HasSubstr("field 'head_dim': is null; GlmConfig keeps None")));
  j = tiny_glm();
  j.erase("num_key_value_heads");
  EXPECT_EQ(parse_model_config(j, "absent kv").num_key_value_heads, 2);
  j["num_key_value_heads"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null kv"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads': is null")));
  // pad_token_id: GlmConfig's 151329 does not fit a vocabulary of 1000; null is none.
  j = tiny_glm();
  j.erase("pad_token_id");
  EXPECT_THAT([&] { parse_model_config(j, "pad"); },
              ThrowsMessage<Error>(HasSubstr("got 151329 (the config class's default)")));
  j["pad_token_id"] = nullptr;
  const ModelConfig none = parse_model_config(j, "no pad");
  EXPECT_FALSE(none.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
}

}  // namespace
}  // namespace shardplan::tensor
