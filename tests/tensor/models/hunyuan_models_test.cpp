// hunyuan_v1_dense and hunyuan_v1_moe against hand formulas written here from their
// transformers modules (modeling_hunyuan_v1_dense.py, modeling_hunyuan_v1_moe.py, transformers
// 5.16) and the published totals. h hidden, V vocabulary, F MLP width, E experts, kv key-value
// heads of 128:
//   dense  Llama's layer; query_layernorm and key_layernorm [head_dim] on q and k after RoPE
//   moe    the same attention; every layer: router gate.wg [E, h] in float32, experts
//          gate_up_proj [E, 2F, h] and down_proj [E, h, F], one shared_mlp F wide
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(HunyuanModels, Hunyuan7BMatchesTheHandTotal) {
  // Hunyuan-7B: V 128,167 tied, h 4,096, 32 layers of 32 heads of 128 (8 kv heads), F 14,336.
  const int64_t V = 128167, h = 4096, kv = 8 * 128, F = 14336;
  const int64_t layer = 2 * h * h + 2 * h * kv + 2 * 128 + 3 * h * F + 2 * h;
  const int64_t total = V * h + 32 * layer + h;
  EXPECT_EQ(total, 7'504'568'320);  // "7B"
  const ModelConfig c = find_model_config("hunyuan-7b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "HunYuanDenseV1ForCausalLM");
  EXPECT_EQ(
      names_under(*m, "model.layers.0.self_attn."),
      (std::vector<std::string>{"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                "query_layernorm.weight", "key_layernorm.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The norms run on the rotated q and k: RoPE's add (q * cos + rotate_half(q) * sin) comes
  // before each norm, once for q, twice (q's and k's) for k. Normed before RoPE, no add would.
  const OpGraph g = trace_model_forward(*m, 1, 8);
  int64_t adds = 0, adds_before_q_norm = -1, adds_before_k_norm = -1;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.0.self_attn" && n.op == "add") ++adds;
    if (n.module == "model.layers.0.self_attn.query_layernorm" && adds_before_q_norm < 0) {
      adds_before_q_norm = adds;
    }
    if (n.module == "model.layers.0.self_attn.key_layernorm" && adds_before_k_norm < 0) {
      adds_before_k_norm = adds;
    }
  }
  EXPECT_EQ(adds_before_q_norm, 1);
  EXPECT_EQ(adds_before_k_norm, 2);
}

TEST(HunyuanModels, HunyuanA13BMatchesThePublishedTotals) {
  // Hunyuan-A13B: V 128,167 tied, h 4,096, 32 layers of 32 heads of 128 (8 kv heads), 64
  // experts of F 3,072, top 8, one shared MLP of 3,072.
  const int64_t V = 128167, h = 4096, kv = 8 * 128, E = 64, F = 3072;
  const int64_t expert = 3 * h * F;
  const int64_t layer = 2 * h * h + 2 * h * kv + 2 * 128 + E * h + E * expert + expert + 2 * h;
  const int64_t total = V * h + 32 * layer + h;
  EXPECT_EQ(total, 80'393'183'232);  // "80B"
  // 13B active: the embedding once, attention, router, 8 experts and the shared MLP per layer.
  EXPECT_EQ(V * h + 32 * (layer - (E - 8) * expert) + h, 12'747'448'320);
  const ModelConfig c = find_model_config("hunyuan-a13b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "HunYuanMoEV1ForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp."),
            (std::vector<std::string>{"gate.wg.weight", "experts.gate_up_proj", "experts.down_proj",
                                      "shared_mlp.gate_proj.weight", "shared_mlp.up_proj.weight",
                                      "shared_mlp.down_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.gate.wg.weight").dtype(), DType::kFloat32);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(HunyuanModels, HunyuanRefusesWhatItCannotBuild) {
  nlohmann::json j = {{"model_type", "hunyuan_v1_moe"},
                      {"vocab_size", 1000},
                      {"hidden_size", 64},
                      {"intermediate_size", 32},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 16},
                      {"num_experts", 4},
                      {"moe_topk", {2, 2}},
                      {"torch_dtype", "bfloat16"}};
  EXPECT_EQ(parse_model_config(j, "list").num_experts_per_tok, 2);
  j["moe_topk"] = {2, 1};
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("moe_topk")));
  j["moe_topk"] = 2;
  j.erase("head_dim");
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("head_dim")));
}

}  // namespace
}  // namespace shardplan::tensor
