// step3p5 (StepFun's Step 3.5 Flash) against hand formulas written here from transformers 5's
// modeling_step3p7.py (its text model) and the published sizes (the model card: "196.81B (196B
// Backbone + 0.81B Head)" total, "~11B" active; 45 layers of width 4,096, vocabulary 128,896,
// 288 routed experts and one shared expert a layer, top 8). h hidden, V vocabulary, K key-value
// heads of d, H_l a layer's query heads, E experts of width F, the shared expert S wide, the dense
// MLP I wide, L layers of which D dense:
//   attention  q_proj [H_l d, h], k_proj, v_proj [K d, h], o_proj [h, H_l d], q_norm, k_norm [d],
//              g_proj [H_l, h], no biases
//   moe        gate.weight [E, h] (its e_score_correction_bias [E] a buffer, not counted); experts
//              gate_up_proj [E, 2F, h], down_proj [E, h, F]; shared_experts gate, up, down of S
//   total      sum over layers (2 h H_l d + 2 h K d + 2 d + h H_l) + 2 h L + D 3 h I
//              + (L - D)(3 E h F + E h + 3 h S) + 2 V h + h (untied)
//   active     total - (L - D)(E - k) 3 h F (k of the E experts a token)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t V, h, I, F, S, E, k, K, d;
  std::vector<int64_t> heads;  // per layer
  int64_t D;                   // the first D layers dense
};

int64_t attention(const Sizes& s, int64_t H) {
  return 2 * s.h * H * s.d + 2 * s.h * s.K * s.d + 2 * s.d + s.h * H;
}
int64_t moe(const Sizes& s) { return 3 * s.E * s.h * s.F + s.E * s.h + 3 * s.h * s.S; }

int64_t hand_total(const Sizes& s) {
  const auto L = static_cast<int64_t>(s.heads.size());
  int64_t total = 2 * s.h * L + s.D * 3 * s.h * s.I + (L - s.D) * moe(s) + 2 * s.V * s.h + s.h;
  for (const int64_t H : s.heads) total += attention(s, H);
  return total;
}
int64_t hand_active(const Sizes& s) {
  const auto L = static_cast<int64_t>(s.heads.size());
  return hand_total(s) - (L - s.D) * (s.E - s.k) * 3 * s.h * s.F;
}

// Step 3.5 Flash: a full layer of 64 heads every fourth (0, 4, ..., 44: 12), sliding layers of 96
// between (33); layers 0-2 dense.
Sizes flash() {
  Sizes s{128896, 4096, 11264, 1280, 1280, 288, 8, 8, 128, {}, 3};
  for (int64_t i = 0; i < 45; ++i) s.heads.push_back(i % 4 == 0 ? 64 : 96);
  return s;
}

