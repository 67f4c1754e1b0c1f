// recurrent_gemma (Google's RecurrentGemma, the Griffin architecture) against hand formulas
// written here from transformers 5's modeling_recurrent_gemma.py and the published totals. h
// hidden, V vocabulary (embed_tokens, lm_head tied), F = intermediate_size / 2 the MLP's width, W
// = lru_width in H heads of w = W / H, K the convolution's taps, d the attention's head width, kv
// its key-value heads:
//   recurrent block  linear_y, linear_x [W, h] + [W], linear_out [h, W] + [h], conv_1d [W, 1, K]
//                    + [W], rg_lru.recurrent_param [W], input_gate_weight and
//                    recurrent_gate_weight [H, w, w], their biases [H, w]:
//                    3 W h + h + W (K + 6) + 2 W w
//   attention        q_proj [H d, h], k_proj and v_proj [kv d, h] (no biases), o_proj [h, H d]
//                    + [h]
//   every layer      mlp_block gate_proj, up_proj [F, h] + [F], down_proj [h, F] + [h];
//                    temporal_pre_norm, channel_pre_norm [h]
//   model            embed_tokens [V, h], final_norm [h]
// Note [Linear scan work] (tensor/ops.h) for the scan's FLOPs.
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t recurrent_params(int64_t h, int64_t W, int64_t H, int64_t K) {
  const int64_t w = W / H;
  return 2 * (W * h + W) + (h * W + h) + (W * K + W) + (W + 2 * H * w * w + 2 * H * w);
}

int64_t attention_params(int64_t h, int64_t H, int64_t kv, int64_t d) {
  return h * H * d + 2 * h * kv * d + H * d * h + h;
}

int64_t mlp_params(int64_t h, int64_t F) { return 3 * h * F + 2 * F + h; }

// Three layers (recurrent, recurrent, attention): h 64, F 192 / 2 = 96, 4 heads of 16 with one
// key-value head, W 96 in 4 heads of 24, K 4, a window of 16, half of each head rotated.
nlohmann::json tiny() {
  return {{"model_type", "recurrent_gemma"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 192},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 1},
          {"lru_width", 96},
          {"conv1d_width", 4},
          {"attention_window_size", 16},
          {"logits_soft_cap", 30.0},
          {"block_types", {"recurrent", "recurrent", "attention"}},
          {"partial_rotary_factor", 0.5}};
}

