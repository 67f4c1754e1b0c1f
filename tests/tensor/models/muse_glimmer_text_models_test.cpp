// muse_glimmer_text (the language model of Meta's Muse Glimmer, model_type muse_glimmer) against
// hand formulas written here from transformers 5's modeling_muse_glimmer.py and
// configuration_muse_glimmer.py, and the published size (the model card: "a 30B multimodal
// model", checkpoint meta-models/Muse-Glimmer-30B). h hidden, V vocabulary, F MLP width, H heads
// and K key-value heads of d, L layers; no bias anywhere by default:
//   attention  q_proj [H d, h], k_proj and v_proj [K d, h], o_proj [h, H d], gate_proj [H d, h]
//              (the output gate); qk_norm has no weight
//   mlp        gate_proj and up_proj [F, h], down_proj [h, F]
//   norms      input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
//              post_feedforward_layernorm [h] each
//   model      embed_tokens [V, h] (its embed_norm has no weight), norm [h], lm_head [V, h]
//   total      L (3 h H d + 2 h K d + 3 h F + 4 h) + 2 V h + h (untied)
// transformers has no MuseGlimmerTextForCausalLM: the names are
// MuseGlimmerForConditionalGeneration's (model.language_model.*, lm_head.*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
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
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

constexpr const char* kLayers = "model.language_model.layers.";

int64_t hand_total(int64_t V, int64_t h, int64_t F, int64_t L, int64_t H, int64_t K, int64_t d) {
  const int64_t layer = 3 * h * H * d + 2 * h * K * d + 3 * h * F + 4 * h;
  return L * layer + 2 * V * h + h;
}

// Four layers: three sliding RoPE layers, then a full NoPE one (the class's rule for four).
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "model_type": "muse_glimmer_text", "vocab_size": 128, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 16, "output_multiplier": 0.5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}
  })");
}

TEST(MuseGlimmerTextModels, MuseGlimmer30BMatchesThePublishedSize) {
  // V 202,048, h 6,656, F 19,968, 52 layers of 32 heads and 2 kv heads of 128, untied:
  //   q_proj, o_proj, gate_proj  3 x 6,656 x 4,096      =  81,788,928
  //   k_proj, v_proj             2 x 6,656 x 256        =   3,407,872
  //   mlp                        3 x 6,656 x 19,968     = 398,721,024
  //   norms                      4 x 6,656              =      26,624
  //   layer                                             = 483,944,448;  x 52 = 25,165,111,296
  //   embed_tokens, lm_head      2 x 202,048 x 6,656    = 2,689,662,976;  norm 6,656
  const int64_t layer = 3 * 6656 * 4096 + 2 * 6656 * 256 + 3 * 6656 * 19968 + 4 * 6656;
  EXPECT_EQ(layer, 483'944'448);
  const int64_t total = hand_total(202048, 6656, 19968, 52, 32, 2, 128);
  EXPECT_EQ(total, 27'854'780'928);
  // The published "30B" is the whole multimodal model: the vision tower (50 layers of 1,536 with
  // biases, MLP 8,960; the patch embedding [1,536, 2 x 3 x 14 x 14] and a 32 x 32 position table;
  // ln_pre, ln_post) 1,852,639,744, its adapter (6,144 -> 4,096 -> 4,096) and the projection to
  // the text width (4,096 -> 6,656) 69,206,016, none of which is built: 29,776,626,688 in all.
  const int64_t vision_layer =
      4 * (1536 * 1536 + 1536) + (1536 * 8960 + 8960) + (8960 * 1536 + 1536) + 4 * 1536;
  const int64_t vision = 50 * vision_layer + 1176 * 1536 + 1024 * 1536 + 4 * 1536;
  const int64_t projector = 6144 * 4096 + 4096 * 4096 + 4096 * 6656;
  EXPECT_EQ(vision, 1'852'639'744);
  EXPECT_EQ(total + vision + projector, 29'776'626'688);  // "30B"

  const ModelConfig c = find_model_config("muse-glimmer");
  EXPECT_EQ(c.model_type, "muse_glimmer_text");
  EXPECT_EQ(c.multimodal_model_type, "muse_glimmer");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);  // the outer file's dtype
  EXPECT_FALSE(c.tie_word_embeddings);         // MuseGlimmerConfig has no tie: false
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_DOUBLE_EQ(c.query_multiplier, 3.87);
  EXPECT_DOUBLE_EQ(c.logit_scale, 1 / std::sqrt(6656.0 / 256));
  EXPECT_DOUBLE_EQ(c.post_norm_eps, 1e-8);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 20);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // 13 full NoPE layers (3, 7, ..., 51: every fourth counted back from the last), 39 sliding.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 2048 dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(1), 13);
  EXPECT_EQ(s.first_layer(1), 3);
  EXPECT_EQ(s.kind_of(51), 1);
  EXPECT_EQ(multimodal_note(c).find("'muse_glimmer' is a multimodal model"), 0u);
  ModelConfig text = c;  // a plan holds the language model alone
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

TEST(MuseGlimmerTextModels, NamesAreTheLanguageModelsInsideTheMultimodalModel) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MuseGlimmerForConditionalGeneration");
  EXPECT_EQ(m->get_submodule("model").type_name(), "MuseGlimmerModel");
  EXPECT_EQ(m->get_submodule("model.language_model").type_name(), "MuseGlimmerTextModel");
  EXPECT_EQ(m->get_submodule("model.language_model.layers.0").type_name(),
            "MuseGlimmerTextDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.language_model.layers.0.self_attn").type_name(),
            "MuseGlimmerTextAttention");
  EXPECT_EQ(m->get_submodule("model.language_model.layers.0.self_attn.qk_norm").type_name(),
            "MuseGlimmerRMSNorm");
  EXPECT_EQ(m->get_submodule("model.language_model.layers.0.mlp").type_name(),
            "MuseGlimmerTextMLP");
  EXPECT_EQ(m->get_submodule("model.language_model.layers.0.input_layernorm").type_name(),
            "MuseGlimmerTextCenteredRMSNorm");
  EXPECT_EQ(m->get_submodule("model.language_model.norm").type_name(), "MuseGlimmerRMSNorm");
  EXPECT_EQ(layers_path(c), "model.language_model.layers");
  // MuseGlimmerTextAttention registers q, k, v, o, then the gate; the decoder layer self_attn,
  // mlp, then its four norms (Gemma 2's order).
  EXPECT_EQ(names_under(*m, std::string(kLayers) + "0."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "self_attn.gate_proj.weight", "mlp.gate_proj.weight",
                   "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
                   "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
                   "post_feedforward_layernorm.weight"}));
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with(kLayers)) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.language_model.embed_tokens.weight",
                        "model.language_model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_parameter("model.language_model.layers.0.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  EXPECT_EQ(m->get_parameter("model.language_model.layers.0.self_attn.gate_proj.weight").sizes(),
            DimVector({64, 64}));
  EXPECT_EQ(m->get_parameter("model.language_model.layers.0.self_attn.o_proj.weight").sizes(),
            DimVector({64, 64}));
  EXPECT_EQ(m->get_parameter("model.language_model.layers.0.mlp.down_proj.weight").sizes(),
            DimVector({64, 96}));
}

