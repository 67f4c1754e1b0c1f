// mellum (JetBrains' Mellum2-12B-A2.5B) against hand formulas written here from transformers 5's
// modeling_mellum.py and the published sizes (the technical report, arXiv:2605.31268: "an
// open-weight 12B-parameter Mixture-of-Experts (MoE) language model with 2.5B active parameters
// per token", 64 experts of which 8 active, 4 KV heads, sliding-window attention on three of
// every four layers). h hidden, V vocabulary, H query heads and K key-value heads of d, E experts
// of width F, k of them a token, the dense MLP I wide, L layers of which D dense:
//   attention  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d], q_norm, k_norm [d]
//   moe        experts gate_up_proj [E, 2F, h], down_proj [E, h, F]; gate.weight [E, h]
//   total      L (2 h H d + 2 h K d + 2 d + 2 h) + D 3 h I + (L - D)(3 E h F + E h)
//              + 2 V h + h (untied)
//   active     total - (L - D)(E - k) 3 h F
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
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
  int64_t V, h, I, F, E, k, H, K, d, L, D;
};

int64_t hand_total(const Sizes& s) {
  const int64_t attention = 2 * s.h * s.H * s.d + 2 * s.h * s.K * s.d + 2 * s.d;
  const int64_t moe = 3 * s.E * s.h * s.F + s.E * s.h;
  return s.L * (attention + 2 * s.h) + s.D * 3 * s.h * s.I + (s.L - s.D) * moe + 2 * s.V * s.h +
         s.h;
}
int64_t hand_active(const Sizes& s) {
  return hand_total(s) - (s.L - s.D) * (s.E - s.k) * 3 * s.h * s.F;
}

// Mellum2-12B-A2.5B: every layer sparse.
constexpr Sizes kMellum2{98304, 2304, 7168, 896, 64, 8, 32, 4, 128, 28, 0};

