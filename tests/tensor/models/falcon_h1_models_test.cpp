// falcon_h1 (TII Falcon-H1) against hand formulas written here from transformers'
// modeling_falcon_h1.py (FalconH1ForCausalLM) and the third-party counts of the releases
// (Falcon-H1-7B-Base "7.586B"). h hidden, V vocabulary, I the MLP width, H heads and kv key-value
// heads of d, a Mamba-2 mixer of nh heads of P (ds = nh P, mamba_d_ssm), G groups of state N, K
// taps, conv = ds + 2 G N, P_in = 2 ds + 2 G N + nh (in_proj's [z | x B C | dt]); biases b_a
// (attention_bias: q, k, v, o), b_m (mlp_bias), b_c (mamba_conv_bias), b_i (mamba_proj_bias:
// in_proj only), b_o (projectors_bias: out_proj only), n (mamba_rms_norm: the gated norm):
//   mlp    feed_forward gate/up [I, h], down [h, I]                3 h I + b_m (2 I + h)
//   mamba  dt_bias, A_log, D [nh]; conv1d [conv, 1, K] (+ [conv]); in_proj [P_in, h] (+ [P_in]);
//          norm [ds]; out_proj [h, ds] (+ [h])
//          3 nh + conv K + b_c conv + h P_in + b_i P_in + n ds + ds h + b_o h
//   attn   q [H d, h], k, v [kv d, h], o [h, H d]                  2 h H d + 2 h kv d
//                                                                   + b_a (H d + 2 kv d + h)
//   layer  mlp + mamba + attn + 2 h (input_layernorm, pre_ff_layernorm)
//   model  embed_tokens [V, h] + L layer + final_layernorm [h] + lm_head [V, h] unless tied
// Buffers, not counted: each mixer's non-persistent mup_vector [1, 1, P_in], rotary_emb's inv_freq.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
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

struct Falcon {
  int64_t V, h, I, L, H, kv, d, nh, P, G, N, K;
  bool b_a, b_m, b_c, b_i, b_o, norm, tied;
};
int64_t mlp(const Falcon& z) { return 3 * z.h * z.I + (z.b_m ? 2 * z.I + z.h : 0); }
int64_t mamba(const Falcon& z) {
  const int64_t ds = z.nh * z.P, conv = ds + 2 * z.G * z.N, in = 2 * ds + 2 * z.G * z.N + z.nh;
  return 3 * z.nh + conv * z.K + (z.b_c ? conv : 0) + z.h * in + (z.b_i ? in : 0) +
         (z.norm ? ds : 0) + ds * z.h + (z.b_o ? z.h : 0);
}
int64_t attention(const Falcon& z) {
  return 2 * z.h * z.H * z.d + 2 * z.h * z.kv * z.d +
         (z.b_a ? z.H * z.d + 2 * z.kv * z.d + z.h : 0);
}
int64_t layer(const Falcon& z) { return mlp(z) + mamba(z) + attention(z) + 2 * z.h; }
int64_t total(const Falcon& z) { return z.V * z.h * (z.tied ? 1 : 2) + z.L * layer(z) + z.h; }

// The spec's tiny config: every option on, H d = 96 != h = 64, ds = 48 != mamba_expand x h = 128
// (mamba_d_ssm wins), P = 48 / 6 = 8, G = 2 dividing nh = 6 and ds, conv = 80, P_in = 134.
nlohmann::json tiny() {
  return {{"model_type", "falcon_h1"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 24},
          {"mamba_d_ssm", 48},
          {"mamba_n_heads", 6},
          {"mamba_d_head", "auto"},
          {"mamba_n_groups", 2},
          {"mamba_d_state", 8},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_chunk_size", 16},
          {"mamba_conv_bias", true},
          {"mamba_proj_bias", true},
          {"projectors_bias", true},
          {"mamba_rms_norm", true},
          {"mamba_norm_before_gate", false},
          {"attention_bias", true},
          {"mlp_bias", true},
          {"rope_theta", 100000000000.0},
          {"embedding_multiplier", 2.0},
          {"lm_head_multiplier", 0.5},
          {"attention_in_multiplier", 1.25},
          {"attention_out_multiplier", 0.75},
          {"key_multiplier", 0.5},
          {"ssm_in_multiplier", 1.5},
          {"ssm_out_multiplier", 0.25},
          {"mlp_multipliers", {0.875, 1.125}},
          {"ssm_multipliers", {0.5, 0.75, 1.0, 1.25, 1.5}},
          {"tie_word_embeddings", false}};
}
constexpr Falcon kTiny{128, 64, 96,   2,    4,    2,    24,   6,    8,    2,
                       8,   4,  true, true, true, true, true, true, false};