TEST(RecurrentGemmaModels, NineBMatchesThePublished8_58B) {
  // google/recurrentgemma-9b (Botev et al. 2024, "RecurrentGemma", Table 1: 8.58B parameters,
  // 7.53B of them not the embedding): V 256,000 tied, h 4,096, 38 layers (recurrent, recurrent,
  // attention repeated: 26 recurrent, 12 attention), W 4,096 in 16 heads of 256, K 4, MLP
  // expansion 3 (F 12,288; the file's 24,576 halved), 16 heads of 256 with one key-value head.
  const int64_t V = 256000, h = 4096, W = 4096, F = 12288;
  const int64_t recurrent = recurrent_params(h, W, 16, 4);
  EXPECT_EQ(recurrent, 52'473'856);
  const int64_t attention = attention_params(h, 16, 1, 256);
  EXPECT_EQ(attention, 35'655'680);
  const int64_t total =
      V * h + h + 38 * (2 * h + mlp_params(h, F)) + 26 * recurrent + 12 * attention;
  EXPECT_EQ(total, 8'579'977'216);
  EXPECT_EQ(total - V * h, 7'531'401'216);
  const ModelConfig c = find_model_config("recurrentgemma-9b");
  EXPECT_EQ(c.intermediate_size, F);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "RecurrentGemmaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(describe(s.kinds[1]), "sliding 2048 dense");
  EXPECT_EQ(s.count(0), 26);
  EXPECT_EQ(s.count(1), 12);
  EXPECT_EQ(s.first_layer(1), 2);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The file's transformers 4 key _block_types says the default list transformers 5 builds.
  EXPECT_EQ(to_hf_json(c).at("block_types"),
            (nlohmann::json{"recurrent", "recurrent", "attention"}));
}

TEST(RecurrentGemmaModels, TwoBMatchesThePublished2_68B) {
  // google/recurrentgemma-2b (the same Table 1: 2.68B, 2.03B without the embedding): h 2,560, 26
  // layers (18 recurrent, 8 attention), 10 heads of 256 with one key-value head, W 2,560,
  // intermediate_size 15,360 (F 7,680).
  const int64_t V = 256000, h = 2560, F = 7680;
  const int64_t total = V * h + h + 26 * (2 * h + mlp_params(h, F)) +
                        18 * recurrent_params(h, 2560, 10, 4) + 8 * attention_params(h, 10, 1, 256);
  EXPECT_EQ(total, 2'682'862'080);
  EXPECT_EQ(total - V * h, 2'027'502'080);
  nlohmann::json j = to_hf_json(find_model_config("recurrentgemma-9b"));
  j["hidden_size"] = 2560;
  j["lru_width"] = 2560;
  j["intermediate_size"] = 15360;
  j["num_hidden_layers"] = 26;
  j["num_attention_heads"] = 10;
  EXPECT_EQ(build_model(parse_model_config(j, "recurrentgemma-2b.json"))->parameters_numel(),
            total);
}

TEST(RecurrentGemmaModels, NamesOrderAndShapesAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  const Names mlp_and_norms_after = {"channel_pre_norm.weight",  "mlp_block.gate_proj.weight",
                                     "mlp_block.gate_proj.bias", "mlp_block.up_proj.weight",
                                     "mlp_block.up_proj.bias",   "mlp_block.down_proj.weight",
                                     "mlp_block.down_proj.bias"};
  Names recurrent = {"temporal_pre_norm.weight",
                     "temporal_block.linear_y.weight",
                     "temporal_block.linear_y.bias",
                     "temporal_block.linear_x.weight",
                     "temporal_block.linear_x.bias",
                     "temporal_block.linear_out.weight",
                     "temporal_block.linear_out.bias",
                     "temporal_block.conv_1d.weight",
                     "temporal_block.conv_1d.bias",
                     "temporal_block.rg_lru.recurrent_param",
                     "temporal_block.rg_lru.input_gate_weight",
                     "temporal_block.rg_lru.input_gate_bias",
                     "temporal_block.rg_lru.recurrent_gate_weight",
                     "temporal_block.rg_lru.recurrent_gate_bias"};
  recurrent.insert(recurrent.end(), mlp_and_norms_after.begin(), mlp_and_norms_after.end());
  EXPECT_EQ(names_under(*m, "model.layers.0."), recurrent);
  Names attention = {"temporal_pre_norm.weight",     "temporal_block.q_proj.weight",
                     "temporal_block.k_proj.weight", "temporal_block.v_proj.weight",
                     "temporal_block.o_proj.weight", "temporal_block.o_proj.bias"};
  attention.insert(attention.end(), mlp_and_norms_after.begin(), mlp_and_norms_after.end());
  EXPECT_EQ(names_under(*m, "model.layers.2."), attention);
  // The top level: embed_tokens, the layers, final_norm; lm_head is tied.
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.final_norm.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  const std::string rec = "model.layers.0.temporal_block.";
  EXPECT_EQ(shape(rec + "linear_y.weight"), (DimVector{96, 64}));
  EXPECT_EQ(shape(rec + "linear_out.weight"), (DimVector{64, 96}));
  EXPECT_EQ(shape(rec + "conv_1d.weight"), (DimVector{96, 1, 4}));
  EXPECT_EQ(shape(rec + "conv_1d.bias"), (DimVector{96}));
  EXPECT_EQ(shape(rec + "rg_lru.recurrent_param"), (DimVector{96}));
  EXPECT_EQ(shape(rec + "rg_lru.input_gate_weight"), (DimVector{4, 24, 24}));
  EXPECT_EQ(shape(rec + "rg_lru.recurrent_gate_bias"), (DimVector{4, 24}));
  EXPECT_EQ(shape("model.layers.2.temporal_block.q_proj.weight"), (DimVector{64, 64}));
  EXPECT_EQ(shape("model.layers.2.temporal_block.k_proj.weight"), (DimVector{16, 64}));
  EXPECT_EQ(shape("model.layers.2.temporal_block.o_proj.bias"), (DimVector{64}));
  EXPECT_EQ(shape("model.layers.1.mlp_block.gate_proj.weight"), (DimVector{96, 64}));
  EXPECT_EQ(shape("model.layers.1.mlp_block.down_proj.bias"), (DimVector{64}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "RecurrentGemmaModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "RecurrentGemmaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.temporal_block").type_name(),
            "RecurrentGemmaRecurrentBlock");
  EXPECT_EQ(m->get_submodule("model.layers.0.temporal_block.rg_lru").type_name(),
            "RecurrentGemmaRglru");
  EXPECT_EQ(m->get_submodule("model.layers.0.temporal_block.conv_1d").type_name(), "Conv1d");
  EXPECT_EQ(m->get_submodule("model.layers.2.temporal_block").type_name(),
            "RecurrentGemmaAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp_block").type_name(), "RecurrentGemmaMlp");
  EXPECT_EQ(m->get_submodule("model.final_norm").type_name(), "RecurrentGemmaRMSNorm");
  // Each attention layer holds its own rotary tables, half of each head's 16 channels: inv_freq
  // [4]; the model's normalizer is a bfloat16 scalar. Neither is in a checkpoint.
  EXPECT_EQ(m->get_buffer("model.layers.2.temporal_block.rotary_emb.inv_freq").sizes(),
            (DimVector{4}));
  EXPECT_EQ(m->get_buffer("model.normalizer").dtype(), DType::kBFloat16);
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  // The recurrent block counts as the token mixer, the MLP as the MLP.
  EXPECT_EQ(block_kind(*m, rec + "rg_lru.input_gate_weight"), "attention");
  EXPECT_EQ(block_kind(*m, rec + "conv_1d.weight"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.2.temporal_block.q_proj.weight"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mlp_block.up_proj.bias"), "mlp");
  EXPECT_EQ(block_kind(*m, "model.layers.0.channel_pre_norm.weight"), "norm");
  // By hand: V h + h, 3 x (2 h + MLP), two recurrent blocks, one attention.
  const int64_t h = 64;
  EXPECT_EQ(recurrent_params(h, 96, 4, 4), 24'064);
  EXPECT_EQ(attention_params(h, 4, 1, 16), 10'304);
  EXPECT_EQ(mlp_params(h, 96), 18'688);
  const int64_t total = 1000 * h + h + 3 * (2 * h + mlp_params(h, 96)) +
                        2 * recurrent_params(h, 96, 4, 4) + attention_params(h, 4, 1, 16);
  EXPECT_EQ(total, 178'944);
  EXPECT_EQ(m->parameters_numel(), total);
  // attention_bias: q, k and v biased (o_proj always is); untied: lm_head [V, h].
  nlohmann::json j = tiny();
  j["attention_bias"] = true;
  j["tie_word_embeddings"] = false;
  const ModulePtr b = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(names_under(*b, "model.layers.2.temporal_block."),
            (Names{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                   "v_proj.bias", "o_proj.weight", "o_proj.bias"}));
  EXPECT_EQ(b->parameters_numel(), total + (64 + 16 + 16) + 1000 * h);
}

TEST(RecurrentGemmaModels, ConfigDefaultsRoundTripAndLayerPattern) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  using A = AttentionType;
  EXPECT_EQ(c.layer_types, (std::vector<A>{A::kLinear, A::kLinear, A::kSliding}));
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.intermediate_size, 96);  // the MLP's width: the file's 192 halved
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.linear_num_key_heads, 4);
  EXPECT_EQ(c.linear_num_value_heads, 4);
  EXPECT_EQ(c.linear_value_head_dim, 24);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_TRUE(c.linear_conv_bias && c.linear_proj_bias && c.o_bias && c.mlp_bias);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.pad_token_id, 0);  // RecurrentGemmaConfig's default, the embedding's padding_idx
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(to_hf_json(c).at("intermediate_size"), 192);
  // The class's defaults: the 2B model's sizes but intermediate_size 7,680 (F 3,840), 10 heads
  // and as many key-value heads, lru_width = hidden, the window 2,048, cap 30, RoPE 10,000 on half
  // of each head, gelu tanh, tied.
  c = parse_model_config({{"model_type", "recurrent_gemma"}}, "defaults.json");
  EXPECT_EQ(c.vocab_size, 256000);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.intermediate_size, 3840);
  EXPECT_EQ(c.num_hidden_layers, 26);
  EXPECT_EQ(c.num_attention_heads, 10);
  EXPECT_EQ(c.num_key_value_heads, 10);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.linear_value_head_dim, 256);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(layer_stack(c).count(1), 8);  // layers 2, 5, ..., 23 attend
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Another pattern, repeated: recurrent, attention; sliding_window is attention_window_size's
  // attribute_map name; _block_types equal to block_types passes.
  nlohmann::json j = tiny();
  j["block_types"] = {"recurrent", "attention"};
  j["_block_types"] = {"recurrent", "attention"};
  j.erase("attention_window_size");
  j["sliding_window"] = 8;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.layer_types, (std::vector<A>{A::kLinear, A::kSliding, A::kLinear}));
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(to_hf_json(c).at("block_types"), (nlohmann::json{"recurrent", "attention"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The planner's cuts round-trip: the first two layers are written as one "recurrent".
  const ModelConfig two = first_layers(parse_model_config(tiny(), "tiny.json"), 2);
  EXPECT_EQ(to_hf_json(two).at("block_types"), (nlohmann::json{"recurrent"}));
  EXPECT_EQ(parse_model_config(to_hf_json(two), "cut"), two);
  // A null pad_token_id stays none through the round trip.
  j = tiny();
  j["pad_token_id"] = nullptr;
  c = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // rope_parameters of the default type give the base and the rotated share.
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 0.25}};
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.rope_theta, 500.0);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
}

TEST(RecurrentGemmaModels, RefusesWhatItCannotBuild) {
  auto refused = [](const nlohmann::json& bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  auto with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json j = tiny();
    j[key] = v;
    return j;
  };
  refused(with("block_types", {"recurrent", "mlp"}),
          "tiny.json: field 'block_types': \"mlp\" is not a block type; expected \"recurrent\" or "
          "\"attention\"");
  refused(with("block_types", nlohmann::json::array()),
          "field 'block_types': []: expected a non-empty list");
  refused(with("block_types", nullptr), "field 'block_types': null, expected a list");
  refused(with("_block_types", {"recurrent", "attention"}),
          "field '_block_types': [\"recurrent\",\"attention\"]: transformers 5 builds block_types");
  nlohmann::json many = with("block_types", {"attention"});
  many["num_hidden_layers"] = 101;
  refused(many, "field 'block_types': 1 block types cover at most 100 layers");
  refused(with("lru_width", 90),
          "field 'lru_width': 90, expected a positive multiple of num_attention_heads 4");
  refused(with("num_key_value_heads", 8),
          "field 'num_key_value_heads': 8, expected at most num_attention_heads 4");
  refused(with("logits_soft_cap", 0.0), "field 'logits_soft_cap': 0.000000, expected a positive");
  refused(with("logits_soft_cap", nullptr), "field 'logits_soft_cap': null");
  refused(with("attention_window_size", 0),
          "field 'attention_window_size': 0, expected a positive");
  refused(with("conv1d_width", 0), "field 'conv1d_width': 0, expected a positive number of taps");
  refused(with("intermediate_size", 1),
          "field 'intermediate_size': 1 makes an MLP of intermediate_size // 2 = 0");
  refused(with("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}),
          "field 'rope_scaling': rope type \"linear\": RecurrentGemmaRotaryEmbedding runs the "
          "default RoPE only");
  refused(with("rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}),
          "field 'rope_parameters': rope type \"yarn\"");
  refused(with("rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}),
          "field 'rope_parameters': {\"full_attention\":{\"rope_type\":\"default\"}}: keyed by "
          "layer type");
  refused(with("embeddings_scale_by_sqrt_dim", false),
          "field 'embeddings_scale_by_sqrt_dim': false: transformers' recurrent_gemma builds "
          "embeddings scaled by sqrt(hidden_size)");
  refused(with("pad_token_id", 1000),
          "field 'pad_token_id': expected a token id in [-vocab_size, vocab_size) = [-1000, 1000)");
  refused(with("hidden_activation", "swiglu"),
          "field 'hidden_activation': 'swiglu' is not supported");
  refused(with("num_hidden_layers", 0), "field 'num_hidden_layers': 0 layers, expected 1..");
  nlohmann::json both = tiny();
  both["sliding_window"] = 32;
  refused(both, "field 'sliding_window': 32 beside attention_window_size 16");
  // Another family's file with RecurrentGemma's layer list is refused rather than built without it.
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["block_types"] = {"recurrent", "attention"};
  refused(llama, "field 'block_types': [\"recurrent\",\"attention\"] changes the architecture");
  // Configs built in code that RecurrentGemma does not build.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.layer_types[2] = AttentionType::kFull;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("recurrent_gemma: a layer attends full_attention")));
  c = parse_model_config(tiny(), "tiny.json");
  c.mlp_bias = false;
  EXPECT_THAT([&] { (void)to_hf_json(c); },
              ThrowsMessage<Error>(HasSubstr("recurrent_gemma: a projection or the convolution "
                                             "without its bias")));
}

TEST(RecurrentGemmaModels, ForwardTracesTheProjectionsGatesAndOneScanPerRecurrentLayer) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const double T = 32, h = 64, W = 96, w = 24, F = 96;
  const OpGraph g = trace_model_forward(*m, 1, 32);
  // A recurrent layer's products: linear_y, linear_x, linear_out, the two gates (per head [T, w]
  // x [w, w]: 2 T W w each), the MLP.
  const double recurrent =
      2 * T * h * W * 2 + 2 * T * W * h + 2 * (2 * T * W * w) + 3 * 2 * T * h * F;
  EXPECT_DOUBLE_EQ(recurrent, 2'654'208);
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.0").matmul_flops, recurrent);
  // The attention layer: q and o (64 x 64), k and v (64 x 16), the scores and values of 4 heads
  // over min(32, 16) keys (2 x 4 x 32 x 16 x (16 + 16)), the MLP.
  const double attention =
      2 * 2 * T * h * 64 + 2 * 2 * T * h * 16 + 2.0 * 4 * T * 16 * (16 + 16) + 3 * 2 * T * h * F;
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.2").matmul_flops, attention);
  // Two recurrent layers, the attention layer, lm_head (1,000).
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, 2 * recurrent + attention + 2 * T * h * 1000);
  const std::string rg_lru = "model.layers.0.temporal_block.rg_lru";
  EXPECT_EQ(ops_in(g, "baddbmm", rg_lru), 2);
  EXPECT_EQ(ops_in(g, "linear_scan", rg_lru), 1);
  EXPECT_EQ(ops_in(g, "causal_conv1d", "model.layers.0.temporal_block"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "model.layers.2.temporal_block"), 1);
  EXPECT_EQ(ops_in(g, "linear_scan", "model.layers.2.temporal_block"), 0);
  EXPECT_EQ(test::ops_under(g, "linear_scan", "model."), 2);
  // The logits' soft cap: divide, tanh, multiply on [1, 32, 1000].
  EXPECT_EQ(ops_in(g, "tanh", ""), 1);
  for (const OpNode& n : g.nodes()) {
    if (n.op == "linear_scan") {
      EXPECT_DOUBLE_EQ(n.flops, 2 * T * W);  // the state's multiply-add per element
      EXPECT_DOUBLE_EQ(n.matmul_flops, 0);
    }
    if (n.op == "causal_conv1d") {
      EXPECT_DOUBLE_EQ(n.flops, T * W * (2 * 4 + 1));  // 4 taps and the bias, no activation
    }
  }
}

TEST(RecurrentGemmaModels, TrainingKeepsTheScanDecaysAndStates) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  int scans = 0, gates = 0;
  const double elements = 2.0 * 64 * 96;           // [2, 64, W]
  const int64_t bytes = int64_t{2} * 64 * 96 * 2;  // bfloat16
  for (const TrainingOp& op : st.ops) {
    if (op.op == "baddbmm") {
      ++gates;
      EXPECT_DOUBLE_EQ(op.matmul_flops, 2 * elements * 24);  // per head [B T, w] x [w, w]
      EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 2 * op.matmul_flops);  // input and weight
    }
    if (op.op != "linear_scan") continue;
    ++scans;
    EXPECT_TRUE(op.rule_known);
    std::vector<std::string_view> whats;
    for (const SavedTensor& s : op.saved) {
      whats.push_back(s.what);
      EXPECT_EQ(st.buffers[static_cast<size_t>(s.buffer)].bytes, bytes);
    }
    EXPECT_EQ(whats, (std::vector<std::string_view>{"input", "output"}));
    // Note [Linear scan work]: 2 forward, 3 backward per element, no products.
    EXPECT_DOUBLE_EQ(op.flops, 2 * elements);
    EXPECT_DOUBLE_EQ(op.backward_flops, 3 * elements);
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 0);
  }
  EXPECT_EQ(scans, 1);
  EXPECT_EQ(gates, 2);
}

