// inkling_text (Thinking Machines Lab's Inkling, the language model of the multimodal
// inkling_mm_model) against hand formulas written here from transformers 5's modeling_inkling.py
// and configuration_inkling.py, and the published size (the transformers model page: "975B total
// parameters with 41B active per token", 66 layers, 6 of 256 experts and 2 shared experts).
// h hidden, V vocabulary, per layer type H query and K key-value heads of d, r = d_rel relative
// states per head, R the bias extent (rel_extent on full layers, the window on sliding ones), k the
// short convolutions' width, E experts and S shared experts of width F, I the dense MLP's width:
//   attention  q_proj [H d, h], k_proj, v_proj [K d, h], r_proj [H r, h], o_proj [h, H d],
//              k_sconv, v_sconv [K d, 1, k], q_norm, k_norm [d], rel_logits_proj.proj [r, R]
//              = 2 h H d + 2 h K d + h H r + 2 K d k + 2 d + r R
//   moe        gate.weight [E + S, h], gate.global_scale [1], gate.e_score_correction_bias [E],
//              experts 3 E F h, shared_experts 3 S F h
//   dense mlp  3 h I + 1 (its global_scale)
//   layer      attention + feed-forward + 2 h (two norms) + 2 h k (attn_sconv, mlp_sconv)
//   total      layers + 2 V h (untied) + 2 h (norm, embed_norm)
//   active     total - (MoE layers) (E - top k) 3 F h
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
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
using test::ops_under;
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// One layer type's attention.
struct Heads {
  int64_t H, K, d, R;
};
struct Sizes {
  int64_t V, h, r, k, E, S, F, top_k, I;
  Heads full, sliding;
};

int64_t attention(const Sizes& s, const Heads& a) {
  return 2 * s.h * a.H * a.d + 2 * s.h * a.K * a.d + s.h * a.H * s.r + 2 * a.K * a.d * s.k +
         2 * a.d + s.r * a.R;
}
int64_t moe(const Sizes& s) {
  return (s.E + s.S) * s.h + 1 + s.E + 3 * s.E * s.F * s.h + 3 * s.S * s.F * s.h;
}
int64_t dense(const Sizes& s) { return 3 * s.h * s.I + 1; }

// Layers given as (sliding?, sparse?) pairs.
int64_t hand_total(const Sizes& s, const std::vector<std::pair<bool, bool>>& layers) {
  int64_t total = 2 * s.V * s.h + 2 * s.h;
  for (const auto& [sliding, sparse] : layers) {
    total += attention(s, sliding ? s.sliding : s.full) + (sparse ? moe(s) : dense(s)) + 2 * s.h +
             2 * s.h * s.k;
  }
  return total;
}
int64_t hand_active(const Sizes& s, const std::vector<std::pair<bool, bool>>& layers) {
  int64_t total = hand_total(s, layers);
  for (const auto& [sliding, sparse] : layers) {
    if (sparse) total -= (s.E - s.top_k) * 3 * s.F * s.h;
  }
  return total;
}

// Inkling: InklingTextConfig's defaults, which the published model's sizes are.
Sizes inkling() {
  return {201024, 6144, 16, 4, 256, 2, 3072, 6, 24576, {64, 8, 128, 1024}, {64, 16, 128, 512}};
}
std::vector<std::pair<bool, bool>> inkling_layers() {
  std::vector<std::pair<bool, bool>> out;
  for (int64_t i = 0; i < 66; ++i) out.emplace_back((i + 1) % 6 != 0, true);
  return out;
}

