// olmo_hybrid (AI2's OLMo Hybrid 7B) against hand formulas written here from transformers'
// modeling_olmo_hybrid.py (OlmoHybridForCausalLM) and OlmoHybridConfig. h hidden, V vocabulary,
// I the MLP width, H heads and kv key-value heads of d; the Gated DeltaNet of n key heads of dk
// and m value heads of dv, K taps (OlmoHybridGatedDeltaNet):
//   gdn    A_log, dt_bias [m]; q_proj, k_proj [n dk, h]; v_proj [m dv, h]; a_proj, b_proj [m, h];
//          g_proj [m dv, h]; o_proj [h, m dv]; conv1d [2 n dk + m dv, 1, K]; o_norm [dv]
//          2 m + 2 n dk h + 3 m dv h + 2 m h + (2 n dk + m dv) K + dv
//   linear layer  gdn + 3 h I (mlp) + 2 h (input_layernorm, post_attention_layernorm)
//   attention layer  q [H d, h], k, v [kv d, h], o [h, H d], q_norm [H d], k_norm [kv d]
//          + 3 h I + 2 h (post_attention_layernorm, post_feedforward_layernorm)
//   model  embed_tokens [V, h] + the layers + norm [h] + lm_head [V, h] (untied)
// Buffers, not counted: rotary_emb's inv_freq (absent in the released NoPE model).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
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
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Hybrid {
  int64_t V, h, I, H, kv, d, n, m, dk, dv, K;
};
int64_t gated_delta_net(const Hybrid& z) {
  return 2 * z.m + 2 * z.n * z.dk * z.h + 3 * z.m * z.dv * z.h + 2 * z.m * z.h +
         (2 * z.n * z.dk + z.m * z.dv) * z.K + z.dv;
}
int64_t linear_layer(const Hybrid& z) { return gated_delta_net(z) + 3 * z.h * z.I + 2 * z.h; }
int64_t attention_layer(const Hybrid& z) {
  return 2 * z.H * z.d * z.h + 2 * z.kv * z.d * z.h + z.H * z.d + z.kv * z.d + 3 * z.h * z.I +
         2 * z.h;
}
int64_t total(const Hybrid& z, int64_t linear, int64_t full) {
  return 2 * z.V * z.h + linear * linear_layer(z) + full * attention_layer(z) + z.h;
}

// Three linear layers then one attention layer (the class's default stack at four layers), GQA in
// both mixers (2 key heads serving 4 value heads; 2 kv heads for 4 query heads), RoPE.
nlohmann::json tiny() {
  return {{"model_type", "olmo_hybrid"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"linear_num_key_heads", 2},
          {"linear_num_value_heads", 4},
          {"linear_key_head_dim", 16},
          {"linear_value_head_dim", 8},
          {"linear_conv_kernel_dim", 4},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
          {"pad_token_id", 0}};
}
constexpr Hybrid kTiny{1000, 64, 128, 4, 2, 16, 2, 4, 16, 8, 4};

bool has_module(const Module& m, const std::string& fqn) {
  for (const NamedModule& nm : m.named_modules()) {
    if (nm.name == fqn) return true;
  }
  return false;
}