TEST(MellumModels, Mellum2MatchesThePublishedSizes) {
  // 28 x (21,233,920 attention + 4,608 norms + 396,361,728 experts + 147,456 router)
  // + 2 x 226,492,416 + 2,304 = 12,149,923,072: "12B total". Active: 28 x 8 / 64 of the experts,
  // 2,439,060,736 with the embeddings and lm_head ("2.5B active"; 1,986,073,600 in the layers).
  EXPECT_EQ(hand_total(kMellum2), 12'149'923'072);
  EXPECT_EQ(hand_active(kMellum2), 2'439'060'736);
  const ModelConfig c = find_model_config("mellum2-12b-a2.5b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 12'149'923'072);
  EXPECT_EQ(active_parameters(*m, c), 2'439'060'736);
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  // The full layers' RoPE: YaRN by 16 from 8,192 at base 500,000.
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 16);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  // Two kinds: sliding layers (three of every four) and full ones (3, 7, ..., 27), all MoE.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 2u);
  EXPECT_EQ(describe(stack.kinds[0]), "sliding 1024 moe");
  EXPECT_EQ(describe(stack.kinds[1]), "moe");
  EXPECT_EQ(stack.count(0), 21);
  EXPECT_EQ(stack.count(1), 7);
  EXPECT_EQ(stack.first_layer(1), 3);
}

TEST(MellumModels, NamesShapesAndOrderAreTransformers) {
  const ModelConfig c = first_layers(find_model_config("mellum2-12b-a2.5b"), 4);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MellumForCausalLM");
  // Layer 0 (sliding) and layer 3 (full) alike: Qwen3-MoE's attention, then experts before the
  // router, then the two norms.
  for (const char* layer : {"model.layers.0.", "model.layers.3."}) {
    EXPECT_EQ(shapes_under(*m, layer), (test::Shapes{{"self_attn.q_proj.weight", {4096, 2304}},
                                                     {"self_attn.k_proj.weight", {512, 2304}},
                                                     {"self_attn.v_proj.weight", {512, 2304}},
                                                     {"self_attn.o_proj.weight", {2304, 4096}},
                                                     {"self_attn.q_norm.weight", {128}},
                                                     {"self_attn.k_norm.weight", {128}},
                                                     {"mlp.experts.gate_up_proj", {64, 1792, 2304}},
                                                     {"mlp.experts.down_proj", {64, 2304, 896}},
                                                     {"mlp.gate.weight", {64, 2304}},
                                                     {"input_layernorm.weight", {2304}},
                                                     {"post_attention_layernorm.weight", {2304}}}))
        << layer;
  }
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "MellumModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "MellumDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "MellumAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "MellumSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.gate").type_name(), "MellumTopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.experts").type_name(), "MellumExperts");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "MellumRotaryEmbedding");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mlp.gate.weight"), "router");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mlp.experts.down_proj"), "experts");
  // The rotary buffers per layer type in use, half the head each.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.sliding_attention_inv_freq").sizes(), (DimVector{64}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.full_attention_original_inv_freq").sizes(),
            (DimVector{64}));
  // _init_weights: the router's bare weight and the experts normal, the norms one.
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  EXPECT_EQ(init.at("model.layers.0.mlp.gate.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.mlp.experts.gate_up_proj"), normal);
  EXPECT_EQ(init.at("model.layers.0.mlp.experts.down_proj"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.k_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.at("model.norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
}

nlohmann::json tiny() {
  return {{"model_type", "mellum"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"layer_types",
           {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
          {"mlp_layer_types", {"dense", "sparse", "sparse", "sparse"}},
          {"sliding_window", 8},
          {"rope_parameters",
           {{"full_attention",
             {{"rope_type", "yarn"},
              {"rope_theta", 500000.0},
              {"factor", 4.0},
              {"original_max_position_embeddings", 64}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}},
          {"max_position_embeddings", 256}};
}

TEST(MellumModels, TinyConfigByHand) {
  // Attention 4 x 12,320 (q 4,096, k 2,048, v 2,048, o 4,096, q/k norms 32); norms 512; the dense
  // MLP of layer 0 18,432; three MoE blocks of 24,832 (experts 16,384 + 8,192, router 256);
  // embeddings 2 x 8,192 + 64.
  const Sizes s{128, 64, 96, 32, 4, 2, 4, 2, 16, 4, 1};
  EXPECT_EQ(hand_total(s), 159'168);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 159'168);
  EXPECT_EQ(active_parameters(*m, c), hand_active(s));
  EXPECT_EQ(hand_active(s), 159'168 - 3 * 12'288);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.dense_intermediate_size, 96);
  EXPECT_EQ(c.intermediate_size, 32);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The dense layer's MLP, as MellumMLP names it.
  EXPECT_EQ(shapes_under(*m, "model.layers.0.mlp."),
            (test::Shapes{{"gate_proj.weight", {96, 64}},
                          {"up_proj.weight", {96, 64}},
                          {"down_proj.weight", {64, 96}}}));
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "MellumMLP");
  // attention_bias on q, k, v and o: 4 x (64 + 32 + 32 + 64).
  j["attention_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(biased)->parameters_numel(), 159'168 + 768);
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  j["attention_bias"] = false;
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 159'168 - 8192);
  // Without mlp_layer_types every layer is sparse: layer 0's MLP becomes an MoE block.
  j = tiny();
  j.erase("mlp_layer_types");
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(),
            159'168 - 18'432 + 24'832);
}

TEST(MellumModels, ClassDefaultsAndTheFilesOwnKeys) {
  // MellumConfig(): Mellum2's sizes, every layer full attention and sparse, unscaled RoPE.
  const nlohmann::json defaults = {{"model_type", "mellum"}};
  const ModelConfig c = parse_model_config(defaults, "defaults.json");
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_TRUE(c.dense_layers.empty());
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(layer_stack(c).kinds.size(), 1u);
  EXPECT_EQ(build_model(c)->parameters_numel(), hand_total(kMellum2));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The published file's Qwen3-MoE leftovers are attributes MellumConfig never reads: inert.
  nlohmann::json j = tiny();
  j["use_sliding_window"] = false;
  j["max_window_layers"] = 2;
  j["mlp_only_layers"] = {0, 1};
  j["decoder_sparse_step"] = 2;
  j["norm_topk_prob"] = false;
  j["rope_theta"] = 1e6;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), parse_model_config(tiny(), "tiny.json"));
  // Every layer sliding: the sliding entry is the model's RoPE, the full one is not read.
  j = tiny();
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention"};
  j["rope_parameters"] = {
      {"sliding_attention", {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 2.0}}}};
  const ModelConfig sliding = parse_model_config(j, "tiny.json");
  EXPECT_DOUBLE_EQ(sliding.rope_theta, 1e4);
  ASSERT_TRUE(sliding.rope_scaling.has_value());
  EXPECT_EQ(sliding.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(sliding), "round trip"), sliding);
  // No sliding layer: a null window is none, and 0 a window nobody uses.
  j = tiny();
  j.erase("layer_types");
  j["sliding_window"] = nullptr;
  const ModelConfig full = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(full.sliding_window.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(full), "round trip"), full);
  j["sliding_window"] = 0;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), full);
}