TEST(MuseGlimmerTextModels, TinyConfigByHand) {
  // V 128, h 64, F 96, 4 layers of 4 heads and 2 kv heads of 16:
  //   q_proj, o_proj, gate_proj 3 x 64 x 64 = 12,288; k_proj, v_proj 2 x 64 x 32 = 4,096;
  //   mlp 3 x 64 x 96 = 18,432; norms 4 x 64 = 256: a layer 35,072, x 4 = 140,288;
  //   embed_tokens and lm_head 2 x 128 x 64 = 16,384; norm 64: 156,736.
  EXPECT_EQ(hand_total(128, 64, 96, 4, 4, 2, 16), 156'736);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(c)->parameters_numel(), 156'736);
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{3}));
  ASSERT_EQ(c.layer_types.size(), 4u);
  EXPECT_EQ(c.layer_types[2], AttentionType::kSliding);
  EXPECT_EQ(c.layer_types[3], AttentionType::kFull);
  ASSERT_TRUE(c.sliding_window);
  EXPECT_EQ(*c.sliding_window, 16);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // tie_word_embeddings drops lm_head; attention_bias adds q 64, k 32, v 32 and o 64 per layer,
  // never to the gate.
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tied"))->parameters_numel(), 156'736 - 128 * 64);
  j["tie_word_embeddings"] = false;
  j["attention_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "biased");
  EXPECT_EQ(build_model(biased)->parameters_numel(), 156'736 + 4 * 192);
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
}

TEST(MuseGlimmerTextModels, LayerRopeThetaDecidesWhichLayersRotate) {
  // Without either list, 6 layers: full and NoPE where (5 - i) % 4 == 0, layers 1 and 5.
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 6;
  const ModelConfig six = parse_model_config(j, "six");
  EXPECT_EQ(six.nope_layers, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(six.layer_types[1], AttentionType::kFull);
  EXPECT_EQ(six.layer_types[4], AttentionType::kSliding);
  EXPECT_EQ(parse_model_config(to_hf_json(six), "round trip"), six);
  // The list's zeros are NoPE, whatever the layer types; another nonzero base rotates with the
  // model's one table (MuseGlimmerTextModel tests the entry for truth), so it changes nothing.
  j = tiny();
  j["layer_rope_theta"] = {10000.0, 0, 5, 0.0};
  const ModelConfig c = parse_model_config(j, "list");
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{1, 3}));
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_EQ(describe(layer_kind(c, 0)), "sliding 16 dense");
  EXPECT_EQ(describe(layer_kind(c, 1)), "nope sliding 16 dense");
  EXPECT_EQ(describe(layer_kind(c, 3)), "nope dense");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A NoPE layer traces no rotation of q and k: no neg (rotate_half), four fewer multiplies.
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  const std::string rope = std::string(kLayers) + "0.self_attn";
  const std::string nope = std::string(kLayers) + "1.self_attn";
  EXPECT_EQ(ops_in(g, "neg", rope), 2);
  EXPECT_EQ(ops_in(g, "neg", nope), 0);
  // q times qk_scale_factor and the output times sigmoid(gate), plus RoPE's two per tensor.
  EXPECT_EQ(ops_in(g, "mul", rope), 2 + 4);
  EXPECT_EQ(ops_in(g, "mul", nope), 2);
}

