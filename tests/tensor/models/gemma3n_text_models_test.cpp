// gemma3n_text (the language model of Gemma 3n E2B and E4B) against hand formulas written here
// from transformers' modeling_gemma3n.py and configuration_gemma3n.py. h hidden, H heads of d, kv
// key-value heads, I the MLP, V the vocabulary, P the per-layer input width over Vp rows, L
// layers, n AltUp copies, r the LAuReL rank:
//   attention  q_proj [H d, h], q_norm [d], k_proj, v_proj [kv d, h], k_norm [d], o_proj [h, H d]
//              (a key-value-shared layer: q_proj, q_norm, o_proj); v_norm has no weight
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I]
//   norms      input, post_attention, pre_feedforward, post_feedforward [h]
//   altup      correct_output_scale [h], correction_coefs [n, n], prediction_coefs [n^2, n],
//              modality_router [n, h], router_norm [h]
//   laurel     linear_left [r, h], linear_right [h, r], post_laurel_norm [h]
//   per layer  per_layer_input_gate [P, h], per_layer_projection [h, P], post_per_layer_input_norm
//   model      embed_tokens [V, h] (tied), norm [h], embed_tokens_per_layer [Vp, L P],
//              per_layer_model_projection [L P, h], per_layer_projection_norm [P],
//              altup_projections and altup_unembed_projections: n - 1 of [h, h] each
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
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
#include "tensor/ops.h"
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

// One layer's parameters by the head comment's table; `shared`: no k/v projections or norms.
int64_t layer(int64_t h, int64_t H, int64_t kv, int64_t d, int64_t I, int64_t P, int64_t n,
              int64_t r, bool shared) {
  const int64_t attention = shared ? 2 * h * H * d + d : 2 * h * H * d + 2 * h * kv * d + 2 * d;
  const int64_t altup = h + n * n + n * n * n + n * h + h;
  const int64_t laurel = 2 * h * r + h;
  return attention + 3 * h * I + 4 * h + altup + laurel + 2 * h * P + h;
}
// The model's own parameters: the tied token table, the final norm, the per-layer table, its
// projection and norm, and the AltUp projections.
int64_t model_parts(int64_t V, int64_t h, int64_t L, int64_t P, int64_t Vp, int64_t n) {
  return V * h + h + Vp * L * P + h * L * P + P + 2 * (n - 1) * h * h;
}

std::vector<int64_t> shape(const Module& m, const std::string& name) {
  const Tensor t = m.get_parameter(name);
  return {t.sizes().begin(), t.sizes().end()};
}