TEST(OlmoHybridModels, SevenBIsTheHandTotal) {
  // allenai/Olmo-Hybrid-7B ("7B"): V 100,352, h 3,840, I 11,008, 32 layers of which every fourth
  // attends (30 heads of 128, MHA), the other 24 Gated DeltaNet of 30 key and 30 value heads of
  // 96 and 192 channels (0.75 h / 30 and twice that), 4 taps. AI2's OLMo-core checkpoint of the
  // model (stage 3, step 23,842) holds 83.1 GiB of fp32 weights and two Adam moments, 12 bytes a
  // parameter: 7.44e9, this total to 0.1 %.
  const Hybrid z{100352, 3840, 11008, 30, 30, 128, 30, 30, 96, 192, 4};
  EXPECT_EQ(gated_delta_net(z), 88'750'332);
  EXPECT_EQ(linear_layer(z), 215'570'172);
  EXPECT_EQ(attention_layer(z), 185'809'920);
  EXPECT_EQ(total(z, 24, 8), 7'430'870'688);
  const ModelConfig c = find_model_config("olmo-hybrid-7b");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 7'430'870'688);
  // The release has no RoPE (rope_theta null): no rotary_emb, and its attention layers are NoPE.
  EXPECT_FALSE(has_module(*m, "model.rotary_emb"));
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(0), 24);
  EXPECT_EQ(s.first_layer(1), 3);
  // OlmoHybridConfig's defaults are this model with RoPE at 10,000 and float32.
  const ModelConfig d =
      parse_model_config(nlohmann::json{{"model_type", "olmo_hybrid"}}, "defaults.json");
  EXPECT_EQ(build_model(d)->parameters_numel(), 7'430'870'688);
  EXPECT_EQ(d.layer_types, c.layer_types);
  EXPECT_EQ(d.linear_key_head_dim, 96);
  EXPECT_EQ(d.linear_value_head_dim, 192);
  EXPECT_EQ(d.num_key_value_heads, 30);
  EXPECT_EQ(d.max_position_embeddings, 65536);
  EXPECT_EQ(d.norm_eps, 1e-6);
  EXPECT_EQ(d.pad_token_id.value_or(-1), 100277);
  EXPECT_TRUE(d.linear_allow_neg_eigval);
  EXPECT_TRUE(d.nope_layers.empty());
  EXPECT_EQ(d.rope_theta, 10000);
  ModelConfig same = d;
  same.torch_dtype = c.torch_dtype;
  same.nope_layers = c.nope_layers;
  EXPECT_EQ(same, c);
}

TEST(OlmoHybridModels, NamesAndShapesAreTransformers) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  // OlmoHybridLinearAttentionDecoderLayer registers mlp, input_layernorm,
  // post_attention_layernorm, linear_attn; the Gated DeltaNet its projections, conv1d, A_log,
  // dt_bias, o_norm, and PyTorch lists a module's own parameters before its children's.
  EXPECT_EQ(
      names_under(*m, "model.layers.0."),
      (std::vector<std::string>{
          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
          "input_layernorm.weight", "post_attention_layernorm.weight", "linear_attn.A_log",
          "linear_attn.dt_bias", "linear_attn.q_proj.weight", "linear_attn.k_proj.weight",
          "linear_attn.v_proj.weight", "linear_attn.a_proj.weight", "linear_attn.b_proj.weight",
          "linear_attn.g_proj.weight", "linear_attn.o_proj.weight", "linear_attn.conv1d.weight",
          "linear_attn.o_norm.weight"}));
  // OlmoHybridAttentionDecoderLayer (OLMo 3's): self_attn, mlp, then the two post norms.
  EXPECT_EQ(names_under(*m, "model.layers.3."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "post_attention_layernorm.weight", "post_feedforward_layernorm.weight"}));
  std::vector<std::string> top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight",
                                           "lm_head.weight"}));
  const test::Shapes gdn = shapes_under(*m, "model.layers.1.linear_attn.");
  EXPECT_EQ(gdn, (test::Shapes{{"A_log", {4}},
                               {"dt_bias", {4}},
                               {"q_proj.weight", {32, 64}},
                               {"k_proj.weight", {32, 64}},
                               {"v_proj.weight", {32, 64}},
                               {"a_proj.weight", {4, 64}},
                               {"b_proj.weight", {4, 64}},
                               {"g_proj.weight", {32, 64}},
                               {"o_proj.weight", {64, 32}},
                               {"conv1d.weight", {96, 1, 4}},
                               {"o_norm.weight", {8}}}));
  EXPECT_EQ(m->get_parameter("model.layers.3.self_attn.q_norm.weight").sizes(), (DimVector{64}));
  EXPECT_EQ(m->get_parameter("model.layers.3.self_attn.k_norm.weight").sizes(), (DimVector{32}));
  EXPECT_EQ(m->type_name(), "OlmoHybridForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "OlmoHybridModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(),
            "OlmoHybridLinearAttentionDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.3").type_name(), "OlmoHybridAttentionDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.linear_attn").type_name(), "OlmoHybridGatedDeltaNet");
  EXPECT_EQ(m->get_submodule("model.layers.0.linear_attn.o_norm").type_name(),
            "OlmoHybridRMSNormGated");
  EXPECT_EQ(m->get_submodule("model.layers.3.self_attn").type_name(), "OlmoHybridAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "OlmoHybridMLP");
  // With a RoPE base the model has its rotary module (after norm, as transformers registers it).
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "OlmoHybridRotaryEmbedding");
}

