// youtu (Tencent Youtu-LLM) against hand formulas written here from transformers 5's
// modular_youtu.py, and the paper's "1.96B". Llama's layer around DeepSeek-V3's latent attention;
// h hidden, V vocabulary, n heads, q q_lora_rank, c kv_lora_rank, dn/dr/dv the nope/rope/value
// widths, the MLP I wide:
//   attention  q_a_proj [q, h], q_a_layernorm [q], q_b_proj [n (dn + dr), q] (q_lora_rank null:
//              q_proj [n (dn + dr), h]), kv_a_proj_with_mqa [c + dr, h], kv_a_layernorm [c],
//              kv_b_proj [n (dn + dv), c], o_proj [h, n dv]
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I], no biases
//   layer      input_layernorm, post_attention_layernorm [h]; final norm [h]; lm_head tied by
//              default (counted once)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t latent(int64_t h, int64_t n, int64_t q, int64_t c, int64_t dn, int64_t dr, int64_t dv) {
  return h * q + q + q * n * (dn + dr) + h * (c + dr) + c + c * n * (dn + dv) + n * dv * h;
}

nlohmann::json tiny() {
  return {{"model_type", "youtu"},         {"vocab_size", 256},      {"hidden_size", 64},
          {"intermediate_size", 128},      {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 4},      {"q_lora_rank", 32},      {"kv_lora_rank", 16},
          {"qk_nope_head_dim", 16},        {"qk_rope_head_dim", 8},  {"v_head_dim", 16},
          {"max_position_embeddings", 256}};
}

