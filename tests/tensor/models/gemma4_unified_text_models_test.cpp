// gemma4_unified_text (the language model of Google's encoder-free Gemma 4 12B, model_type
// gemma4_unified) against hand formulas written here from transformers' modeling_gemma4_unified.py
// and configuration_gemma4_unified.py, and the published size ("12B": google/gemma-4-12B-it).
// h hidden, H heads, V vocabulary, I MLP width; a sliding layer's heads are head_dim d wide with
// kv key-value heads, a full layer's global_head_dim D wide with gkv (num_global_key_value_heads,
// read with attention_k_eq_v, which also drops v_proj there):
//   attention  q_proj [H d, h], q_norm [d], k_norm [d], k_proj [kv d, h], v_proj [kv d, h] (not
//              on a full layer with attention_k_eq_v), o_proj [h, H d]; v_norm has no weight
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I]
//   norms      input, post_attention, pre_feedforward, post_feedforward [h]
//   model      embed_tokens [V, h] (tied), norm [h]; layer_scalar [1] a persistent buffer
// No per-layer embeddings and no experts, whatever the file says of them. The names are those of
// Gemma4UnifiedForCausalLM (transformers' causal-LM mapping for gemma4_unified_text): model.*,
// lm_head.*.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
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

// One layer's attention: q and o over H heads of width d, k (and v) over kv heads, q/k norms.
int64_t attention(int64_t h, int64_t H, int64_t kv, int64_t d, bool has_v) {
  return 2 * h * H * d + (has_v ? 2 : 1) * h * kv * d + 2 * d;
}
// One layer: its attention, the MLP and the four norms.
int64_t layer(int64_t h, int64_t H, int64_t kv, int64_t d, bool has_v, int64_t I) {
  return attention(h, H, kv, d, has_v) + 3 * h * I + 4 * h;
}

std::vector<int64_t> shape(const Module& m, const std::string& name) {
  const Tensor t = m.get_parameter(name);
  return {t.sizes().begin(), t.sizes().end()};
}

const Names kLayerNorms = {"input_layernorm.weight", "post_attention_layernorm.weight",
                           "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"};