TEST(RecurrentGemmaModels, ScanOpChecksItsOperands) {
  const Tensor x = empty({2, 10, 16}, {.dtype = DType::kBFloat16});
  EXPECT_EQ(linear_scan(x, x).sizes(), (DimVector{2, 10, 16}));
  EXPECT_EQ(linear_scan(empty({2, 10, 16}, {.dtype = DType::kFloat32}), x).dtype(),
            DType::kBFloat16);  // x's dtype
  EXPECT_THAT(
      [&] {
        (void)linear_scan(empty({2, 10, 8}), x);
      },
      ThrowsMessage<Error>(HasSubstr("linear_scan: expected the decays a as floating "
                                     "point of x's shape [2, 10, 16]")));
  EXPECT_THAT(
      [&] {
        (void)linear_scan(empty({2, 16}), empty({2, 16}));
      },
      ThrowsMessage<Error>(HasSubstr("linear_scan: expected x as floating point [batch, "
                                     "tokens, channels]")));
  EXPECT_EQ(chunked_scan_chunk("linear_scan"), 0);  // no tensor-core tiles
}

TEST(RecurrentGemmaModels, TensorParallelPlanSplitsTheRecurrentBlockByHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.init_rules.empty());  // recurrent_param's transformed uniform draw: refused
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("sliding_window"), "attention_window_size");
  EXPECT_EQ(f.file_key("final_logit_softcapping"), "logits_soft_cap");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.temporal_block.q_proj", "colwise"},
      {"model.layers.*.temporal_block.k_proj", "colwise"},
      {"model.layers.*.temporal_block.v_proj", "colwise"},
      {"model.layers.*.temporal_block.o_proj", "rowwise"},
      {"model.layers.*.temporal_block.linear_y", "colwise"},
      {"model.layers.*.temporal_block.linear_x", "colwise"},
      {"model.layers.*.temporal_block.linear_out", "rowwise"},
      {"model.layers.*.mlp_block.gate_proj", "colwise"},
      {"model.layers.*.mlp_block.up_proj", "colwise"},
      {"model.layers.*.mlp_block.down_proj", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Unfused projections whose rows are in head order: a contiguous split is whole heads.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      const bool attends = path.find("_proj") != std::string::npos &&
                           path.find("temporal_block") != std::string::npos;
      path.replace(star, 1, attends ? "2" : "0");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