TEST(Step3p5Models, FlashMatchesThePublishedSizes) {
  // 12 x 75,759,872 + 33 x 109,445,376 attention, 368,640 layer norms, 3 x 138,412,032 dense
  // MLPs, 42 x 4,546,756,608 MoE blocks, 2 x 527,958,016 + 4,096: 196.96 B (the card's 196.81 B
  // total; its split into a "196B backbone" and a "0.81B head" is not reproduced, docs/models.md).
  // Active: 11.99 B, 11.46 B without the embedding rows (the card's "~11B").
  EXPECT_EQ(hand_total(flash()), 196'956'118'272);
  EXPECT_EQ(hand_active(flash()), 11'987'311'872);
  const ModelConfig c = find_model_config("step-3.5-flash");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 196'956'118'272);
  EXPECT_EQ(active_parameters(*m, c), 11'987'311'872);
  // The routers' score-correction biases are buffers the checkpoint holds: 42 x 288.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 12'096);
  EXPECT_EQ(parameters_beyond_model(c).mtp, 0);  // the three prediction layers are not built
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The legacy keys, read as Step3p7TextConfig reads them.
  EXPECT_EQ(c.vocab_size, 128896);
  EXPECT_EQ(c.num_key_value_heads, 8);  // num_attention_groups
  EXPECT_EQ(c.num_local_experts, 288);  // moe_num_experts
  EXPECT_EQ(c.num_experts_per_tok, 8);  // moe_top_k
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.sliding_num_attention_heads, 96);                // attention_other_setting
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 1, 2}));  // moe_layers_enum "3,...,44"
  EXPECT_EQ(c.intermediate_size, 1280);
  EXPECT_EQ(c.dense_intermediate_size, 11264);
  EXPECT_EQ(c.shared_expert_intermediate_size, 1280);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.pad_token_id, 1);  // the class's default: the file has none
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_TRUE(c.attention_gate_per_head);
  // The full layers' RoPE (rope_theta[0], partial_rotary_factors[0], the llama3 rope_scaling).
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 2.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 131072);
  // Four kinds: full dense (0), sliding dense (1, 2), sliding MoE, full MoE.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 4u);
  EXPECT_EQ(describe(stack.kinds[0]), "dense");
  EXPECT_EQ(describe(stack.kinds[1]), "sliding 512 dense");
  EXPECT_EQ(describe(stack.kinds[2]), "sliding 512 moe");
  EXPECT_EQ(describe(stack.kinds[3]), "moe");
  EXPECT_EQ(stack.count(0), 1);
  EXPECT_EQ(stack.count(1), 2);
  EXPECT_EQ(stack.count(2), 31);
  EXPECT_EQ(stack.count(3), 11);
  EXPECT_EQ(attention_heads_of(c, stack.kinds[2]), 96);
  EXPECT_EQ(attention_heads_of(c, stack.kinds[3]), 64);
  // A one-layer model of the sliding MoE kind, as the planner traces it, keeps its 96 heads.
  const ModulePtr one = build_model(uniform_config(c, stack.kinds[2]));
  EXPECT_EQ(one->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            (DimVector{96 * 128, 4096}));
  EXPECT_EQ(one->get_parameter("model.layers.0.self_attn.g_proj.weight").sizes(),
            (DimVector{96, 4096}));
}

