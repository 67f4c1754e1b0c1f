// zaya (Zyphra's ZAYA1) against hand formulas written here from transformers 5's modeling_zaya.py
// and configuration_zaya.py, and the published sizes (Zyphra's ZAYA1 announcement: "760M active
// and 8.3B total parameters"; transformers' model page: "760M active / 8.4B total"). h hidden, V
// vocabulary (tied), H heads and K key-value heads of d, C = (H + K) d, t0 and t1 the CCA
// convolution widths, r the router width, E experts of width F (top 1), L layers:
//   attention  q_proj [H d, h], k_proj [K d, h], v_proj_current and v_proj_delayed [K d / 2, h],
//              conv_qk_depthwise [C, 1, t0] + [C], conv_qk_grouped [C, d, t1] + [C],
//              qk_norm.temp [K], o_proj [h, H d]      (no biases unless attention_bias)
//   router     down_proj [r, h] + [r], router_mlp.norm [r], fc1 and fc2 [r, r] + [r],
//              out_proj [E + 1, r] (E experts and the skip); router_states_scale [r] on layers 1..
//   experts    gate_up_proj [E, 2F, h], down_proj [E, h, F]
//   layer      two RMSNorms [h], two residual scalings of four vectors [h]
//   total      L (attention + router + 3 E h F + 10 h) + (L - 1) r + 3 h + V h
//              (3 h: the embeddings' scale and bias, the final norm)
//   active     total - L (E - 1) 3 h F
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
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t V, h, L, H, K, d, E, F, r, t0, t1;
};

int64_t attention(const Sizes& s) {
  const int64_t C = (s.H + s.K) * s.d;
  return s.h * s.H * s.d + s.h * s.K * s.d + 2 * s.h * (s.K * s.d / 2) + C * s.t0 + C +
         C * s.d * s.t1 + C + s.K + s.H * s.d * s.h;
}
int64_t router(const Sizes& s) {
  return s.h * s.r + s.r + s.r + 2 * (s.r * s.r + s.r) + s.r * (s.E + 1);
}
int64_t hand_total(const Sizes& s) {
  return s.L * (attention(s) + router(s) + 3 * s.E * s.h * s.F + 10 * s.h) + (s.L - 1) * s.r +
         3 * s.h + s.V * s.h;
}
int64_t hand_active(const Sizes& s) { return hand_total(s) - s.L * (s.E - 1) * 3 * s.h * s.F; }

const Sizes kZaya1{262272, 2048, 40, 8, 2, 128, 16, 2048, 256, 2, 2};