TEST(Gemma4UnifiedTextModels, TwelveBMatchesTheHandTotal) {
  // google/gemma-4-12B-it's text config (transformers' convert_gemma4_unified_weights.py,
  // _VARIANTS["gemma-4-12b"]): h 3,840, I 4 h = 15,360, 48 layers of (5 sliding, 1 full) x 8, 16
  // heads; sliding 256 wide with 8 kv heads, full 512 wide with 1 kv head and no v_proj
  // (attention_k_eq_v); vocabulary 262,144 tied.
  //   sliding attention  2 x 3,840 x 4,096 + 2 x 3,840 x 2,048 + 512          =  47,186,432
  //   full attention     2 x 3,840 x 8,192 + 3,840 x 512 + 1,024              =  64,881,664
  //   MLP 3 x 3,840 x 15,360 = 176,947,200; norms 15,360
  const int64_t V = 262144, h = 3840, I = 15360;
  const int64_t sliding = layer(h, 16, 8, 256, true, I), full = layer(h, 16, 1, 512, false, I);
  EXPECT_EQ(attention(h, 16, 8, 256, true), 47'186'432);
  EXPECT_EQ(attention(h, 16, 1, 512, false), 64'881'664);
  EXPECT_EQ(sliding, 224'148'992);
  EXPECT_EQ(full, 241'844'224);
  const int64_t total = V * h + 40 * sliding + 8 * full + h;
  EXPECT_EQ(total, 11'907'350'272);
  // The published "12B" is the whole model: beside the language model, the vision embedder
  // (patch_ln1 [6,912] x 2, patch_dense [3,840, 6,912] + bias, patch_ln2 and pos_norm [3,840] x 2,
  // pos_embedding [1,120, 2, 3,840], the projection [3,840, 3,840]) 49,922,304 and the audio
  // projection [3,840, 640] 2,457,600, not built: 11,959,730,176 in all.
  const int64_t vision = 2 * 6912 + 6912 * h + h + 4 * h + 1120 * 2 * h + h * h;
  EXPECT_EQ(vision, 49'922'304);
  EXPECT_EQ(total + vision + 640 * h, 11'959'730'176);
  const ModelConfig c = find_model_config("gemma-4-12b");
  EXPECT_EQ(c.model_type, "gemma4_unified_text");
  EXPECT_EQ(c.multimodal_model_type, "gemma4_unified");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.per_layer_input_size, 0);  // the file's "BC" keys build nothing
  EXPECT_EQ(c.num_local_experts, 0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Gemma4UnifiedForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  Names layer0 = {"self_attn.q_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                  "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                  "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};
  layer0.insert(layer0.end(), kLayerNorms.begin(), kLayerNorms.end());
  EXPECT_EQ(names_under(*m, "model.layers.0."), layer0);
  EXPECT_EQ(
      names_under(*m, "model.layers.5.self_attn."),
      (Names{"q_proj.weight", "q_norm.weight", "k_norm.weight", "k_proj.weight", "o_proj.weight"}));
  // The top level in named_parameters order: the embedding, the layers, the final norm (lm_head
  // is the embedding's, listed once).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_EQ(m->named_parameters().front().name, "model.embed_tokens.weight");
  EXPECT_EQ(m->named_parameters().back().name, "model.norm.weight");
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{4096, h}));
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{2048, h}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.q_proj.weight"), (std::vector<int64_t>{8192, h}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.k_proj.weight"), (std::vector<int64_t>{512, h}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.o_proj.weight"), (std::vector<int64_t>{h, 8192}));
  EXPECT_EQ(shape(*m, "model.layers.5.self_attn.k_norm.weight"), (std::vector<int64_t>{512}));
  EXPECT_EQ(shape(*m, "model.layers.47.mlp.down_proj.weight"), (std::vector<int64_t>{h, I}));
  // Two kinds; each layer's geometry by its type, the window of 1,024 on the sliding ones.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.kinds[0].attention, AttentionType::kSliding);
  EXPECT_EQ(s.kinds[0].window, 1024);
  EXPECT_EQ(head_dim_of(c, s.kinds[0]), 256);
  EXPECT_EQ(kv_heads_of(c, s.kinds[0]), 8);
  EXPECT_EQ(s.kinds[1].attention, AttentionType::kFull);
  EXPECT_EQ(head_dim_of(c, s.kinds[1]), 512);
  EXPECT_EQ(value_head_dim(c, s.kinds[1]), 512);
  EXPECT_EQ(kv_heads_of(c, s.kinds[1]), 1);
  EXPECT_EQ(s.count(0), 40);
  EXPECT_EQ(s.count(1), 8);
  ModelConfig text = c;  // a plan holds the language model alone
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

// Four layers [sliding, full, sliding, full], h 64, 4 heads: sliding 16 wide with 2 kv, full 32
// wide with 1 kv and no v_proj; MLP 96; vocabulary 128 tied.
nlohmann::json tiny() {
  return {{"model_type", "gemma4_unified_text"},
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
          {"sliding_window", 8},
          {"layer_types",
           {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
}

TEST(Gemma4UnifiedTextModels, TinyConfigByHand) {
  // Sliding: attention 4,096 + 32 + 2,048 + 2,048 + 4,096 = 12,320; full: 8,192 + 64 + 2,048 +
  // 8,192 = 18,496; MLP 18,432; norms 256: layers 31,008 and 37,184. Model: 8,192 + 64.
  EXPECT_EQ(layer(64, 4, 2, 16, true, 96), 31'008);
  EXPECT_EQ(layer(64, 4, 1, 32, false, 96), 37'184);
  const int64_t total = 2 * 31'008 + 2 * 37'184 + 128 * 64 + 64;
  EXPECT_EQ(total, 144'640);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  Names layer1 = {"self_attn.q_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                  "self_attn.k_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight",
                  "mlp.up_proj.weight",      "mlp.down_proj.weight"};
  layer1.insert(layer1.end(), kLayerNorms.begin(), kLayerNorms.end());
  EXPECT_EQ(names_under(*m, "model.layers.1."), layer1);
  // transformers' class names, which the init rules match.
  EXPECT_EQ(m->get_submodule("model").type_name(), "Gemma4UnifiedTextModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "Gemma4UnifiedTextDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "Gemma4UnifiedTextAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "Gemma4UnifiedTextMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn.q_norm").type_name(),
            "Gemma4UnifiedRMSNorm");
  EXPECT_EQ(m->get_submodule("model.norm").type_name(), "Gemma4UnifiedRMSNorm");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "Gemma4UnifiedTextRotaryEmbedding");
  // layer_scalar is a checkpoint tensor (a persistent buffer), not a parameter.
  Names buffers;
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true}))
    buffers.push_back(b.name);
  EXPECT_EQ(buffers, (Names{"model.layers.0.layer_scalar", "model.layers.1.layer_scalar",
                            "model.layers.2.layer_scalar", "model.layers.3.layer_scalar"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(untied, "untied.json"))->parameters_numel(),
            total + 128 * 64);
}

TEST(Gemma4UnifiedTextModels, BareFileTakesTheUnifiedClassDefaults) {
  // Gemma4UnifiedTextConfig's defaults: h 2,304, I 9,216, 30 layers of (5 sliding, 1 full) x 5, 8
  // heads and 4 kv heads (256 wide; 512 on full layers, v_proj kept without attention_k_eq_v),
  // a window of 1,024, 262,144 positions and no per-layer embeddings (Gemma4TextConfig: 512,
  // 131,072 and 256 a layer).
  //   sliding  2 x 2,304 x 2,048 + 2 x 2,304 x 1,024 + 512 + 63,700,992 + 9,216  = 77,866,496
  //   full     2 x 2,304 x 4,096 + 2 x 2,304 x 2,048 + 1,024 + 63,700,992 + 9,216 = 92,022,784
  const int64_t sliding = layer(2304, 8, 4, 256, true, 9216);
  const int64_t full = layer(2304, 8, 4, 512, true, 9216);
  EXPECT_EQ(sliding, 77'866'496);
  EXPECT_EQ(full, 92'022'784);
  const int64_t total = 25 * sliding + 5 * full + 262144 * 2304 + 2304;
  EXPECT_EQ(total, 3'010'758'400);
  const ModelConfig c = parse_model_config({{"model_type", "gemma4_unified_text"}}, "bare.json");
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.sliding_window, 1024);
  EXPECT_EQ(c.per_layer_input_size, 0);
  EXPECT_EQ(c.layer_types[5], AttentionType::kFull);
  EXPECT_EQ(c.layer_types[29], AttentionType::kFull);
  EXPECT_EQ(c.global_head_dim, 512);
  EXPECT_EQ(c.global_num_key_value_heads, 4);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // The same file as gemma4_text: the other class's window, positions and per-layer table.
  const ModelConfig g4 = parse_model_config({{"model_type", "gemma4_text"}}, "bare.json");
  EXPECT_EQ(g4.sliding_window, 512);
  EXPECT_EQ(g4.max_position_embeddings, 131072);
  EXPECT_EQ(g4.per_layer_input_size, 256);
}

// Gemma4UnifiedTextConfig has no per-layer-embedding or expert fields: the 12B file's "BC" keys,
// and any values of them, are attributes its model never reads (the decoder layer has no gate
// and no router), where gemma4_text builds both.
TEST(Gemma4UnifiedTextModels, PerLayerEmbeddingAndExpertKeysBuildNothing) {
  nlohmann::json j = tiny();
  j["hidden_size_per_layer_input"] = 8;
  j["vocab_size_per_layer_input"] = 128;
  j["enable_moe_block"] = true;
  j["num_experts"] = 4;
  j["top_k_experts"] = 2;
  j["moe_intermediate_size"] = 16;
  const ModelConfig c = parse_model_config(j, "keys.json");
  EXPECT_EQ(c, parse_model_config(tiny(), "tiny.json"));
  EXPECT_EQ(build_model(c)->parameters_numel(), 144'640);
  // Null is not refused either: not a field of the strict class.
  j["hidden_size_per_layer_input"] = nullptr;
  j["enable_moe_block"] = nullptr;
  EXPECT_NO_THROW(parse_model_config(j, "null.json"));
  j["model_type"] = "gemma4_text";  // Gemma4TextConfig's fields: null is refused
  EXPECT_THAT([&] { parse_model_config(j, "gemma4.json"); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr("hidden_size_per_layer_input"), HasSubstr("Gemma4TextConfig"))));
}

// The traced projections and attention of one batch (B 1, S 16: T = 16), by hand: 2 T in out
// per Linear, each layer's by its type's head width; the attention 2 x heads x S x keys x (d + d),
// keys the window of 8 on the sliding layers and all 16 on the full ones.
TEST(Gemma4UnifiedTextModels, TrainingTraceMatmulFlopsByHand) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 16);
  // Sliding: q 64 -> 64, k and v 64 -> 32, o 64 -> 64: 393,216; MLP 2 x 16 x 18,432 = 589,824;
  // attention 2 x 4 x 16 x 8 x 32 = 32,768.
  const double sliding = 2.0 * 16 * 64 * (64 + 32 + 32 + 64) + 589'824 + 32'768;
  // Full: q 64 -> 128, k 64 -> 32 (the values are the same projection), o 128 -> 64: 589,824;
  // the MLP; attention 2 x 4 x 16 x 16 x 64 = 131,072.
  const double full = 2.0 * 16 * 64 * (128 + 32 + 128) + 589'824 + 131'072;
  EXPECT_DOUBLE_EQ(sliding, 1'015'808);
  EXPECT_DOUBLE_EQ(full, 1'310'720);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.0").matmul_flops, sliding);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.1").matmul_flops, full);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.3").matmul_flops, full);
  // q_norm, k_norm and the weightless v_norm; one fused attention, scale 1.
  EXPECT_EQ(ops_in(g, "rms_norm", "model.layers.1.self_attn.q_norm"), 1);
  EXPECT_EQ(ops_in(g, "rms_norm", "model.layers.1.self_attn.v_norm"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "model.layers.1.self_attn"), 1);
  // The whole step: four layers and the output layer 2 x 16 x 64 x 128 = 262,144.
  TraceOptions o;
  o.batch = 1;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 2 * sliding + 2 * full + 262'144);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 4'915'200);
  EXPECT_EQ(st.totals.parameters, 144'640);
}

TEST(Gemma4UnifiedTextModels, RefusesWhatItDoesNotBuildNamingTheField) {
  nlohmann::json j;
  // Strict fields: null is not the default.
  for (const char* key : {"head_dim", "global_head_dim", "num_kv_shared_layers", "attention_k_eq_v",
                          "use_double_wide_mlp"}) {
    j = tiny();
    j[key] = nullptr;
    EXPECT_THAT([&] { parse_model_config(j, "null.json"); },
                ThrowsMessage<Error>(AllOf(HasSubstr(key), HasSubstr("is null"),
                                           HasSubstr("Gemma4UnifiedTextConfig"))))
        << key;
  }
  j = tiny();
  j["sliding_window"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "window.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("sliding_window"), HasSubstr("default 1024"))));
  // "all" makes every token attend both ways: not a causal language model.
  j = tiny();
  j["use_bidirectional_attention"] = "all";
  EXPECT_THAT([&] { parse_model_config(j, "bidi.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("use_bidirectional_attention"),
                                         HasSubstr("expected null or \"vision\""))));
  j["use_bidirectional_attention"] = nullptr;
  EXPECT_NO_THROW(parse_model_config(j, "causal.json"));
  // Gemma 4 divides the logits by any cap it is given: 0 is refused, null is none.
  j = tiny();
  j["final_logit_softcapping"] = 0.0;
  EXPECT_THAT([&] { parse_model_config(j, "cap.json"); },
              ThrowsMessage<Error>(HasSubstr("final_logit_softcapping")));
  j = tiny();
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}}},
                          {"full_attention", {{"rope_type", "yarn"}, {"rope_theta", 1e6}}}};
  EXPECT_THAT([&] { parse_model_config(j, "rope.json"); },
              ThrowsMessage<Error>(HasSubstr("rope_parameters.full_attention.rope_type \"yarn\"")));
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}}}};
  EXPECT_THAT([&] { parse_model_config(j, "rope.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("Gemma4UnifiedTextRotaryEmbedding"),
                                         HasSubstr("expected an entry \"full_attention\""))));
  j = tiny();
  j["layer_types"][0] = "chunked_attention";
  EXPECT_THAT([&] { parse_model_config(j, "types.json"); },
              ThrowsMessage<Error>(HasSubstr("chunked_attention")));
  // Key-value sharing needs a source layer of each type.
  j = tiny();
  j["num_kv_shared_layers"] = 4;
  EXPECT_THAT([&] { parse_model_config(j, "all.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("num_kv_shared_layers"),
                                         HasSubstr("no layer computes keys and values"))));
  j = tiny();
  j.erase("global_head_dim");
  j.erase("num_global_key_value_heads");
  j["per_layer_config"] = {{"1", {{"head_dim", 32}}}};
  EXPECT_THAT([&] { parse_model_config(j, "uneven.json"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("per_layer_config"),
                                         HasSubstr("full_attention layers differ (layer 3)"))));
}

