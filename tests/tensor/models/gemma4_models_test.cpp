// gemma4_text (Gemma 4 E2B, E4B, 31B and 26B-A4B) against hand formulas written here from
// transformers' modeling_gemma4.py and configuration_gemma4.py, and the model card's sizes
// ("31B: 30.7B"; "26B-A4B: 25.2B total, 3.8B active"; "E2B: 2.3B effective", without its per-layer
// table). h hidden, H heads, V vocabulary; a sliding layer's heads are head_dim d wide with kv
// key-value heads, a full layer's global_head_dim D wide with gkv (num_global_key_value_heads, read
// with attention_k_eq_v, which also drops v_proj there):
//   attention  q_proj [H d, h], q_norm [d], k_norm [d], k_proj [kv d, h], v_proj [kv d, h]
//              (not on a full layer with attention_k_eq_v), o_proj [h, H d]; v_norm has no weight
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I]
//   norms      input, post_attention, pre_feedforward, post_feedforward [h]
//   moe        router.scale [h], router.per_expert_scale [E], router.proj [E, h] (its own
//              parameters first), experts.gate_up_proj [E, 2F, h], experts.down_proj [E, h, F],
//              post_feedforward_layernorm_1, _2, pre_feedforward_layernorm_2 [h]
//   model      embed_tokens [V, h] (tied), norm [h]; layer_scalar [1] a persistent buffer
// E2B and E4B add per-layer embeddings and key-value sharing (below, before their tests).
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

// One layer's attention: q and o over H heads of width d, k (and v) over kv heads, q/k norms.
int64_t attention(int64_t h, int64_t H, int64_t kv, int64_t d, bool has_v) {
  return 2 * h * H * d + (has_v ? 2 : 1) * h * kv * d + 2 * d;
}
// The MoE block beside the dense MLP: router (scale, per-expert scale, proj), experts, 3 norms.
int64_t moe(int64_t h, int64_t E, int64_t F) { return h + E + E * h + 3 * E * F * h + 3 * h; }

std::vector<int64_t> shape(const Module& m, const std::string& name) {
  const Tensor t = m.get_parameter(name);
  return {t.sizes().begin(), t.sizes().end()};
}

