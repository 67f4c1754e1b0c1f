// laguna (Poolside's Laguna XS.2) against hand formulas written here from transformers 5's
// modular_laguna.py and the published sizes (the model card: "33B total parameter ... 3B activated
// parameters per token"; SGLang's model page and its support PR: 33.4 B total, 3.0 B active; the
// Hub lists 33.44 B). h hidden, V vocabulary, K key-value heads of d, H_l a layer's query heads,
// E experts of width F, the shared expert S wide, the dense MLP I wide, L layers of which D dense:
//   attention  q_proj [H_l d, h], k_proj, v_proj [K d, h], o_proj [h, H_l d], q_norm, k_norm [d],
//              g_proj [H_l, h] (gating per head; [H_l d, h] per element), no biases
//   moe        experts gate_up_proj [E, 2F, h], down_proj [E, h, F]; gate.weight [E, h] and
//              gate.e_score_correction_bias [E] (a frozen nn.Parameter, counted); shared_experts
//              gate, up, down of S
//   total      sum over layers (2 h H_l d + 2 h K d + 2 d + h H_l) + 2 h L + D 3 h I
//              + (L - D)(3 E h F + E h + E + 3 h S) + 2 V h + h (untied)
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
  int64_t V, h, I, F, S, E, k, K, d;
  std::vector<int64_t> heads;  // per layer
  int64_t D;                   // the first D layers dense
};

int64_t attention(const Sizes& s, int64_t H) {
  return 2 * s.h * H * s.d + 2 * s.h * s.K * s.d + 2 * s.d + s.h * H;
}
int64_t moe(const Sizes& s) { return 3 * s.E * s.h * s.F + s.E * s.h + s.E + 3 * s.h * s.S; }

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

// XS.2: a full layer of 48 heads every fourth (0, 4, ..., 36), sliding layers of 64 between.
Sizes xs2() {
  Sizes s{100352, 2048, 8192, 512, 512, 256, 8, 8, 128, {}, 1};
  for (int64_t i = 0; i < 40; ++i) s.heads.push_back(i % 4 == 0 ? 48 : 64);
  return s;
}