TEST(MellumModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "mellum.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "expected rope_parameters");
  refused("rope_scaling", nullptr, "expected rope_parameters alone");
  refused("layer_types",
          {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"},
          "no mask");
  refused("layer_types", {"sliding_attention", "full_attention"},
          "a list of num_hidden_layers = 4");
  refused("sliding_window", nullptr, "transformers raises without a window");
  refused("sliding_window", 0, "expected > 0");
  refused("mlp_layer_types", {"dense", "sparse", "sparse"}, "a list of num_hidden_layers = 4");
  refused("mlp_layer_types", {"dense", "moe", "sparse", "sparse"}, "\"dense\" or \"sparse\"");
  refused("intermediate_size", 0, "expected a positive MLP width");
  refused("rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}},
          "expected \"sliding_attention\"");
  refused("rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e4}},
          "expected \"full_attention\"");
  refused("rope_parameters", nlohmann::json::array({1, 2}), "reads it by layer type");
  refused("rope_parameters",
          {{"full_attention", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}},
           {"sliding_attention", {{"rope_theta", 1e4}}}},
          "rotates the whole head");
  refused("rope_parameters",
          {{"full_attention", {{"rope_type", "default"}}},
           {"sliding_attention", {{"rope_theta", 1e4}}}},
          "has no rope_theta");
}

TEST(MellumModels, TraceRotatesPerLayerTypeAndSlidesThreeLayersOfFour) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const double B = 2, S = 16, T = B * S, h = 64, H = 4, K = 2, d = 16, I = 96, E = 4;
  const auto matmul_of = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  // Layer 0 slides (a window of 8 of the 16 keys), layer 3 attends all 16: q, k, v and o_proj,
  // then the core's two products, 4 B H S keys d.
  for (const auto& [layer, keys] : {std::tuple{0, 8.0}, std::tuple{3, 16.0}}) {
    const std::string a = "model.layers." + std::to_string(layer) + ".self_attn";
    EXPECT_DOUBLE_EQ(matmul_of(a),
                     2 * T * h * (H * d + 2 * K * d) + 2 * T * H * d * h + 4 * B * H * S * keys * d)
        << a;
    // The whole head rotates: rotate_half's one cat for q and one for k.
    EXPECT_EQ(ops_in(g, "cat", a), 2) << a;
  }
  // One table per layer type in use (sliding and full): two cosines.
  EXPECT_EQ(ops_in(g, "cos", "model.rotary_emb"), 2);
  // Layer 0's dense MLP: three [T, h] x [h, I] products.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.mlp"), 3 * 2 * T * h * I);
  // The experts on their expected load: 32 tokens x 2 picks over 4 experts, 16 each, gate_up
  // 2 x 16 x 64 x 64 and down 2 x 16 x 32 x 64 per expert.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.experts"),
                   4 * (2 * 16 * 64 * 64 + 2 * 16 * 32 * 64));
  // The router: one [T, h] x [h, E] product, softmax scores.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.gate"), 2 * T * h * E);
  EXPECT_EQ(ops_in(g, "softmax", "model.layers.1.mlp.gate"), 1);
}

TEST(MellumModels, TrainingTraceCountsEachProjectionThreeTimes) {
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
  // q 64, k 32, v 32 and o_proj 64 x 64, over 32 tokens.
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (64 + 32 + 32) + 2.0 * 32 * 64 * 64);
  EXPECT_DOUBLE_EQ(backward, 2 * forward);
}

TEST(MellumModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.experts_class, "MellumExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  // q, k, v apart (each split by whole heads), o_proj row-parallel; the dense MLP as Llama's;
  // each expert split over its width; router and norms replicated (no rule).
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.gate_proj", "colwise"},
      {"model.layers.*.mlp.up_proj", "colwise"},
      {"model.layers.*.mlp.down_proj", "rowwise"},
      {"model.layers.*.mlp.experts", "experts"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    // Every rule names a module the tiny model builds: layer 0 for the dense MLP, 1 otherwise.
    std::string path = want[i].first;
    const bool dense_mlp =
        path.find(".mlp.") != std::string::npos && path.find("experts") == std::string::npos;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      path.replace(star, 1, dense_mlp ? "0" : "1");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

// The Hub's files keep each expert apart (mlp.experts.<e>.{gate,up,down}_proj.weight);
// transformers stacks them as it loads (conversion_mapping.py: "mellum" as "qwen2_moe"), and so
// does the checkpoint check.
TEST(MellumModels, HubCheckpointExpertsAreStackedAsTransformersLoadsThem) {
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  std::vector<test::StEntry> experts;
  for (const NamedTensor& p : model->named_parameters()) {
    if (p.name.find(".mlp.experts.") == std::string::npos) continue;
    const std::string block = p.name.substr(0, p.name.find(".experts."));
    test::append_experts_one_by_one(
        experts, block, p.name,
        std::vector<int64_t>(p.tensor.sizes().begin(), p.tensor.sizes().end()),
        {"gate_proj", "up_proj", "down_proj"});
  }
  const ModelSource src = test::check_stored_as(
      cfg, *model,
      [](const std::string& n) -> std::string {
        return n.find(".mlp.experts.") != std::string::npos ? "" : n;  // stored one by one
      },
      experts);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

}  // namespace
}  // namespace shardplan::tensor
