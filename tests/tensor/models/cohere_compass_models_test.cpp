// cohere_compass_text (the language model of cohere_compass, Cohere's North vision-language
// models) against hand formulas written here from transformers' modeling_cohere_compass.py
// (transformers 5.16+). Destination: tests/tensor/models/cohere_compass_models_test.cpp.
// h hidden, V vocabulary, F MLP width, n heads, kv key-value heads, d head_dim:
//   embed_tokens [V, h]; per layer q_proj [n d, h], k_proj and v_proj [kv d, h], o_proj [h, n d]
//   (each with a bias by attention_bias), mlp gate_proj and up_proj [F, h], down_proj [h, F],
//   input_layernorm [h] (CohereCompassLayerNorm: a weight, no bias); norm [h]; lm_head [V, h]
//   tied by default (CohereCompassTextConfig), by the outer config in the wrapper (default
//   untied: Qwen3VLConfig's tie_word_embeddings False).
// Which layers rotate: rope_parameters keyed by layer type, null for NoPE.
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
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Three sliding RoPE layers and a full NoPE one, as the North checkpoints lay out theirs, with
// biases; the rope dict holds an inert top-level base beside its entries, as theirs does.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "model_type": "cohere_compass_text", "vocab_size": 1000, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "attention_bias": true, "logit_scale": 0.25,
    "sliding_window": 16, "torch_dtype": "bfloat16",
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                    "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50000,
                                              "mrope_section": [4, 2, 2],
                                              "mrope_interleaved": true},
                        "full_attention": null, "rope_theta": 10000.0, "rope_type": "default"}
  })");
}

TEST(CohereCompassModels, TinyMatchesTheHandTotal) {
  // V 1000, h 64, n 4, kv 2, d 16, F 128, 4 layers, attention_bias, tied (the class's default):
  //   embed_tokens         1000 * 64                  = 64,000
  //   q_proj  64*64 + 64   = 4,160;  k_proj 64*32 + 32 = 2,080;  v_proj 2,080
  //   o_proj  64*64 + 64   = 4,160                     (attention 12,480)
  //   mlp     3 * 64 * 128 = 24,576; input_layernorm 64
  //   layer   12,480 + 24,576 + 64                    = 37,120;  x 4 = 148,480
  //   norm    64
  //   total   64,000 + 148,480 + 64                   = 212,544
  const int64_t V = 1000, h = 64, q = 4 * 16, kv = 2 * 16, F = 128;
  const int64_t layer = (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + 3 * h * F + h;
  EXPECT_EQ(layer, 37'120);
  const int64_t total = V * h + 4 * layer + h;
  EXPECT_EQ(total, 212'544);
  const ModelConfig c = parse_model_config(tiny(), "tiny cohere_compass_text");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.logit_scale, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_theta, 50000);  // the sliding entry's: the top-level one is inert
  EXPECT_FALSE(c.rope_scaling);
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.pad_token_id, 0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "CohereCompassForCausalLM");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "CohereCompassDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "CohereCompassAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "CohereCompassMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.input_layernorm").type_name(),
            "CohereCompassLayerNorm");
  // CohereCompassDecoderLayer registers self_attn, mlp, then its one norm.
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.gate_proj.weight",
                "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.o_proj.weight").sizes(),
            DimVector({64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.down_proj.weight").sizes(), DimVector({64, 128}));
  EXPECT_EQ(m->get_parameter("model.layers.0.input_layernorm.weight").sizes(), DimVector({64}));
  // Three sliding RoPE layers, the fourth full and NoPE.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 16 dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.first_layer(1), 3);
  // Untied: lm_head [V, h] more.
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(untied, "untied"))->parameters_numel(), total + V * h);
  // to_hf_json reads back to the same config.
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(CohereCompassModels, RopeParametersDecideWhichLayersRotate) {
  // transformers' own tester: the full layers rotate, the sliding ones do not (the reverse of
  // Cohere2, whose windowed layers rotate).
  nlohmann::json j = tiny();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 10000}}},
                          {"sliding_attention", nullptr}};
  const ModelConfig c = parse_model_config(j, "full rotates");
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_EQ(describe(layer_kind(c, 0)), "nope sliding 16 dense");
  EXPECT_EQ(describe(layer_kind(c, 3)), "dense");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Both rotate (each its own base: the full one is kept), and a scaled entry is read.
  j["rope_parameters"]["sliding_attention"] = {{"rope_type", "default"}, {"rope_theta", 20000}};
  j["rope_parameters"]["full_attention"] = {
      {"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 30000}};
  const ModelConfig both = parse_model_config(j, "both");
  EXPECT_TRUE(both.nope_layers.empty());
  EXPECT_DOUBLE_EQ(both.rope_theta, 30000);
  ASSERT_TRUE(both.rope_scaling);
  EXPECT_EQ(both.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(both), "round trip"), both);
  // Neither rotates: every layer NoPE, the inert base kept.
  j["rope_parameters"] = {
      {"full_attention", nullptr}, {"sliding_attention", nullptr}, {"rope_theta", 5000.0}};
  const ModelConfig none = parse_model_config(j, "none");
  EXPECT_EQ(none.nope_layers.size(), 4u);
  EXPECT_DOUBLE_EQ(none.rope_theta, 5000);
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
  // Without layer_types every layer is full (no sliding_window_pattern rule): its entry decides.
  j = tiny();
  j.erase("layer_types");
  j["sliding_window_pattern"] = 4;  // an attribute CohereCompassTextConfig never reads
  const ModelConfig nope_full = parse_model_config(j, "all full, full NoPE");
  EXPECT_EQ(nope_full.nope_layers.size(), 4u);  // tiny's full entry is null
  j["rope_parameters"].erase("full_attention");
  EXPECT_THAT([&] { parse_model_config(j, "no full entry"); },
              ThrowsMessage<Error>(HasSubstr("\"full_attention\"")));
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 10000}}}};
  const ModelConfig all_full = parse_model_config(j, "all full");
  ASSERT_EQ(all_full.layer_types.size(), 4u);
  EXPECT_EQ(all_full.layer_types[1], AttentionType::kFull);
  EXPECT_TRUE(all_full.nope_layers.empty());
}

