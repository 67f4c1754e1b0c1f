// dots1 (dots.llm1) and olmoe (OLMoE) against hand formulas written here from their transformers
// modules (modeling_dots1.py, modeling_olmoe.py, transformers 5.16) and the published totals. h
// hidden, V vocabulary, F expert width, E experts:
//   dots1  Qwen3's attention (per-head q/k norms [head_dim]); layers from first_k_dense_replace on
//          hold DeepSeek-V3's block: experts.gate_up_proj [E, 2F, h], experts.down_proj
//          [E, h, F], the sigmoid router gate [E, h] (its score-correction bias a buffer),
//          shared_experts n_shared x F wide
//   olmoe  q_norm [h] and k_norm [kv width] over whole projections; every layer Mixtral's block
//          (gate [E, h] before the experts)
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
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(Dots1OlmoeModels, DotsLlm1MatchesThePublishedTotals) {
  // dots.llm1: V 152,064 untied, h 4,096, 62 layers of 32 heads of 128 (MHA), the first dense
  // (F 10,944), then 128 experts of 1,408, top 6, two shared experts (2,816 wide).
  const int64_t V = 152064, h = 4096, E = 128, F = 1408;
  const int64_t attention = 4 * h * h + 2 * 128, norms = 2 * h;
  const int64_t dense = attention + 3 * h * 10944 + norms;
  const int64_t expert = 3 * h * F, shared = 3 * h * 2 * F, router = E * h;
  const int64_t moe = attention + E * expert + router + shared + norms;
  const int64_t total = 2 * V * h + dense + 61 * moe + h;
  EXPECT_EQ(total, 142'774'373'888);  // "142B"
  const int64_t active = 2 * V * h + dense + 61 * (moe - (E - 6) * expert) + h;
  EXPECT_EQ(active, 14'016'581'120);  // "14B activated"
  const ModelConfig c = find_model_config("dots.llm1");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "Dots1ForCausalLM");
  EXPECT_EQ(
      names_under(*m, "model.layers.1.mlp."),
      (std::vector<std::string>{"experts.gate_up_proj", "experts.down_proj", "gate.weight",
                                "shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                                "shared_experts.down_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_norm.weight").sizes(), DimVector({128}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.gate_proj.weight").sizes(), DimVector({10944, h}));
  EXPECT_FALSE(c.sliding_window);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.count(1), 61);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Dots1OlmoeModels, Dots1WindowsAndRequiredFields) {
  nlohmann::json j = {
      {"model_type", "dots1"},    {"vocab_size", 1000},          {"hidden_size", 64},
      {"intermediate_size", 128}, {"moe_intermediate_size", 32}, {"num_hidden_layers", 4},
      {"num_attention_heads", 4}, {"num_key_value_heads", 2},    {"n_routed_experts", 8},
      {"num_experts_per_tok", 2}, {"n_shared_experts", 1},       {"torch_dtype", "bfloat16"}};
  // Dots1Config's defaults: every layer MoE (first_k_dense_replace 0); a window of 4096 from
  // layer 62 on, so none of 4 slides until max_window_layers says so.
  const ModelConfig dflt = parse_model_config(j, "default");
  EXPECT_TRUE(dflt.dense_layers.empty());
  EXPECT_EQ(dflt.sliding_window, 4096);
  EXPECT_EQ(dflt.layer_types[3], AttentionType::kFull);
  j["max_window_layers"] = 2;
  const ModelConfig two = parse_model_config(j, "two");
  EXPECT_EQ(two.layer_types[1], AttentionType::kFull);
  EXPECT_EQ(two.layer_types[2], AttentionType::kSliding);
  EXPECT_EQ(parse_model_config(to_hf_json(two), "round trip"), two);
  // Dots1Config's num_key_value_heads is 32 when absent; null is the head count.
  nlohmann::json many = j;
  many["hidden_size"] = 128;
  many["num_attention_heads"] = 64;
  many.erase("num_key_value_heads");
  EXPECT_EQ(parse_model_config(many, "absent").num_key_value_heads, 32);
  many["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parse_model_config(many, "null").num_key_value_heads, 64);
  j.erase("n_shared_experts");  // None in Dots1Config: its block cannot be built
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("n_shared_experts")));
}

TEST(Dots1OlmoeModels, Olmoe1b7bMatchesThePublishedTotals) {
  // OLMoE-1B-7B: V 50,304 untied, h 2,048, 16 layers of 16 heads (MHA), 64 experts of 1,024,
  // top 8; q_norm [2,048], k_norm [2,048].
  const int64_t V = 50304, h = 2048, E = 64, F = 1024;
  const int64_t expert = 3 * h * F;
  const int64_t layer = 4 * h * h + 2 * h + E * h + E * expert + 2 * h;
  const int64_t total = 2 * V * h + 16 * layer + h;
  EXPECT_EQ(total, 6'919'161'856);                                            // "7B"
  EXPECT_EQ(2 * V * h + 16 * (layer - (E - 8) * expert) + h, 1'282'017'280);  // "1B" active
  const ModelConfig c = find_model_config("olmoe-1b-7b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "OlmoeForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Dots1OlmoeModels, OlmoeRefusesWhatItDoesNotBuild) {
  nlohmann::json j = {
      {"model_type", "olmoe"},   {"vocab_size", 1000},       {"hidden_size", 64},
      {"intermediate_size", 32}, {"num_hidden_layers", 2},   {"num_attention_heads", 4},
      {"num_experts", 8},        {"num_experts_per_tok", 2}, {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "tiny");
  EXPECT_EQ(c.num_key_value_heads, 4);  // None: the head count
  EXPECT_EQ(build_model(c)->get_parameter("model.layers.0.self_attn.k_norm.weight").sizes(),
            DimVector({64}));
  j["clip_qkv"] = 8.0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("clip_qkv")));
  j["clip_qkv"] = nullptr;
  j["head_dim"] = 32;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("head_dim")));
}

}  // namespace
}  // namespace shardplan::tensor