TEST(OlmoHybridModels, TinyConfigMatchesTheHandTotal) {
  EXPECT_EQ(gated_delta_net(kTiny), 11'152);
  EXPECT_EQ(linear_layer(kTiny), 35'856);
  EXPECT_EQ(attention_layer(kTiny), 37'088);
  EXPECT_EQ(total(kTiny, 3, 1), 272'720);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(build_model(c)->parameters_numel(), 272'720);
  // Tied: lm_head is the embedding, counted once.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tied.json"))->parameters_numel(),
            272'720 - 1000 * 64);
}

TEST(OlmoHybridModels, ConfigDefaultsAndRoundTrip) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kLinear,
                                        AttentionType::kLinear, AttentionType::kFull}));
  EXPECT_TRUE(c.nope_layers.empty());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The linear widths' defaults: key heads and value heads = heads, key width int(0.75 h / n),
  // value width twice that; beta doubled unless linear_allow_neg_eigval is false.
  nlohmann::json j = tiny();
  for (const char* k : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                        "linear_value_head_dim", "linear_conv_kernel_dim"}) {
    j.erase(k);
  }
  j["linear_allow_neg_eigval"] = false;
  ModelConfig d = parse_model_config(j, "tiny.json");
  EXPECT_EQ(d.linear_num_key_heads, 4);
  EXPECT_EQ(d.linear_num_value_heads, 4);
  EXPECT_EQ(d.linear_key_head_dim, 12);  // int(0.75 * 64 / 4)
  EXPECT_EQ(d.linear_value_head_dim, 24);
  EXPECT_EQ(d.linear_conv_kernel_dim, 4);
  EXPECT_FALSE(d.linear_allow_neg_eigval);
  EXPECT_EQ(parse_model_config(to_hf_json(d), "round trip"), d);
  // Default layer types: a full layer every fourth; with fewer than four layers, the last one.
  j = tiny();
  j["num_hidden_layers"] = 6;
  EXPECT_EQ(layer_kind(parse_model_config(j, "six.json"), 3).attention, AttentionType::kFull);
  EXPECT_EQ(layer_kind(parse_model_config(j, "six.json"), 5).attention, AttentionType::kLinear);
  j["num_hidden_layers"] = 2;
  EXPECT_EQ(parse_model_config(j, "two.json").layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kFull}));
  // transformers' legacy names: "mamba" is linear_attention, "attention" full_attention.
  j = tiny();
  j["layer_types"] = {"mamba", "attention", "linear_attention", "full_attention"};
  EXPECT_EQ(parse_model_config(j, "legacy.json").layer_types[1], AttentionType::kFull);
  // No RoPE: a null rope_theta, in rope_parameters or at the top level (OLMo-core's converter
  // writes the latter). The attention layers are then NoPE and the model has no rotary module.
  for (const nlohmann::json& nope :
       {nlohmann::json{{"rope_parameters", nullptr}, {"rope_theta", nullptr}},
        nlohmann::json{{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", nullptr}}}},
        nlohmann::json{{"rope_theta", nullptr}}}) {
    j = tiny();
    j.erase("rope_parameters");
    j.update(nope);
    const ModelConfig n = parse_model_config(j, "nope.json");
    EXPECT_EQ(n.nope_layers, (std::vector<int64_t>{3})) << nope.dump();
    EXPECT_FALSE(has_module(*build_model(n), "model.rotary_emb")) << nope.dump();
    const nlohmann::json back = to_hf_json(n);
    EXPECT_TRUE(back.at("rope_theta").is_null());
    EXPECT_EQ(parse_model_config(back, "round trip"), n);
  }
  // Without any RoPE key, transformers fills the default base (10,000): the model rotates.
  j = tiny();
  j.erase("rope_parameters");
  EXPECT_TRUE(parse_model_config(j, "default-rope.json").nope_layers.empty());
  // A scaled RoPE (rope_parameters, or a legacy rope_scaling, which replaces them) round-trips.
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "yarn"},
                          {"factor", 8.0},
                          {"original_max_position_embeddings", 8192},
                          {"rope_theta", 500000.0}};
  ModelConfig y = parse_model_config(j, "yarn.json");
  ASSERT_TRUE(y.rope_scaling.has_value());
  EXPECT_EQ(y.rope_scaling->rope_type, "yarn");
  EXPECT_EQ(y.rope_theta, 500000);
  EXPECT_EQ(parse_model_config(to_hf_json(y), "round trip"), y);
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  y = parse_model_config(j, "legacy.json");
  EXPECT_EQ(y.rope_scaling->rope_type, "linear");
  EXPECT_EQ(y.rope_theta, 10000);  // rope_parameters' base went with them
  // The shipped file round-trips too.
  const ModelConfig seven = find_model_config("olmo-hybrid-7b");
  EXPECT_EQ(parse_model_config(to_hf_json(seven), "round trip"), seven);
}