TEST(YoutuModels, TinyConfigMatchesTheHandTotal) {
  // attention: 64 x 32 (2,048) + 32 + 32 x 4 x 24 (3,072) + 64 x 24 (1,536) + 16
  //            + 16 x 4 x 32 (2,048) + 4 x 16 x 64 (4,096) = 12,848
  // layer: 12,848 + norms 128 + MLP 3 x 64 x 128 (24,576) = 37,552
  // tied embeddings 256 x 64 = 16,384 (lm_head adds nothing), final norm 64:
  // 16,384 + 2 x 37,552 + 64 = 91,552.
  EXPECT_EQ(latent(64, 4, 32, 16, 16, 8, 16), 12848);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_TRUE(c.tie_word_embeddings);  // YoutuConfig's default
  EXPECT_EQ(c.head_dim, 8);            // qk_rope_head_dim, as YoutuConfig sets head_dim
  EXPECT_EQ(c.num_local_experts, 0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "YoutuForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 91552);
  EXPECT_EQ(
      names_under(*m, "model.layers.0."),
      (Names{"self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight",
             "self_attn.q_b_proj.weight", "self_attn.kv_a_proj_with_mqa.weight",
             "self_attn.kv_a_layernorm.weight", "self_attn.kv_b_proj.weight",
             "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
             "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_b_proj.weight").sizes(),
            (DimVector{96, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.kv_b_proj.weight").sizes(),
            (DimVector{128, 16}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.o_proj.weight").sizes(),
            (DimVector{64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.down_proj.weight").sizes(), (DimVector{64, 128}));
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "YoutuAttention");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Untied: lm_head [256, 64] more. No query latent: q_proj [96, 64] (6,144) in place of
  // 2,048 + 32 + 3,072 = 5,152 per layer. attention_bias: 32 + 24 + 64 per layer.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 107936);
  j = tiny();
  j["q_lora_rank"] = nullptr;
  const ModelConfig direct = parse_model_config(j, "tiny.json");
  const ModulePtr d = build_model(direct);
  EXPECT_EQ(d->parameters_numel(), 91552 + 2 * 992);
  EXPECT_EQ(names_under(*d, "model.layers.0.self_attn."),
            (Names{"q_proj.weight", "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight",
                   "kv_b_proj.weight", "o_proj.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(direct), "round trip"), direct);
  j = tiny();
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 91552 + 240);
}

TEST(YoutuModels, Youtu2BMatchesThePapersCount) {
  // Youtu-LLM-2B's config.json (as third-party copies give it): V 128,256 tied, h 2,048, 32
  // layers of 16 heads (q 1,536, c 512, 128 + 64 / 128), MLP 6,144, RoPE base 1.6e6.
  const int64_t V = 128256, h = 2048, L = 32;
  const int64_t attention = latent(h, 16, 1536, 512, 128, 64, 128);
  EXPECT_EQ(attention, 15'337'472);
  const int64_t total = V * h + L * (attention + 2 * h + 3 * h * 6144) + h;
  EXPECT_EQ(total, 1'961'560'064);  // "Youtu-LLM (1.96B)"
  nlohmann::json j = {
      {"model_type", "youtu"},       {"vocab_size", V},        {"hidden_size", h},
      {"intermediate_size", 6144},   {"num_hidden_layers", L}, {"num_attention_heads", 16},
      {"num_key_value_heads", 16},   {"q_lora_rank", 1536},    {"kv_lora_rank", 512},
      {"qk_nope_head_dim", 128},     {"qk_rope_head_dim", 64}, {"v_head_dim", 128},
      {"tie_word_embeddings", true}, {"rope_interleave", true}};
  j["rope_parameters"] = {{"rope_theta", 1600000}, {"rope_type", "default"}};
  const ModelConfig c = parse_model_config(j, "youtu-llm-2b.json");
  EXPECT_EQ(c.rope_theta, 1.6e6);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.max_position_embeddings, 131072);  // YoutuConfig's
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // YoutuConfig: initializer_range 2 / sqrt(5 x 2,048) and the embedding's twice that.
  EXPECT_DOUBLE_EQ(c.initializer_range, 2.0 / std::pow(5.0 * 2048, 0.5));
  EXPECT_NEAR(c.initializer_range, 0.0197642353760524, 1e-15);
  EXPECT_DOUBLE_EQ(c.embedding_initializer_range, 2 * c.initializer_range);
}

ParameterInit normal(double std, int64_t zero_row = -1) {
  ParameterInit p{ParameterInit::Kind::kNormal, 0.0, std};
  p.zero_row = zero_row;
  return p;
}

std::map<std::string, ParameterInit> inits(const nlohmann::json& j) {
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> out;
  for (const NamedInit& p : parameter_inits(*m, c)) out[p.name] = p.init;
  return out;
}

TEST(YoutuModels, EmbeddingsAreDrawnWithTheirOwnStd) {
  // Without initializer_range: 2 / sqrt(5 x 64) = 0.1118...; the embedding (and the tied head,
  // listed once under the embedding) twice that; RMSNorms one.
  const double init = 2.0 / std::pow(320.0, 0.5);
  std::map<std::string, ParameterInit> i = inits(tiny());
  EXPECT_EQ(i.at("model.layers.0.self_attn.q_a_proj.weight"), normal(init));
  EXPECT_EQ(i.at("model.layers.1.mlp.up_proj.weight"), normal(init));
  EXPECT_EQ(i.at("model.embed_tokens.weight"), normal(2 * init));
  EXPECT_EQ(i.count("lm_head.weight"), 0u);
  EXPECT_EQ(i.at("model.layers.0.self_attn.kv_a_layernorm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  // A file's initializer_range doubles into the embedding's; its own embedding_initializer_range
  // wins; the padding row is zero; an untied head is drawn as a Linear.
  nlohmann::json j = tiny();
  j["initializer_range"] = 0.01;
  j["tie_word_embeddings"] = false;
  j["pad_token_id"] = 3;
  i = inits(j);
  EXPECT_EQ(i.at("model.embed_tokens.weight"), normal(0.02, 3));
  EXPECT_EQ(i.at("lm_head.weight"), normal(0.01));
  j["embedding_initializer_range"] = 0.05;
  EXPECT_EQ(inits(j).at("model.embed_tokens.weight"), normal(0.05, 3));
  j["embedding_initializer_range"] = 0;  // Python's `or`: twice initializer_range again
  EXPECT_EQ(inits(j).at("model.embed_tokens.weight"), normal(0.02, 3));
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(YoutuModels, MoeKeysTheClassDeletedAreRefused) {
  // YoutuConfig deletes DeepSeek's MoE fields: a file asking for experts or dense layers is not a
  // Youtu-LLM; null or 0 (what exporters write) passes.
  for (const char* key : {"n_routed_experts", "moe_intermediate_size", "first_k_dense_replace",
                          "n_shared_experts", "num_nextn_predict_layers"}) {
    nlohmann::json j = tiny();
    j[key] = 8;
    EXPECT_THAT([&] { (void)parse_model_config(j, "youtu.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")))
        << key;
    j[key] = nullptr;
    EXPECT_EQ(parse_model_config(j, "youtu.json").num_local_experts, 0) << key;
  }
  // num_key_value_heads: 16 where the file has none (YoutuConfig's), not the head count.
  nlohmann::json j = tiny();
  j.erase("num_key_value_heads");
  j["num_attention_heads"] = 16;
  EXPECT_EQ(parse_model_config(j, "youtu.json").num_key_value_heads, 16);
  j["num_attention_heads"] = 4;
  EXPECT_THAT([&] { (void)parse_model_config(j, "youtu.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads'")));
}

}  // namespace
}  // namespace shardplan::tensor