// E4B: 35 layers of (4 sliding, 1 full) x 7, the last 15 (from layer 20) sharing keys and values:
// 12 sliding and 3 full; h 2,048, 8 heads and 2 kv heads of 256, MLP 16,384, V 262,400 tied,
// P 256 over 262,144 rows, n 4, r 64. Google counts E4B as "4B effective" (the model without the
// per-layer table, which can stay off the accelerator: 4,486,425,328 here) and about 8B raw
// with the vision and audio towers, which are not modelled; the published checkpoint also holds
// the shared layers' k/v projections and norms (15 x 2,097,408 = 31,461,120 more), which
// transformers skips on load.
TEST(Gemma3nTextModels, E4BMatchesTheHandTotal) {
  const int64_t V = 262400, h = 2048, L = 35, P = 256, Vp = 262144;
  const int64_t own = layer(h, 8, 2, 256, 16384, P, 4, 64, false);
  const int64_t shared = layer(h, 8, 2, 256, 16384, P, 4, 64, true);
  EXPECT_EQ(own, 112'484'944);
  EXPECT_EQ(shared, 110'387'536);
  EXPECT_EQ(model_parts(V, h, L, P, Vp, 4), 2'929'723'648);
  const int64_t total = 20 * own + 15 * shared + model_parts(V, h, L, P, Vp, 4);
  EXPECT_EQ(total, 6'835'235'568);
  EXPECT_EQ(total - Vp * L * P, 4'486'425'328);  // "E4B": 4B effective
  const ModelConfig c = find_model_config("gemma-3n-e4b");
  EXPECT_EQ(c.model_type, "gemma3n_text");
  EXPECT_EQ(c.multimodal_model_type, "gemma3n");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_EQ(c.intermediate_size, 16384);  // the file's list of 35 equal widths
  EXPECT_EQ(c.altup_num_inputs, 4);
  EXPECT_EQ(c.laurel_rank, 64);
  EXPECT_EQ(c.num_kv_shared_layers, 15);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Gemma3nForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."), (Names{"self_attn.q_proj.weight",
                                                       "self_attn.q_norm.weight",
                                                       "self_attn.k_proj.weight",
                                                       "self_attn.v_proj.weight",
                                                       "self_attn.k_norm.weight",
                                                       "self_attn.o_proj.weight",
                                                       "mlp.gate_proj.weight",
                                                       "mlp.up_proj.weight",
                                                       "mlp.down_proj.weight",
                                                       "input_layernorm.weight",
                                                       "post_attention_layernorm.weight",
                                                       "pre_feedforward_layernorm.weight",
                                                       "post_feedforward_layernorm.weight",
                                                       "altup.correct_output_scale",
                                                       "altup.correction_coefs.weight",
                                                       "altup.prediction_coefs.weight",
                                                       "altup.modality_router.weight",
                                                       "altup.router_norm.weight",
                                                       "laurel.linear_left.weight",
                                                       "laurel.linear_right.weight",
                                                       "laurel.post_laurel_norm.weight",
                                                       "per_layer_input_gate.weight",
                                                       "per_layer_projection.weight",
                                                       "post_per_layer_input_norm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.20.self_attn."),
            (Names{"q_proj.weight", "q_norm.weight", "o_proj.weight"}));
  Names model_level;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) model_level.push_back(p.name);
  }
  EXPECT_EQ(
      model_level,
      (Names{"model.embed_tokens.weight", "model.norm.weight",
             "model.embed_tokens_per_layer.weight", "model.per_layer_model_projection.weight",
             "model.per_layer_projection_norm.weight", "model.altup_projections.0.weight",
             "model.altup_projections.1.weight", "model.altup_projections.2.weight",
             "model.altup_unembed_projections.0.weight", "model.altup_unembed_projections.1.weight",
             "model.altup_unembed_projections.2.weight"}));
  EXPECT_EQ(shape(*m, "model.layers.0.altup.prediction_coefs.weight"),
            (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(shape(*m, "model.embed_tokens_per_layer.weight"), (std::vector<int64_t>{Vp, L * P}));
  // Six kinds: the first 10 layers' MLPs cut their gate (sliding and full), then dense sliding
  // and full, then the shared layers of each type.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 6u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 512 sparse-gate dense");
  EXPECT_EQ(describe(s.kinds[1]), "sparse-gate dense");
  EXPECT_EQ(describe(s.kinds[2]), "sliding 512 dense");
  EXPECT_EQ(describe(s.kinds[4]), "kv-shared sliding 512 dense");
  EXPECT_EQ(describe(s.kinds[5]), "kv-shared dense");
  EXPECT_EQ(s.first_layer(1), 4);
  EXPECT_EQ(s.first_layer(2), 10);
  EXPECT_EQ(s.first_layer(4), 20);
  const std::vector<int64_t> counts{s.count(0), s.count(1), s.count(2),
                                    s.count(3), s.count(4), s.count(5)};
  EXPECT_EQ(counts, (std::vector<int64_t>{8, 2, 8, 2, 12, 3}));
  ModelConfig text = c;  // a plan holds the language model alone
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

// Gemma3nTextConfig's defaults are E4B's: a file stating nothing but its type builds the shipped
// file's language model (its list of widths, its sparsity list of 10 x 0.95, its layer types).
TEST(Gemma3nTextModels, ClassDefaultsAreTheShippedE4B) {
  ModelConfig shipped = find_model_config("gemma-3n-e4b");
  shipped.multimodal_model_type.clear();
  const nlohmann::json bare = {{"model_type", "gemma3n_text"}, {"torch_dtype", "bfloat16"}};
  const ModelConfig defaults = parse_model_config(bare, "defaults.json");
  EXPECT_EQ(defaults, shipped);
  EXPECT_EQ(defaults.activation_sparsity[9], 0.95);
  EXPECT_EQ(defaults.activation_sparsity[10], 0.0);
  EXPECT_EQ(defaults.layer_types[4], AttentionType::kFull);
  EXPECT_EQ(defaults.layer_types[5], AttentionType::kSliding);
}

// Four layers [sliding, full, sliding, full], the last two sharing (layer 0 the sliding source,
// layer 1 the full one); h 64, 4 heads and 2 kv heads of 16, MLP 96 (as a list), V 128 tied,
// P 8 over 128 rows, n 3 copies, r 4; layer 0's MLP sparse.
nlohmann::json tiny() {
  return {{"model_type", "gemma3n_text"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", {96, 96, 96, 96}},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"sliding_window", 8},
          {"layer_types",
           {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}},
          {"hidden_size_per_layer_input", 8},
          {"vocab_size_per_layer_input", 128},
          {"num_kv_shared_layers", 2},
          {"altup_num_inputs", 3},
          {"laurel_rank", 4},
          {"activation_sparsity_pattern", {0.95, 0.0, 0.0, 0.0}},
          {"torch_dtype", "bfloat16"}};
}

TEST(Gemma3nTextModels, TinyConfigByHand) {
  // Own layer: attention 4,096 + 16 + 2,048 + 2,048 + 16 + 4,096 = 12,320; MLP 18,432; norms
  // 256; altup 64 + 9 + 27 + 192 + 64 = 356; laurel 256 + 256 + 64 = 576; per-layer 512 + 512 +
  // 64 = 1,088: 33,028. Shared layer: attention 4,096 + 16 + 4,096 = 8,208: 28,916. Model:
  // 8,192 + 64 + 4,096 + 2,048 + 8 + 4 x 4,096 = 30,792.
  EXPECT_EQ(layer(64, 4, 2, 16, 96, 8, 3, 4, false), 33'028);
  EXPECT_EQ(layer(64, 4, 2, 16, 96, 8, 3, 4, true), 28'916);
  EXPECT_EQ(model_parts(128, 64, 4, 8, 128, 3), 30'792);
  const int64_t total = 2 * 33'028 + 2 * 28'916 + 30'792;
  EXPECT_EQ(total, 154'680);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.3.self_attn."),
            (Names{"q_proj.weight", "q_norm.weight", "o_proj.weight"}));
  EXPECT_EQ(shape(*m, "model.layers.1.altup.correction_coefs.weight"),
            (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(shape(*m, "model.layers.1.altup.prediction_coefs.weight"),
            (std::vector<int64_t>{9, 3}));
  EXPECT_EQ(shape(*m, "model.layers.1.altup.modality_router.weight"),
            (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(shape(*m, "model.layers.1.laurel.linear_left.weight"), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(shape(*m, "model.per_layer_model_projection.weight"), (std::vector<int64_t>{32, 64}));
  // No persistent buffers: the scalar scales are products, the rotary tables non-persistent.
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(untied, "untied.json"))->parameters_numel(),
            total + 128 * 64);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The forward of one batch (B 1, S 8: T = 8 tokens), 2 T in out FLOPs per Linear:
//   attention  q 64 -> 64, k and v 64 -> 32, o 64 -> 64: 16 x 64 x 192       = 196,608
//   mlp        3 x 16 x 64 x 96                                                = 294,912
//   altup      the router twice (16 x 64 x 3 x 2), prediction_coefs 16 x 3 x 9,
//              correction_coefs 16 x 3 x 3: 6,144 + 432 + 144                  =   6,720
//   laurel     16 x 64 x 4 x 2                                                 =   8,192
//   per layer  16 x 64 x 8 x 2                                                 =  16,384
//   layer 0                                                                    = 522,816
// and AltUp's prediction, per token [h, n] x [n, n]: 2 x 8 x 64 x 3 x 3 = 9,216.
TEST(Gemma3nTextModels, TraceRunsAltUpLaurelAndTheSparseGate) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 8);
  const auto flops = [&](const std::string& op, const std::string& prefix) {
    double f = 0;
    for (const OpNode& n : g.nodes()) {
      if (n.op == op && n.module.starts_with(prefix)) f += n.matmul_flops;
    }
    return f;
  };
  EXPECT_EQ(flops("linear", "model.layers.0."), 522'816.0);
  EXPECT_EQ(flops("matmul", "model.layers.0.altup"), 9'216.0);
  // Layer 2 borrows layer 0's keys and values: no k or v projection runs.
  EXPECT_EQ(flops("linear", "model.layers.2."), 522'816.0 - 65'536.0);
  EXPECT_EQ(ops_in(g, "linear", "model.layers.2.self_attn.q_proj") +
                ops_in(g, "linear", "model.layers.2.self_attn.o_proj"),
            2);
  // Before and after the layers: the copies' projections (2 of 64 -> 64 each way), once.
  EXPECT_EQ(flops("linear", "model.altup_projections"), 2 * 65'536.0);
  EXPECT_EQ(flops("linear", "model.altup_unembed_projections"), 2 * 65'536.0);
  // Layer 0's MLP cuts its gate at mean + std x Phi^-1(0.95): a mean, a variance, a relu;
  // layer 1's MLP none.
  for (const char* op : {"mean", "var", "relu"}) {
    EXPECT_EQ(ops_in(g, op, "model.layers.0.mlp"), 1) << op;
    EXPECT_EQ(ops_in(g, op, "model.layers.1.mlp"), 0) << op;
  }
  // q_norm, k_norm and the weightless v_norm; layer 2 only q_norm.
  EXPECT_EQ(test::ops_under(g, "rms_norm", "model.layers.0.self_attn"), 3);
  EXPECT_EQ(test::ops_under(g, "rms_norm", "model.layers.2.self_attn"), 1);
  // The logits soft-capped: tanh in the model's root.
  EXPECT_EQ(ops_in(g, "tanh", ""), 1);
}

// A training step: the same projections forward, each twice backward (input and weight
// gradients); the layers are the four blocks, the AltUp projections outside them.
TEST(Gemma3nTextModels, TrainingStepDoublesTheProjectionsBackward) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.input = empty({1, 8}, {.dtype = DType::kInt64});
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_EQ(st.totals.parameters, 154'680);
  ASSERT_EQ(st.blocks.size(), 4u);
  EXPECT_EQ(st.blocks[0].fqn, "model.layers.0");
  double forward = 0, backward = 0;
  for (const TrainingOp& op : st.ops) {
    const std::string& fqn = op.call >= 0 ? st.calls[static_cast<size_t>(op.call)].fqn : "";
    if ((op.op != "linear" && op.op != "matmul") || !fqn.starts_with("model.layers.0.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  EXPECT_DOUBLE_EQ(forward, 522'816.0 + 9'216.0);
  EXPECT_DOUBLE_EQ(backward, 2 * (522'816.0 + 9'216.0));
}

// A one-layer model of each kind, as the planner traces it, keeps the whole per-layer table and
// the kind's sparsity; the shared kind takes its source's keys and values as inputs.
TEST(Gemma3nTextModels, EachKindBuildsAndTracesAlone) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 4u);  // sparse sliding, full, shared sliding, shared full
  EXPECT_TRUE(s.kinds[0].sparse_activation);
  EXPECT_FALSE(s.kinds[1].sparse_activation);
  for (const LayerKind& k : s.kinds) {
    SCOPED_TRACE(describe(k));
    const ModelConfig one = uniform_config(c, k);
    EXPECT_EQ(one.activation_sparsity, (std::vector<double>{k.sparse_activation ? 0.95 : 0.0}));
    const ModulePtr m = build_model(one);
    EXPECT_EQ(shape(*m, "model.embed_tokens_per_layer.weight"), (std::vector<int64_t>{128, 32}));
    EXPECT_NO_THROW(trace_model_forward(*m, 1, 8));
  }
  const ModelConfig two = first_layers(c, 2);
  EXPECT_EQ(two.activation_sparsity, (std::vector<double>{0.95, 0.0}));
  EXPECT_EQ(two.num_kv_shared_layers, 0);
}

TEST(Gemma3nTextModels, RefusesWhatItDoesNotBuildNamingTheField) {
  const auto refused = [](const nlohmann::json& j) {
    try {
      (void)parse_model_config(j, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = tiny();
  j["intermediate_size"] = {96, 96, 64, 96};
  EXPECT_THAT(refused(j), AllOf(HasSubstr("intermediate_size"),
                                HasSubstr("layer 2 is 64 wide and layer 0 96")));
  j["intermediate_size"] = {96, 96};
  EXPECT_THAT(refused(j), HasSubstr("2 widths, expected one for every layer"));
  j = tiny();
  j["activation_sparsity_pattern"] = 0.95;  // the class takes its len()
  EXPECT_THAT(refused(j), AllOf(HasSubstr("activation_sparsity_pattern"),
                                HasSubstr("expected a list of one share per layer")));
  j["activation_sparsity_pattern"] = {0.95, 1.0, 0.0, 0.0};
  EXPECT_THAT(refused(j), HasSubstr("layer 1: 1.0, expected a share in [0, 1)"));
  // Without the key, the class's 15 shared layers of a 4-layer model: no layer makes keys.
  j = tiny();
  j.erase("num_kv_shared_layers");
  EXPECT_THAT(refused(j), AllOf(HasSubstr("num_kv_shared_layers"), HasSubstr("15, expected 0..3")));
  j["num_kv_shared_layers"] = 3;  // layer 1 would share, but no full layer precedes it
  EXPECT_THAT(refused(j), HasSubstr("layer 1 (full_attention) has no earlier layer"));
  // Strict fields: null is not the default.
  for (const char* key : {"altup_num_inputs", "laurel_rank", "head_dim", "sliding_window",
                          "final_logit_softcapping", "hidden_size_per_layer_input"}) {
    j = tiny();
    j[key] = nullptr;
    EXPECT_THAT(refused(j), AllOf(HasSubstr(key), HasSubstr("is null"))) << key;
  }
  j = tiny();
  j["final_logit_softcapping"] = 0.0;  // the model divides by it
  EXPECT_THAT(refused(j), HasSubstr("final_logit_softcapping"));
  j = tiny();
  j["altup_num_inputs"] = 0;
  EXPECT_THAT(refused(j), HasSubstr("altup_num_inputs"));
  j = tiny();
  j["altup_active_idx"] = 3;
  EXPECT_THAT(refused(j), HasSubstr("altup_active_idx': 3, expected a copy in 0..2"));
  j = tiny();
  j["laurel_rank"] = 0;
  EXPECT_THAT(refused(j), HasSubstr("laurel_rank"));
  j = tiny();
  j["hidden_size_per_layer_input"] = 0;
  EXPECT_THAT(refused(j), HasSubstr("hidden_size_per_layer_input"));
  j = tiny();
  j["layer_types"][2] = "chunked_attention";
  EXPECT_THAT(refused(j), HasSubstr("chunked_attention: Gemma 3n masks"));
  j = tiny();
  j["num_attention_heads"] = 3;  // Gemma3nTextConfig.validate_architecture
  j["num_key_value_heads"] = 1;
  EXPECT_THAT(refused(j), HasSubstr("3 does not divide hidden_size 64"));
  j = tiny();
  j["rope_parameters"] = {{"chunked_attention", {{"rope_type", "default"}}}};
  EXPECT_THAT(refused(j), HasSubstr("reads it by layer type"));
  j["rope_parameters"] = {
      {"full_attention", {{"rope_type", "yarn"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}}};
  EXPECT_THAT(refused(j), HasSubstr("rotates the whole head"));
}

// convert_rope_params_to_dict: the full layers' base from rope_parameters, else the legacy
// rope_theta; a legacy rope_scaling joins the full layers' set. Values only: no shape changes.
TEST(Gemma3nTextModels, RopeIsKeyedByLayerType) {
  nlohmann::json j = tiny();
  j["rope_theta"] = 5e5;
  EXPECT_EQ(parse_model_config(j, "legacy.json").rope_theta, 5e5);
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 2e6}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  EXPECT_EQ(parse_model_config(j, "new.json").rope_theta, 2e6);
  j.erase("rope_parameters");
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  const ModelConfig scaled = parse_model_config(j, "scaled.json");
  ASSERT_TRUE(scaled.rope_scaling.has_value());
  EXPECT_EQ(scaled.rope_scaling->rope_type, "linear");
  EXPECT_EQ(scaled.rope_scaling->factor, 4.0);
  EXPECT_EQ(parse_model_config(to_hf_json(scaled), "round trip"), scaled);
  EXPECT_EQ(build_model(scaled)->parameters_numel(), 154'680);
}

TEST(Gemma3nTextModels, MultimodalFileTiesByItsOwnFlagAndFixesTheTextClass) {
  nlohmann::json text = tiny();
  text.erase("model_type");  // Gemma3nConfig always builds Gemma3nTextConfig
  nlohmann::json outer = {{"model_type", "gemma3n"},
                          {"text_config", text},
                          {"vision_config", {{"model_type", "gemma3n_vision"}}},
                          {"audio_config", {{"model_type", "gemma3n_audio"}}}};
  const ModelConfig tied = parse_model_config(outer, "gemma3n.json");
  EXPECT_EQ(tied.model_type, "gemma3n_text");
  EXPECT_EQ(tied.multimodal_model_type, "gemma3n");
  EXPECT_TRUE(tied.tie_word_embeddings);  // Gemma3nConfig's default
  outer["tie_word_embeddings"] = false;
  outer["text_config"]["tie_word_embeddings"] = true;  // the wrapper's own flag decides
  EXPECT_EQ(build_model(parse_model_config(outer, "gemma3n.json"))->parameters_numel(),
            154'680 + 128 * 64);
  outer["text_config"]["model_type"] = "gemma3_text";
  EXPECT_THAT([&] { parse_model_config(outer, "gemma3n.json"); },
              ThrowsMessage<Error>(HasSubstr("always builds its text model gemma3n_text")));
}

// The published checkpoints hold the language model under model.language_model. and still the
// shared layers' k/v projections and norms, which transformers skips on load.
TEST(Gemma3nTextModels, SharedLayersKeysAndValuesInTheCheckpointAreSkipped) {
  const nlohmann::json outer = {{"model_type", "gemma3n"}, {"text_config", tiny()}};
  const ModulePtr model = build_model(parse_model_config(outer, "gemma3n.json"));
  const std::string layer3 = "model.language_model.layers.3.self_attn.";
  const std::vector<test::StEntry> extra = {{layer3 + "k_proj.weight", "BF16", {32, 64}},
                                            {layer3 + "v_proj.weight", "BF16", {32, 64}},
                                            {layer3 + "k_norm.weight", "BF16", {16}}};
  const ModelSource src = test::check_stored_as(
      outer, *model,
      [](const std::string& n) {
        return n.starts_with("model.") ? "model.language_model." + n.substr(6) : n;
      },
      extra);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_EQ(src.check.beyond_model,
            (Names{layer3 + "k_norm.weight", layer3 + "k_proj.weight", layer3 + "v_proj.weight"}));
}

// Gemma3nPreTrainedModel._init_weights: Linear and both tables normal(0, 0.02) with the padding
// row (pad_token_id 0, the class's) zero, every norm weight one, AltUp's output scale zero.
TEST(Gemma3nTextModels, InitRulesAreGemma3nPreTrainedModels) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  std::map<std::string, ParameterInit> by_name;
  for (const NamedInit& i : parameter_inits(*build_model(c), c)) by_name[i.name] = i.init;
  EXPECT_EQ(by_name.at("model.layers.0.altup.correct_output_scale"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(by_name.at("model.layers.0.altup.router_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.k_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(by_name.at("model.layers.0.altup.prediction_coefs.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(by_name.at("model.altup_projections.1.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(by_name.at("model.embed_tokens.weight").zero_row, 0);
  EXPECT_EQ(by_name.at("model.embed_tokens_per_layer.weight").zero_row, 0);
}

// The family's flags and Megatron-style plan: each rule names a module the model builds (layer 0
// standing in for the wildcard); AltUp, LAuReL and the per-layer gates are in no rule
// (replicated). tests/planner/cost/gemma3n_text_tensor_parallel_test.cpp applies it.
TEST(Gemma3nTextModels, TensorParallelPlanNamesTheModelsModules) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_TRUE(f.rope_parameters_by_layer_type);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_FALSE(f.moe);
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("activation_sparsity"), "activation_sparsity_pattern");
  EXPECT_EQ(f.file_key("per_layer_input_size"), "hidden_size_per_layer_input");
  std::vector<std::pair<std::string, std::string>> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    EXPECT_EQ(r.fused_parts, 1) << r.pattern;
    rules.emplace_back(std::string(r.pattern), std::string(r.style));
  }
  EXPECT_EQ(rules, (std::vector<std::pair<std::string, std::string>>{
                       {"model.embed_tokens", "rowwise"},
                       {"model.embed_tokens_per_layer", "rowwise"},
                       {"model.layers.*.self_attn.q_proj", "colwise"},
                       {"model.layers.*.self_attn.k_proj", "colwise"},
                       {"model.layers.*.self_attn.v_proj", "colwise"},
                       {"model.layers.*.self_attn.o_proj", "rowwise"},
                       {"model.layers.*.mlp.gate_proj", "colwise"},
                       {"model.layers.*.mlp.up_proj", "colwise"},
                       {"model.layers.*.mlp.down_proj", "rowwise"},
                       {"lm_head", "colwise"}}));
  const ModulePtr m = build_model(c);
  for (const auto& [pattern, style] : rules) {
    std::string fqn = pattern;
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "0");
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