// The spec's variant: the same sizes, every bias off but the convolution's, no gated norm, tied.
nlohmann::json variant() {
  nlohmann::json j = tiny();
  for (const char* k :
       {"mamba_proj_bias", "projectors_bias", "mamba_rms_norm", "attention_bias", "mlp_bias"}) {
    j[k] = false;
  }
  j["tie_word_embeddings"] = true;
  return j;
}
constexpr Falcon kVariant{128, 64, 96,    2,     4,    2,     24,    6,     8,   2,
                          8,   4,  false, false, true, false, false, false, true};

TEST(FalconH1Models, TinyConfigMatchesTheHandTotal) {
  // mlp: gate 96 x 64 = 6,144 + 96, up 6,144 + 96, down 64 x 96 = 6,144 + 64: 18,688.
  // mamba: dt_bias, A_log, D 3 x 6 = 18; conv1d 80 x 1 x 4 = 320 + 80; in_proj 134 x 64 = 8,576
  //        + 134; norm 48; out_proj 64 x 48 = 3,072 + 64: 12,312.
  // attn: q 96 x 64 = 6,144 + 96; k 48 x 64 = 3,072 + 48; v 3,072 + 48; o 64 x 96 = 6,144 + 64:
  //       18,688.
  // layer: 18,688 + 12,312 + 18,688 + norms 128 = 49,816; two: 99,632.
  // model: embed_tokens 128 x 64 = 8,192, final_layernorm 64, lm_head 8,192: 116,080.
  EXPECT_EQ(mlp(kTiny), 18688);
  EXPECT_EQ(mamba(kTiny), 12312);
  EXPECT_EQ(attention(kTiny), 18688);
  EXPECT_EQ(layer(kTiny), 49816);
  EXPECT_EQ(total(kTiny), 116080);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "FalconH1ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 116080);
  // Layer 0 in named_parameters order: feed_forward, mamba (its own dt_bias, A_log, D before its
  // children conv1d, in_proj, norm, out_proj), self_attn, the two norms.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"feed_forward.gate_proj.weight", {96, 64}},
                          {"feed_forward.gate_proj.bias", {96}},
                          {"feed_forward.up_proj.weight", {96, 64}},
                          {"feed_forward.up_proj.bias", {96}},
                          {"feed_forward.down_proj.weight", {64, 96}},
                          {"feed_forward.down_proj.bias", {64}},
                          {"mamba.dt_bias", {6}},
                          {"mamba.A_log", {6}},
                          {"mamba.D", {6}},
                          {"mamba.conv1d.weight", {80, 1, 4}},
                          {"mamba.conv1d.bias", {80}},
                          {"mamba.in_proj.weight", {134, 64}},
                          {"mamba.in_proj.bias", {134}},
                          {"mamba.norm.weight", {48}},
                          {"mamba.out_proj.weight", {64, 48}},
                          {"mamba.out_proj.bias", {64}},
                          {"self_attn.q_proj.weight", {96, 64}},
                          {"self_attn.q_proj.bias", {96}},
                          {"self_attn.k_proj.weight", {48, 64}},
                          {"self_attn.k_proj.bias", {48}},
                          {"self_attn.v_proj.weight", {48, 64}},
                          {"self_attn.v_proj.bias", {48}},
                          {"self_attn.o_proj.weight", {64, 96}},
                          {"self_attn.o_proj.bias", {64}},
                          {"input_layernorm.weight", {64}},
                          {"pre_ff_layernorm.weight", {64}}}));
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "FalconH1DecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.feed_forward").type_name(), "FalconH1MLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "FalconH1Mixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.norm").type_name(), "FalconH1RMSNormGated");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "FalconH1Attention");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "FalconH1RotaryEmbedding");
  // FalconH1Model's last norm is final_layernorm, registered before rotary_emb; lm_head last.
  const std::vector<NamedTensor> all = m->named_parameters();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[all.size() - 2].name, "model.final_layernorm.weight");
  EXPECT_EQ(all.back().name, "lm_head.weight");
  EXPECT_EQ(names_under(*m, "model.embed_tokens."), (std::vector<std::string>{"weight"}));
  // mup_vector: a buffer of every mixer, [1, 1, P_in] in the parameters' dtype, not persistent
  // (not in the state dict, not in checkpoints); the rotary table covers all of head_dim.
  const Tensor mup = m->get_buffer("model.layers.1.mamba.mup_vector");
  EXPECT_EQ(mup.sizes(), (DimVector{1, 1, 134}));
  EXPECT_EQ(mup.dtype(), c.torch_dtype);
  EXPECT_FALSE(m->get_submodule("model.layers.1.mamba").is_buffer_persistent("mup_vector"));
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true})) {
    EXPECT_FALSE(b.name.ends_with("mup_vector")) << b.name;
  }
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{12}));
  // The mixer counts as a token mixer ("attention") in the parameter report.
  EXPECT_EQ(block_kind(*m, "model.layers.0.mamba.in_proj.weight"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mamba.dt_bias"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.0.feed_forward.up_proj.weight"), "mlp");
}