TEST(ZayaModels, Zaya1BaseMatchesThePublishedSizes) {
  // Attention 5,575,682 (q 2,097,152, k 524,288, the value halves 2 x 262,144, the convolutions
  // 3,840 and 328,960, temp 2, o 2,097,152); router 660,736; experts 201,326,592; norms and
  // scalings 20,480: 207,583,490 a layer, 256 more from layer 1 on; the embedding 537,133,056.
  EXPECT_EQ(attention(kZaya1), 5'575'682);
  EXPECT_EQ(router(kZaya1), 660'736);
  EXPECT_EQ(hand_total(kZaya1), 8'840'488'784);
  EXPECT_EQ(hand_active(kZaya1), 1'290'741'584);
  const ModelConfig c = find_model_config("zaya1-base");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 8'840'488'784);
  EXPECT_EQ(active_parameters(*m, c), 1'290'741'584);
  // The published figures leave out the tied embedding: 8,303,355,728 ("8.3B") and 753,608,528
  // active ("760M").
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("embedding"), 537'133'056);
  EXPECT_EQ(m->parameters_numel() - kinds.at("embedding"), 8'303'355'728);
  EXPECT_EQ(active_parameters(*m, c) - kinds.at("embedding"), 753'608'528);
  EXPECT_EQ(kinds.at("experts"), int64_t{40} * 201'326'592);
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 0);  // balancing_biases: a buffer it builds
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_EQ(c.num_experts_per_tok, 1);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_TRUE(c.tie_word_embeddings);
  // One kind: every layer "hybrid" (full attention) with routed experts.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(describe(stack.kinds[0]), "moe");
}

TEST(ZayaModels, ClassDefaultsAreZaya1) {
  // ZayaConfig() is the ZAYA1 checkpoint's layout: a file of model_type alone builds it.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "zaya"}}, "defaults");
  EXPECT_EQ(build_model(c)->parameters_numel(), 8'840'488'784);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.cca_time0, 2);
  EXPECT_EQ(c.cca_time1, 2);
  EXPECT_EQ(c.router_hidden_size, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// Three layers, the second sliding; convolutions of 2 and 3 taps.
nlohmann::json tiny() {
  return {{"model_type", "zaya"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_experts", 4},
          {"num_experts_per_tok", 1},
          {"moe_intermediate_size", 32},
          {"router_hidden_size", 16},
          {"cca_time0", 2},
          {"cca_time1", 3},
          {"layer_types", {"hybrid", "hybrid_sliding", "hybrid"}},
          {"sliding_window", 8},
          {"rope_parameters",
           {{"hybrid",
             {{"rope_type", "default"}, {"rope_theta", 5000000.0}, {"partial_rotary_factor", 0.5}}},
            {"hybrid_sliding",
             {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}}}}},
          {"max_position_embeddings", 256}};
}
const Sizes kTiny{128, 64, 3, 4, 2, 16, 4, 32, 16, 2, 3};

TEST(ZayaModels, TinyConfigByHand) {
  // Attention 17,282 (q 4,096, k 2,048, values 2 x 1,024, depthwise 192 + 96, grouped 4,608 + 96,
  // temp 2, o 4,096); router 1,680; experts 24,576; norms and scalings 640: 44,178 a layer, 16
  // more on layers 1 and 2; 3 x 64 + 8,192 outside the layers.
  EXPECT_EQ(attention(kTiny), 17'282);
  EXPECT_EQ(router(kTiny), 1'680);
  EXPECT_EQ(hand_total(kTiny), 140'950);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 140'950);
  EXPECT_EQ(active_parameters(*m, c), hand_active(kTiny));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 2u);
  EXPECT_EQ(describe(stack.kinds[0]), "moe");
  EXPECT_EQ(describe(stack.kinds[1]), "sliding 8 moe");
  // attention_bias on q, k, both value halves and o: 3 x (64 + 32 + 16 + 16 + 64).
  j["attention_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(biased)->parameters_numel(), 140'950 + 576);
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  j["attention_bias"] = false;
  // Untied: lm_head.weight of its own; lm_head_bias: lm_head.bias [V].
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 140'950 + 8'192);
  j["tie_word_embeddings"] = true;
  j["lm_head_bias"] = true;
  const ModelConfig head_bias = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(head_bias)->parameters_numel(), 140'950 + 128);
  EXPECT_EQ(parse_model_config(to_hf_json(head_bias), "round trip"), head_bias);
  // A null pad token stays none through the round trip (not the class's 0).
  j = tiny();
  j["pad_token_id"] = nullptr;
  const ModelConfig no_pad = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(no_pad.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(no_pad), "round trip"), no_pad);
}

TEST(ZayaModels, NamesShapesAndOrderAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "ZayaForCausalLM");
  // Layer 1: ZayaAttention registers o_proj before the CCA projection; a module's own parameters
  // come before its children's (router_states_scale before down_proj).
  EXPECT_EQ(shapes_under(*m, "model.layers.1."),
            (test::Shapes{{"self_attn.o_proj.weight", {64, 64}},
                          {"self_attn.qkv_proj.q_proj.weight", {64, 64}},
                          {"self_attn.qkv_proj.k_proj.weight", {32, 64}},
                          {"self_attn.qkv_proj.v_proj_current.weight", {16, 64}},
                          {"self_attn.qkv_proj.v_proj_delayed.weight", {16, 64}},
                          {"self_attn.qkv_proj.conv_qk_depthwise.weight", {96, 1, 2}},
                          {"self_attn.qkv_proj.conv_qk_depthwise.bias", {96}},
                          {"self_attn.qkv_proj.conv_qk_grouped.weight", {96, 16, 3}},
                          {"self_attn.qkv_proj.conv_qk_grouped.bias", {96}},
                          {"self_attn.qk_norm.temp", {2}},
                          {"mlp.gate.router_states_scale", {16}},
                          {"mlp.gate.down_proj.weight", {16, 64}},
                          {"mlp.gate.down_proj.bias", {16}},
                          {"mlp.gate.router_mlp.norm.weight", {16}},
                          {"mlp.gate.router_mlp.fc1.weight", {16, 16}},
                          {"mlp.gate.router_mlp.fc1.bias", {16}},
                          {"mlp.gate.router_mlp.fc2.weight", {16, 16}},
                          {"mlp.gate.router_mlp.fc2.bias", {16}},
                          {"mlp.gate.router_mlp.out_proj.weight", {5, 16}},
                          {"mlp.experts.gate_up_proj", {4, 64, 64}},
                          {"mlp.experts.down_proj", {4, 64, 32}},
                          {"input_layernorm.weight", {64}},
                          {"post_attention_layernorm.weight", {64}},
                          {"post_attention_residual_scale.hidden_states_scale", {64}},
                          {"post_attention_residual_scale.hidden_states_bias", {64}},
                          {"post_attention_residual_scale.residual_scale", {64}},
                          {"post_attention_residual_scale.residual_bias", {64}},
                          {"post_mlp_residual_scale.hidden_states_scale", {64}},
                          {"post_mlp_residual_scale.hidden_states_bias", {64}},
                          {"post_mlp_residual_scale.residual_scale", {64}},
                          {"post_mlp_residual_scale.residual_bias", {64}}}));
  // Layer 0's router has no router_states_scale (use_eda is layer_idx != 0).
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp.gate."),
            (Names{"down_proj.weight", "down_proj.bias", "router_mlp.norm.weight",
                   "router_mlp.fc1.weight", "router_mlp.fc1.bias", "router_mlp.fc2.weight",
                   "router_mlp.fc2.bias", "router_mlp.out_proj.weight"}));
  // Outside the layers: ZayaModel's own two vectors first, then its children; lm_head tied.
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.input_hidden_states_scale", "model.input_hidden_states_bias",
                            "model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn").type_name(), "ZayaAttention");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn.qkv_proj").type_name(), "ZayaCCAProjection");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn.qk_norm").type_name(), "ZayaQKNorm");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "ZayaSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.gate").type_name(), "ZayaRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "ZayaExperts");
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.experts.down_proj"), "experts");
  EXPECT_EQ(block_kind(*m, "model.layers.1.self_attn.qkv_proj.conv_qk_grouped.weight"),
            "attention");
  // balancing_biases: a persistent float32 buffer of E + 1 (in the checkpoint, not counted).
  const Module& gate = m->get_submodule("model.layers.0.mlp.gate");
  EXPECT_EQ(gate.buffer("balancing_biases").sizes(), (DimVector{5}));
  EXPECT_EQ(gate.buffer("balancing_biases").dtype(), DType::kFloat32);
  EXPECT_TRUE(gate.is_buffer_persistent("balancing_biases"));
  // The rotary tables per layer type: 8 of 16 channels rotate (inv_freq of 4).
  EXPECT_EQ(m->get_buffer("model.rotary_emb.hybrid_inv_freq").sizes(), (DimVector{4}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.hybrid_sliding_inv_freq").sizes(), (DimVector{4}));
  // With lm_head_bias the bias follows the tied weight.
  nlohmann::json j = tiny();
  j["lm_head_bias"] = true;
  const ModulePtr with_bias = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(with_bias->named_parameters().back().name, "lm_head.bias");
}

TEST(ZayaModels, InitIsZayaPreTrainedModels) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  const std::string l = "model.layers.1.";
  EXPECT_EQ(init.at(l + "self_attn.qkv_proj.conv_qk_grouped.weight"), normal);
  EXPECT_EQ(init.at(l + "self_attn.qkv_proj.conv_qk_depthwise.bias"), zero);
  EXPECT_EQ(init.at(l + "self_attn.qk_norm.temp"), zero);
  EXPECT_EQ(init.at(l + "mlp.gate.router_states_scale"), one);
  EXPECT_EQ(init.at(l + "mlp.gate.down_proj.bias"), zero);
  EXPECT_EQ(init.at(l + "mlp.gate.router_mlp.norm.weight"), one);
  EXPECT_EQ(init.at(l + "mlp.experts.gate_up_proj"), normal);
  EXPECT_EQ(init.at(l + "post_mlp_residual_scale.residual_scale"), one);
  EXPECT_EQ(init.at(l + "post_mlp_residual_scale.residual_bias"), zero);
  EXPECT_EQ(init.at("model.input_hidden_states_scale"), one);
  EXPECT_EQ(init.at("model.input_hidden_states_bias"), zero);
  // The embedding normal with its pad_token_id (0) row zero.
  EXPECT_EQ(init.at("model.embed_tokens.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02, 0}));
}

TEST(ZayaModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "zaya.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("num_experts_per_tok", 2, "num_experts_per_tok=1 only");
  refused("layer_types", {"hybrid", "sliding_attention", "hybrid"}, "makes masks for");
  refused("layer_types", {"hybrid", "hybrid"}, "a list of num_hidden_layers = 3");
  refused("sliding_window", nullptr, "raises without a window");
  refused("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "expected rope_parameters");
  refused("rope_scaling", nullptr, "expected rope_parameters alone");
  refused("rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e4}},
          "expected \"hybrid\" as an object");
  refused("rope_parameters", {{"hybrid", {{"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}}}},
          "expected \"hybrid_sliding\"");
  refused("rope_parameters",
          {{"hybrid", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}},
           {"hybrid_sliding", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}},
          "has no rope_theta");
  refused("rope_parameters",
          {{"hybrid", {{"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}}},
           {"hybrid_sliding", {{"rope_theta", 1e4}}}},
          "rotates one width");
  refused("cca_time0", 0, "convolution width >= 1");
  refused("cca_time1", -1, "convolution width >= 1");
  refused("router_hidden_size", 0, "router's positive width");
  refused("zaya_mlp_expansion", 256, "convert_zaya_weights_to_hf.py");
  refused("swa_layers", {0, 0, 0, 0, 0, 0}, "legacy alternating-layer");
  // Two value halves of K d // 2 each: one key-value head of 15 channels leaves one short.
  nlohmann::json j = tiny();
  j["num_attention_heads"] = 2;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 15;
  EXPECT_THAT([&] { parse_model_config(j, "zaya.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("field 'head_dim'"), HasSubstr("two halves"))));
  // A config built in code: the widths are bounded as every other width is.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.cca_time1 = 5000;
  EXPECT_THAT([&] { validate(c); }, ThrowsMessage<Error>(HasSubstr("field 'cca_time1'")));
}

TEST(ZayaModels, ForwardTraceRunsTheCcaAndTheFloat32ResidualStream) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = DType::kBFloat16});
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const auto totals = [&](const std::string& module) { return g.module_totals().at(module); };
  const std::string a = "model.layers.1.self_attn";
  // The convolutions over [B, C, S + pad]: the depthwise one writes S + t1 - 1 = 18 steps of 96
  // channels from 2 taps each, the grouped one 16 steps from 16 channels x 3 taps each.
  EXPECT_DOUBLE_EQ(totals(a + ".qkv_proj.conv_qk_depthwise").flops, 2.0 * 2 * 96 * 18 * 2);
  EXPECT_DOUBLE_EQ(totals(a + ".qkv_proj.conv_qk_grouped").flops, 2.0 * 2 * 96 * 16 * 16 * 3);
  EXPECT_DOUBLE_EQ(totals(a + ".qkv_proj.conv_qk_grouped").matmul_flops, 0);
  // q and k L2-normalized as the weightless RMSNorm, k times temp.
  EXPECT_EQ(ops_in(g, "rms_norm", a + ".qk_norm"), 2);
  EXPECT_EQ(ops_in(g, "mul", a + ".qk_norm"), 1);
  // Layer 1 slides: 8 keys a query, 4 B H S keys d in the core.
  EXPECT_DOUBLE_EQ(totals(a).matmul_flops, 2.0 * 32 * 64 * (64 + 32 + 16 + 16) + 2.0 * 2 * 64 * 16 +
                                               2.0 * 32 * 64 * 64 + 4.0 * 2 * 4 * 16 * 8 * 16);
  // The router: down_proj, fc1, fc2, out_proj over 32 tokens; layer 1 adds the previous layer's
  // projection times router_states_scale, layer 0 has none.
  EXPECT_DOUBLE_EQ(totals("model.layers.1.mlp.gate").matmul_flops,
                   2.0 * 32 * (64 * 16 + 16 * 16 + 16 * 16 + 16 * 5));
  EXPECT_EQ(ops_in(g, "mul", "model.layers.1.mlp.gate"), 1);
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.mlp.gate"), 0);
  EXPECT_EQ(ops_in(g, "gelu", "model.layers.1.mlp.gate.router_mlp"), 2);
  // The experts on their expected load: 32 tokens x 1 pick over 4 experts, 8 each.
  EXPECT_DOUBLE_EQ(totals("model.layers.1.mlp.experts").matmul_flops,
                   4 * (2.0 * 8 * 64 * 64 + 2.0 * 8 * 32 * 64));
  // The float32 stream: cast up once after the embeddings' affine and down before the final norm;
  // each layer casts it down before each of its two norms.
  EXPECT_EQ(ops_in(g, "to", "model"), 2);
  EXPECT_EQ(ops_in(g, "to", "model.layers.1"), 2);
}

TEST(ZayaModels, TrainingTraceCountsTheZeroTokensDelayedValueOnce) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  int linears = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "linear" || op.call < 0) continue;
    if (!st.calls[static_cast<size_t>(op.call)].fqn.starts_with("model.layers.1.self_attn")) {
      continue;
    }
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
    ++linears;
  }
  // q 64, k 32, the value halves 16 and 16, o_proj 64 x 64 over 32 tokens, and v_proj_delayed
  // once more on one zero token per sequence: 790,528.
  EXPECT_EQ(linears, 6);
  const double zero_token = 2.0 * 2 * 64 * 16;
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (64 + 32 + 16 + 16) + 2.0 * 32 * 64 * 64 + zero_token);
  EXPECT_DOUBLE_EQ(forward, 790'528);
  // Backward: the input and weight gradients of each, but the zero token has no input gradient.
  EXPECT_DOUBLE_EQ(backward, 2 * forward - zero_token);
}

TEST(ZayaModels, TensorParallelPlanIsMegatronsOnTheCcaProjections) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_TRUE(f.rope_parameters_by_layer_type);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.experts_class, "ZayaExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.qkv_proj.q_proj", "colwise"},
      {"model.layers.*.self_attn.qkv_proj.k_proj", "colwise"},
      {"model.layers.*.self_attn.qkv_proj.v_proj_current", "colwise"},
      {"model.layers.*.self_attn.qkv_proj.v_proj_delayed", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.experts", "experts"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);  // every projection its own module
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
