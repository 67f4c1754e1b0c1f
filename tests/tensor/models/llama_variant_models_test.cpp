// Four families whose transformers code is Llama's layer with one change each, against hand
// formulas written here from their transformers modules and the published totals. h hidden, V
// vocabulary, F MLP width, hd head_dim, kv key-value heads:
//   smollm3   (modular_smollm3.py): Llama's layer; the layers no_rope_layers marks 0 rotate
//             neither q nor k (NoPE), every 4th by default; tied embeddings
//   seed_oss  (modular_seed_oss.py): q, k, v biases, none on o (attention_out_bias); each half's
//             output dropped out (residual_dropout 0.1) before the residual add when training
//   glm4      (modular_glm4.py): q, k, v biases; one gate_up_proj [2F, h]; four norms per layer:
//             input, post_attention (before the MLP), post_self_attn, post_mlp (after each half)
//   ministral3 (modular_ministral3.py): Mistral's layer, no biases; YaRN by default
//   exaone4   (modular_exaone4.py): OLMo 2's layer (norms after each half) with per-head q/k
//             norms; sliding layers (window 4096, three of four) rotate, the full ones are NoPE
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

int64_t count_ops(const OpGraph& g, const std::string& op, const std::string& module_prefix) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) {
    if (node.op == op && node.module.starts_with(module_prefix)) ++n;
  }
  return n;
}

TEST(LlamaVariantModels, SmolLM3ThreeBMatchesTheHandTotal) {
  // SmolLM3-3B: V 128,256 tied, h 2,048, 36 layers of 16 heads (4 kv heads of 128), F 11,008.
  const int64_t V = 128256, h = 2048, kv = 4 * 128, F = 11008;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + 2 * h;
  const int64_t total = V * h + 36 * layer + h;
  EXPECT_EQ(total, 3'075'098'624);  // "3B"
  const ModelConfig c = find_model_config("smollm3-3b");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // Every 4th layer is NoPE: 27 RoPE layers and 9 NoPE ones, all attending in full.
  ASSERT_EQ(c.nope_layers.size(), 9u);
  EXPECT_EQ(c.nope_layers.front(), 3);
  EXPECT_EQ(c.nope_layers.back(), 35);
  EXPECT_TRUE(c.layer_types.empty());
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(1), 9);
  EXPECT_EQ(s.first_layer(1), 3);
  EXPECT_EQ(c.pad_token_id, 128004);
}

nlohmann::json tiny_smollm3() {
  return {{"model_type", "smollm3"},  {"vocab_size", 1000},     {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 8}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"pad_token_id", 0},      {"torch_dtype", "bfloat16"}};
}