TEST(FalconH1Models, VariantWithoutNormOrBiasesTied) {
  // mlp 3 x 6,144 = 18,432; mamba 18 + 320 + 80 + 8,576 + 3,072 = 12,066; attn 6,144 + 3,072 x 2
  // + 6,144 = 18,432; layer 18,432 + 12,066 + 18,432 + 128 = 49,058; model 2 x 49,058 + 8,192
  // (embed_tokens = lm_head) + 64 = 106,372.
  EXPECT_EQ(mamba(kVariant), 12066);
  EXPECT_EQ(layer(kVariant), 49058);
  EXPECT_EQ(total(kVariant), 106372);
  const ModelConfig c = parse_model_config(variant(), "variant.json");
  EXPECT_FALSE(c.linear_gated_norm);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 106372);
  EXPECT_EQ(names_under(*m, "model.layers.0.mamba."),
            (std::vector<std::string>{"dt_bias", "A_log", "D", "conv1d.weight", "conv1d.bias",
                                      "in_proj.weight", "out_proj.weight"}));
  EXPECT_THROW((void)m->get_submodule("model.layers.0.mamba.norm"), Error);
  // in_proj's bias is mamba_proj_bias, out_proj's projectors_bias: one without the other.
  nlohmann::json j = variant();
  j["mamba_proj_bias"] = true;
  const ModulePtr in = build_model(parse_model_config(j, "variant.json"));
  EXPECT_EQ(in->get_parameter("model.layers.0.mamba.in_proj.bias").sizes(), (DimVector{134}));
  EXPECT_FALSE(in->get_parameter("model.layers.0.mamba.out_proj.bias").defined());
  EXPECT_EQ(in->parameters_numel(), 106372 + 2 * 134);
  j = variant();
  j["projectors_bias"] = true;
  const ModulePtr out = build_model(parse_model_config(j, "variant.json"));
  EXPECT_FALSE(out->get_parameter("model.layers.0.mamba.in_proj.bias").defined());
  EXPECT_EQ(out->get_parameter("model.layers.0.mamba.out_proj.bias").sizes(), (DimVector{64}));
  EXPECT_EQ(out->parameters_numel(), 106372 + 2 * 64);
}

