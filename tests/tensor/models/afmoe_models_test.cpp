// afmoe (Arcee's Trinity) against hand formulas written here from transformers 5's
// modular_afmoe.py and the published sizes (the Trinity technical report, arXiv 2602.17004: Nano
// 6B, Mini 26B, Large 398B). h hidden, V vocabulary, H heads and K key-value heads of d, E experts
// of width F, S shared experts, the dense MLP I wide, D dense layers of L:
//   attention  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d], q_norm, k_norm [d],
//              gate_proj [H d, h] (the output gate, no bias)
//   norms      input_layernorm, post_attention_layernorm, pre_mlp_layernorm, post_mlp_layernorm
//              [h], registered before the feed-forward
//   moe        expert_bias [E] (the block's own frozen parameter, counted, so listed first as
//              named_parameters lists a module's own before its children's), router.gate [E, h],
//              shared_experts (gate, up, down of S F), experts gate_up_proj [E, 2F, h] and
//              down_proj [E, h, F]
//   total      L (3 h H d + 2 h K d + 2 d + 4 h) + D 3 h I + (L - D)(E h + 3 h S F + 3 E h F + E)
//              + 2 V h + h (untied)
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
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t V, h, I, F, L, D, H, K, d, E, S;
};

int64_t hand_total(const Sizes& s) {
  const int64_t attention = 3 * s.h * s.H * s.d + 2 * s.h * s.K * s.d + 2 * s.d + 4 * s.h;
  const int64_t moe = s.E * s.h + 3 * s.h * s.F * s.S + 3 * s.E * s.h * s.F + s.E;
  return s.L * attention + s.D * 3 * s.h * s.I + (s.L - s.D) * moe + 2 * s.V * s.h + s.h;
}

TEST(AfmoeModels, TrinityMatchesThePublishedSizes) {
  // Nano: 1,024 / 56 layers (2 dense) / 8 heads, 2 kv / 128 experts of 256, one shared: "6B".
  EXPECT_EQ(hand_total({200192, 1024, 3072, 256, 56, 2, 8, 2, 128, 128, 1}), 6'120'003'328);
  const std::pair<const char*, Sizes> shipped[] = {
      // Mini: 2,048 / 32 layers (2 dense) / 32 heads, 4 kv / 128 experts of 1,024: "26B".
      {"trinity-mini", {200192, 2048, 6144, 1024, 32, 2, 32, 4, 128, 128, 1}},
      // Large: 3,072 / 60 layers (6 dense) / 48 heads, 8 kv / 256 experts of 3,072: "398B".
      {"trinity-large", {200192, 3072, 12288, 3072, 60, 6, 48, 8, 128, 256, 1}}};
  const int64_t published[] = {26'123'974'400, 398'635'286'016};
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(shipped[i].first);
    EXPECT_EQ(hand_total(shipped[i].second), published[i]);
    const ModelConfig c = find_model_config(shipped[i].first);
    EXPECT_EQ(build_model(c)->parameters_numel(), published[i]);
    EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  }
}