TEST(LlamaVariantModels, SmolLM3NopeLayersRotateNothing) {
  // The trace of a NoPE layer lacks RoPE's ops on q and on k: per tensor two narrows (x1, x2),
  // neg, cat, two muls and an add, 7 ops; the muls and the add touch every element, neg half.
  const ModelConfig c = parse_model_config(tiny_smollm3(), "tiny smollm3");
  ASSERT_EQ(c.nope_layers, (std::vector<int64_t>{3, 7}));
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "SmolLM3ForCausalLM");
  const int64_t B = 2, S = 16;
  const OpGraph g = trace_model_forward(*m, B, S);
  const CostTotals rope = g.module_totals().at("model.layers.2.self_attn");
  const CostTotals nope = g.module_totals().at("model.layers.3.self_attn");
  EXPECT_EQ(rope.ops - nope.ops, 14);
  const double q = B * 4 * S * 16.0, k = B * 2 * S * 16.0;  // heads x head_dim 16
  EXPECT_DOUBLE_EQ(rope.flops - nope.flops, 3.5 * (q + k));
  EXPECT_DOUBLE_EQ(rope.matmul_flops, nope.matmul_flops);
  // The same names and shapes as Llama's layer.
  EXPECT_EQ(
      names_under(*m, "model.layers.3."),
      (std::vector<std::string>{
          "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(LlamaVariantModels, SmolLM3ReadsNoRopeLayersAndWindowsAsItsConfigDoes) {
  nlohmann::json j = tiny_smollm3();
  // A longer list is read for its first num_hidden_layers entries (SmolLM3Config's "at least").
  j["no_rope_layers"] = {0, 1, 1, 1, 1, 1, 1, 0, 1, 1};
  const ModelConfig listed = parse_model_config(j, "listed");
  EXPECT_EQ(listed.nope_layers, (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(parse_model_config(to_hf_json(listed), "round trip"), listed);
  j["no_rope_layers"] = nlohmann::json::array();  // SmolLM3Config derives none from it
  EXPECT_THAT([&] { parse_model_config(j, "empty"); },
              ThrowsMessage<Error>(HasSubstr("is empty; expected at least num_hidden_layers")));
  j["no_rope_layers"] = {1, 1, 0};
  EXPECT_THAT([&] { parse_model_config(j, "short"); },
              ThrowsMessage<Error>(HasSubstr("expected a list of at least num_hidden_layers = 8")));
  j["no_rope_layers"] = {1, 1, 2, 1, 1, 1, 1, 1};
  EXPECT_THAT([&] { parse_model_config(j, "two"); },
              ThrowsMessage<Error>(HasSubstr("entry 2 is 2, expected 1 (RoPE) or 0 (none)")));
  j.erase("no_rope_layers");
  j["no_rope_layer_interval"] = 3;
  EXPECT_EQ(parse_model_config(j, "interval").nope_layers, (std::vector<int64_t>{2, 5}));
  // use_sliding_window with a window: the NoPE layers slide (SmolLM3Config's layer_types).
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4;
  const ModelConfig windowed = parse_model_config(j, "windowed");
  ASSERT_EQ(windowed.layer_types.size(), 8u);
  EXPECT_EQ(windowed.layer_types[2], AttentionType::kSliding);
  EXPECT_EQ(windowed.layer_types[3], AttentionType::kFull);
  EXPECT_EQ(describe(layer_kind(windowed, 5)), "nope sliding 4 dense");
  EXPECT_EQ(parse_model_config(to_hf_json(windowed), "round trip"), windowed);
  // Without use_sliding_window, SmolLM3Attention passes no window (what flash attention reads):
  // layer_types do not slide.
  j["use_sliding_window"] = false;
  j["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 8; ++i) j["layer_types"].push_back("sliding_attention");
  const ModelConfig unwindowed = parse_model_config(j, "unwindowed");
  EXPECT_TRUE(unwindowed.layer_types.empty());
  EXPECT_FALSE(unwindowed.sliding_window.has_value());
}

TEST(LlamaVariantModels, SmolLM3PadTokenIdIsItsConfigClasses) {
  nlohmann::json j = tiny_smollm3();
  j["vocab_size"] = 128256;
  j.erase("pad_token_id");
  const ModelConfig absent = parse_model_config(j, "absent");
  EXPECT_EQ(absent.pad_token_id, 128004);  // SmolLM3Config's default
  j["pad_token_id"] = nullptr;
  const ModelConfig none = parse_model_config(j, "null");
  EXPECT_FALSE(none.pad_token_id.has_value());  // None stays None
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
  // The default row must exist, as nn.Embedding's padding_idx check says.
  j = tiny_smollm3();
  j.erase("pad_token_id");
  EXPECT_THAT([&] { parse_model_config(j, "tiny"); },
              ThrowsMessage<Error>(HasSubstr("got 128004 (the config class's default)")));
}

TEST(LlamaVariantModels, SeedOss36BMatchesTheHandTotal) {
  // Seed-OSS-36B: V 155,136 untied, h 5,120, 64 layers of 80 heads of 128 (8 kv heads),
  // F 27,648; biases on q, k, v only.
  const int64_t V = 155136, h = 5120, q = 80 * 128, kv = 8 * 128, F = 27648;
  const int64_t attention = h * q + q + 2 * (h * kv + kv) + q * h;
  const int64_t layer = attention + 3 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 64 * layer + h;
  EXPECT_EQ(total, 36'151'104'512);  // "36B"
  const ModelConfig c = find_model_config("seed-oss-36b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "SeedOssForCausalLM");
  EXPECT_EQ(
      names_under(*m, "model.layers.0.self_attn."),
      (std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                "v_proj.weight", "v_proj.bias", "o_proj.weight"}));
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(LlamaVariantModels, SeedOssDropsEachHalfsOutputWhenTraining) {
  nlohmann::json j = {{"model_type", "seed_oss"}, {"vocab_size", 1000},
                      {"hidden_size", 64},        {"intermediate_size", 128},
                      {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 16},
                      {"attention_dropout", 0.0}, {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "tiny seed_oss");
  EXPECT_EQ(c.pad_token_id, 1);  // SeedOssConfig's default
  // residual_dropout 0.1 by default: two dropouts per layer in training, on [B, S, h] each.
  const ModulePtr train = build_model(c, {.dtype = std::nullopt, .training = true});
  const OpGraph g = trace_model_forward(*train, 2, 8);
  EXPECT_EQ(count_ops(g, "dropout", "model.layers.0"), 2);
  // transformers drops out inside SeedOssAttention and SeedOssMLP, after o_proj and down_proj:
  // the same op on the same tensor, traced here by the decoder layer before each residual add.
  EXPECT_EQ(count_ops(g, "dropout", "model.layers.0.self_attn"), 0);
  EXPECT_EQ(count_ops(trace_model_forward(*build_model(c), 2, 8), "dropout", ""), 0);  // eval
  j["residual_dropout"] = 0.0;
  const ModulePtr off =
      build_model(parse_model_config(j, "off"), {.dtype = std::nullopt, .training = true});
  EXPECT_EQ(count_ops(trace_model_forward(*off, 2, 8), "dropout", ""), 0);
  j["residual_dropout"] = 1.5;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("residual_dropout")));
}

TEST(LlamaVariantModels, Glm4NineBMatchesTheHandTotal) {
  // GLM-4-9B-0414: V 151,552 untied, h 4,096, 40 layers of 32 heads of 128 (2 kv heads),
  // F 13,696; q, k, v biases; gate_up_proj [2F, h]; four norms per layer.
  const int64_t V = 151552, h = 4096, kv = 2 * 128, F = 13696;
  const int64_t attention = h * h + h + 2 * (h * kv + kv) + h * h;
  const int64_t layer = attention + 2 * F * h + F * h + 4 * h;
  const int64_t total = 2 * V * h + 40 * layer + h;
  EXPECT_EQ(total, 9'400'279'040);  // "9B" (9.4 B on its model card)
  const ModelConfig c = find_model_config("glm-4-9b-0414");
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(LlamaVariantModels, Glm4LayerNamesNormsAndOrder) {
  const nlohmann::json j = {{"model_type", "glm4"},     {"vocab_size", 1000},
                            {"hidden_size", 64},        {"intermediate_size", 96},
                            {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                            {"num_key_value_heads", 2}, {"head_dim", 16},
                            {"pad_token_id", 0},        {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "tiny glm4");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Glm4ForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                "self_attn.o_proj.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight",
                "post_self_attn_layernorm.weight", "post_mlp_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.gate_up_proj.weight").sizes(),
            DimVector({192, 64}));
  // Four RMSNorms of [B, S, h] per layer in the trace, and the MLP's GEMMs 2 T h 2F + 2 T F h.
  const OpGraph g = trace_model_forward(*m, 1, 8);
  EXPECT_EQ(count_ops(g, "rms_norm", "model.layers.1"), 4);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.1.mlp").matmul_flops,
                   2.0 * 8 * 64 * 192 + 2.0 * 8 * 96 * 64);
}

TEST(LlamaVariantModels, Ministral3EightBIsItsConfigClasssDefaults) {
  // Ministral3Config's defaults (Ministral-3-8B): V 131,072 untied, h 4,096, 34 layers of 32
  // heads of 128 (8 kv heads), F 14,336, no biases.
  const int64_t V = 131072, h = 4096, kv = 8 * 128, F = 14336;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 34 * layer + h;
  EXPECT_EQ(total, 8'489'553'920);  // 8.4 B beside its 0.4 B vision encoder
  const ModelConfig c = find_model_config("ministral-3-8b");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Inside a mistral3 file (its text_config), as Ministral 3 ships; without rope settings the
  // class's YaRN applies.
  nlohmann::json text = {{"model_type", "ministral3"}, {"vocab_size", 1000},
                         {"hidden_size", 64},          {"intermediate_size", 128},
                         {"num_hidden_layers", 2},     {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},   {"pad_token_id", 0}};
  const nlohmann::json outer = {{"model_type", "mistral3"},
                                {"text_config", text},
                                {"vision_config", {{"model_type", "pixtral"}}},
                                {"torch_dtype", "bfloat16"}};
  const ModelConfig wrapped = parse_model_config(outer, "mistral3");
  EXPECT_EQ(wrapped.model_type, "ministral3");
  EXPECT_EQ(wrapped.multimodal_model_type, "mistral3");
  EXPECT_EQ(wrapped.head_dim, 128);  // Ministral3Config's, whatever hidden / heads is
  ASSERT_TRUE(wrapped.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(wrapped.rope_scaling->factor, 16);
  EXPECT_EQ(wrapped.rope_scaling->original_max_position_embeddings, 16384);
  EXPECT_EQ(build_model(wrapped)->type_name(), "Ministral3ForCausalLM");
  // Mistral3Config ties the output layer unless its own tie_word_embeddings says otherwise.
  EXPECT_TRUE(wrapped.tie_word_embeddings);
}

TEST(LlamaVariantModels, Exaone4ThirtyTwoBMatchesTheHandTotal) {
  // EXAONE-4.0-32B: V 102,400 untied, h 5,120, 64 layers of 40 heads of 128 (8 kv heads),
  // F 27,392; per-head q_norm, k_norm [128]; two norms per layer, after each half.
  const int64_t V = 102400, h = 5120, kv = 8 * 128, F = 27392;
  const int64_t layer = 2 * h * h + 2 * h * kv + 2 * 128 + 3 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 64 * layer + h;
  EXPECT_EQ(total, 32'003'216'384);  // "32B"
  const ModelConfig c = find_model_config("exaone-4.0-32b");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // Three sliding RoPE layers of four, the fourth full and NoPE.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 4096 dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(1), 16);
  EXPECT_EQ(s.first_layer(1), 3);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(LlamaVariantModels, Exaone4LayersFromItsPatternAndNamesAsOlmo2) {
  nlohmann::json j = {{"model_type", "exaone4"},  {"vocab_size", 1000},
                      {"hidden_size", 64},        {"intermediate_size", 128},
                      {"num_hidden_layers", 6},   {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
  // No layer_types: Exaone4Config's integer pattern 4 and window 4096.
  const ModelConfig dflt = parse_model_config(j, "default");
  EXPECT_EQ(dflt.sliding_window, 4096);
  EXPECT_EQ(dflt.nope_layers, (std::vector<int64_t>{3}));
  EXPECT_EQ(dflt.layer_types[2], AttentionType::kSliding);
  EXPECT_EQ(dflt.layer_types[3], AttentionType::kFull);
  EXPECT_EQ(dflt.layer_types[5], AttentionType::kSliding);  // an integer pattern leaves the last
  const ModulePtr m = build_model(dflt);
  EXPECT_EQ(m->type_name(), "Exaone4ForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "post_attention_layernorm.weight", "post_feedforward_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_norm.weight").sizes(), DimVector({16}));
  // A string of L and G repeats, the last layer global (Exaone4Config's docstring).
  j["sliding_window_pattern"] = "LG";
  j["sliding_window"] = 8;
  const ModelConfig lg = parse_model_config(j, "LG");
  EXPECT_EQ(lg.nope_layers, (std::vector<int64_t>{1, 3, 5}));
  j["num_hidden_layers"] = 5;
  EXPECT_EQ(parse_model_config(j, "LG odd").nope_layers, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(parse_model_config(to_hf_json(lg), "round trip"), lg);
  j["sliding_window_pattern"] = "LLX";
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("expected a positive integer or a string of L")));
  // No window: Exaone4Config divides by a zero pattern unless the file lists layer_types; with
  // them every layer is full and rotating ("sliding_window is None": RoPE everywhere).
  j["sliding_window"] = nullptr;
  j["sliding_window_pattern"] = 4;
  EXPECT_THAT(
      [&] { parse_model_config(j, "no window"); },
      ThrowsMessage<Error>(HasSubstr("field 'sliding_window': is null and no layer_types")));
  j["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 5; ++i)
    j["layer_types"].push_back(i % 2 ? "full_attention" : "sliding_attention");
  const ModelConfig none = parse_model_config(j, "no window");
  EXPECT_TRUE(none.nope_layers.empty());
  EXPECT_TRUE(none.layer_types.empty());
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
}

TEST(LlamaVariantModels, KeyValueHeadsAndRopeDefaultToTheConfigClasses) {
  // A file without num_key_value_heads gets its class's (SmolLM3Config 4, SeedOssConfig 8,
  // Glm4Config 2, Ministral3Config 8, Exaone4Config 32), a null one the head count.
  const std::pair<const char*, int64_t> classes[] = {
      {"smollm3", 4}, {"seed_oss", 8}, {"glm4", 2}, {"ministral3", 8}, {"exaone4", 32}};
  for (const auto& [type, kv] : classes) {
    SCOPED_TRACE(type);
    nlohmann::json j = {
        {"model_type", type},       {"vocab_size", 1000},     {"hidden_size", 512},
        {"intermediate_size", 256}, {"num_hidden_layers", 2}, {"num_attention_heads", 32},
        {"head_dim", 16},           {"pad_token_id", 0},      {"torch_dtype", "bfloat16"}};
    EXPECT_EQ(parse_model_config(j, "absent").num_key_value_heads, kv);
    j["num_key_value_heads"] = nullptr;
    EXPECT_EQ(parse_model_config(j, "null").num_key_value_heads, 32);
  }
  // Ministral3Config's YaRN stays under a top-level rope_theta (its base is 1e6).
  const nlohmann::json m = {{"model_type", "ministral3"},
                            {"vocab_size", 1000},
                            {"hidden_size", 64},
                            {"intermediate_size", 128},
                            {"num_hidden_layers", 2},
                            {"num_attention_heads", 4},
                            {"num_key_value_heads", 2},
                            {"rope_theta", 5e5},
                            {"pad_token_id", 0},
                            {"sliding_window", 16},
                            {"layer_types", {"full_attention", "sliding_attention"}}};
  const ModelConfig c = parse_model_config(m, "theta");
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  // Every layer slides when a window is set; layer_types is read and ignored.
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kSliding, AttentionType::kSliding}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // rope_parameters of type default: no scaling, and it survives the round trip.
  nlohmann::json plain = m;
  plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  const ModelConfig p = parse_model_config(plain, "plain");
  EXPECT_FALSE(p.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(p.rope_theta, 5e5);
  EXPECT_EQ(parse_model_config(to_hf_json(p), "round trip"), p);
}

TEST(LlamaVariantModels, Llama4FullLayersAreNopeLayers) {
  const ModelConfig c = find_model_config("llama4-scout");
  // Every 4th layer of 48 takes no RoPE and attends in full; the others chunk.
  ASSERT_EQ(c.nope_layers.size(), 12u);
  for (const int64_t l : c.nope_layers) {
    EXPECT_EQ((l + 1) % 4, 0);
    EXPECT_EQ(c.layer_types[static_cast<size_t>(l)], AttentionType::kFull);
  }
  EXPECT_EQ(describe(layer_kind(c, 3)), "nope moe");
  EXPECT_EQ(describe(layer_kind(c, 0)), "chunked 8192 moe");
}

}  // namespace
}  // namespace shardplan::tensor