TEST(FalconH1Models, ConfigDefaultsAndRoundTrip) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_TRUE(c.parallel_mamba);
  EXPECT_TRUE(c.layer_types.empty());  // every layer attends in full
  EXPECT_EQ(c.linear_num_value_heads, 6);
  EXPECT_EQ(c.linear_value_head_dim, 8);  // "auto": 48 / 6
  EXPECT_EQ(c.linear_num_key_heads, 2);
  EXPECT_EQ(c.linear_key_head_dim, 8);
  EXPECT_TRUE(c.linear_proj_bias);
  EXPECT_EQ(c.linear_out_proj_bias, true);
  EXPECT_EQ(c.head_dim, 24);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rope_theta, 1e11);
  EXPECT_EQ(c.key_multiplier, 0.5);
  EXPECT_EQ(c.mlp_gate_multiplier, 0.875);
  EXPECT_EQ(c.mlp_down_multiplier, 1.125);
  EXPECT_EQ(c.ssm_multipliers, (std::array<double, 5>{0.5, 0.75, 1.0, 1.25, 1.5}));
  EXPECT_EQ(c.pad_token_id, 0);  // the class's
  // to_hf_json reads back to the same config, mamba_d_ssm written (48, not expand x h = 128).
  nlohmann::json j = to_hf_json(c);
  EXPECT_EQ(j.at("mamba_d_ssm"), 48);
  EXPECT_EQ(parse_model_config(j, "round trip"), c);
  const ModelConfig v = parse_model_config(variant(), "variant.json");
  EXPECT_EQ(parse_model_config(to_hf_json(v), "round trip"), v);
  // mamba_d_ssm absent: the class's 1024 (8 heads of 128), whatever mamba_expand says.
  j = tiny();
  j.erase("mamba_d_ssm");
  j["mamba_n_heads"] = 8;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.linear_num_value_heads * c.linear_value_head_dim, 1024);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  // mamba_d_ssm null: int(mamba_expand x hidden_size), here 1 x 64 in 8 heads of 8; written back
  // as mamba_d_ssm 64.
  j["mamba_d_ssm"] = nullptr;
  j["mamba_expand"] = 1;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.linear_value_head_dim, 8);
  EXPECT_EQ(to_hf_json(c).at("mamba_d_ssm"), 64);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The class's defaults where the file is silent: no multipliers are all ones, no biases but the
  // convolution's, no gated norm, 8 key-value heads (null: the heads), pad_token_id 0.
  j = nlohmann::json{
      {"model_type", "falcon_h1"}, {"vocab_size", 128},      {"hidden_size", 64},
      {"intermediate_size", 96},   {"num_hidden_layers", 1}, {"num_attention_heads", 8},
      {"mamba_d_ssm", 64},         {"mamba_n_heads", 8},     {"mamba_d_state", 16}};
  c = parse_model_config(j, "defaults.json");
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 8);  // 64 / 8
  EXPECT_EQ(c.linear_num_key_heads, 1);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_TRUE(c.linear_conv_bias);
  EXPECT_FALSE(c.linear_proj_bias);
  EXPECT_EQ(c.linear_out_proj_bias, false);
  EXPECT_FALSE(c.linear_gated_norm);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.embedding_multiplier, 1.0);
  EXPECT_EQ(c.lm_head_multiplier, 1.0);
  EXPECT_EQ(c.ssm_multipliers, (std::array<double, 5>{1, 1, 1, 1, 1}));
  EXPECT_FALSE(c.tie_word_embeddings);
  j["num_key_value_heads"] = nullptr;
  j["num_attention_heads"] = 4;
  EXPECT_EQ(parse_model_config(j, "defaults.json").num_key_value_heads, 4);
  // The default RoPE type makes a table of the whole head whatever partial_rotary_factor says.
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e11}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse_model_config(j, "tiny.json").partial_rotary_factor, 1.0);
  // Keys transformers keeps as inert attributes.
  j = tiny();
  j["attn_layer_indices"] = nullptr;
  j["mamba_use_mlp"] = false;  // the MLP is built all the same
  j["mlp_expansion_factor"] = 8;
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), parse_model_config(tiny(), "tiny.json"));
}