TEST(InklingTextModels, FlagshipMatchesThePublishedSizes) {
  // A full layer: attention 119,562,496; a sliding one 132,145,408 (16 key-value heads, a bias
  // over 512); every layer's MoE block 14,610,346,241 and 61,440 of norms and convolutions.
  // 11 full + 55 sliding layers + 2 x 1,235,091,456 + 12,288: "975B total, 41B active".
  const Sizes s = inkling();
  EXPECT_EQ(attention(s, s.full), 119'562'496);
  EXPECT_EQ(attention(s, s.sliding), 132'145'408);
  EXPECT_EQ(moe(s), 14'610'346'241);
  EXPECT_EQ(hand_total(s, inkling_layers()), 975'340'287'042);
  EXPECT_EQ(hand_active(s, inkling_layers()), 41'059'071'042);
  // The shipped file is the multimodal one: its language model is what is built.
  const ModelConfig c = find_model_config("inkling");
  EXPECT_EQ(c.model_type, "inkling_text");
  EXPECT_EQ(c.multimodal_model_type, "inkling_mm_model");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "InklingForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 975'340'287'042);
  EXPECT_EQ(active_parameters(*m, c), 41'059'071'042);
  // The router's bias is a parameter the model holds; the prediction layers are not built.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 0);
  EXPECT_EQ(parameters_beyond_model(c).mtp, 0);
  ModelConfig text = c;
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
  // The file's checkpoint-style keys (sconv_kernel_size, model_max_length) as their fields.
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.tie_word_embeddings);
  // Two kinds: the 55 sliding layers (layer 0 first) and the 11 full ones.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 2u);
  EXPECT_EQ(describe(stack.kinds[0]), "sliding 512 moe");
  EXPECT_EQ(describe(stack.kinds[1]), "moe");
  EXPECT_EQ(stack.count(0), 55);
  EXPECT_EQ(stack.count(1), 11);
  EXPECT_EQ(stack.kind_of(5), 1);
  EXPECT_EQ(kv_heads_of(c, stack.kinds[0]), 16);
  EXPECT_EQ(kv_heads_of(c, stack.kinds[1]), 8);
  // A one-layer model of the full kind, as the planner traces it, keeps its 8 key-value heads and
  // its bias over 1,024 tokens.
  const ModulePtr one = build_model(uniform_config(c, stack.kinds[1]));
  EXPECT_EQ(one->get_parameter("model.layers.0.self_attn.k_proj.weight").sizes(),
            (DimVector{8 * 128, 6144}));
  EXPECT_EQ(one->get_parameter("model.layers.0.self_attn.rel_logits_proj.proj").sizes(),
            (DimVector{16, 1024}));
}

// Four layers: full with the dense MLP, two sliding MoE layers, a full MoE layer. The sliding
// layers' heads, key-value heads and head width all differ from the full layers'.
nlohmann::json tiny() {
  return {{"model_type", "inkling_text"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"swa_num_attention_heads", 8},
          {"swa_num_key_value_heads", 4},
          {"swa_head_dim", 8},
          {"sliding_window_size", 8},
          {"d_rel", 4},
          {"rel_extent", 32},
          {"log_scaling_n_floor", 8},
          {"log_scaling_alpha", 0.1},
          {"conv_kernel_size", 3},
          {"layer_types", {"hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid"}},
          {"mlp_layer_types", {"dense", "sparse", "sparse", "sparse"}},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"n_shared_experts", 2},
          {"route_scale", 8.0},
          {"logits_mup_width_multiplier", 4.0},
          {"unpadded_vocab_size", 120},
          {"max_position_embeddings", 256}};
}
Sizes tiny_sizes() { return {128, 64, 4, 3, 4, 2, 32, 2, 96, {4, 2, 16, 32}, {8, 4, 8, 8}}; }
const std::vector<std::pair<bool, bool>> kTinyLayers = {
    {false, false}, {true, true}, {true, true}, {false, true}};

TEST(InklingTextModels, TinyConfigByHand) {
  // Attention 13,664 (full) and 14,576 (sliding); dense MLP 18,433; MoE 37,253 (router 384 + 1
  // + 4, experts 24,576, shared 12,288); 512 of norms and convolutions a layer; embeddings
  // 2 x 8,192 + 128: 32,609 + 2 x 52,341 + 51,429 + 16,512.
  const Sizes s = tiny_sizes();
  EXPECT_EQ(attention(s, s.full), 13'664);
  EXPECT_EQ(attention(s, s.sliding), 14'576);
  EXPECT_EQ(moe(s), 37'253);
  EXPECT_EQ(hand_total(s, kTinyLayers), 205'232);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 205'232);
  EXPECT_EQ(active_parameters(*m, c), hand_active(s, kTinyLayers));
  EXPECT_EQ(hand_active(s, kTinyLayers), 168'368);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // ModelConfig keeps Gemma 4's convention: head_dim is the sliding layers' width.
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.global_head_dim, 16);
  EXPECT_EQ(c.sliding_num_attention_heads, 8);
  EXPECT_EQ(c.sliding_num_key_value_heads, 4);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.dense_intermediate_size, 96);
  EXPECT_EQ(c.intermediate_size, 32);
  EXPECT_EQ(c.shared_expert_intermediate_size, 2 * 32);
  EXPECT_EQ(c.d_rel, 4);
  EXPECT_EQ(c.rel_extent, 32);
  EXPECT_EQ(c.log_scaling_n_floor, 8);
  EXPECT_DOUBLE_EQ(c.logits_scaling, 4.0);
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 3u);
  EXPECT_EQ(describe(stack.kinds[0]), "dense");
  EXPECT_EQ(describe(stack.kinds[1]), "sliding 8 moe");
  EXPECT_EQ(describe(stack.kinds[2]), "moe");
  EXPECT_EQ(head_dim_of(c, stack.kinds[0]), 16);
  EXPECT_EQ(head_dim_of(c, stack.kinds[1]), 8);
  EXPECT_EQ(attention_heads_of(c, stack.kinds[1]), 8);
  // tie_word_embeddings true changes nothing: InklingForCausalLM ties no weight.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), c);
}

TEST(InklingTextModels, NamesShapesAndOrderAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = DType::kBFloat16});
  // Layer 0: full attention (4 heads, 2 key-value heads of 16, a bias over 32), the dense MLP,
  // whose own global_scale comes before its projections.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"self_attn.q_proj.weight", {64, 64}},
                          {"self_attn.k_proj.weight", {32, 64}},
                          {"self_attn.v_proj.weight", {32, 64}},
                          {"self_attn.r_proj.weight", {16, 64}},
                          {"self_attn.o_proj.weight", {64, 64}},
                          {"self_attn.k_sconv.conv1d.weight", {32, 1, 3}},
                          {"self_attn.v_sconv.conv1d.weight", {32, 1, 3}},
                          {"self_attn.q_norm.weight", {16}},
                          {"self_attn.k_norm.weight", {16}},
                          {"self_attn.rel_logits_proj.proj", {4, 32}},
                          {"mlp.global_scale", {1}},
                          {"mlp.gate_proj.weight", {96, 64}},
                          {"mlp.up_proj.weight", {96, 64}},
                          {"mlp.down_proj.weight", {64, 96}},
                          {"input_layernorm.weight", {64}},
                          {"post_attention_layernorm.weight", {64}},
                          {"attn_sconv.conv1d.weight", {64, 1, 3}},
                          {"mlp_sconv.conv1d.weight", {64, 1, 3}}}));
  // Layer 1: sliding attention (8 heads, 4 key-value heads of 8, a bias over the window of 8),
  // the MoE block: router, routed experts, shared experts.
  EXPECT_EQ(shapes_under(*m, "model.layers.1."),
            (test::Shapes{{"self_attn.q_proj.weight", {64, 64}},
                          {"self_attn.k_proj.weight", {32, 64}},
                          {"self_attn.v_proj.weight", {32, 64}},
                          {"self_attn.r_proj.weight", {32, 64}},
                          {"self_attn.o_proj.weight", {64, 64}},
                          {"self_attn.k_sconv.conv1d.weight", {32, 1, 3}},
                          {"self_attn.v_sconv.conv1d.weight", {32, 1, 3}},
                          {"self_attn.q_norm.weight", {8}},
                          {"self_attn.k_norm.weight", {8}},
                          {"self_attn.rel_logits_proj.proj", {4, 8}},
                          {"mlp.gate.weight", {6, 64}},
                          {"mlp.gate.global_scale", {1}},
                          {"mlp.gate.e_score_correction_bias", {4}},
                          {"mlp.experts.gate_up_proj", {4, 64, 64}},
                          {"mlp.experts.down_proj", {4, 64, 32}},
                          {"mlp.shared_experts.gate_proj", {2, 32, 64}},
                          {"mlp.shared_experts.up_proj", {2, 32, 64}},
                          {"mlp.shared_experts.down_proj", {2, 64, 32}},
                          {"input_layernorm.weight", {64}},
                          {"post_attention_layernorm.weight", {64}},
                          {"attn_sconv.conv1d.weight", {64, 1, 3}},
                          {"mlp_sconv.conv1d.weight", {64, 1, 3}}}));
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight",
                            "model.embed_norm.weight", "lm_head.weight"}));
  const std::pair<const char*, const char*> types[] = {
      {"model", "InklingTextModel"},
      {"model.layers.1", "InklingDecoderLayer"},
      {"model.layers.1.self_attn", "InklingAttention"},
      {"model.layers.1.self_attn.k_sconv", "InklingShortConvolution"},
      {"model.layers.1.self_attn.rel_logits_proj", "InklingRelativeLogits"},
      {"model.layers.1.mlp", "InklingMoE"},
      {"model.layers.1.mlp.gate", "InklingTopkRouter"},
      {"model.layers.1.mlp.experts", "InklingExperts"},
      {"model.layers.1.mlp.shared_experts", "InklingSharedExperts"},
      {"model.layers.0.mlp", "InklingMLP"},
      {"model.layers.1.attn_sconv", "InklingShortConvolution"}};
  for (const auto& [path, type] : types) {
    EXPECT_EQ(m->get_submodule(path).type_name(), type) << path;
  }
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.experts.down_proj"), "experts");
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.shared_experts.gate_proj"), "mlp");
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.gate.e_score_correction_bias"), "router");
  EXPECT_EQ(block_kind(*m, "model.layers.1.self_attn.rel_logits_proj.proj"), "attention");
  // The router's bias is a trained nn.Parameter here (Laguna's is frozen).
  EXPECT_TRUE(m->get_parameter("model.layers.1.mlp.gate.e_score_correction_bias").requires_grad());
  // The four short convolutions stay in float32 in a bfloat16 model
  // (_keep_in_fp32_modules_strict); everything else is bfloat16.
  for (const char* p :
       {"model.layers.1.self_attn.k_sconv.conv1d.weight", "model.layers.1.attn_sconv.conv1d.weight",
        "model.layers.0.mlp_sconv.conv1d.weight"}) {
    EXPECT_EQ(m->get_parameter(p).dtype(), DType::kFloat32) << p;
  }
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.rel_logits_proj.proj").dtype(),
            DType::kBFloat16);
  // _init_weights: Linear, Conv1d, the profiles and the experts normal; the scales one; the
  // router's bias zero; the embedding normal without a padding row (pad_token_id None).
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("model.embed_tokens.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.self_attn.r_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.self_attn.rel_logits_proj.proj"), normal);
  EXPECT_EQ(init.at("model.layers.1.self_attn.k_sconv.conv1d.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.gate.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.gate.global_scale"), one);
  EXPECT_EQ(init.at("model.layers.1.mlp.gate.e_score_correction_bias"), zero);
  EXPECT_EQ(init.at("model.layers.1.mlp.experts.gate_up_proj"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.shared_experts.gate_proj"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.shared_experts.down_proj"), normal);
  EXPECT_EQ(init.at("model.layers.0.mlp.global_scale"), one);
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_norm.weight"), one);
  EXPECT_EQ(init.at("model.embed_norm.weight"), one);
}