TEST(CohereCompassModels, RotatesInTheActivationsDtypeAndScalesTheLogits) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // x + attn(n) + mlp(n): two adds in the layer and one norm, read by both halves.
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  // Qwen3's apply_rotary_pos_emb: no float32 round trip of q and k (Cohere2 casts 4 times).
  EXPECT_EQ(ops_in(g, "to", "model.layers.0.self_attn"), 0);
  EXPECT_EQ(ops_in(g, "mul", ""), 1);  // logits * logit_scale
  // A NoPE layer traces fewer ops than a rotating one (no cos/sin products).
  int64_t rope_ops = 0, nope_ops = 0;
  for (const OpNode& n : g.nodes()) {
    rope_ops += n.module == "model.layers.0.self_attn";
    nope_ops += n.module == "model.layers.3.self_attn";
  }
  EXPECT_GT(rope_ops, nope_ops);
  // logit_scale null or absent: 1.0, still multiplied (CohereCompassForCausalLM).
  nlohmann::json j = tiny();
  j["logit_scale"] = nullptr;
  EXPECT_DOUBLE_EQ(parse_model_config(j, "null").logit_scale, 1.0);
  j.erase("logit_scale");
  const ModelConfig one = parse_model_config(j, "absent");
  EXPECT_DOUBLE_EQ(one.logit_scale, 1.0);
  EXPECT_EQ(ops_in(trace_model_forward(*build_model(one), 2, 8), "mul", ""), 1);
}