TEST(Gemma4Models, ThirtyOneBMatchesThePublishedSize) {
  // 60 layers, 5 sliding (32 heads of 256, 16 kv) then 1 full (32 heads of 512, 4 kv, no v_proj);
  // dense MLP 21,504 wide; vocabulary 262,144 tied.
  const int64_t V = 262144, h = 5376, I = 21504;
  const int64_t sliding = attention(h, 32, 16, 256, true) + 3 * h * I + 4 * h;
  const int64_t full = attention(h, 32, 4, 512, false) + 3 * h * I + 4 * h;
  EXPECT_EQ(sliding, 478'959'104);
  EXPECT_EQ(full, 534'009'856);
  const int64_t total = V * h + 50 * sliding + 10 * full + h;
  EXPECT_EQ(total, 30'697'345'280);  // "30.7B"
  const ModelConfig c = find_model_config("gemma-4-31b");
  EXPECT_EQ(c.model_type, "gemma4_text");
  EXPECT_EQ(c.multimodal_model_type, "gemma4");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Gemma4ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  const Names norms = {"input_layernorm.weight", "post_attention_layernorm.weight",
                       "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"};
  Names layer0 = {"self_attn.q_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                  "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                  "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};
  layer0.insert(layer0.end(), norms.begin(), norms.end());
  EXPECT_EQ(names_under(*m, "model.layers.0."), layer0);
  EXPECT_EQ(
      names_under(*m, "model.layers.5.self_attn."),
      (Names{"q_proj.weight", "q_norm.weight", "k_norm.weight", "k_proj.weight", "o_proj.weight"}));
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{4096, h}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.k_proj.weight"), (std::vector<int64_t>{2048, h}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.o_proj.weight"), (std::vector<int64_t>{h, 16384}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.q_norm.weight"), (std::vector<int64_t>{512}));
  // Two kinds; each layer's geometry by its type.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.kinds[0].attention, AttentionType::kSliding);
  EXPECT_EQ(s.kinds[0].window, 1024);
  EXPECT_EQ(head_dim_of(c, s.kinds[0]), 256);
  EXPECT_EQ(kv_heads_of(c, s.kinds[0]), 16);
  EXPECT_EQ(head_dim_of(c, s.kinds[1]), 512);
  EXPECT_EQ(value_head_dim(c, s.kinds[1]), 512);
  EXPECT_EQ(kv_heads_of(c, s.kinds[1]), 4);
  EXPECT_EQ(s.count(1), 10);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  ModelConfig text = c;  // a plan holds the language model alone
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

TEST(Gemma4Models, TwentySixBA4BMatchesTheTotalAndActiveSizes) {
  // 30 layers of 16 heads (sliding: 256 wide, 8 kv; full: 512, 2 kv, no v_proj); every layer its
  // dense MLP of 2,112 beside 128 experts of 704, top 8.
  const int64_t V = 262144, h = 2816, E = 128, F = 704;
  const int64_t common = 3 * h * 2112 + 4 * h + moe(h, E, F);
  const int64_t sliding = attention(h, 16, 8, 256, true) + common;
  const int64_t full = attention(h, 16, 2, 512, false) + common;
  EXPECT_EQ(sliding, 814'094'976);
  EXPECT_EQ(full, 828'513'408);
  const int64_t total = V * h + 25 * sliding + 5 * full + h;
  EXPECT_EQ(total, 25'233'141'760);
  const int64_t active = total - 30 * 3 * (E - 8) * F * h;
  EXPECT_EQ(active, 3'822'530'560);  // "3.8B active"
  const ModelConfig c = find_model_config("gemma-4-26b-a4b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(c.num_local_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.intermediate_size, 704);                 // the experts' width
  EXPECT_EQ(c.shared_expert_intermediate_size, 2112);  // the dense MLP beside them
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("experts"), 30 * 3 * E * F * h);
  EXPECT_EQ(kinds.at("router"), 30 * (h + E + E * h));
  EXPECT_EQ(m->get_submodule("model.layers.0.experts").type_name(), "Gemma4TextExperts");
  ModelConfig text = c;
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

// Four layers [sliding, full, sliding, full], h 64, 4 heads: sliding 16 wide with 2 kv, full 32
// wide with 1 kv and no v_proj; MLP 96; 4 experts of 16, top 2; vocabulary 128 tied.
nlohmann::json tiny() {
  return {{"model_type", "gemma4_text"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"global_head_dim", 32},
          {"num_global_key_value_heads", 1},
          {"attention_k_eq_v", true},
          {"hidden_size_per_layer_input", 0},
          {"enable_moe_block", true},
          {"num_experts", 4},
          {"top_k_experts", 2},
          {"moe_intermediate_size", 16},
          {"sliding_window", 8},
          {"layer_types",
           {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
}

TEST(Gemma4Models, TinyConfigByHand) {
  // Sliding: attention 4,096 + 32 + 2,048 + 2,048 + 4,096 = 12,320; full: 8,192 + 64 + 2,048 +
  // 8,192 = 18,496; MLP 18,432; norms 256; MoE 64 + 4 + 256 + 8,192 + 4,096 + 192 = 12,804.
  EXPECT_EQ(attention(64, 4, 2, 16, true), 12'320);
  EXPECT_EQ(attention(64, 4, 1, 32, false), 18'496);
  EXPECT_EQ(moe(64, 4, 16), 12'804);
  const int64_t total =
      2 * (12320 + 18432 + 256 + 12804) + 2 * (18496 + 18432 + 256 + 12804) + 128 * 64 + 64;
  EXPECT_EQ(total, 195'856);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.1."), (Names{"self_attn.q_proj.weight",
                                                       "self_attn.q_norm.weight",
                                                       "self_attn.k_norm.weight",
                                                       "self_attn.k_proj.weight",
                                                       "self_attn.o_proj.weight",
                                                       "mlp.gate_proj.weight",
                                                       "mlp.up_proj.weight",
                                                       "mlp.down_proj.weight",
                                                       "input_layernorm.weight",
                                                       "post_attention_layernorm.weight",
                                                       "pre_feedforward_layernorm.weight",
                                                       "post_feedforward_layernorm.weight",
                                                       "router.scale",
                                                       "router.per_expert_scale",
                                                       "router.proj.weight",
                                                       "experts.gate_up_proj",
                                                       "experts.down_proj",
                                                       "post_feedforward_layernorm_1.weight",
                                                       "post_feedforward_layernorm_2.weight",
                                                       "pre_feedforward_layernorm_2.weight"}));
  EXPECT_EQ(shape(*m, "model.layers.1.experts.gate_up_proj"), (std::vector<int64_t>{4, 32, 64}));
  EXPECT_EQ(shape(*m, "model.layers.1.experts.down_proj"), (std::vector<int64_t>{4, 64, 16}));
  // layer_scalar is a checkpoint tensor (a persistent buffer), not a parameter.
  Names buffers;
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true}))
    buffers.push_back(b.name);
  EXPECT_EQ(buffers, (Names{"model.layers.0.layer_scalar", "model.layers.1.layer_scalar",
                            "model.layers.2.layer_scalar", "model.layers.3.layer_scalar"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The traced projections of one token batch (B 1, S 8: T = 8): 2 T in out per Linear, each
// layer's by its type's head width.
TEST(Gemma4Models, TraceUsesEachLayerTypesHeadWidthAndNormsValues) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 8);
  const auto linear_flops = [&](const std::string& prefix) {
    double f = 0;
    for (const OpNode& op : g.nodes()) {
      if (op.op == "linear" && op.module.starts_with(prefix)) f += op.matmul_flops;
    }
    return f;
  };
  const auto norms = [&](const std::string& prefix) {
    int64_t n = 0;
    for (const OpNode& op : g.nodes()) n += op.op == "rms_norm" && op.module.starts_with(prefix);
    return n;
  };
  // Sliding: q 64 -> 64, k and v 64 -> 32, o 64 -> 64.
  EXPECT_EQ(linear_flops("model.layers.0.self_attn"), 2.0 * 8 * 64 * (64 + 32 + 32 + 64));
  // Full: q 64 -> 128, k 64 -> 32 (the values are the same projection), o 128 -> 64.
  EXPECT_EQ(linear_flops("model.layers.1.self_attn"), 2.0 * 8 * 64 * (128 + 32 + 128));
  EXPECT_EQ(linear_flops("model.layers.1.router"), 2.0 * 8 * 64 * 4);
  // q_norm, k_norm and the weightless v_norm.
  EXPECT_EQ(norms("model.layers.1.self_attn"), 3);
  // The router's weightless norm of the residual; the experts' own norm is the layer's.
  EXPECT_EQ(norms("model.layers.1.router"), 1);
}

TEST(Gemma4Models, PerLayerConfigSaysWhatTheLegacyKeysSay) {
  nlohmann::json j = tiny();
  j.erase("global_head_dim");
  j.erase("num_global_key_value_heads");
  j["per_layer_config"] = {{"01", {{"head_dim", 32}, {"num_key_value_heads", 1}}},
                           {"3", {{"head_dim", 32}, {"num_key_value_heads", 1}}}};
  EXPECT_EQ(parse_model_config(j, "new.json"), parse_model_config(tiny(), "legacy.json"));
  // Without attention_k_eq_v the full layers' own key-value heads come only from
  // per_layer_config (the legacy key is not read then), and are written back so.
  j["attention_k_eq_v"] = false;
  const ModelConfig c = parse_model_config(j, "new.json");
  EXPECT_EQ(kv_heads_of(c, LayerKind{.ffn = FfnKind::kMoe}), 1);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  nlohmann::json legacy = tiny();
  legacy["attention_k_eq_v"] = false;
  EXPECT_EQ(parse_model_config(legacy, "legacy.json").global_num_key_value_heads, 2);
  // A null per_layer_config still replaces the legacy keys: every layer is 16 wide with 2 kv.
  legacy["per_layer_config"] = nullptr;
  const ModelConfig flat = parse_model_config(legacy, "null.json");
  EXPECT_EQ(flat.global_head_dim, 16);
  EXPECT_EQ(flat.global_num_key_value_heads, 2);
  EXPECT_EQ(parse_model_config(to_hf_json(flat), "round trip"), flat);
  // Layers of one type must agree; only head_dim and num_key_value_heads are per layer.
  j["per_layer_config"] = {{"1", {{"head_dim", 32}}}};
  EXPECT_THAT([&] { parse_model_config(j, "uneven.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("per_layer_config"),
                                         HasSubstr("full_attention layers differ (layer 3)"))));
  j["per_layer_config"] = {{"1", {{"intermediate_size", 32}}}};
  EXPECT_THAT([&] { parse_model_config(j, "other.json"); },
              ThrowsMessage<Error>(HasSubstr("overrides \"intermediate_size\"")));
  j["per_layer_config"] = {{"7", {{"head_dim", 32}}}};
  EXPECT_THAT([&] { parse_model_config(j, "index.json"); },
              ThrowsMessage<Error>(HasSubstr("key \"7\" is not a layer; expected 0..3")));
}

TEST(Gemma4Models, LastLayerIsFullAndRopeIsKeyedByLayerType) {
  nlohmann::json j = tiny();
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention"};
  EXPECT_EQ(parse_model_config(j, "t").layer_types.back(), AttentionType::kFull);
  j["layer_types"][3] = "chunked_attention";  // made full before the types are checked
  EXPECT_EQ(parse_model_config(j, "t").layer_types.back(), AttentionType::kFull);
  j.erase("layer_types");  // Gemma4TextConfig's rule: each sixth full, then the last
  j["num_hidden_layers"] = 8;
  const ModelConfig c = parse_model_config(j, "t");
  EXPECT_EQ(c.layer_types[5], AttentionType::kFull);
  EXPECT_EQ(c.layer_types[6], AttentionType::kSliding);
  EXPECT_EQ(c.layer_types[7], AttentionType::kFull);
  j = tiny();
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  EXPECT_THAT([&] { parse_model_config(j, "rope.json"); },
              ThrowsMessage<Error>(HasSubstr("expected an entry \"full_attention\"")));
  j["rope_parameters"]["full_attention"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}};
  EXPECT_THAT([&] { parse_model_config(j, "rope.json"); },
              ThrowsMessage<Error>(HasSubstr("rope_parameters.full_attention.rope_type \"yarn\"")));
  j["rope_parameters"]["full_attention"] = {
      {"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 5e5}};
  EXPECT_EQ(parse_model_config(j, "rope.json").rope_theta, 5e5);
}

TEST(Gemma4Models, RefusesWhatItDoesNotBuildNamingTheField) {
  nlohmann::json j = tiny();
  // Strict fields: null is not the default.
  for (const char* key : {"hidden_size_per_layer_input", "global_head_dim", "head_dim",
                          "num_kv_shared_layers", "enable_moe_block"}) {
    j = tiny();
    j[key] = nullptr;
    EXPECT_THAT([&] { parse_model_config(j, "null.json"); },
                ThrowsMessage<Error>(AllOf(HasSubstr(key), HasSubstr("is null"))))
        << key;
  }
  // Gemma 4 divides the logits by any cap it is given: 0 is refused, null is none.
  j = tiny();
  j["final_logit_softcapping"] = 0.0;
  EXPECT_THAT([&] { parse_model_config(j, "cap.json"); },
              ThrowsMessage<Error>(HasSubstr("final_logit_softcapping")));
  j["final_logit_softcapping"] = nullptr;
  j["pad_token_id"] = nullptr;
  const ModelConfig none = parse_model_config(j, "cap.json");
  EXPECT_EQ(none.final_logit_softcapping, 0.0);
  EXPECT_FALSE(none.pad_token_id);
  EXPECT_TRUE(to_hf_json(none)["final_logit_softcapping"].is_null());
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
  j = tiny();
  j["rope_parameters"] = {{"sliding_attention", {{"type", "yarn"}, {"rope_theta", 1e4}}},
                          {"full_attention", {{"rope_type", "proportional"}}}};
  EXPECT_THAT([&] { parse_model_config(j, "rope.json"); },
              ThrowsMessage<Error>(HasSubstr("sliding_attention.rope_type \"yarn\"")));
  j = tiny();
  j["use_bidirectional_attention"] = "all";
  EXPECT_THAT([&] { parse_model_config(j, "bidi.json"); },
              ThrowsMessage<Error>(HasSubstr("use_bidirectional_attention")));
  j["use_bidirectional_attention"] = "vision";  // text tokens stay causal
  EXPECT_NO_THROW(parse_model_config(j, "vision.json"));
  j = tiny();
  j.erase("num_experts");
  EXPECT_THAT([&] { parse_model_config(j, "moe.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("num_experts"), HasSubstr("enable_moe_block"))));
  j = tiny();
  j["sliding_window"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "window.json"); },
              ThrowsMessage<Error>(HasSubstr("sliding_window")));
  j = tiny();
  j["num_global_key_value_heads"] = 3;
  EXPECT_THAT([&] { parse_model_config(j, "gkv.json"); },
              ThrowsMessage<Error>(HasSubstr("num_global_key_value_heads")));
}

TEST(Gemma4Models, MultimodalFileTiesByItsOwnFlagAndFixesTheTextClass) {
  nlohmann::json text = tiny();
  text.erase("model_type");  // Gemma4Config's text class is fixed: no model_type needed
  nlohmann::json outer = {{"model_type", "gemma4"},
                          {"text_config", text},
                          {"vision_config", {{"model_type", "gemma4_vision"}}},
                          {"audio_config", nullptr},
                          {"torch_dtype", "bfloat16"}};
  const ModelConfig tied = parse_model_config(outer, "gemma4.json");
  EXPECT_EQ(tied.model_type, "gemma4_text");
  EXPECT_TRUE(tied.tie_word_embeddings);  // Gemma4Config's default
  EXPECT_EQ(tied.torch_dtype, DType::kBFloat16);
  outer["tie_word_embeddings"] = false;
  outer["text_config"]["tie_word_embeddings"] = true;  // the wrapper's own flag decides
  const ModelConfig untied = parse_model_config(outer, "gemma4.json");
  EXPECT_FALSE(untied.tie_word_embeddings);
  EXPECT_EQ(build_model(untied)->parameters_numel(), 195'856 + 128 * 64);
  outer["text_config"]["model_type"] = "gemma3_text";
  EXPECT_THAT([&] { parse_model_config(outer, "gemma4.json"); },
              ThrowsMessage<Error>(HasSubstr("always builds its text model gemma4_text")));
}

// The language model's checkpoint keys under model.language_model., layer_scalar included.
TEST(Gemma4Models, CheckpointWithLayerScalarsLoads) {
  const nlohmann::json outer = {{"model_type", "gemma4"}, {"text_config", tiny()}};
  const ModulePtr model = build_model(parse_model_config(outer, "gemma4.json"));
  std::vector<test::StEntry> scalars;
  for (int i = 0; i < 4; ++i) {
    scalars.push_back(
        {"model.language_model.layers." + std::to_string(i) + ".layer_scalar", "BF16", {1}});
  }
  const ModelSource src = test::check_stored_as(
      outer, *model,
      [](const std::string& n) {
        return n.starts_with("model.") ? "model.language_model." + n.substr(6) : n;
      },
      scalars);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

// E2B and E4B: per-layer embeddings (P 256 per layer over a table of 262,144 rows) and the last
// layers sharing keys and values. A shared layer keeps q_proj, q_norm and o_proj; with
// use_double_wide_mlp its MLP is 2 I wide. Every layer adds the per-layer gate [P, h], projection
// [h, P] and its norm [h]; the model adds the table [Vp, L P], the projection [L P, h] and a norm
// [P].
int64_t small_layer(int64_t h, int64_t H, int64_t kv, int64_t d, bool shared, int64_t I,
                    int64_t P) {
  const int64_t attn = shared ? 2 * h * H * d + d : attention(h, H, kv, d, true);
  return attn + 3 * h * I + 4 * h + 2 * h * P + h;
}

TEST(Gemma4Models, E2BAndE4BMatchTheHandTotals) {
  const int64_t V = 262144, P = 256;
  {
    // E2B: 35 layers of (4 sliding, 1 full) x 7, 8 heads and 1 kv head; the last 20 share (first
    // shared layer 15: its sources are layer 13, sliding, and 14, full); MLP 6,144, doubled there.
    const int64_t h = 1536, I = 6144, L = 35;
    const int64_t s = small_layer(h, 8, 1, 256, false, I, P),
                  f = small_layer(h, 8, 1, 512, false, I, P);
    const int64_t ss = small_layer(h, 8, 1, 256, true, 2 * I, P),
                  fs = small_layer(h, 8, 1, 512, true, 2 * I, P);
    EXPECT_EQ(s, 36'184'064);
    EXPECT_EQ(f, 43'262'464);
    EXPECT_EQ(ss, 63'708'928);
    EXPECT_EQ(fs, 70'000'640);
    const int64_t total = V * h + h + V * L * P + L * P * h + P + 12 * s + 3 * f + 16 * ss + 4 * fs;
    EXPECT_EQ(total, 4'628'569'344);
    EXPECT_EQ(total - V * L * P, 2'279'759'104);  // "2.3B effective"
    const ModelConfig c = find_model_config("gemma-4-e2b");
    const ModulePtr m = build_model(c);
    EXPECT_EQ(m->parameters_numel(), total);
    EXPECT_EQ(names_under(*m, "model.layers.15.self_attn."),
              (Names{"q_proj.weight", "q_norm.weight", "o_proj.weight"}));
    EXPECT_EQ(shape(*m, "model.layers.15.mlp.down_proj.weight"), (std::vector<int64_t>{h, 2 * I}));
    EXPECT_EQ(shape(*m, "model.layers.14.mlp.down_proj.weight"), (std::vector<int64_t>{h, I}));
    EXPECT_EQ(names_under(*m, "model.layers.0.per_layer"),
              (Names{"_input_gate.weight", "_projection.weight"}));
    Names model_level;
    for (const NamedTensor& p : m->named_parameters()) {
      if (!p.name.starts_with("model.layers.")) model_level.push_back(p.name);
    }
    EXPECT_EQ(model_level, (Names{"model.embed_tokens.weight", "model.norm.weight",
                                  "model.embed_tokens_per_layer.weight",
                                  "model.per_layer_model_projection.weight",
                                  "model.per_layer_projection_norm.weight"}));
    const LayerStack st = layer_stack(c);
    ASSERT_EQ(st.kinds.size(), 4u);  // sliding, full, and each shared
    EXPECT_TRUE(st.kinds[st.kind_of(15)].kv_shared);
    EXPECT_EQ(st.count(st.kind_of(15)), 16);
    EXPECT_EQ(describe(st.kinds[st.kind_of(34)]), "kv-shared dense");
    ModelConfig text = c;
    text.multimodal_model_type.clear();
    EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
    // A one-layer model of a kind keeps the whole per-layer table (it runs once, at the start).
    const ModulePtr one = build_model(uniform_config(c, st.kinds[st.kind_of(15)]));
    EXPECT_EQ(shape(*one, "model.embed_tokens_per_layer.weight"), (std::vector<int64_t>{V, L * P}));
    EXPECT_NO_THROW(trace_model_forward(*one, 1, 16));
  }
  {
    // E4B: 42 layers of (5 sliding, 1 full) x 7, 8 heads and 2 kv heads; the last 18 share.
    const int64_t h = 2560, I = 10240, L = 42;
    const int64_t s = small_layer(h, 8, 2, 256, false, I, P),
                  f = small_layer(h, 8, 2, 512, false, I, P);
    const int64_t ss = small_layer(h, 8, 2, 256, true, I, P),
                  fs = small_layer(h, 8, 2, 512, true, I, P);
    EXPECT_EQ(s, 93'074'432);
    EXPECT_EQ(f, 106'182'144);
    EXPECT_EQ(ss, 90'452'736);
    EXPECT_EQ(fs, 100'938'752);
    const int64_t total = V * h + h + V * L * P + L * P * h + P + 20 * s + 4 * f + 15 * ss + 3 * fs;
    EXPECT_EQ(total, 7'463'013'376);
    EXPECT_EQ(build_model(find_model_config("gemma-4-e4b"))->parameters_numel(), total);
  }
}

// The worked example with every part on: tiny() with per-layer embeddings of 8 and the last two
// layers sharing (layer 0 the sliding source, layer 1 the full one), their MLPs doubled.
TEST(Gemma4Models, TinyWithEveryPartByHand) {
  nlohmann::json j = tiny();
  j["hidden_size_per_layer_input"] = 8;
  j["vocab_size_per_layer_input"] = 128;
  j["num_kv_shared_layers"] = 2;
  j["use_double_wide_mlp"] = true;
  // Per layer: norms 256, per-layer parts 512 + 512 + 64, MoE 12,804: 14,148. Layer 0 12,320 +
  // 18,432; layer 1 18,496 + 18,432; layer 2 q 4,096 + 16 + o 4,096 and MLP 36,864; layer 3 q
  // 8,192 + 32 + o 8,192 and 36,864. Model: 8,192 + 64 + table 4,096 + projection 2,048 + 8.
  const int64_t common = 256 + 1088 + 12804;
  const int64_t total = (12320 + 18432 + common) + (18496 + 18432 + common) +
                        (8208 + 36864 + common) + (16416 + 36864 + common) + 8192 + 64 + 4096 +
                        2048 + 8;
  EXPECT_EQ(total, 237'032);
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "untied.json"))->parameters_numel(), 245'224);
  // Layers 2 and 3 attend with layers 0's and 1's keys and values: no k or v projection runs.
  const OpGraph g = trace_model_forward(*m, 1, 8);
  int64_t shared_linears = 0;
  for (const OpNode& op : g.nodes()) {
    shared_linears += op.op == "linear" && op.module.starts_with("model.layers.3.self_attn");
  }
  EXPECT_EQ(shared_linears, 2);  // q_proj and o_proj
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Gemma4Models, SharingNeedsASourceLayerOfEachType) {
  nlohmann::json j = tiny();
  j["num_kv_shared_layers"] = 4;  // every layer
  EXPECT_THAT([&] { parse_model_config(j, "all.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("num_kv_shared_layers"),
                                         HasSubstr("no layer computes keys and values"))));
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                      "full_attention"};
  j["num_kv_shared_layers"] = 1;  // layer 3, the only full layer
  EXPECT_THAT([&] { parse_model_config(j, "source.json"); },
              ThrowsMessage<Error>(HasSubstr("layer 3 (full_attention) has no earlier layer")));
  // More than the layers: Gemma4TextAttention looks for a source in layer_types[:L - n], a
  // negative slice, and fails.
  j["num_kv_shared_layers"] = 9;
  EXPECT_THAT([&] { parse_model_config(j, "more.json"); },
              ThrowsMessage<Error>(HasSubstr("9, expected 0..3")));
  j = tiny();
  j["hidden_size_per_layer_input"] = 8;
  j["vocab_size_per_layer_input"] = 4;
  j["pad_token_id"] = 7;
  EXPECT_THAT([&] { parse_model_config(j, "pad.json"); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr("pad_token_id"), HasSubstr("vocab_size_per_layer_input = 4"))));
  // A negative padding_idx counts from the end of each table (nn.Embedding normalizes it).
  j["vocab_size_per_layer_input"] = 64;
  j["pad_token_id"] = -1;
  const ModelConfig c = parse_model_config(j, "pad.json");
  std::map<std::string, int64_t> zero_rows;
  for (const NamedInit& i : parameter_inits(*build_model(c), c))
    zero_rows[i.name] = i.init.zero_row;
  EXPECT_EQ(zero_rows.at("model.embed_tokens.weight"), 127);
  EXPECT_EQ(zero_rows.at("model.embed_tokens_per_layer.weight"), 63);
}

// E2B's and E4B's checkpoints still hold the shared layers' key and value projections and norms,
// which transformers skips on load: listed beside the model, the checkpoint loadable.
TEST(Gemma4Models, SharedLayersKeysAndValuesInTheCheckpointAreSkipped) {
  nlohmann::json text = tiny();
  text["num_kv_shared_layers"] = 2;
  const nlohmann::json outer = {{"model_type", "gemma4"}, {"text_config", text}};
  const ModulePtr model = build_model(parse_model_config(outer, "gemma4.json"));
  std::vector<test::StEntry> extra;
  for (int i = 0; i < 4; ++i) {
    extra.push_back(
        {"model.language_model.layers." + std::to_string(i) + ".layer_scalar", "BF16", {1}});
  }
  const std::string layer2 = "model.language_model.layers.2.self_attn.";
  extra.push_back({layer2 + "k_proj.weight", "BF16", {32, 64}});
  extra.push_back({layer2 + "v_proj.weight", "BF16", {32, 64}});
  extra.push_back({layer2 + "k_norm.weight", "BF16", {16}});
  const auto stored = [](const std::string& n) {
    return n.starts_with("model.") ? "model.language_model." + n.substr(6) : n;
  };
  const ModelSource src = test::check_stored_as(outer, *model, stored, extra);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_EQ(src.check.beyond_model,
            (Names{layer2 + "k_norm.weight", layer2 + "k_proj.weight", layer2 + "v_proj.weight"}));
  // A non-shared layer's extra projection is still unexpected (layer 1: full, values = keys).
  extra.push_back({"model.language_model.layers.1.self_attn.v_proj.weight", "BF16", {32, 64}});
  EXPECT_THAT(
      [&] { test::check_stored_as(outer, *model, stored, extra); },
      ThrowsMessage<Error>(HasSubstr("layers.1.self_attn.v_proj.weight' is not in the model")));
}

}  // namespace
}  // namespace shardplan::tensor