TEST(AfmoeModels, NamesOrderAndLayerKinds) {
  const ModelConfig c = first_layers(find_model_config("trinity-mini"), 4);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "AfmoeForCausalLM");
  const Names layer = {
      "self_attn.q_proj.weight",    "self_attn.k_proj.weight",  "self_attn.v_proj.weight",
      "self_attn.o_proj.weight",    "self_attn.q_norm.weight",  "self_attn.k_norm.weight",
      "self_attn.gate_proj.weight", "input_layernorm.weight",   "post_attention_layernorm.weight",
      "pre_mlp_layernorm.weight",   "post_mlp_layernorm.weight"};
  Names dense = layer;
  for (const char* p : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
    dense.emplace_back(p);
  }
  EXPECT_EQ(names_under(*m, "model.layers.0."), dense);
  EXPECT_EQ(names_under(*m, "model.layers.3.mlp."),
            (Names{"expert_bias", "router.gate.weight", "shared_experts.gate_proj.weight",
                   "shared_experts.up_proj.weight", "shared_experts.down_proj.weight",
                   "experts.gate_up_proj", "experts.down_proj"}));
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp").type_name(), "AfmoeSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp.router").type_name(), "AfmoeTokenChoiceRouter");
  EXPECT_FALSE(m->get_parameter("model.layers.3.mlp.expert_bias").requires_grad());
  // Three sliding layers of four, rotated; the fourth full and NoPE.
  for (int64_t i = 0; i < 4; ++i) {
    const LayerKind k = layer_kind(c, i);
    EXPECT_EQ(k.attention, i == 3 ? AttentionType::kFull : AttentionType::kSliding) << i;
    EXPECT_EQ(k.rope, i != 3) << i;
    EXPECT_EQ(k.window, i == 3 ? 0 : 2048) << i;
  }
  // _init_weights: the router's gate and the bias start at zero.
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("model.layers.3.mlp.router.gate.weight"), zero);
  EXPECT_EQ(init.at("model.layers.3.mlp.expert_bias"), zero);
  EXPECT_EQ(init.at("model.layers.3.self_attn.gate_proj.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.layers.3.pre_mlp_layernorm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
}

nlohmann::json tiny() {
  return {{"model_type", "afmoe"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_dense_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"num_shared_experts", 2},
          {"route_scale", 2.826},
          {"global_attn_every_n_layers", 2},
          {"sliding_window", 8},
          {"mup_enabled", true},
          {"max_position_embeddings", 256}};
}

TEST(AfmoeModels, TinyConfigByHand) {
  // Attention 4,096 x 3 + 2,048 x 2 + 32 = 16,416; norms 256; dense MLP 18,432; MoE block:
  // router 256, shared (2 x 32 wide) 12,288, experts 24,576, bias 4 = 37,124; embeddings
  // 2 x 8,192 + norm 64.
  EXPECT_EQ(hand_total({128, 64, 96, 32, 4, 1, 4, 2, 16, 4, 2}), 212'940);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(c)->parameters_numel(), 212'940);
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(c.scale_embeddings);
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 212'940 - 8192);
  j["tie_word_embeddings"] = false;
  j["attention_bias"] = true;  // q 64, k 32, v 32, o 64; the gate never has one
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 212'940 + 4 * 192);
  // The embeddings scaled by sqrt(64) with mup_enabled: one more multiply in the trace.
  const auto muls_in_model = [](const nlohmann::json& doc) {
    const ModulePtr m = build_model(parse_model_config(doc, "tiny.json"));
    const OpGraph g = trace_model_forward(*m, 1, 8);
    int64_t muls = 0, gates = 0;
    for (const OpNode& n : g.nodes()) {
      muls += n.module == "model" && n.op == "mul";
      gates += n.module == "model.layers.0.self_attn" && n.op == "sigmoid";
    }
    EXPECT_EQ(gates, 1);  // o_proj(out * sigmoid(gate_proj(x)))
    return muls;
  };
  nlohmann::json off = tiny();
  off["mup_enabled"] = false;
  EXPECT_EQ(muls_in_model(tiny()), muls_in_model(off) + 1);
}

TEST(AfmoeModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "trinity.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("sliding_window", nullptr, "need a window");
  refused("score_func", "softmax", "a sigmoid router");
  refused("route_norm", false, "renormalized");
  refused("n_group", 4, "without expert groups");
  refused("num_shared_experts", 0, "expected >= 1");
  refused("global_attn_every_n_layers", 0, "expected > 0");
  refused("layer_types",
          {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"},
          "full_attention and sliding_attention layers only");
  nlohmann::json j = tiny();
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention",
                      "full_attention"};  // wins over global_attn_every_n_layers
  EXPECT_EQ(parse_model_config(j, "trinity.json").nope_layers, (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace shardplan::tensor