TEST(FalconH1Models, Refusals) {
  auto refused = [](const nlohmann::json& bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "f.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  nlohmann::json j = tiny();
  // layers_block_type is a read-only property: transformers raises on a file setting it.
  j["layer_types"] = {"hybrid", "hybrid"};
  refused(j, "field 'layer_types': FalconH1Config's layers_block_type is a read-only property");
  j = tiny();
  j["layers_block_type"] = {"hybrid", "hybrid"};
  refused(j, "field 'layers_block_type'");
  j = tiny();
  j["mlp_multipliers"] = {1.0, 1.0, 1.0};  // FalconH1MLP unpacks two
  refused(j, "field 'mlp_multipliers': expected a list of 2 numbers");
  j = tiny();
  j["ssm_multipliers"] = {1.0, 1.0, 1.0, 1.0};
  refused(j, "field 'ssm_multipliers': expected a list of 5 numbers");
  j = tiny();
  j["mamba_d_head"] = 16;  // 16 x 6 != 48
  refused(j,
          "field 'mamba_d_head': 16 x mamba_n_heads 6 is not the Mamba width 48; expected "
          "\"auto\" or 8");
  j = tiny();
  j["mamba_d_head"] = "eight";
  refused(j, "field 'mamba_d_head': \"eight\" is not a head width");
  j = tiny();
  j["mamba_n_heads"] = 5;
  refused(j, "field 'mamba_n_heads': 5 does not divide the Mamba width 48");
  j = tiny();
  j["mamba_n_groups"] = 4;  // 6 heads in 4 groups
  refused(j, "'mamba_n_heads' (linear_num_value_heads): 6 is not a multiple of mamba_n_groups 4");
  j = tiny();
  j["key_multiplier"] = nullptr;  // builds in transformers, fails in forward
  refused(j, "field 'key_multiplier': is null");
  j = tiny();
  j["head_dim"] = nullptr;  // None ** -0.5
  refused(j, "field 'head_dim': is null");
  j = tiny();
  j["hidden_act"] = "gelu";
  refused(j, "field 'hidden_act': 'gelu' is not built");
  j = tiny();
  j["num_key_value_heads"] = 3;
  refused(j, "3 does not divide num_attention_heads 4");
  // A scaled RoPE type with a partial factor: a narrower table than the head it rotates.
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "linear"},
                          {"factor", 2.0},
                          {"rope_theta", 1e11},
                          {"partial_rotary_factor", 0.5}};
  refused(j, "field 'rope_parameters': partial_rotary_factor 0.5");
  // Falcon's keys in another family's file describe another model.
  nlohmann::json bamba = to_hf_json(find_model_config("bamba-9b"));
  bamba["mamba_d_ssm"] = 1024;
  refused(bamba, "'mamba_d_ssm': 1024 changes the architecture");
  // A config built in code: the mixer beside the attention only where a family builds it.
  ModelConfig llama = find_model_config("llama3-8b");
  llama.parallel_mamba = true;
  llama.linear_num_key_heads = 1;
  llama.linear_num_value_heads = 32;
  llama.linear_key_head_dim = 128;
  llama.linear_value_head_dim = 64;
  llama.linear_conv_kernel_dim = 4;
  EXPECT_THAT([&] { validate(llama, "built"); },
              ThrowsMessage<Error>(HasSubstr("field 'parallel_mamba'")));
  ModelConfig falcon = parse_model_config(tiny(), "tiny.json");
  falcon.linear_key_head_dim = 0;
  EXPECT_THAT([&] { validate(falcon, "built"); },
              ThrowsMessage<Error>(HasSubstr("'mamba_d_state' (linear_key_head_dim): must be a "
                                             "positive integer (every layer has a Mamba-2 mixer")));
}