TEST(OlmoHybridModels, RefusalsNameTheKey) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["layer_types"] = std::vector<std::string>(4, "linear_attention");
  refused(j, "'layer_types': has no full_attention layer; OLMo Hybrid expects at least one");
  j["layer_types"] = std::vector<std::string>(4, "full_attention");
  refused(j, "'layer_types': has no linear_attention layer; OLMo Hybrid expects");
  j = tiny();
  j["num_hidden_layers"] = 1;  // the default stack is then one full layer: ValueError
  refused(j, "has no linear_attention layer (the default: a full_attention layer every fourth");
  j = tiny();
  j["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention",
                      "full_attention"};
  refused(j, "'layer_types': \"sliding_attention\" is not a layer type");
  j = tiny();
  j["hidden_act"] = "gelu";
  refused(j, "'hidden_act': 'gelu' is not built; expected \"silu\"");
  j = tiny();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  refused(j, "'rope_parameters': is keyed by layer type");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "linear"},
                          {"factor", 2.0},
                          {"rope_theta", 1e4},
                          {"partial_rotary_factor", 0.5}};
  refused(j, "'rope_parameters': partial_rotary_factor 0.5 with rope type 'linear'");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 0}};
  refused(j, "'rope_parameters': rope_theta 0, expected a positive base or null");
  j = tiny();
  j.erase("rope_parameters");
  j["rope_theta"] = "10000";
  refused(j, "'rope_theta': expected a number");
  j = tiny();
  j["linear_num_value_heads"] = 5;
  refused(j, "'linear_num_value_heads': 5 is not a multiple of linear_num_key_heads 2");
  j = tiny();
  j.erase("linear_key_head_dim");
  j["linear_num_key_heads"] = 0;
  refused(j, "'linear_num_key_heads': must be a positive integer, got 0");
  j = tiny();
  j.erase("linear_key_head_dim");
  j["linear_num_key_heads"] = 64;  // int(0.75 * 64 / 64) = 0
  refused(j, "'linear_key_head_dim': 0 (0.75 hidden_size / linear_num_key_heads");
  j = tiny();
  j.erase("pad_token_id");  // the class's 100277 is no row of 1,000: nn.Embedding refuses it
  refused(j,
          "'pad_token_id': expected a token id in [-vocab_size, vocab_size) = [-1000, 1000) "
          "(nn.Embedding's padding_idx), got 100277 (the config class's default)");
  j = tiny();
  j["full_attention_interval"] = 2;  // Qwen3-Next's key: not OlmoHybridConfig's
  refused(j, "'full_attention_interval': 2 changes the architecture");
  // A config built in code with a layer type neither layer class builds.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.sliding_window = 128;
  c.layer_types[3] = AttentionType::kSliding;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("olmo_hybrid: layer 3 attends sliding_attention")));
}