TEST(InklingTextModels, ClassDefaultsAliasesAndDerivedLayerTypes) {
  // InklingTextConfig() is the published model: the shipped file's language model, its dtype
  // aside.
  const nlohmann::json defaults = {{"model_type", "inkling_text"}};
  const ModelConfig d = parse_model_config(defaults, "defaults.json");
  ModelConfig shipped = find_model_config("inkling");
  shipped.multimodal_model_type.clear();
  shipped.torch_dtype = d.torch_dtype;
  EXPECT_EQ(d, shipped);
  EXPECT_EQ(d.sliding_window, 512);
  EXPECT_EQ(d.log_scaling_n_floor, 0);
  EXPECT_EQ(d.layer_types[4], AttentionType::kSliding);
  EXPECT_EQ(d.layer_types[5], AttentionType::kFull);
  EXPECT_TRUE(d.dense_layers.empty());
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  // The attribute_map's aliases name the same fields.
  nlohmann::json j = tiny();
  for (const auto& [key, alias] :
       {std::pair<const char*, const char*>{"conv_kernel_size", "sconv_kernel_size"},
        {"max_position_embeddings", "model_max_length"},
        {"sliding_window_size", "sliding_window"},
        {"n_routed_experts", "num_local_experts"},
        {"logits_mup_width_multiplier", "embedding_multiplier"}}) {
    j[alias] = j[key];
    j.erase(key);
  }
  EXPECT_EQ(parse_model_config(j, "aliases.json"), c);
  // Without layer_types: local_layer_ids names the sliding layers (indices past the stack are
  // ignored, as the class's set ignores them), else all but every sixth layer slide.
  j = tiny();
  j.erase("layer_types");
  j["local_layer_ids"] = {1, 2, 9};
  EXPECT_EQ(parse_model_config(j, "local.json"), c);
  j.erase("local_layer_ids");
  EXPECT_EQ(parse_model_config(j, "rule.json").layer_types,
            (std::vector<AttentionType>(4, AttentionType::kSliding)));
  // Without mlp_layer_types: the first dense_mlp_idx layers dense (a key __post_init__ pops), and
  // dense_intermediate_size over intermediate_size.
  j = tiny();
  j.erase("mlp_layer_types");
  j["dense_mlp_idx"] = 1;
  EXPECT_EQ(parse_model_config(j, "dense.json"), c);
  j["dense_intermediate_size"] = 80;
  const ModelConfig wider = parse_model_config(j, "dense.json");
  EXPECT_EQ(wider.dense_intermediate_size, 80);
  EXPECT_EQ(build_model(wider)->parameters_numel(), 205'232 - 3 * 64 * 16);
  EXPECT_EQ(parse_model_config(to_hf_json(wider), "round trip"), wider);
  // Equal head counts and widths per type keep the sliding fields at 0 (the full layers').
  j = tiny();
  j["swa_num_attention_heads"] = 4;
  j["swa_num_key_value_heads"] = 2;
  j["swa_head_dim"] = 16;
  const ModelConfig same = parse_model_config(j, "same.json");
  EXPECT_EQ(same.sliding_num_attention_heads, 0);
  EXPECT_EQ(same.sliding_num_key_value_heads, 0);
  EXPECT_EQ(same.global_head_dim, 0);
  EXPECT_EQ(same.head_dim, 16);
  EXPECT_EQ(parse_model_config(to_hf_json(same), "round trip"), same);
  // The multimodal wrapper: its text_config builds InklingTextConfig whatever it names, and the
  // output layer stays untied whatever the wrapper says.
  nlohmann::json text = tiny();
  text.erase("model_type");
  const nlohmann::json wrapper = {{"model_type", "inkling_mm_model"},
                                  {"tie_word_embeddings", true},
                                  {"torch_dtype", "bfloat16"},
                                  {"text_config", text},
                                  {"vision_config", {{"patch_size", 40}}}};
  const ModelConfig mm = parse_model_config(wrapper, "inkling.json");
  EXPECT_EQ(mm.model_type, "inkling_text");
  EXPECT_EQ(mm.multimodal_model_type, "inkling_mm_model");
  EXPECT_FALSE(mm.tie_word_embeddings);
  EXPECT_EQ(build_model(mm)->parameters_numel(), 205'232);
  nlohmann::json other = wrapper;
  other["text_config"]["model_type"] = "llama";
  EXPECT_THAT([&] { parse_model_config(other, "inkling.json"); },
              ThrowsMessage<Error>(HasSubstr("always builds its text model inkling_text")));
}

TEST(InklingTextModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "inkling.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("layer_types", {"hybrid", "full_attention", "hybrid_sliding", "hybrid"},
          "expected one of them");
  refused("layer_types", {"hybrid", "hybrid_sliding", "hybrid"}, "a list of num_hidden_layers = 4");
  refused("mlp_layer_types", {"dense", "moe", "sparse", "sparse"}, "\"dense\" or \"sparse\"");
  refused("n_shared_experts", 0, "expected at least 1");
  refused("log_scaling_n_floor", 0, "expected a positive position");
  refused("sliding_window_size", 0, "expected a positive integer");
  refused("d_rel", 0, "expected a positive integer");
  refused("rel_extent", -1, "expected a positive integer");
  refused("swa_head_dim", 0, "expected a positive integer");
  refused("conv_kernel_size", 0, "expected a positive integer");
  refused("sconv_kernel_size", 5, "differs from conv_kernel_size 3");
  refused("model_max_length", 512, "differs from max_position_embeddings 256");
  refused("embedding_multiplier", 2.0, "differs from logits_mup_width_multiplier");
  refused("logits_mup_width_multiplier", 0.0, "nonzero finite number");
  refused("unpadded_vocab_size", 0, "positive row count");
  refused("hidden_act", "xielu", "does not build");
  refused("route_scale", "8", "expected a number");
  // Checked once parsed (validate), named by the file's key.
  refused("swa_num_key_value_heads", 3, "does not divide");
  refused("num_experts_per_tok", 5, "must be in [1, num_local_experts = 4]");
}

TEST(InklingTextModels, TraceCountsEachProjectionTheBiasProductAndTheConvolutions) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const double B = 2, S = 16, T = 32, h = 64, r = 4;
  const auto matmul_of = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  // Layer 0 (full: 4 heads, 2 key-value heads of 16, a bias over 32, all 16 keys) and layer 1
  // (sliding: 8 heads, 4 of 8, a bias over 8, a window of 8 keys): q, k, v, r and o, the relative
  // logits' product 2 T H r R, and the core's two products 4 B H S keys d.
  struct Case {
    int layer;
    double H, K, d, R, keys;
  };
  for (const Case& x : {Case{0, 4, 2, 16, 32, 16}, Case{1, 8, 4, 8, 8, 8}}) {
    const std::string a = "model.layers." + std::to_string(x.layer) + ".self_attn";
    EXPECT_DOUBLE_EQ(matmul_of(a + ".r_proj"), 2 * T * h * x.H * r);
    EXPECT_DOUBLE_EQ(matmul_of(a + ".rel_logits_proj"), 2 * T * x.H * r * x.R);
    EXPECT_DOUBLE_EQ(matmul_of(a), 2 * T * h * (x.H * x.d + 2 * x.K * x.d + x.H * r) +
                                       2 * T * x.H * x.d * h + 2 * T * x.H * r * x.R +
                                       4 * B * x.H * S * x.keys * x.d);
    // Four short convolutions a layer: k and v in the attention, one after each half.
    EXPECT_EQ(ops_under(g, "causal_conv1d", "model.layers." + std::to_string(x.layer) + "."), 4);
  }
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.self_attn"), 1'015'808);
  // The full layers scale their queries by 1 + alpha log(position / 8) (one log for tau), the
  // sliding ones do not.
  EXPECT_EQ(ops_in(g, "log", "model.layers.0.self_attn"), 1);
  EXPECT_EQ(ops_in(g, "log", "model.layers.3.self_attn"), 1);
  EXPECT_EQ(ops_in(g, "log", "model.layers.1.self_attn"), 0);
  // The dense MLP: three projections of 96, then its global_scale.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.mlp"), 3 * 2 * T * h * 96);
  // The MoE block: the router over E + S = 6 logits (sigmoid scores, logsigmoid of the chosen
  // ones), the routed experts on their expected load (32 tokens x 2 picks over 4 experts: 16
  // each, gate_up 2 x 16 x 64 x 64 and down 2 x 16 x 32 x 64 per expert), the two shared experts
  // on every token (three batched products of 2 x 2 x 32 x 64 x 32).
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.gate"), 2 * T * h * 6);
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.mlp.gate"), 2);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.experts"), 786'432);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.shared_experts"), 3 * 2 * 2 * T * h * 32);
  EXPECT_EQ(ops_in(g, "bmm", "model.layers.1.mlp.shared_experts"), 3);
  // The final hidden states divided by logits_mup_width_multiplier before lm_head.
  EXPECT_EQ(ops_in(g, "div", ""), 1);
  EXPECT_DOUBLE_EQ(matmul_of("lm_head"), 2 * T * h * 128);
}