// The last two layers share keys and values (layer 0 the sliding source, layer 1 the full one):
// no k or v parts there, and with use_double_wide_mlp their MLPs 192 wide. Layers 2 and 3: q
// 4,096 + 16 + o 4,096 and q 8,192 + 32 + o 8,192, MLP 36,864, norms 256.
TEST(Gemma4UnifiedTextModels, KeyValueSharingAndDoubleWideMlpByHand) {
  nlohmann::json j = tiny();
  j["num_kv_shared_layers"] = 2;
  j["use_double_wide_mlp"] = true;
  const int64_t total =
      31'008 + 37'184 + (8'208 + 36'864 + 256) + (16'416 + 36'864 + 256) + 128 * 64 + 64;
  EXPECT_EQ(total, 175'312);
  const ModelConfig c = parse_model_config(j, "shared.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.3.self_attn."),
            (Names{"q_proj.weight", "q_norm.weight", "o_proj.weight"}));
  EXPECT_EQ(shape(*m, "model.layers.2.mlp.up_proj.weight"), (std::vector<int64_t>{192, 64}));
  const OpGraph g = trace_model_forward(*m, 1, 8);
  EXPECT_EQ(test::ops_under(g, "linear", "model.layers.3.self_attn"), 2);  // q_proj and o_proj
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Gemma4UnifiedTextModels, MultimodalFileTiesByItsOwnFlagAndFixesTheTextClass) {
  nlohmann::json text = tiny();
  text.erase("model_type");  // Gemma4UnifiedConfig's text class is fixed: no model_type needed
  nlohmann::json outer = {
      {"model_type", "gemma4_unified"},
      {"text_config", text},
      {"vision_config", {{"model_type", "gemma4_unified_vision"}, {"mm_embed_dim", 64}}},
      {"audio_config", {{"model_type", "gemma4_unified_audio"}}},
      {"dtype", "bfloat16"}};
  const ModelConfig tied = parse_model_config(outer, "gemma4_unified.json");
  EXPECT_EQ(tied.model_type, "gemma4_unified_text");
  EXPECT_EQ(tied.multimodal_model_type, "gemma4_unified");
  EXPECT_TRUE(tied.tie_word_embeddings);  // Gemma4UnifiedConfig's default
  EXPECT_EQ(tied.torch_dtype, DType::kBFloat16);
  EXPECT_EQ(build_model(tied)->parameters_numel(), 144'640);
  outer["tie_word_embeddings"] = false;
  outer["text_config"]["tie_word_embeddings"] = true;  // the wrapper's own flag decides
  const ModelConfig untied = parse_model_config(outer, "gemma4_unified.json");
  EXPECT_FALSE(untied.tie_word_embeddings);
  EXPECT_EQ(build_model(untied)->parameters_numel(), 144'640 + 128 * 64);
  outer["text_config"]["model_type"] = "gemma4_text";
  EXPECT_THAT([&] { parse_model_config(outer, "gemma4_unified.json"); },
              ThrowsMessage<Error>(HasSubstr("always builds its text model gemma4_unified_text")));
}

// The multimodal checkpoint: the language model under model.language_model., layer_scalar
// included, lm_head tied (not stored); the vision embedder and the audio projection beside it,
// listed outside the language model.
TEST(Gemma4UnifiedTextModels, MultimodalCheckpointFitsItsLanguageModel) {
  const nlohmann::json outer = {{"model_type", "gemma4_unified"}, {"text_config", tiny()}};
  const ModulePtr model = build_model(parse_model_config(outer, "gemma4_unified.json"));
  std::vector<test::StEntry> extra;
  for (int i = 0; i < 4; ++i) {
    extra.push_back(
        {"model.language_model.layers." + std::to_string(i) + ".layer_scalar", "BF16", {1}});
  }
  extra.push_back({"model.embed_vision.patch_dense.weight", "BF16", {64, 6912}});
  extra.push_back({"model.embed_vision.pos_embedding", "BF16", {1120, 2, 64}});
  extra.push_back({"model.embed_audio.embedding_projection.weight", "BF16", {64, 640}});
  const ModelSource src = test::check_stored_as(
      outer, *model,
      [](const std::string& n) {
        return n.starts_with("model.") ? "model.language_model." + n.substr(6) : n;
      },
      extra);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_EQ(src.check.language_model_prefix, "model.language_model.");
  EXPECT_EQ(src.check.outside_language_model.size(), 3u);
}

TEST(Gemma4UnifiedTextModels, InitIsPreTrainedModelsWithNormsAtOne) {
  nlohmann::json j = tiny();
  j["initializer_range"] = 0.02;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  std::map<std::string, int64_t> zero_rows;
  for (const NamedInit& p : parameter_inits(*m, c)) {
    init[p.name] = p.init;
    zero_rows[p.name] = p.init.zero_row;
  }
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.mlp.down_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_norm.weight"), one);
  EXPECT_EQ(init.at("model.layers.1.post_feedforward_layernorm.weight"), one);
  EXPECT_EQ(init.at("model.norm.weight"), one);
  EXPECT_EQ(init.at("model.embed_tokens.weight").kind, ParameterInit::Kind::kNormal);
  EXPECT_EQ(zero_rows.at("model.embed_tokens.weight"), 0);  // pad_token_id 0, the class's
  // 13 in a sliding layer, 12 in a full one, the embedding and the final norm (lm_head tied).
  EXPECT_EQ(init.size(), 2u * 13 + 2 * 12 + 2);
}

TEST(Gemma4UnifiedTextModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  const ModelFamily* f = find_family("gemma4_unified_text");
  ASSERT_NE(f, nullptr);
  std::vector<std::tuple<std::string, std::string, int64_t>> rules;
  for (const TensorParallelRule& r : f->tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  using Rule = std::tuple<std::string, std::string, int64_t>;
  EXPECT_EQ(rules, (std::vector<Rule>{{"model.embed_tokens", "rowwise", 1},
                                      {"model.layers.*.self_attn.q_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.k_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.v_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.o_proj", "rowwise", 1},
                                      {"model.layers.*.mlp.gate_proj", "colwise", 1},
                                      {"model.layers.*.mlp.up_proj", "colwise", 1},
                                      {"model.layers.*.mlp.down_proj", "rowwise", 1},
                                      {"lm_head", "colwise", 1}}));
  // Each pattern names a Linear or the Embedding in a sliding (0) layer; in a full one (1) every
  // pattern but v_proj (attention_k_eq_v: the values are k_proj's).
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  for (const char* layer : {"0", "1"}) {
    for (const auto& [pattern, style, parts] : rules) {
      std::string fqn = pattern;
      if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, layer);
      if (fqn == "model.layers.1.self_attn.v_proj") {
        EXPECT_THROW((void)m->get_submodule(fqn), Error);
        continue;
      }
      const std::string type = m->get_submodule(fqn).type_name();
      EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
    }
  }
  EXPECT_TRUE(f->rotary);
  EXPECT_TRUE(f->rope_parameters_by_layer_type);
  EXPECT_FALSE(f->learned_positions);
  EXPECT_FALSE(f->fused_qkv);
  EXPECT_FALSE(f->moe);
  EXPECT_TRUE(f->experts_class.empty());
  EXPECT_EQ(f->layers_path, "model.layers");
  EXPECT_EQ(f->hf_class_prefix, "Gemma4Unified");
  EXPECT_EQ(f->file_key("hidden_act"), "hidden_activation");
  EXPECT_EQ(f->file_key("global_num_key_value_heads"), "num_global_key_value_heads");
  EXPECT_EQ(f->file_key("double_wide_shared_mlp"), "use_double_wide_mlp");
}

}  // namespace
}  // namespace shardplan::tensor