TEST(Step3p5Models, NamesShapesAndOrderAreTransformers) {
  const ModelConfig c = first_layers(find_model_config("step-3.5-flash"), 4);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Step3p7ForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "Step3p7TextModel");
  // Layer 0: full attention of 64 heads, the dense MLP.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"self_attn.q_proj.weight", {8192, 4096}},
                          {"self_attn.k_proj.weight", {1024, 4096}},
                          {"self_attn.v_proj.weight", {1024, 4096}},
                          {"self_attn.o_proj.weight", {4096, 8192}},
                          {"self_attn.q_norm.weight", {128}},
                          {"self_attn.k_norm.weight", {128}},
                          {"self_attn.g_proj.weight", {64, 4096}},
                          {"mlp.gate_proj.weight", {11264, 4096}},
                          {"mlp.up_proj.weight", {11264, 4096}},
                          {"mlp.down_proj.weight", {4096, 11264}},
                          {"input_layernorm.weight", {4096}},
                          {"post_attention_layernorm.weight", {4096}}}));
  // Layer 3: sliding attention of 96 heads, the MoE block (router, experts, shared expert).
  EXPECT_EQ(shapes_under(*m, "model.layers.3."),
            (test::Shapes{{"self_attn.q_proj.weight", {12288, 4096}},
                          {"self_attn.k_proj.weight", {1024, 4096}},
                          {"self_attn.v_proj.weight", {1024, 4096}},
                          {"self_attn.o_proj.weight", {4096, 12288}},
                          {"self_attn.q_norm.weight", {128}},
                          {"self_attn.k_norm.weight", {128}},
                          {"self_attn.g_proj.weight", {96, 4096}},
                          {"mlp.gate.weight", {288, 4096}},
                          {"mlp.experts.gate_up_proj", {288, 2560, 4096}},
                          {"mlp.experts.down_proj", {288, 4096, 1280}},
                          {"mlp.shared_experts.gate_proj.weight", {1280, 4096}},
                          {"mlp.shared_experts.up_proj.weight", {1280, 4096}},
                          {"mlp.shared_experts.down_proj.weight", {4096, 1280}},
                          {"input_layernorm.weight", {4096}},
                          {"post_attention_layernorm.weight", {4096}}}));
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.3").type_name(), "Step3p7DecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.3.self_attn").type_name(), "Step3p7Attention");
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp").type_name(), "Step3p7SparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp.gate").type_name(), "Step3p7TopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp.experts").type_name(), "Step3p7Experts");
  EXPECT_EQ(m->get_submodule("model.layers.3.mlp.shared_experts").type_name(), "Step3p7MLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "Step3p7MLP");
  EXPECT_EQ(m->get_submodule("model.layers.3.input_layernorm").type_name(), "Step3p7RMSNorm");
  EXPECT_EQ(m->get_submodule("model.layers.3.self_attn.q_norm").type_name(), "Step3p7RMSNorm");
  EXPECT_EQ(block_kind(*m, "model.layers.3.mlp.gate.weight"), "router");
  EXPECT_EQ(block_kind(*m, "model.layers.3.mlp.experts.down_proj"), "experts");
  EXPECT_EQ(block_kind(*m, "model.layers.3.self_attn.g_proj.weight"), "attention");
  // The rotary buffers per layer type: 64 of the full layers' 128 channels rotate, all of the
  // sliding layers'.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.full_attention_inv_freq").sizes(), (DimVector{32}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.sliding_attention_inv_freq").sizes(), (DimVector{64}));
  // _init_weights: Linear, router and experts normal; every Step3p7RMSNorm zero (1 + w).
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("model.layers.3.mlp.gate.weight"), normal);
  EXPECT_EQ(init.at("model.layers.3.self_attn.g_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.3.mlp.experts.gate_up_proj"), normal);
  EXPECT_EQ(init.at("model.layers.3.mlp.experts.down_proj"), normal);
  EXPECT_EQ(init.at("model.layers.3.mlp.shared_experts.down_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.3.self_attn.q_norm.weight"), zero);
  EXPECT_EQ(init.at("model.layers.3.input_layernorm.weight"), zero);
  EXPECT_EQ(init.at("model.norm.weight"), zero);
}

// StepFun's own spelling, as Step 3.5 Flash's file writes it: num_attention_groups,
// moe_num_experts, moe_top_k, moe_layers_enum, attention_other_setting, per-layer rope_theta and
// partial_rotary_factors, a rope_scaling of the full layers, and per-layer lists padded with the
// num_nextn_predict_layers prediction layer's entry.
nlohmann::json tiny() {
  const nlohmann::json types = {"full_attention", "sliding_attention", "sliding_attention",
                                "sliding_attention", "sliding_attention"};
  return {{"model_type", "step3p5"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"share_expert_dim", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_attention_groups", 2},
          {"head_dim", 16},
          {"moe_num_experts", 4},
          {"moe_top_k", 2},
          {"moe_layers_enum", "1,2,3"},
          {"num_nextn_predict_layers", 1},
          {"layer_types", types},
          {"attention_other_setting",
           {{"attention_type", "sliding_attention"},
            {"num_attention_heads", 8},
            {"num_attention_groups", 2},
            {"head_dim", 16}}},
          {"sliding_window", 8},
          {"rope_theta", {5e6, 1e4, 1e4, 1e4, 1e4}},
          {"partial_rotary_factors", {0.5, 1.0, 1.0, 1.0, 1.0}},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 2.0},
            {"original_max_position_embeddings", 128},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 32.0}}},
          {"yarn_only_types", {"full_attention"}},
          {"swiglu_limits", {0.0, 0.0, 0.0, 7.0, 0.0}},
          {"swiglu_limits_shared", {0.0, 0.0, 0.0, 16.0, 0.0}},
          {"moe_router_scaling_factor", 3.0},
          {"use_head_wise_attn_gate", true},
          {"use_qk_norm", true},
          {"zero_centered", true},
          {"max_position_embeddings", 256}};
}