TEST(MuseGlimmerTextModels, TheForwardRunsTheNormsGateAndScaledCappedLogits) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  const std::string attn = std::string(kLayers) + "0.self_attn";
  // One weightless qk_norm, called on q and on k.
  EXPECT_EQ(ops_in(g, "rms_norm", attn + ".qk_norm"), 2);
  EXPECT_EQ(ops_in(g, "sigmoid", attn), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", attn), 1);
  // The embeddings' weightless norm, in the language model itself; the final norm in its own.
  EXPECT_EQ(ops_in(g, "rms_norm", "model.language_model"), 1);
  EXPECT_EQ(ops_in(g, "rms_norm", "model.language_model.norm"), 1);
  // Four (1 + w) norms a layer, each normed input joined to the residual: two adds.
  EXPECT_EQ(ops_in(g, "rms_norm", std::string(kLayers) + "0.post_attention_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "add", std::string(kLayers) + "0"), 2);
  // 20 tanh(logits x output_multiplier / 20): two multiplies, a division and tanh at the root.
  EXPECT_EQ(ops_in(g, "mul", ""), 2);
  EXPECT_EQ(ops_in(g, "div", ""), 1);
  EXPECT_EQ(ops_in(g, "tanh", ""), 1);
}

TEST(MuseGlimmerTextModels, TrainingStepOfTheTinyModel) {
  nlohmann::json j = tiny();
  j["attention_dropout"] = 0.1;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 4u);
  EXPECT_EQ(st.blocks[0].type, "MuseGlimmerTextDecoderLayer");
  // Layer 0's forward matrix products over 16 tokens: q_proj, gate_proj and o_proj
  // 3 x 2 x 16 x 64 x 64 = 393,216; k_proj and v_proj 2 x 2 x 16 x 64 x 32 = 131,072; the MLP
  // 3 x 2 x 16 x 64 x 96 = 589,824; attention 2 x (2 x 4 heads) x 8 x 8 keys (the window of 16
  // holds them all) x (16 + 16) = 32,768.
  double layer0 = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block == 0) layer0 += op.matmul_flops;
  }
  EXPECT_DOUBLE_EQ(layer0, 393216.0 + 131072 + 589824 + 32768);
  EXPECT_EQ(st.totals.parameters, 156'736);
}

