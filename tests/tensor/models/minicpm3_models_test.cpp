// minicpm3 (OpenBMB MiniCPM3) against hand formulas written here from transformers 5's
// modular_minicpm3.py: Llama's layer around DeepSeek-V2's latent attention, and three
// multipliers. h hidden, V vocabulary, n heads, q q_lora_rank, c kv_lora_rank, dn/dr/dv the
// nope/rope/value widths (dv = h / n unless given), the MLP I wide:
//   attention  q_a_proj [q, h], q_a_layernorm [q], q_b_proj [n (dn + dr), q],
//              kv_a_proj_with_mqa [c + dr, h], kv_a_layernorm [c], kv_b_proj [n (dn + dv), c],
//              o_proj [h, n dv]
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I] (biases by mlp_bias)
//   layer      input_layernorm, post_attention_layernorm [h]; final norm [h]; lm_head tied by
//              default (counted once)
//   forward    embeddings x scale_emb; each branch x scale_depth / sqrt(L); the final hidden
//              states / (h / dim_model_base) before lm_head
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t latent(int64_t h, int64_t n, int64_t q, int64_t c, int64_t dn, int64_t dr, int64_t dv) {
  return h * q + q + q * n * (dn + dr) + h * (c + dr) + c + c * n * (dn + dv) + n * dv * h;
}

nlohmann::json tiny() {
  return {{"model_type", "minicpm3"}, {"vocab_size", 256},      {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 4}, {"q_lora_rank", 32},      {"kv_lora_rank", 16},
          {"qk_nope_head_dim", 16},   {"qk_rope_head_dim", 8},  {"max_position_embeddings", 256},
          {"scale_emb", 12},          {"scale_depth", 1.4},     {"dim_model_base", 16}};
}

TEST(MiniCPM3Models, TinyConfigMatchesTheHandTotal) {
  // v_head_dim = 64 / 4 = 16. attention: 64 x 32 (2,048) + 32 + 32 x 4 x 24 (3,072)
  //   + 64 x 24 (1,536) + 16 + 16 x 4 x 32 (2,048) + 4 x 16 x 64 (4,096) = 12,848
  // layer: 12,848 + norms 128 + MLP 3 x 64 x 96 (18,432) = 31,408
  // tied embeddings 256 x 64 = 16,384, final norm 64: 16,384 + 2 x 31,408 + 64 = 79,264.
  EXPECT_EQ(latent(64, 4, 32, 16, 16, 8, 16), 12848);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.v_head_dim, 16);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.embedding_multiplier, 12.0);
  EXPECT_EQ(c.residual_multiplier, 1.4 / std::sqrt(2.0));  // 0.98994949...
  EXPECT_EQ(c.logits_scaling, 4.0);                        // 64 / 16
  EXPECT_EQ(c.attention_multiplier, 0.0);                  // latent attention keeps (dn + dr)^-0.5
  EXPECT_EQ(c.initializer_range, 0.1);                     // MiniCPM3Config's
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MiniCPM3ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 79264);
  EXPECT_EQ(
      names_under(*m, "model.layers.1."),
      (Names{"self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight",
             "self_attn.q_b_proj.weight", "self_attn.kv_a_proj_with_mqa.weight",
             "self_attn.kv_a_layernorm.weight", "self_attn.kv_b_proj.weight",
             "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
             "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.kv_b_proj.weight").sizes(),
            (DimVector{128, 16}));  // 4 heads x (16 + 16)
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.o_proj.weight").sizes(),
            (DimVector{64, 64}));
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "MiniCPM3Attention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "MiniCPM3MLP");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // mlp_bias: gate and up [96], down [64], each after its weight; attention_bias: q_a_proj (32),
  // kv_a_proj_with_mqa (24), o_proj (64); untied: lm_head [256, 64].
  nlohmann::json j = tiny();
  j["mlp_bias"] = true;
  const ModulePtr biased = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(biased->parameters_numel(), 79264 + 2 * (96 + 96 + 64));
  EXPECT_EQ(names_under(*biased, "model.layers.0.mlp."),
            (Names{"gate_proj.weight", "gate_proj.bias", "up_proj.weight", "up_proj.bias",
                   "down_proj.weight", "down_proj.bias"}));
  j = tiny();
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 79264 + 240);
  j = tiny();
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 79264 + 16384);
}