TEST(InklingTextModels, TrainingTraceCountsProjectionsAndTheBiasThreeTimes) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double forward = 0, backward = 0, bias_forward = 0, bias_backward = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.call < 0 || op.matmul_flops <= 0) continue;
    const std::string& fqn = st.calls[static_cast<size_t>(op.call)].fqn;
    if (fqn == "model.layers.1.self_attn.rel_logits_proj") {
      bias_forward += op.matmul_flops;
      bias_backward += op.backward_matmul_flops;
    } else if (op.op == "linear" && fqn.starts_with("model.layers.1.self_attn")) {
      forward += op.matmul_flops;
      backward += op.backward_matmul_flops;
    }
  }
  // q 64, k 32, v 32 and r 32 outputs, o_proj 64 x 64, over 32 tokens; each weight and input
  // gradient another product of each.
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (64 + 32 + 32 + 32) + 2.0 * 32 * 64 * 64);
  EXPECT_DOUBLE_EQ(backward, 2 * forward);
  // The relative logits are trained through the kernel that reads them: the states' and the
  // profiles' gradients, 2 x 2 T H r R.
  EXPECT_DOUBLE_EQ(bias_forward, 2.0 * 32 * 8 * 4 * 8);
  EXPECT_DOUBLE_EQ(bias_backward, 2 * bias_forward);
}

// The family's tensor-parallel plan names modules the model builds
// (tests/planner/cost/inkling_text_parallel_test.cpp applies it).
TEST(InklingTextModels, TensorParallelPlanNamesBuiltModules) {
  const ModelFamily& f = *find_family("inkling_text");
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.experts_class, "InklingExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.r_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.gate_proj", "colwise"},
      {"model.layers.*.mlp.up_proj", "colwise"},
      {"model.layers.*.mlp.down_proj", "rowwise"},
      {"model.layers.*.mlp.experts", "experts"},
      {"model.layers.*.mlp.shared_experts", "experts"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Every projection is unfused, its rows head by head: a contiguous split is whole heads.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      // Layer 0 holds the dense MLP, layer 1 the experts (and, as every layer, an attention).
      const bool dense_mlp = path.ends_with("mlp.gate_proj") || path.ends_with("mlp.up_proj") ||
                             path.ends_with("mlp.down_proj");
      path.replace(star, 1, dense_mlp ? "0" : "1");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