TEST(Step3p5Models, TinyConfigByHand) {
  // Attention 12,576 (4 heads) + 3 x 21,024 (8 heads); norms 512; dense MLP 18,432; three MoE
  // blocks of 30,976 (experts 24,576, router 256, shared 6,144); embeddings 2 x 8,192 + 64.
  const Sizes s{128, 64, 96, 32, 32, 4, 2, 2, 16, {4, 8, 8, 8}, 1};
  EXPECT_EQ(hand_total(s), 203'968);
  EXPECT_EQ(hand_active(s), 167'104);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 203'968);
  EXPECT_EQ(active_parameters(*m, c), 167'104);
  // _init_weights fills every parameter (materialize refuses a family that misses one).
  EXPECT_EQ(parameter_inits(*m, c).size(), m->named_parameters().size());
  EXPECT_EQ(c.num_hidden_layers, 4);  // the prediction layer's entries split off
  EXPECT_EQ(c.layer_types.size(), 4u);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.sliding_num_attention_heads, 8);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attention_bias on q, k, v and o (never g_proj): 192 + 3 x 256.
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 203'968 + 960);
  j["attention_bias"] = false;
  // mlp_bias on the dense MLP (96 + 96 + 64) and each shared expert (32 + 32 + 64), not the
  // routed experts: 256 + 3 x 128.
  j["mlp_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(biased)->parameters_numel(), 203'968 + 640);
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 203'968 - 8192);
}

// The same model as transformers 5 saves it: the class's field names, mlp_layer_types,
// num_sliding_attention_heads with its per_layer_config, rope_parameters per layer type.
nlohmann::json tiny_saved() {
  return {{"model_type", "step3p5"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"share_expert_dim", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"mlp_layer_types", {"dense", "sparse", "sparse", "sparse"}},
          {"layer_types",
           {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"}},
          {"num_sliding_attention_heads", 8},
          {"per_layer_config",
           {{"1", {{"num_attention_heads", 8}}},
            {"2", {{"num_attention_heads", 8}}},
            {"3", {{"num_attention_heads", 8}}}}},
          {"sliding_window", 8},
          {"rope_parameters",
           {{"full_attention",
             {{"rope_type", "llama3"},
              {"rope_theta", 5e6},
              {"partial_rotary_factor", 0.5},
              {"factor", 2.0},
              {"original_max_position_embeddings", 128},
              {"low_freq_factor", 1.0},
              {"high_freq_factor", 32.0}}},
            {"sliding_attention",
             {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 1.0}}}}},
          {"max_position_embeddings", 256}};
}

TEST(Step3p5Models, TheSavedSpellingReadsAsStepFunsOwn) {
  const ModelConfig legacy = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(parse_model_config(tiny_saved(), "saved.json"), legacy);
  // A saved rope_parameters per type wins over the legacy lists and rope_scaling beside it.
  nlohmann::json j = tiny_saved();
  j["rope_theta"] = 77.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(parse_model_config(j, "saved.json"), legacy);
  // The attribute_map aliases win over the fields they name (set after them).
  j = tiny_saved();
  j["moe_num_experts"] = 8;
  j["moe_top_k"] = 1;
  j["num_attention_groups"] = 4;
  j["share_expert_dims"] = 16;
  const ModelConfig aliased = parse_model_config(j, "saved.json");
  EXPECT_EQ(aliased.num_local_experts, 8);
  EXPECT_EQ(aliased.num_experts_per_tok, 1);
  EXPECT_EQ(aliased.num_key_value_heads, 4);
  EXPECT_EQ(aliased.shared_expert_intermediate_size, 16);
  // num_local_experts is a field attribute_map sends to n_routed_experts, which is set after it:
  // it never decides. hidden_act is set to silu whatever the file says.
  j = tiny_saved();
  j["num_local_experts"] = 16;
  j["hidden_act"] = "swigluoai";
  EXPECT_EQ(parse_model_config(j, "saved.json"), legacy);
  // Without a rope_parameters per type the legacy lists decide; a rope_parameters of another
  // shape is dropped (transformers rebuilds it), and so is a rope_scaling's legacy "type".
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  EXPECT_EQ(parse_model_config(j, "tiny.json"), legacy);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  EXPECT_FALSE(parse_model_config(j, "tiny.json").rope_scaling.has_value());
  // A scalar rope_theta is every layer's; no partial_rotary_factors rotates whole heads.
  j = tiny();
  j["rope_theta"] = 1e6;
  j.erase("partial_rotary_factors");
  j.erase("rope_scaling");
  const ModelConfig scalar = parse_model_config(j, "tiny.json");
  EXPECT_DOUBLE_EQ(scalar.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(scalar.partial_rotary_factor, 1.0);
  EXPECT_FALSE(scalar.rope_scaling.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(scalar), "round trip"), scalar);
  // mlp_layer_types decides over moe_layers_enum; without either, layers 3 onwards are sparse.
  j = tiny();
  j["mlp_layer_types"] = {"dense", "dense", "sparse", "sparse", "dense"};
  EXPECT_EQ(parse_model_config(j, "tiny.json").dense_layers, (std::vector<int64_t>{0, 1}));
  j.erase("mlp_layer_types");
  j.erase("moe_layers_enum");
  EXPECT_EQ(parse_model_config(j, "tiny.json").dense_layers, (std::vector<int64_t>{0, 1, 2}));
  j["moe_layers_enum"] = {2, 3};
  EXPECT_EQ(parse_model_config(j, "tiny.json").dense_layers, (std::vector<int64_t>{0, 1}));
}

TEST(Step3p5Models, ClassDefaults) {
  // Step3p7TextConfig(): 45 full layers of 64 heads, layers 0-2 dense, vocabulary 128,815:
  // 45 x 75,759,872 attention, 368,640 norms, 3 x 138,412,032, 42 x 4,546,756,608,
  // 2 x 527,626,240 + 4,096.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "step3p5"}}, "d.json");
  EXPECT_EQ(c.num_hidden_layers, 45);
  EXPECT_EQ(c.vocab_size, 128815);
  EXPECT_EQ(c.max_position_embeddings, 128000);
  EXPECT_EQ(c.sliding_num_attention_heads, 0);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.pad_token_id, 1);
  Sizes s = flash();
  s.V = 128815;
  s.heads.assign(45, 64);
  EXPECT_EQ(hand_total(s), 195'843'833'088);
  EXPECT_EQ(build_model(c)->parameters_numel(), 195'843'833'088);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Step3p5Models, WhatTransformersDoesNotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "step3p5.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("num_hidden_layers", 0, "expected 1..1024");
  refused("layer_types",
          {"full_attention", "chunked_attention", "sliding_attention", "sliding_attention",
           "sliding_attention"},
          "masks for full and sliding layers only");
  refused("layer_types", {"full_attention", "sliding_attention", "sliding_attention"},
          "a list of num_hidden_layers = 4 entries (or 5");
  refused("sliding_window", nullptr, "needs a window");
  refused("sliding_window", 0, "expected > 0");
  refused("mlp_layer_types", {"dense", "moe", "sparse", "sparse"}, "\"dense\" or \"sparse\"");
  refused("moe_layers_enum", "1,x", "is not a layer index");
  refused("attention_other_setting", {{"num_attention_heads", 8}, {"num_attention_groups", 1}},
          "the model's key-value heads; expected 2");
  refused("attention_other_setting", {{"num_attention_heads", 8}, {"head_dim", 32}},
          "the model's head_dim; expected 16");
  refused("attention_other_setting", {{"num_attention_heads", 7}},
          "expected a positive multiple of the 2 key-value heads");
  refused("attention_other_setting",
          {{"num_attention_heads", 8}, {"attention_type", "full_attention"}},
          "applies the setting to the sliding layers");
  refused("per_layer_config",
          {{"1", {{"num_attention_heads", 8}}},
           {"2", {{"num_attention_heads", 4}}},
           {"3", {{"num_attention_heads", 8}}}},
          "one head count per layer type");
  refused("per_layer_config", {{"1", {{"head_dim", 8}}}}, "per-layer query head counts only");
  refused("per_layer_config", {{"9", {{"num_attention_heads", 8}}}}, "is not a layer in 0..3");
  refused("gating", "per-element", "expected true or \"per-head\"");
  refused("gating", false, "expected true or \"per-head\"");
  refused("use_bidirectional_attention", true, "causal decoders");
  refused("sparse_attention_config", {{"sparse_num_index_heads", 4}}, "no lightning indexer");
  refused("swiglu_limits", {0.0, 0.0, 0.0}, "a list of num_hidden_layers = 4");
  refused("swiglu_limits_shared", {0.0, 0.0, "x", 0.0}, "expected a number or null");
  refused("query_pre_attn_scalar", 0, "expected > 0");
  refused("partial_rotary_factors", {0.5, 0.5, 1.0, 1.0, 1.0}, "over the whole head");
  refused("rope_theta", {5e6, 1e4, 1e4}, "a list of num_hidden_layers = 4");
  refused("rope_theta", {5e6, -1.0, 1e4, 1e4, 1e4}, "expected a positive number");
  refused("rope_scaling", 2.0, "expected an object or null");
  refused("rope_parameters", 5, "expected an object");
  refused("rope_parameters",
          {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
           {"sliding_attention", {{"rope_type", "default"}}}},
          "has no rope_theta");
  refused("yarn_only_types", {"full_attention", "sliding_attention"},
          "the rope_scaling on the full layers alone");
  refused("share_expert_dim", 0, "always builds its shared expert");
  refused("intermediate_size", 0, "positive width of the dense layers' MLP");
  refused("num_nextn_predict_layers", -1, "expected 0..");
  refused("use_head_wise_attn_gate", false, "a gate per head");
  refused("use_qk_norm", false, "q_norm and k_norm");
  refused("zero_centered", false, "(1 + weight) RMSNorms");
  refused("moe_router_activation", "softmax", "a sigmoid router");
  refused("norm_expert_weight", false, "top-k weights renormalized");
  refused("att_impl_type", "MFA", "grouped-query attention");
  refused("sink", true, "attention without sinks");
  refused("use_moe", false, "routed experts");
  refused("use_rope_layers", {true, false, true, true}, "on every layer");
  // Keys of other families' architectures that Step3p7TextConfig does not read are refused.
  refused("first_k_dense_replace", 2, "does not build it");
  refused("index_n_heads", 4, "does not build it");
}

TEST(Step3p5Models, TraceGatesPerHeadAndRotatesPerLayerType) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const double T = 32, h = 64, K = 2, d = 16;
  const auto matmul_of = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  // Layer 0 (4 heads, full: all 16 keys) and layer 1 (8 heads, a window of 8 keys): q, k, v, the
  // gate and o_proj, then the core's two products, 4 B H s keys d.
  for (const auto& [layer, H, keys] : {std::tuple{0, 4.0, 16.0}, std::tuple{1, 8.0, 8.0}}) {
    const std::string a = "model.layers." + std::to_string(layer) + ".self_attn";
    EXPECT_DOUBLE_EQ(matmul_of(a + ".g_proj"), 2 * T * h * H);
    EXPECT_DOUBLE_EQ(matmul_of(a), 2 * T * h * (H * d + 2 * K * d + H) + 2 * T * H * d * h +
                                       4 * 2 * H * 16 * keys * d);
    // sigmoid(g_proj(x)) in the attention itself, in the model's dtype (no cast).
    EXPECT_EQ(ops_in(g, "sigmoid", a), 1);
  }
  // The full layer rotates 8 of 16 channels (rotate_half's cat and the pass-through's, for q and
  // k), the sliding layer all of them (rotate_half's alone).
  EXPECT_EQ(ops_in(g, "cat", "model.layers.0.self_attn"), 4);
  EXPECT_EQ(ops_in(g, "cat", "model.layers.1.self_attn"), 2);
  // The dense MLP of layer 0: gate, up and down over 32 tokens, 3 x 2 x 32 x 64 x 96.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.mlp"), 3 * 2 * T * h * 96);
  // The experts on their expected load: 32 tokens x 2 picks over 4 experts, 16 each, gate_up
  // 2 x 16 x 64 x 64 and down 2 x 16 x 32 x 64 per expert.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.experts"), 786'432);
  // The router: one [T, h] x [h, E] product, sigmoid scores; the shared expert 3 x 2 T h S.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.gate"), 2 * T * h * 4);
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.mlp.gate"), 1);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.shared_experts"), 3 * 2 * T * h * 32);
}

TEST(Step3p5Models, TrainingTraceCountsEachProjectionThreeTimes) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "linear" || op.call < 0) continue;
    if (!st.calls[static_cast<size_t>(op.call)].fqn.starts_with("model.layers.1.self_attn")) {
      continue;
    }
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // q 128, k 32, v 32, the per-head gate 8 and o_proj 128 x 64, over 32 tokens.
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (128 + 32 + 32 + 8) + 2.0 * 32 * 128 * 64);
  EXPECT_DOUBLE_EQ(backward, 2 * forward);
}