TEST(CohereCompassModels, RefusesWhatTransformersCannotBuild) {
  auto refused = [](nlohmann::json j, const char* what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr(what)));
  };
  nlohmann::json j = tiny();
  j.erase("rope_parameters");
  refused(j, "rope_parameters");
  j = tiny();
  j["rope_parameters"].erase("sliding_attention");
  refused(j, "\"sliding_attention\"");
  j = tiny();
  j["rope_parameters"]["sliding_attention"].erase("rope_theta");
  refused(j, "rope_theta");
  j = tiny();
  j["rope_scaling"] = nullptr;  // would replace rope_parameters
  refused(j, "rope_scaling");
  j = tiny();
  j["sliding_window"] = nullptr;
  refused(j, "sliding_window");
  j = tiny();
  j["layer_types"][0] = "chunked_attention";
  refused(j, "chunked_attention");
  j = tiny();
  j["is_causal"] = false;
  refused(j, "is_causal");
  j = tiny();
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "mrope";
  refused(j, "rope_parameters");
}

TEST(CohereCompassModels, MultimodalFileReadsItsTextConfigAndTiesByTheOuterConfig) {
  nlohmann::json text = tiny();
  text.erase("torch_dtype");
  const nlohmann::json wrapper = {{"model_type", "cohere_compass"},
                                  {"torch_dtype", "bfloat16"},
                                  {"text_config", text},
                                  {"vision_config", {{"depth", 2}, {"hidden_size", 32}}}};
  const ModelConfig c = parse_model_config(wrapper, "north");
  EXPECT_EQ(c.model_type, "cohere_compass_text");
  EXPECT_EQ(c.multimodal_model_type, "cohere_compass");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  // CohereCompassConfig's tie_word_embeddings (False) decides: lm_head is its own.
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(build_model(c)->parameters_numel(), 212'544 + 1000 * 64);
  nlohmann::json tied = wrapper;
  tied["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(tied, "tied"))->parameters_numel(), 212'544);
  // A text_config without model_type is the wrapper's text class; another type is refused.
  nlohmann::json no_type = wrapper;
  no_type["text_config"].erase("model_type");
  EXPECT_EQ(parse_model_config(no_type, "default text").model_type, "cohere_compass_text");
  nlohmann::json other = wrapper;
  other["text_config"]["model_type"] = "cohere2";
  EXPECT_THAT([&] { parse_model_config(other, "other"); },
              ThrowsMessage<Error>(HasSubstr("cohere_compass_text")));
}

TEST(CohereCompassModels, NorthMicroLanguageModelMatchesTheHandTotal) {
  // North-Micro-Vision's language model as third-party reports give it (not in the mirror):
  // V 262,144 tied, h 2,048, 28 layers of 16 heads of 128 (8 kv heads), F 6,144, three sliding
  // RoPE layers (window 4096, base 50,000) then a full NoPE one. The published 2.5 B adds about
  // 0.54 B of Qwen3-VL vision tower and mergers, not built.
  const int64_t V = 262144, h = 2048, kv = 8 * 128, F = 6144;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + h;
  EXPECT_EQ(layer, 50'333'696);
  const int64_t total = V * h + 28 * layer + h;
  EXPECT_EQ(total, 1'946'216'448);
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 28; ++i)
    types.push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
  const nlohmann::json text = {{"model_type", "cohere_compass_text"},
                               {"vocab_size", V},
                               {"hidden_size", h},
                               {"intermediate_size", F},
                               {"num_hidden_layers", 28},
                               {"num_attention_heads", 16},
                               {"num_key_value_heads", 8},
                               {"head_dim", 128},
                               {"logit_scale", 0.25},
                               {"max_position_embeddings", 500000},
                               {"sliding_window", 4096},
                               {"layer_types", types},
                               {"rope_parameters",
                                {{"sliding_attention",
                                  {{"mrope_interleaved", true},
                                   {"mrope_section", {24, 20, 20}},
                                   {"rope_type", "default"},
                                   {"rope_theta", 50000}}},
                                 {"full_attention", nullptr},
                                 {"rope_theta", 10000.0},
                                 {"rope_type", "default"}}}};
  const ModelConfig c = parse_model_config(
      {{"model_type", "cohere_compass"}, {"tie_word_embeddings", true}, {"text_config", text}},
      "north-micro");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 4096 dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(1), 7);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip").nope_layers, c.nope_layers);
}

}  // namespace
}  // namespace shardplan::tensor