TEST(MuseGlimmerTextModels, InitIsPreTrainedModelsWithEveryRmsNormAtOne) {
  nlohmann::json j = tiny();
  j["pad_token_id"] = 0;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  // The (1 + w) norms too: PreTrainedModel._init_weights fills every "RMSNorm" class with ones.
  EXPECT_EQ(init.at("model.language_model.layers.0.post_feedforward_layernorm.weight"), one);
  EXPECT_EQ(init.at("model.language_model.norm.weight"), one);
  EXPECT_EQ(init.at("model.language_model.layers.0.self_attn.gate_proj.weight"), normal);
  EXPECT_EQ(init.at("lm_head.weight"), normal);
  EXPECT_EQ(init.at("model.language_model.embed_tokens.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02, 0}));  // padding row 0
}

TEST(MuseGlimmerTextModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "muse.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("sliding_window", nullptr, "needs a window");
  refused("sliding_window", 0, "expected > 0");
  refused("layer_types",
          {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"},
          "full_attention and sliding_attention layers only");
  refused("layer_rope_theta", {10000.0, 0, 10000.0}, "num_hidden_layers = 4");
  refused("layer_rope_theta", {10000.0, "x", 10000.0, 0}, "expected a number");
  refused("final_logit_softcapping", 0.0, "must be positive");
  refused("final_logit_softcapping", nullptr, "is null");
  refused("qk_scale_factor", nullptr, "is null");
  refused("output_multiplier", nullptr, "is null");
  refused("post_norm_eps", 0.0, "must be positive");
  refused("hidden_size", 66, "not a multiple of the 4 attention heads");
  refused("hidden_activation", "xielu", "not built");
  refused("partial_rotary_factor", 0.5, "rotates the whole head_dim");
  nlohmann::json j = tiny();
  j["rope_parameters"]["partial_rotary_factor"] = 0.5;
  EXPECT_THAT([&] { parse_model_config(j, "muse.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'partial_rotary_factor'")));
  // Gemma 2's fields the class deletes are read and change nothing.
  j = tiny();
  j["attn_logit_softcapping"] = 50.0;
  j["query_pre_attn_scalar"] = 256;
  EXPECT_EQ(parse_model_config(j, "gemma2 leftovers"), parse_model_config(tiny(), "tiny"));
}

TEST(MuseGlimmerTextModels, MultimodalFileReadsItsTextConfigAndTiesByTheOuterConfig) {
  nlohmann::json text = tiny();
  const nlohmann::json wrapper = {{"model_type", "muse_glimmer"},
                                  {"dtype", "bfloat16"},
                                  {"text_config", text},
                                  {"vision_config", {{"hidden_size", 32}}}};
  const ModelConfig c = parse_model_config(wrapper, "muse");
  EXPECT_EQ(c.model_type, "muse_glimmer_text");
  EXPECT_EQ(c.multimodal_model_type, "muse_glimmer");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(build_model(c)->parameters_numel(), 156'736);
  // MuseGlimmerForConditionalGeneration ties by its own config's tie_word_embeddings, whatever
  // text_config says.
  nlohmann::json tied = wrapper;
  tied["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(tied, "tied"))->parameters_numel(), 156'736 - 128 * 64);
  nlohmann::json text_tied = wrapper;
  text_tied["text_config"]["tie_word_embeddings"] = true;
  EXPECT_FALSE(parse_model_config(text_tied, "text tied").tie_word_embeddings);
  // MuseGlimmerConfig always builds MuseGlimmerTextConfig: no model_type is that, another refused.
  nlohmann::json no_type = wrapper;
  no_type["text_config"].erase("model_type");
  EXPECT_EQ(parse_model_config(no_type, "default text").model_type, "muse_glimmer_text");
  nlohmann::json other = wrapper;
  other["text_config"]["model_type"] = "gemma2";
  EXPECT_THAT([&] { parse_model_config(other, "other"); },
              ThrowsMessage<Error>(HasSubstr("muse_glimmer_text")));
}

TEST(MuseGlimmerTextModels, ACheckpointOfTheMultimodalModelFitsItsLanguageModel) {
  // The checkpoint names the language model as the model does; the vision tower, its adapter and
  // the projection are listed outside the language model, neither loaded nor unexpected.
  const nlohmann::json config = {{"model_type", "muse_glimmer"},
                                 {"dtype", "bfloat16"},
                                 {"text_config", tiny()},
                                 {"vision_config", {{"hidden_size", 32}}}};
  const ModulePtr model = build_model(parse_model_config(config, "config.json"));
  const ModelSource src =
      test::check_stored_as(config, *model, [](const std::string& n) { return n; },
                            {{"model.vision_tower.layers.0.attn.q_proj.weight", "BF16", {32, 32}},
                             {"model.vision_adapter.fc1.weight", "BF16", {32, 128}},
                             {"model.vision_projection.weight", "BF16", {64, 32}}});
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_EQ(src.check.language_model_prefix, "model.language_model.");
  EXPECT_EQ(src.check.outside_language_model.size(), 3u);
}

TEST(MuseGlimmerTextModels, TensorParallelPlanSplitsWholeHeadsAndTheGate) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_FALSE(f.moe);
  EXPECT_EQ(f.layers_path, "model.language_model.layers");
  EXPECT_EQ(f.file_key("query_multiplier"), "qk_scale_factor");
  EXPECT_EQ(f.file_key("logit_scale"), "output_multiplier");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.language_model.embed_tokens", "rowwise"},
      {"model.language_model.layers.*.self_attn.q_proj", "colwise"},
      {"model.language_model.layers.*.self_attn.k_proj", "colwise"},
      {"model.language_model.layers.*.self_attn.v_proj", "colwise"},
      {"model.language_model.layers.*.self_attn.gate_proj", "colwise"},
      {"model.language_model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.language_model.layers.*.mlp.gate_proj", "colwise"},
      {"model.language_model.layers.*.mlp.up_proj", "colwise"},
      {"model.language_model.layers.*.mlp.down_proj", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Every projection is its own, rows in head order: a contiguous split is whole heads.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "3");
    const std::string type = m->get_submodule(path).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << path << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