TEST(Step3p5Models, TensorParallelPlanIsMegatronsOverWholeHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.router_score_bias, ModelFamily::RouterBias::kOnRouter);
  EXPECT_EQ(f.layers_path, "model.layers");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.g_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.gate_proj", "colwise"},
      {"model.layers.*.mlp.up_proj", "colwise"},
      {"model.layers.*.mlp.down_proj", "rowwise"},
      {"model.layers.*.mlp.experts", "experts"},
      {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
      {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
      {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Every projection is unfused with its rows in head order: a contiguous split is whole heads
    // (g_proj's rows are its heads' gates).
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    // Each rule names modules of the tiny model: the dense MLP's of layer 0, the MoE block's of
    // layer 1, the attention's of layer 3 (sliding).
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      const bool dense_mlp = path.ends_with(".mlp.gate_proj") || path.ends_with(".mlp.up_proj") ||
                             path.ends_with(".mlp.down_proj");
      const bool moe = !dense_mlp && path.find(".mlp.") != std::string::npos;
      path.replace(star, 1, dense_mlp ? "0" : moe ? "1" : "3");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

// Step 3.7 Flash's multimodal file nests this text model (text_config, model_type step3p5) beside
// its vision encoder: Step3p7Config always builds Step3p7TextConfig from it, and
// Step3p7ForConditionalGeneration ties lm_head by the outer config's tie_word_embeddings, which
// Step3p7Config does not define (absent: untied).
TEST(Step3p5Models, TheStep37WrapperParsesToItsTextModel) {
  nlohmann::json text = tiny();
  text["tie_word_embeddings"] = true;  // not the config that ties
  const nlohmann::json wrapper = {
      {"model_type", "step3p7"},
      {"architectures", {"Step3p7ForConditionalGeneration"}},
      {"torch_dtype", "bfloat16"},
      {"image_token_id", 151679},
      {"projector_bias", false},
      {"vision_config", {{"model_type", "step3p5_vision"}, {"width", 32}, {"layers", 2}}},
      {"text_config", text}};
  const ModelConfig c = parse_model_config(wrapper, "step3p7.json");
  ModelConfig want = parse_model_config(tiny(), "tiny.json");
  want.torch_dtype = DType::kBFloat16;
  want.multimodal_model_type = "step3p7";
  EXPECT_EQ(c, want);
  EXPECT_FALSE(c.tie_word_embeddings);
  nlohmann::json tied = wrapper;
  tied["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(tied, "step3p7.json").tie_word_embeddings);
  // A text_config without model_type is Step3p7TextConfig; another type is refused.
  nlohmann::json no_type = wrapper;
  no_type["text_config"].erase("model_type");
  EXPECT_EQ(parse_model_config(no_type, "step3p7.json"), want);
  nlohmann::json other = wrapper;
  other["text_config"]["model_type"] = "llama";
  EXPECT_THAT([&] { parse_model_config(other, "step3p7.json"); },
              ThrowsMessage<Error>(HasSubstr("always builds its text model step3p5")));
}

}  // namespace
}  // namespace shardplan::tensor