// One kind for the whole stack: full attention (its keys, values and RoPE priced as any full
// layer's) with a Mamba-2 mixer beside it.
TEST(FalconH1Models, OneLayerKindWithTheMixerBesideTheAttention) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const LayerStack s = layer_stack(c);
  ASSERT_TRUE(s.uniform());
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(s.kinds[0].attention, AttentionType::kFull);
  EXPECT_TRUE(s.kinds[0].parallel_mamba);
  EXPECT_EQ(describe(s.kinds[0]), "attention+mamba dense");
  EXPECT_EQ(layer_kind(uniform_config(c, s.kinds[0]), 0), s.kinds[0]);
  EXPECT_TRUE(first_layers(c, 1).parallel_mamba);
}

// Note [Mamba-2 trace]: each multiplier is one mul where transformers runs it (the layer's three,
// the mixer's two, the MLP's gate and down, k's in the attention, the embeddings' in the model,
// the logits' at the root), and the mixer is one fused scan.
TEST(FalconH1Models, TraceRunsEveryMultiplierAndOneScanPerLayer) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 16);
  EXPECT_EQ(ops_in(g, "mul", ""), 1);                      // logits x lm_head_multiplier
  EXPECT_EQ(ops_in(g, "mul", "model"), 1);                 // embeddings x embedding_multiplier
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0"), 3);        // ssm_out, attention_in, _out
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 3);        // branches, two residuals
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.mamba"), 2);  // ssm_in, mup_vector
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.feed_forward"), 3);  // gate, up x act, down
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.self_attn"), 5);     // key, and RoPE's 2 on q and k
  bool mup_read = false;
  int scans = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.0.mamba" && n.op == "mul") {
      for (const int64_t t : n.inputs) mup_read |= g.tensor(t).sizes == DimVector{1, 1, 134};
    }
    if (n.op != "mamba_split_conv1d_scan_combined") continue;
    ++scans;
    EXPECT_EQ(n.outputs.size(), 2u);  // the output and the gated norm's rstd
    // Note [Mamba-2 scan work] at Q 256, P 8, N 8, G 2 on 256 padded tokens: per head 4 N P +
    // P (Q + 64) = 256 + 2,560; per group 2 Q N = 4,096.
    EXPECT_DOUBLE_EQ(n.matmul_flops, 256.0 * (6 * 2816 + 2 * 4096));
    // Elementwise: the convolution over 80 channels (4 taps and the SiLU), 12 per d_inner channel.
    EXPECT_DOUBLE_EQ(n.flops - n.matmul_flops, 16.0 * (80 * (2 * 4 + 4) + 12 * 48));
  }
  EXPECT_TRUE(mup_read);
  EXPECT_EQ(scans, 2);
  // Without the gated norm: no rstd, 8 per d_inner channel.
  const ModulePtr vm = build_model(parse_model_config(variant(), "variant.json"));
  const OpGraph v = trace_model_forward(*vm, 1, 16);
  int unnormed = 0;
  for (const OpNode& n : v.nodes()) {
    if (n.op != "mamba_split_conv1d_scan_combined") continue;
    ++unnormed;
    EXPECT_EQ(n.outputs.size(), 1u);
    EXPECT_DOUBLE_EQ(n.matmul_flops, 256.0 * (6 * 2816 + 2 * 4096));  // the same scan
    EXPECT_DOUBLE_EQ(n.flops - n.matmul_flops, 16.0 * (80 * (2 * 4 + 4) + 8 * 48));
  }
  EXPECT_EQ(unnormed, 2);
}