TEST(OlmoHybridModels, TracedLinearLayerIsTheProjectionsAndTheChunkedRule) {
  // One linear layer (the stack's first kind, as the planner traces it), 100 tokens: the rule
  // pads them to 128.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelConfig one = uniform_config(c, layer_stack(c).kinds[0]);
  const ModulePtr m = build_model(one);
  EXPECT_FALSE(has_module(*m, "model.rotary_emb"));  // no attention layer rotates
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  // q, k, v, a, b, g projections (32 + 32 + 32 + 4 + 4 + 32 = 136 outputs), o_proj (32 in), the
  // gated MLP (3 products of 128), lm_head (1,000).
  const double linears = 2 * T * h * 136 + 2 * T * 32 * h + 3 * 2 * T * h * 128 + 2 * T * h * 1000;
  // Note [Gated delta rule work] at C 64, K 16, V 8 on 128 padded tokens of 4 value heads:
  // 6 K V + 6 C K + 4 C V + C^2 / 2 per token and head.
  const double rule = 128 * 4 * (6 * 16 * 8 + 6 * 64 * 16 + 4 * 64 * 8 + 64 * 64 / 2.0);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, linears + rule);
  const std::string gdn = "model.layers.0.linear_attn";
  EXPECT_EQ(ops_in(g, "cat", gdn), 1);  // q, k and v joined for the convolution
  EXPECT_EQ(ops_in(g, "chunk_gated_delta_rule", gdn), 1);
  int convs = 0;
  for (const OpNode& node : g.nodes()) {
    if (node.op != "causal_conv1d") continue;
    ++convs;
    // Depthwise over 2 n dk + m dv = 96 channels and 100 tokens, 4 taps each, and the SiLU.
    EXPECT_DOUBLE_EQ(node.flops, 96.0 * 100 * (2 * 4 + 4));
    EXPECT_EQ(node.module, gdn + ".conv1d");
  }
  EXPECT_EQ(convs, 1);
  // linear_allow_neg_eigval: beta = 2 sigmoid(b), one multiply more.
  ModelConfig plain = one;
  plain.linear_allow_neg_eigval = false;
  const ModulePtr p = build_model(plain);
  const OpGraph base = trace_model_forward(*p, 1, 100);
  EXPECT_EQ(ops_in(g, "mul", gdn), ops_in(base, "mul", gdn) + 1);
  EXPECT_EQ(ops_in(g, "sigmoid", gdn), 1);
}

