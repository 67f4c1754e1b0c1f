// phimoe (Phi-3.5-MoE) against hand formulas written here from transformers' modular_phimoe.py
// and the published size ("42B total, 6.6B active": Microsoft's model card). h hidden, V
// vocabulary, H heads and kv key-value heads of d, E experts of width F:
//   attention  q_proj [H d, h], k_proj and v_proj [kv d, h], o_proj [h, H d], each with a bias
//              with attention_bias
//   moe        router [E, h] (a Linear, registered first), experts.gate_up_proj [E, 2F, h],
//              experts.down_proj [E, h, F]
//   norms      input_layernorm, post_attention_layernorm: nn.LayerNorm, weight and bias [h]
//   model      embed_tokens [V, h], norm (LayerNorm) [h] x 2, lm_head [V, h] with a bias [V]
//              with lm_head_bias; untied
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
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t attention(int64_t h, int64_t H, int64_t kv, int64_t d, bool bias) {
  const int64_t weights = 2 * h * H * d + 2 * h * kv * d;
  return weights + (bias ? 2 * H * d + 2 * kv * d - H * d + h : 0);  // q, k, v biases and o's [h]
}

TEST(PhimoeModels, Phi35MoeMatchesThePublishedSize) {
  // 32 layers of 32 heads (8 kv) of 128, 16 experts of 6,400, top 2; biases on q/k/v/o and the
  // output layer; vocabulary 32,064 untied.
  const int64_t V = 32064, h = 4096, E = 16, F = 6400;
  const int64_t attn = attention(h, 32, 8, 128, true);
  EXPECT_EQ(attn, 41'953'280);
  const int64_t experts = 3 * E * F * h, layer = attn + 2 * 2 * h + E * h + experts;
  EXPECT_EQ(layer, 1'300'326'400);
  const int64_t total = 32 * layer + V * h + (V * h + V) + 2 * h;
  EXPECT_EQ(total, 41'873'153'344);  // "42B" (the card's 41.9B)
  const int64_t active = total - 32 * experts + 32 * 3 * 2 * F * h;
  EXPECT_EQ(active, 6'640'999'744);  // "6.6B active"
  const ModelConfig c = find_model_config("phi-3.5-moe");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "PhimoeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                   "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                   "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.router.weight",
                   "mlp.experts.gate_up_proj", "mlp.experts.down_proj", "input_layernorm.weight",
                   "input_layernorm.bias", "post_attention_layernorm.weight",
                   "post_attention_layernorm.bias"}));
  EXPECT_EQ(names_under(*m, "lm_head."), (Names{"weight", "bias"}));
  EXPECT_EQ(names_under(*m, "model.norm."), (Names{"weight", "bias"}));
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "PhimoeSparseMoeBlock");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "phimoe"},   {"vocab_size", 128},      {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"num_local_experts", 4}, {"num_experts_per_tok", 2},
          {"attention_bias", true},   {"lm_head_bias", true},   {"sliding_window", 32}};
}

TEST(PhimoeModels, TinyConfigByHandAndTheOutputBias) {
  // Attention 4,096 + 2,048 + 2,048 + 4,096 weights, 64 + 32 + 32 + 64 biases = 12,480; router
  // 256; experts 3 x 4 x 96 x 64 = 73,728; two LayerNorms 256: 86,720 a layer. Model: embedding
  // 8,192, norm 128, lm_head 8,192 + 128.
  EXPECT_EQ(attention(64, 4, 2, 16, true), 12'480);
  const int64_t total = 2 * (12480 + 256 + 73728 + 256) + 8192 + 128 + 8192 + 128;
  EXPECT_EQ(total, 190'080);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_TRUE(c.lm_head_bias);
  EXPECT_EQ(layer_stack(c).kinds.front().window, 32);  // sliding_window: every layer slides
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  // The output bias starts at zero, as Linear biases do in _init_weights; LayerNorms at 1 and 0.
  std::map<std::string, ParameterInit> inits;
  for (const NamedInit& i : parameter_inits(*m, c)) inits[i.name] = i.init;
  EXPECT_EQ(inits.at("lm_head.bias"), (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(inits.at("model.norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  j["lm_head_bias"] = false;
  j["attention_bias"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "plain.json"))->parameters_numel(),
            total - 2 * (64 + 32 + 32 + 64) - 128);
  // A file of another family with an output bias is refused, naming the key (Note
  // [Architecture fields nobody read]).
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["lm_head_bias"] = true;
  EXPECT_THAT(
      [&] { parse_model_config(llama, "llama.json"); },
      ThrowsMessage<Error>(AllOf(HasSubstr("lm_head_bias"), HasSubstr("does not build it"))));
  j = tiny();
  j["router_jitter_noise"] = 2.0;
  EXPECT_THAT([&] { parse_model_config(j, "jitter.json"); },
              ThrowsMessage<Error>(HasSubstr("router_jitter_noise")));
}

}  // namespace
}  // namespace shardplan::tensor