TEST(LagunaModels, XsTwoMatchesThePublishedSizes) {
  // 10 x 29,458,688 + 30 x 37,880,064 attention, 163,840 norms, 50,331,648 dense MLP,
  // 39 x 808,976,640 MoE blocks, 2 x 205,520,896 + 2,048: "33.4B total, 3.0B active".
  EXPECT_EQ(hand_total(xs2()), 33'442'617'088);
  EXPECT_EQ(hand_active(xs2()), 3'017'135'872);
  const ModelConfig c = find_model_config("laguna-xs.2");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 33'442'617'088);
  EXPECT_EQ(active_parameters(*m, c), 3'017'135'872);
  // The bias is a parameter the model holds, not a buffer beside it.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Three kinds: the dense full layer 0, the full MoE layers (4, 8, ...), the sliding ones.
  EXPECT_EQ(c.num_attention_heads, 48);
  EXPECT_EQ(c.sliding_num_attention_heads, 64);
  EXPECT_TRUE(c.attention_gate_per_head);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 3u);
  EXPECT_EQ(describe(stack.kinds[0]), "dense");
  EXPECT_EQ(describe(stack.kinds[1]), "sliding 512 moe");
  EXPECT_EQ(describe(stack.kinds[2]), "moe");
  EXPECT_EQ(stack.count(0), 1);
  EXPECT_EQ(stack.count(1), 30);
  EXPECT_EQ(stack.count(2), 9);
  EXPECT_EQ(attention_heads_of(c, stack.kinds[1]), 64);
  EXPECT_EQ(attention_heads_of(c, stack.kinds[2]), 48);
  // A one-layer model of the sliding kind, as the planner traces it, keeps its 64 heads.
  const ModulePtr one = build_model(uniform_config(c, stack.kinds[1]));
  EXPECT_EQ(one->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            (DimVector{64 * 128, 2048}));
}

TEST(LagunaModels, NamesShapesAndOrderAreTransformers) {
  const ModelConfig c = first_layers(find_model_config("laguna-xs.2"), 2);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "LagunaForCausalLM");
  // Layer 0: full attention of 48 heads, the dense MLP.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"self_attn.q_proj.weight", {6144, 2048}},
                          {"self_attn.k_proj.weight", {1024, 2048}},
                          {"self_attn.v_proj.weight", {1024, 2048}},
                          {"self_attn.o_proj.weight", {2048, 6144}},
                          {"self_attn.q_norm.weight", {128}},
                          {"self_attn.k_norm.weight", {128}},
                          {"self_attn.g_proj.weight", {48, 2048}},
                          {"mlp.gate_proj.weight", {8192, 2048}},
                          {"mlp.up_proj.weight", {8192, 2048}},
                          {"mlp.down_proj.weight", {2048, 8192}},
                          {"input_layernorm.weight", {2048}},
                          {"post_attention_layernorm.weight", {2048}}}));
  // Layer 1: sliding attention of 64 heads, the MoE block (experts, router, shared expert).
  EXPECT_EQ(shapes_under(*m, "model.layers.1."),
            (test::Shapes{{"self_attn.q_proj.weight", {8192, 2048}},
                          {"self_attn.k_proj.weight", {1024, 2048}},
                          {"self_attn.v_proj.weight", {1024, 2048}},
                          {"self_attn.o_proj.weight", {2048, 8192}},
                          {"self_attn.q_norm.weight", {128}},
                          {"self_attn.k_norm.weight", {128}},
                          {"self_attn.g_proj.weight", {64, 2048}},
                          {"mlp.experts.gate_up_proj", {256, 1024, 2048}},
                          {"mlp.experts.down_proj", {256, 2048, 512}},
                          {"mlp.gate.weight", {256, 2048}},
                          {"mlp.gate.e_score_correction_bias", {256}},
                          {"mlp.shared_experts.gate_proj.weight", {512, 2048}},
                          {"mlp.shared_experts.up_proj.weight", {512, 2048}},
                          {"mlp.shared_experts.down_proj.weight", {2048, 512}},
                          {"input_layernorm.weight", {2048}},
                          {"post_attention_layernorm.weight", {2048}}}));
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "LagunaSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.gate").type_name(), "LagunaTopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "LagunaExperts");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.shared_experts").type_name(), "LagunaMLP");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn").type_name(), "LagunaAttention");
  EXPECT_FALSE(m->get_parameter("model.layers.1.mlp.gate.e_score_correction_bias").requires_grad());
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.gate.e_score_correction_bias"), "router");
  EXPECT_EQ(block_kind(*m, "model.layers.1.mlp.experts.down_proj"), "experts");
  // The rotary buffers per layer type: 64 of the full layers' 128 channels rotate, all of the
  // sliding layers'.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.full_attention_inv_freq").sizes(), (DimVector{32}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.sliding_attention_inv_freq").sizes(), (DimVector{64}));
  // _init_weights: the router's weight normal and its bias zero; the gate a Linear (normal).
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  EXPECT_EQ(init.at("model.layers.1.mlp.gate.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.gate.e_score_correction_bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("model.layers.1.self_attn.g_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.experts.gate_up_proj"), normal);
  EXPECT_EQ(init.at("model.layers.1.self_attn.q_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
}

nlohmann::json tiny() {
  return {{"model_type", "laguna"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"shared_expert_intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_attention_heads_per_layer", {4, 8, 8, 8}},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"layer_types",
           {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"}},
          {"mlp_layer_types", {"dense", "sparse", "sparse", "sparse"}},
          {"sliding_window", 8},
          {"gating", "per-head"},
          {"moe_routed_scaling_factor", 2.5},
          {"rope_parameters",
           {{"full_attention",
             {{"rope_type", "default"}, {"rope_theta", 500000.0}, {"partial_rotary_factor", 0.5}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}},
          {"max_position_embeddings", 256}};
}

TEST(LagunaModels, TinyConfigByHand) {
  // Attention 12,576 (4 heads) + 3 x 21,024 (8 heads); norms 512; dense MLP 18,432; three MoE
  // blocks of 30,980 (experts 24,576, router 256 + 4, shared 6,144); embeddings 2 x 8,192 + 64.
  const Sizes s{128, 64, 96, 32, 32, 4, 2, 2, 16, {4, 8, 8, 8}, 1};
  EXPECT_EQ(hand_total(s), 203'980);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 203'980);
  EXPECT_EQ(active_parameters(*m, c), hand_active(s));
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.sliding_num_attention_heads, 8);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Per element: g_proj [H d, h], 64 (16 - 1) more per head: 26,880 over the 28 heads.
  j["gating"] = "per-element";
  const ModelConfig pe = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(pe.attention_gate_per_head);
  EXPECT_EQ(build_model(pe)->parameters_numel(), 203'980 + 26'880);
  EXPECT_EQ(parse_model_config(to_hf_json(pe), "round trip"), pe);
  j["gating"] = false;  // transformers' gate_per_head is False: the per-element gate
  EXPECT_EQ(parse_model_config(j, "tiny.json"), pe);
  j["gating"] = true;
  // attention_bias on q, k, v and o (never g_proj): 192 + 3 x 256.
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 203'980 + 960);
  j["attention_bias"] = false;
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 203'980 - 8192);
}

TEST(LagunaModels, ClassDefaultsAndTheFilesOwnKeys) {
  // LagunaConfig(): 40 full layers of 48 heads, layer 0 dense, half of each head rotated.
  const nlohmann::json defaults = {{"model_type", "laguna"}};
  const ModelConfig c = parse_model_config(defaults, "defaults.json");
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.sliding_num_attention_heads, 0);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  Sizes s = xs2();
  s.heads.assign(40, 48);
  EXPECT_EQ(hand_total(s), 33'189'975'808);
  EXPECT_EQ(build_model(c)->parameters_numel(), 33'189'975'808);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The remote-code files' Qwen2-MoE keys are attributes transformers' class drops: read, inert.
  nlohmann::json j = tiny();
  j["mlp_only_layers"] = {0, 1};
  j["decoder_sparse_step"] = 2;
  j["norm_topk_prob"] = true;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), parse_model_config(tiny(), "tiny.json"));
  // A full entry without partial_rotary_factor rotates the whole head (the entry's .get default).
  j = tiny();
  j["rope_parameters"]["full_attention"].erase("partial_rotary_factor");
  EXPECT_DOUBLE_EQ(parse_model_config(j, "tiny.json").partial_rotary_factor, 1.0);
  // No sliding layer: a null window is none.
  j = tiny();
  j.erase("layer_types");
  j.erase("num_attention_heads_per_layer");
  j["sliding_window"] = nullptr;
  const ModelConfig full = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(full.sliding_window.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(full), "round trip"), full);
  j["sliding_window"] = 0;  // a window no layer uses
  EXPECT_EQ(parse_model_config(j, "tiny.json"), full);
}

TEST(LagunaModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "laguna.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "expected rope_parameters");
  refused("rope_scaling", nullptr, "expected rope_parameters alone");
  refused("gating", "per-channel", "expected true or \"per-head\"");
  refused("layer_types",
          {"full_attention", "chunked_attention", "sliding_attention", "sliding_attention"},
          "no mask");
  refused("sliding_window", nullptr, "transformers raises without a window");
  refused("sliding_window", 0, "expected > 0");
  refused("num_attention_heads_per_layer", {4, 8, 8}, "a list of num_hidden_layers = 4");
  refused("num_attention_heads_per_layer", {4, 8, 7, 8}, "positive multiple of");
  refused("num_attention_heads_per_layer", {4, 8, 6, 8}, "one head count per layer type");
  refused("mlp_layer_types", {"dense", "moe", "sparse", "sparse"}, "\"dense\" or \"sparse\"");
  refused("moe_apply_router_weight_on_input", true, "NotImplementedError");
  refused("moe_router_logit_softcapping", 30.0, "soft-capping is not built");
  refused("shared_expert_intermediate_size", 0, "always builds its shared expert");
  refused("rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}},
          "expected \"sliding_attention\"");
  refused("rope_parameters",
          {{"full_attention", {{"rope_theta", 1e4}}},
           {"sliding_attention", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}},
          "over the whole head");
  refused("rope_parameters",
          {{"full_attention", {{"rope_type", "default"}}},
           {"sliding_attention", {{"rope_theta", 1e4}}}},
          "has no rope_theta");
  // Other families do not read per-layer head counts: refused rather than ignored.
  nlohmann::json llama = {{"model_type", "llama"},
                          {"vocab_size", 128},
                          {"hidden_size", 64},
                          {"intermediate_size", 96},
                          {"num_hidden_layers", 2},
                          {"num_attention_heads", 4},
                          {"num_attention_heads_per_layer", {4, 8}}};
  EXPECT_THAT([&] { parse_model_config(llama, "llama.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_attention_heads_per_layer'")));
}

TEST(LagunaModels, TraceGatesPerHeadAndRotatesPerLayerType) {
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
    // softplus in float32 as log(1 + exp): one exp and one log in the attention itself.
    EXPECT_EQ(ops_in(g, "exp", a), 1);
    EXPECT_EQ(ops_in(g, "log", a), 1);
  }
  // The full layer rotates 8 of 16 channels (rotate_half's cat and the pass-through's, for q and
  // k), the sliding layer all of them (rotate_half's alone).
  EXPECT_EQ(ops_in(g, "cat", "model.layers.0.self_attn"), 4);
  EXPECT_EQ(ops_in(g, "cat", "model.layers.1.self_attn"), 2);
  // The experts on their expected load: 32 tokens x 2 picks over 4 experts, 16 each, gate_up
  // 2 x 16 x 64 x 64 and down 2 x 16 x 32 x 64 per expert.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.experts"), 786'432);
  // The router: one [T, h] x [h, E] product, sigmoid scores.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.gate"), 2 * T * h * 4);
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.mlp.gate"), 1);
}

TEST(LagunaModels, TrainingTraceCountsEachProjectionThreeTimes) {
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

// The Hub's Laguna files keep each expert apart, the score-correction bias beside the experts and
// the shared expert singular (shared_expert); transformers renames and stacks them as it loads
// (conversion_mapping.py "laguna"), and so does the checkpoint check.
TEST(LagunaModels, HubCheckpointNamesAreRenamedAsTransformersLoadsThem) {
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
      [](std::string n) -> std::string {
        if (n.find(".mlp.experts.") != std::string::npos) return "";  // stored one by one
        for (const auto& [built, stored] :
             {std::pair<std::string, std::string>{".mlp.gate.e_score_correction_bias",
                                                  ".mlp.experts.e_score_correction_bias"},
              {".mlp.shared_experts.", ".mlp.shared_expert."}}) {
          const size_t at = n.find(built);
          if (at != std::string::npos) n.replace(at, built.size(), stored);
        }
        return n;
      },
      experts);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

}  // namespace
}  // namespace shardplan::tensor