TEST(OlmoHybridModels, AttentionRotatesOnlyWithARopeBase) {
  const ModelConfig rope = parse_model_config(tiny(), "tiny.json");
  nlohmann::json j = tiny();
  j["rope_parameters"] = nullptr;
  j["rope_theta"] = nullptr;
  const ModelConfig nope = parse_model_config(j, "nope.json");
  // bfloat16 activations, as trained: the float32 RoPE tables then cast q and k up and back.
  const ModulePtr a = build_model(rope, {.dtype = DType::kBFloat16});
  const ModulePtr b = build_model(nope, {.dtype = DType::kBFloat16});
  const OpGraph ga = trace_model_forward(*a, 1, 16), gb = trace_model_forward(*b, 1, 16);
  const std::string attn = "model.layers.3.self_attn";
  // RoPE: rotate_half's cat for q and for k, in float32 (cast up and back: 4 casts).
  EXPECT_EQ(ops_in(ga, "cat", attn), 2);
  EXPECT_EQ(ops_in(ga, "to", attn), 4);
  EXPECT_EQ(ops_in(gb, "cat", attn), 0);
  EXPECT_EQ(ops_in(gb, "to", attn), 0);
  // q_norm and k_norm over the whole projection widths either way, and the two post norms.
  EXPECT_EQ(ops_in(gb, "rms_norm", attn + ".q_norm"), 1);
  EXPECT_EQ(ops_in(gb, "rms_norm", attn + ".k_norm"), 1);
  EXPECT_EQ(ops_in(gb, "rms_norm", "model.layers.3.post_attention_layernorm"), 1);
  EXPECT_EQ(ops_in(gb, "rms_norm", "model.layers.3.post_feedforward_layernorm"), 1);
  EXPECT_EQ(ga.totals().matmul_flops, gb.totals().matmul_flops);
}

TEST(OlmoHybridModels, TrainingStepOfTheTinyModel) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 64;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_EQ(st.totals.parameters, 272'720);
  // Forward matrix products at 128 tokens, by hand:
  //   linear layer  q k v a b g 2 x 128 x 64 x 136 = 2,228,224; o_proj 2 x 128 x 32 x 64 =
  //                 524,288; MLP 6 x 128 x 64 x 128 = 6,291,456; the rule (one chunk per
  //                 sequence) 128 x 4 x 11,008 = 5,636,096: 14,680,064
  //   attention layer  q, o 2 x 128 x 64 x 64 each, k, v 2 x 128 x 64 x 32 each = 3,145,728;
  //                 MLP 6,291,456; attention 2 x (2 x 4) x 64 x 64 x (16 + 16) = 2,097,152:
  //                 11,534,336
  //   lm_head 2 x 128 x 64 x 1,000 = 16,384,000
  //   3 x 14,680,064 + 11,534,336 + 16,384,000 = 71,958,528
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 71'958'528);
  ASSERT_EQ(st.blocks.size(), 4u);
  EXPECT_EQ(st.blocks[0].type, "OlmoHybridLinearAttentionDecoderLayer");
  EXPECT_EQ(st.blocks[3].type, "OlmoHybridAttentionDecoderLayer");
  int rules = 0, attentions = 0;
  for (const TrainingOp& op : st.ops) {
    rules += op.op == "chunk_gated_delta_rule";
    attentions += op.op == "scaled_dot_product_attention";
  }
  EXPECT_EQ(rules, 3);
  EXPECT_EQ(attentions, 1);
}

TEST(OlmoHybridModels, TensorParallelPlanIsMegatronsOverWholeHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.init_rules.empty());  // A_log's log-uniform draw: materialize refuses
  EXPECT_EQ(f.layers_path, "model.layers");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.linear_attn.q_proj", "colwise"},
      {"model.layers.*.linear_attn.k_proj", "colwise"},
      {"model.layers.*.linear_attn.v_proj", "colwise"},
      {"model.layers.*.linear_attn.a_proj", "colwise"},
      {"model.layers.*.linear_attn.b_proj", "colwise"},
      {"model.layers.*.linear_attn.g_proj", "colwise"},
      {"model.layers.*.linear_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.gate_proj", "colwise"},
      {"model.layers.*.mlp.up_proj", "colwise"},
      {"model.layers.*.mlp.down_proj", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Every projection is unfused with its rows in head order: a contiguous split is whole heads.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      path.replace(star, 1, path.find("self_attn") != std::string::npos ? "3" : "0");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