// Note [Mamba-2 groups] in tensor/training.cpp: without the norm's rstd the backward still prices
// the variant's two groups of state 8 (one group of 16 would cost more per head).
TEST(FalconH1Models, TrainingWithoutTheNormKeepsTheGroups) {
  nlohmann::json j = variant();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "variant.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  int found = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "mamba_split_conv1d_scan_combined") continue;
    ++found;
    ASSERT_EQ(op.outputs.size(), 1u);
    int64_t out_x = -1, zxbcdt = -1;
    for (const SavedTensor& s : op.saved) {
      EXPECT_NE(s.what, "rstd");
      const int64_t bytes = s.tensor >= 0 ? st.tensors[static_cast<size_t>(s.tensor)].nbytes
                                          : st.buffers[static_cast<size_t>(s.buffer)].bytes;
      if (s.what == "out_x") out_x = bytes;
      if (s.tensor == op.inputs[0]) zxbcdt = bytes;
    }
    EXPECT_EQ(out_x, 2 * 64 * 48 * 2);    // [2, 64, 6 x 8] bf16 before the gate
    EXPECT_EQ(zxbcdt, 2 * 64 * 134 * 2);  // after the mup_vector product
    // 2 x 256 padded tokens. Backward per head 10 N P + 3 P (Q + 64) = 640 + 7,680, per group
    // 4 Q N = 8,192; recompute per head 2 N P = 128, per group 2 Q N = 4,096.
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 512.0 * (6 * 8320 + 2 * 8192));
    EXPECT_DOUBLE_EQ(op.recompute_flops, 512.0 * (6 * 128 + 2 * 4096));
  }
  EXPECT_EQ(found, 1);
}

TEST(FalconH1Models, ScanOpWithoutANorm) {
  const TensorOptions o{};
  const Tensor zx = empty({1, 4, 134}, o), w = empty({80, 1, 4}, o), bias = empty({80}, o);
  const Tensor heads = empty({6}, o);
  // d_inner = 134 - 80 - 6 = 48: 6 heads of 8.
  EXPECT_EQ(mamba_split_conv1d_scan_combined(zx, w, bias, heads, heads, heads, Tensor(), 2).sizes(),
            (DimVector{1, 4, 6, 8}));
  EXPECT_THAT(
      [&] {
        (void)mamba_split_conv1d_scan_combined(empty({1, 4, 130}, o), w, bias, heads, heads, heads,
                                               Tensor(), 2);
      },
      ThrowsMessage<Error>(HasSubstr("d_inner 44 is not a positive multiple of the heads 6")));
}

// Falcon-H1-7B (configs/models/falcon-h1-7b.json): V 130,048 untied, h 3,072, I 12,288, 44
// layers, 12 heads and 2 kv heads of 128 (H d = 1,536 != h), Mamba 24 heads of 128 (ds 3,072) in
// one group of state 256, 4 taps, the gated norm on, the conv bias the only bias:
//   mlp 3 x 3,072 x 12,288 = 113,246,208
//   mamba 72 + 3,584 x 4 + 3,584 + 6,680 x 3,072 + 3,072 + 3,072 x 3,072 = 29,979,208
//   attn 2 x 3,072 x 1,536 + 2 x 3,072 x 256 = 11,010,048
//   layer + 6,144 of norms = 154,241,608; 44 layers 6,786,630,752
//   model + 2 x 399,507,456 + 3,072 = 7,585,648,736 (third-party "7.586B").
TEST(FalconH1Models, Falcon7BIsThePublishedSize) {
  const Falcon f7{130048, 3072, 12288, 44,    12,   2,     128,   24,   128,  1,
                  256,    4,    false, false, true, false, false, true, false};
  EXPECT_EQ(mlp(f7), 113'246'208);
  EXPECT_EQ(mamba(f7), 29'979'208);
  EXPECT_EQ(attention(f7), 11'010'048);
  EXPECT_EQ(layer(f7), 154'241'608);
  EXPECT_EQ(total(f7), 7'585'648'736);
  const ModelConfig c = find_model_config("falcon-h1-7b");
  EXPECT_EQ(c.linear_num_value_heads * c.linear_value_head_dim, 3072);
  EXPECT_EQ(c.head_dim * c.num_attention_heads, 1536);
  EXPECT_TRUE(c.linear_gated_norm);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 7'585'648'736);
  EXPECT_EQ(active_parameters(*m, c), 7'585'648'736);
  EXPECT_EQ(describe(layer_stack(c).kinds[0]), "attention+mamba dense");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

}  // namespace
}  // namespace shardplan::tensor