TEST(MiniCPM3Models, MiniCPM3FourBMatchesTheHandTotal) {
  // MiniCPM3-4B: V 73,448 tied, h 2,560, 62 layers of 40 heads (q 768, c 256, 64 + 32 / 64),
  // MLP 6,400; longrope from 32,768 positions; scale_emb 12, scale_depth 1.4, dim_model_base 256.
  const int64_t V = 73448, h = 2560, L = 62;
  const int64_t attention = latent(h, 40, 768, 256, 64, 32, 64);
  EXPECT_EQ(attention, 13'517'824);
  const int64_t total = V * h + L * (attention + 2 * h + 3 * h * 6400) + h;
  EXPECT_EQ(total, 4'073'875'968);  // "4B"
  nlohmann::json j = {{"model_type", "minicpm3"},  {"vocab_size", V},
                      {"hidden_size", h},          {"intermediate_size", 6400},
                      {"num_hidden_layers", L},    {"num_attention_heads", 40},
                      {"num_key_value_heads", 40}, {"q_lora_rank", 768},
                      {"kv_lora_rank", 256},       {"qk_nope_head_dim", 64},
                      {"qk_rope_head_dim", 32},    {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},     {"max_position_embeddings", 32768},
                      {"scale_emb", 12},           {"scale_depth", 1.4},
                      {"dim_model_base", 256},     {"torch_dtype", "bfloat16"}};
  j["rope_scaling"] = {{"type", "longrope"},
                       {"long_factor", std::vector<double>(16, 1.5)},
                       {"short_factor", std::vector<double>(16, 1.0)},
                       {"original_max_position_embeddings", 32768}};
  const ModelConfig c = parse_model_config(j, "minicpm3-4b.json");
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "longrope");
  EXPECT_EQ(c.v_head_dim, 64);
  EXPECT_EQ(c.residual_multiplier, 1.4 / std::sqrt(62.0));
  EXPECT_EQ(c.logits_scaling, 10.0);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // The multipliers are written back as MiniCPM3's keys and read back to the same values.
  const nlohmann::json back = to_hf_json(c);
  EXPECT_EQ(back.at("dim_model_base"), 256);
  EXPECT_EQ(back.at("scale_emb"), 12.0);
  EXPECT_EQ(parse_model_config(back, "round trip"), c);
}

TEST(MiniCPM3Models, ConfigClassDefaultsAndChecks) {
  // Null scale_depth and dim_model_base are no-op scalings (sqrt(L) and hidden_size).
  nlohmann::json j = tiny();
  j["scale_depth"] = nullptr;
  j["dim_model_base"] = nullptr;
  ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.residual_multiplier, 1.0);
  EXPECT_EQ(c.logits_scaling, 1.0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Absent: the class's 12, 1.4 and 256.
  j = tiny();
  for (const char* key : {"scale_emb", "scale_depth", "dim_model_base"}) j.erase(key);
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.embedding_multiplier, 12.0);
  EXPECT_EQ(c.residual_multiplier, 1.4 / std::sqrt(2.0));
  EXPECT_EQ(c.logits_scaling, 0.25);  // 64 / 256
  j["dim_model_base"] = 0;
  EXPECT_THAT([&] { (void)parse_model_config(j, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'dim_model_base'")));
  // The heads must divide hidden_size (validate_architecture), even beside a head_dim.
  j = tiny();
  j["num_attention_heads"] = 3;
  j["num_key_value_heads"] = 3;
  j["head_dim"] = 24;
  EXPECT_THAT([&] { (void)parse_model_config(j, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_attention_heads'")));
  // num_key_value_heads: 40 where the file has none (the class's), a null one the head count.
  j = tiny();
  j.erase("num_key_value_heads");
  j["hidden_size"] = 160;
  j["num_attention_heads"] = 40;
  EXPECT_EQ(parse_model_config(j, "m.json").num_key_value_heads, 40);
  j["num_attention_heads"] = 4;
  EXPECT_THAT([&] { (void)parse_model_config(j, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads'")));
  j["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "m.json").num_key_value_heads, 4);
  // v_head_dim stated, q_lora_rank null: q_proj [4 x 24, 64] in place of the query latent.
  j = tiny();
  j["v_head_dim"] = 8;
  j["q_lora_rank"] = nullptr;
  c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            (DimVector{96, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.kv_b_proj.weight").sizes(),
            (DimVector{96, 16}));  // 4 x (16 + 8)
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.o_proj.weight").sizes(),
            (DimVector{64, 32}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// MiniCPM3ForCausalLM divides the final hidden states [B, S, h] by logits_scaling before lm_head,
// not the logits [B, S, V] after it (Granite's place).
TEST(MiniCPM3Models, TheLogitsScalingDividesTheHiddenStates) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 8);
  std::vector<DimVector> divided;  // outputs of the root's own divisions
  for (const OpNode& n : g.nodes()) {
    if (n.module.empty() && n.op.starts_with("div")) {
      divided.push_back(g.tensor(n.outputs.front()).sizes);
    }
  }
  ASSERT_EQ(divided.size(), 1u);
  EXPECT_EQ(divided.front(), (DimVector{1, 8, 64}));
}

}  // namespace
}  // namespace shardplan::tensor
