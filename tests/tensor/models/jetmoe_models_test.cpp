// jetmoe (JetMoE-8B) against hand formulas written here from transformers 5's modeling_jetmoe.py
// and configuration_jetmoe.py, and the published sizes ("JetMoE-8B has 8B parameters in total,
// but only 2B are activated for each input token", "2.2B" active in its model card's table;
// Shen et al. 2024, arXiv 2404.07413). h hidden, V vocabulary, L layers, E experts of which a
// token takes k, K key-value heads of d channels (D = K d), F the MLP experts' width:
//   mlp             bias [h]; input_linear [E, 2F, h] ([gate; up]); output_linear [E, h, F];
//                   router.layer [E, h]
//   norms           input_layernorm, post_attention_layernorm [h] each; model.norm [h]
//   self_attention  experts.bias [h]; experts.input_linear [E, D, h]; experts.output_linear
//                   [E, h, D]; experts.router.layer [E, h]; kv_proj [2 D, h]
//   model           embed_tokens [V, h]; lm_head tied to it by default
// A layer: h + 3 E F h + E h + 2 h + h + 2 E D h + E h + 2 D h. A token passes through k of the
// E experts of both sparse blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
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
using test::ops_under;
using test::Shapes;
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// One layer's parameters by the formula above.
int64_t layer(int64_t h, int64_t D, int64_t F, int64_t E) {
  const int64_t mlp = h + E * 2 * F * h + E * h * F + E * h;
  const int64_t attention = h + E * D * h + E * h * D + E * h + 2 * D * h;
  return mlp + 2 * h + attention;
}

// Both sparse blocks' experts in one layer: 3 E F h (MLP) + 2 E D h (queries and outputs).
int64_t experts(int64_t h, int64_t D, int64_t F, int64_t E) {
  return 3 * E * F * h + 2 * E * D * h;
}

TEST(JetMoeModels, JetMoe8BMatchesThePublishedSize) {
  // JetMoE-8B: V 32,000, h 2,048, 24 layers, 8 experts of 5,632, top 2, 16 key-value heads of
  // 128 (D = 2,048, 32 query heads), tied embeddings.
  const int64_t V = 32000, h = 2048, L = 24, E = 8, F = 5632, D = 16 * 128;
  EXPECT_EQ(layer(h, D, F, E), 352'362'496);
  EXPECT_EQ(experts(h, D, F, E), 343'932'928);
  const int64_t total = L * layer(h, D, F, E) + V * h + h;
  EXPECT_EQ(total, 8'522'237'952);  // "8B" (the Hub lists 8.52B parameters)
  const int64_t active = total - L * experts(h, D, F, E) + L * experts(h, D, F, E) / E * 2;
  EXPECT_EQ(active, 2'331'445'248);  // "2.2B" active (the model card), the embedding aside:
  EXPECT_EQ(active - V * h - h, 2'265'907'200);
  const ModelConfig c = find_model_config("jetmoe-8b");
  EXPECT_EQ(c.model_type, "jetmoe");
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_hidden_layers, L);
  EXPECT_EQ(c.num_key_value_heads, 16);
  EXPECT_EQ(c.num_attention_heads, 32);  // 16 x top 2
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.num_local_experts, E);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.initializer_range, 0.01);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "JetMoeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("experts"), L * experts(h, D, F, E));
  EXPECT_EQ(kinds.at("router"), L * 2 * E * h);
  EXPECT_EQ(kinds.at("attention"), L * (h + 2 * D * h));  // the MoA bias and kv_proj
  EXPECT_EQ(kinds.at("mlp"), L * h);                      // the MoE bias
  EXPECT_EQ(kinds.at("norm"), L * 2 * h + h);
  EXPECT_EQ(kinds.at("embedding"), V * h);
  EXPECT_EQ(kinds.count("other"), 0u);
  EXPECT_EQ(kinds.count("lm_head"), 0u);  // tied: counted once, as the embedding
  EXPECT_EQ(layers_path(c), "model.layers");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(JetMoeModels, TheClassDefaultsAreTheFourBillionModel) {
  // JetMoeConfig() ("a JetMoe 4B style configuration"): 12 layers of JetMoE-8B's layer,
  // rms_norm_eps 1e-6: 12 x 352,362,496 + 65,536,000 + 2,048.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "jetmoe"}}, "defaults");
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.initializer_range, 0.01);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_EQ(build_model(c)->parameters_numel(), 12 * int64_t{352'362'496} + 65'536'000 + 2'048);
  EXPECT_EQ(12 * int64_t{352'362'496} + 65'536'000 + 2'048, 4'293'888'000);
}

TEST(JetMoeModels, NamesShapesAndOrderOfOneLayerAndTheTop) {
  const ModelConfig c = first_layers(find_model_config("jetmoe-8b"), 2);
  const ModulePtr m = build_model(c);
  const int64_t h = 2048, E = 8, F = 5632, D = 2048;
  // JetMoeDecoderLayer registers mlp, the two norms, then self_attention; each sparse block's
  // bias is its own parameter, listed before its children's.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (Shapes{{"mlp.bias", {h}},
                    {"mlp.input_linear.weight", {E, 2 * F, h}},
                    {"mlp.output_linear.weight", {E, h, F}},
                    {"mlp.router.layer.weight", {E, h}},
                    {"input_layernorm.weight", {h}},
                    {"post_attention_layernorm.weight", {h}},
                    {"self_attention.experts.bias", {h}},
                    {"self_attention.experts.input_linear.weight", {E, D, h}},
                    {"self_attention.experts.output_linear.weight", {E, h, D}},
                    {"self_attention.experts.router.layer.weight", {E, h}},
                    {"self_attention.kv_proj.weight", {2 * D, h}}}));
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").impl(),
            m->get_parameter("model.embed_tokens.weight").impl());
  // rotary_emb comes last in JetMoeModel, its inv_freq not persistent.
  EXPECT_EQ(m->get_submodule("model").named_children().back().first, "rotary_emb");
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  // transformers' class names; the four expert projections are grouped-experts projections.
  EXPECT_EQ(m->get_submodule("model").type_name(), "JetMoeModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "JetMoeDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "JetMoeMoE");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attention").type_name(), "JetMoeAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attention.experts").type_name(), "JetMoeMoA");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.router").type_name(), "JetMoeTopKGating");
  const std::pair<const char*, GroupedExperts::Projection> projections[] = {
      {"mlp.input_linear", GroupedExperts::Projection::kFirst},
      {"mlp.output_linear", GroupedExperts::Projection::kSecond},
      {"self_attention.experts.input_linear", GroupedExperts::Projection::kFirst},
      {"self_attention.experts.output_linear", GroupedExperts::Projection::kSecond}};
  for (const auto& [name, which] : projections) {
    const Module& p = m->get_submodule(std::string("model.layers.1.") + name);
    EXPECT_EQ(p.type_name(), "JetMoeParallelExperts") << name;
    const auto* grouped = dynamic_cast<const GroupedExperts*>(&p);
    ASSERT_NE(grouped, nullptr) << name;
    ASSERT_TRUE(grouped->projection().has_value()) << name;
    EXPECT_EQ(*grouped->projection(), which) << name;
    EXPECT_FALSE(grouped->shared()) << name;  // routed: split by expert parallelism
  }
  // [gate; up]: two equal parts; the queries one.
  EXPECT_EQ(dynamic_cast<const GroupedExperts&>(m->get_submodule("model.layers.0.mlp.input_linear"))
                .projection_parts(),
            2);
  EXPECT_EQ(dynamic_cast<const GroupedExperts&>(
                m->get_submodule("model.layers.0.self_attention.experts.input_linear"))
                .projection_parts(),
            1);
}

// h 64, V 128, 2 layers, 2 key-value heads of 16 (D = 32, 4 query heads), 4 experts of 48, top 2.
nlohmann::json tiny() {
  return {{"model_type", "jetmoe"},   {"vocab_size", 128},
          {"hidden_size", 64},        {"num_hidden_layers", 2},
          {"num_key_value_heads", 2}, {"kv_channels", 16},
          {"intermediate_size", 48},  {"max_position_embeddings", 256},
          {"num_local_experts", 4},   {"num_experts_per_tok", 2},
          {"torch_dtype", "bfloat16"}};
}

TEST(JetMoeModels, TinyConfigByHandAndItsInits) {
  // mlp: 64 + 4 x 96 x 64 + 4 x 64 x 48 + 4 x 64 = 64 + 24,576 + 12,288 + 256 = 37,184
  // norms 128; self_attention: 64 + 4 x 32 x 64 x 2 + 256 + 64 x 64 = 64 + 16,384 + 256 + 4,096
  // = 20,800. A layer 58,112; two 116,224; embed_tokens 8,192 (tied), norm 64.
  EXPECT_EQ(37'184 + 128 + 20'800, 58'112);
  EXPECT_EQ(layer(64, 32, 48, 4), 58'112);
  const int64_t total = 2 * 58'112 + 8'192 + 64;
  EXPECT_EQ(total, 124'480);
  // Active: the experts 3 x 4 x 48 x 64 + 2 x 4 x 32 x 64 = 53,248 a layer, 2 of 4 of them.
  EXPECT_EQ(experts(64, 32, 48, 4), 53'248);
  const int64_t active = total - 2 * 53'248 + 2 * 53'248 / 4 * 2;
  EXPECT_EQ(active, 71'232);
  nlohmann::json j = tiny();
  j["pad_token_id"] = 0;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // JetMoePreTrainedModel._init_weights: every JetMoeParallelExperts weight and Linear normal(0,
  // initializer_range = 0.01), both biases zero, the padding row of embed_tokens zero, norms one.
  std::map<std::string, ParameterInit> inits;
  for (const NamedInit& i : parameter_inits(*m, c)) inits[i.name] = i.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.01};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const std::string b = "model.layers.1.";
  for (const char* w :
       {"mlp.input_linear.weight", "mlp.output_linear.weight", "mlp.router.layer.weight",
        "self_attention.experts.input_linear.weight", "self_attention.experts.output_linear.weight",
        "self_attention.experts.router.layer.weight", "self_attention.kv_proj.weight"}) {
    EXPECT_EQ(inits.at(b + w), normal) << w;
  }
  EXPECT_EQ(inits.at(b + "mlp.bias"), zero);
  EXPECT_EQ(inits.at(b + "self_attention.experts.bias"), zero);
  EXPECT_EQ(inits.at(b + "input_layernorm.weight"), one);
  EXPECT_EQ(inits.at("model.norm.weight"), one);
  EXPECT_EQ(inits.at("model.embed_tokens.weight").zero_row, 0);
}

TEST(JetMoeModels, KeysAliasesAndRoundTrips) {
  // head_dim is kv_channels' attribute_map alias, and wins over it.
  nlohmann::json j = tiny();
  j["head_dim"] = 8;
  const ModelConfig aliased = parse_model_config(j, "alias.json");
  EXPECT_EQ(aliased.head_dim, 8);
  EXPECT_EQ(
      build_model(aliased)->get_parameter("model.layers.0.self_attention.kv_proj.weight").sizes(),
      DimVector({2 * 2 * 8, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(aliased), "round trip"), aliased);
  // Untied, scaled RoPE, dropout, gelu: each read and written back.
  j = tiny();
  j["tie_word_embeddings"] = false;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  j["attention_dropout"] = 0.1;
  j["activation_function"] = "gelu";
  j["rms_norm_eps"] = 1e-5;
  const ModelConfig c = parse_model_config(j, "variant.json");
  EXPECT_FALSE(c.tie_word_embeddings);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 2.0);
  EXPECT_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(build_model(c)->parameters_numel(), 124'480 + 8'192);  // lm_head of its own
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A rope_scaling of type "default" is none; transformers 5's rope_parameters give the base.
  j = tiny();
  j["rope_scaling"] = {{"type", "default"}};
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  const ModelConfig plain = parse_model_config(j, "plain.json");
  EXPECT_FALSE(plain.rope_scaling.has_value());
  EXPECT_EQ(plain.rope_theta, 500000.0);
  // The original code's keys and a stated num_attention_heads pass when they say what is built.
  j = tiny();
  j["num_attention_heads"] = 4;
  j["ffn_hidden_size"] = 48;
  j["moe_num_experts"] = 4;
  j["moe_top_k"] = 2;
  j["glu"] = true;
  j["bias"] = true;
  j["aux_loss_coef"] = 0.02;
  j["output_router_logits"] = true;
  EXPECT_EQ(parse_model_config(j, "legacy.json"), parse_model_config(tiny(), "tiny.json"));
}

TEST(JetMoeModels, RefusedOptionsNameTheirKeys) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); }, ThrowsMessage<Error>(HasSubstr(what)))
        << what;
  };
  nlohmann::json j = tiny();
  j["partial_rotary_factor"] = 0.5;
  refused(j, "field 'partial_rotary_factor': partial_rotary_factor 0.5");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  refused(j, "field 'rope_parameters': partial_rotary_factor 0.25");
  j = tiny();
  j["glu"] = false;
  refused(j, "field 'glu': false: transformers' JetMoe builds gated MLP experts");
  j = tiny();
  j["bias"] = false;
  refused(j, "field 'bias': false: transformers' JetMoe builds an output bias");
  j = tiny();
  j["moe_num_experts"] = 8;
  refused(j, "field 'moe_num_experts': 8: transformers' JetMoe builds num_local_experts = 4");
  j = tiny();
  j["moe_top_k"] = 1;
  refused(j, "field 'moe_top_k': 1: transformers' JetMoe builds num_experts_per_tok = 2");
  j = tiny();
  j["ffn_hidden_size"] = 96;
  refused(j, "field 'ffn_hidden_size': 96: transformers' JetMoe builds experts of");
  j = tiny();
  j["num_attention_heads"] = 8;
  refused(j,
          "field 'num_attention_heads': 8: transformers' JetMoe builds num_key_value_heads x "
          "num_experts_per_tok = 4 query heads");
  j = tiny();
  j["num_experts_per_tok"] = 5;  // JetMoeConfig.validate_architecture
  refused(j, "field 'num_experts_per_tok': must be in [1, num_local_experts = 4]");
  j = tiny();
  j["num_experts_per_tok"] = 0;
  refused(j, "field 'num_experts_per_tok': must be a positive integer, got 0");
  j = tiny();
  j["num_key_value_heads"] = 0;
  refused(j, "field 'num_key_value_heads': must be a positive integer, got 0");
  j = tiny();
  j["kv_channels"] = 15;
  refused(j, "field 'kv_channels' (head_dim): the rotary width");
  j = tiny();
  j["activation_function"] = "xielu";
  refused(j, "field 'activation_function': 'xielu' has learned parameters");
  j = tiny();
  j["activation_function"] = "swishy";
  refused(j, "field 'activation_function': 'swishy' is not supported");
  j = tiny();
  j["num_local_experts"] = int64_t{1} << 20;  // 2 x 2 x 2^20 x 64 x 2 x 2^31: beyond 1e18
  j["kv_channels"] = int64_t{1} << 31;
  refused(j,
          "field 'num_local_experts': 1048576 attention experts of num_key_value_heads x "
          "kv_channels = 2 x 2147483648 query channels");
  j = tiny();
  j["kv_channels"] = "16";
  refused(j, "field 'kv_channels': expected an integer");
}

TEST(JetMoeModels, ForwardMatmulsByHandAndTheOps) {
  // Batch 2 of 8 tokens (T = 16), h 64, D 32, 4 heads of 16, 4 experts, top 2: each expert runs
  // on its expected ceil(16 x 2 / 4) = 8 picks.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  auto matmul = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  const std::string b = "model.layers.1.";
  const std::string moa = b + "self_attention.experts";
  EXPECT_DOUBLE_EQ(matmul(moa + ".router"), 2.0 * 16 * 64 * 4);
  EXPECT_DOUBLE_EQ(matmul(moa + ".input_linear"), 2.0 * 4 * 8 * 64 * 32);
  EXPECT_DOUBLE_EQ(matmul(moa + ".output_linear"), 2.0 * 4 * 8 * 32 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "self_attention.kv_proj"), 2.0 * 16 * 64 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.router"), 2.0 * 16 * 64 * 4);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.input_linear"), 2.0 * 4 * 8 * 64 * 96);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.output_linear"), 2.0 * 4 * 8 * 48 * 64);
  // QK^T and PV over 2 x 4 heads of 8 x 8 scores, 16 wide: the keys and values repeated to the
  // queries' four heads.
  EXPECT_DOUBLE_EQ(
      matmul(b + "self_attention") - matmul(moa) - matmul(b + "self_attention.kv_proj"),
      2.0 * 8 * 8 * 8 * 32);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", b + "self_attention"), 1);
  for (const OpNode& node : g.nodes()) {
    if (node.op != "scaled_dot_product_attention" || node.module != b + "self_attention") continue;
    ASSERT_GE(node.inputs.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {  // q, k, v
      EXPECT_EQ(g.tensor(node.inputs[i]).sizes, DimVector({2, 4, 8, 16})) << i;
    }
  }
  // One batched GEMM per expert projection; the routers' logits cast to float32 and their
  // gates back; silu on the gate half.
  EXPECT_EQ(ops_in(g, "bmm", moa + ".input_linear"), 1);
  EXPECT_EQ(ops_in(g, "bmm", moa + ".output_linear"), 1);
  EXPECT_EQ(ops_in(g, "bmm", b + "mlp.input_linear"), 1);
  EXPECT_EQ(ops_in(g, "bmm", b + "mlp.output_linear"), 1);
  EXPECT_EQ(ops_in(g, "to", b + "mlp.router"), 2);
  EXPECT_EQ(ops_in(g, "softmax", b + "mlp.router"), 1);
  EXPECT_EQ(ops_in(g, "silu", b + "mlp"), 1);
  EXPECT_EQ(ops_under(g, "rms_norm", b), 2);
  EXPECT_DOUBLE_EQ(matmul("lm_head"), 2.0 * 16 * 64 * 128);
}

TEST(JetMoeModels, TrainingStepOfTheTinyModel) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  // Block 0's forward matmuls (T = 16, 8 picks an expert): MoA router 8,192, queries 131,072,
  // kv_proj 131,072, attention 32,768, outputs 131,072; MoE router 8,192, input_linear 393,216,
  // output_linear 196,608.
  double block0 = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block == 0) block0 += op.matmul_flops;
  }
  EXPECT_DOUBLE_EQ(block0, 8192.0 + 131072 + 131072 + 32768 + 131072 + 8192 + 393216 + 196608);
  EXPECT_DOUBLE_EQ(block0, 1'032'192.0);
}

TEST(JetMoeModels, ACheckpointUnderTheModelsOwnNamesLoads) {
  // The Hub's safetensors name the tensors as transformers 5 builds them (the 3-D expert
  // weights included): nothing to rename, nothing missing or unexpected; lm_head tied, not stored.
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny.json"));
  const ModelSource src =
      test::check_stored_as(cfg, *model, [](const std::string& n) { return n; });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

TEST(JetMoeModels, FlagsAndTheTensorParallelPlan) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.experts_class, "JetMoeParallelExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.hf_class_prefix, "JetMoe");
  EXPECT_EQ(f.file_key("head_dim"), "kv_channels");
  EXPECT_EQ(f.file_key("hidden_act"), "activation_function");
  EXPECT_FALSE(f.init_rules.empty());
  // Note [JetMoE tensor parallelism] in family_jetmoe.cpp.
  const std::vector<std::tuple<std::string, std::string, int64_t>> want = {
      {"model.embed_tokens", "rowwise", 1},
      {"model.layers.*.self_attention.experts.input_linear", "experts", 1},
      {"model.layers.*.self_attention.experts.output_linear", "experts", 1},
      {"model.layers.*.self_attention.kv_proj", "colwise", 2},
      {"model.layers.*.mlp.input_linear", "experts", 1},
      {"model.layers.*.mlp.output_linear", "experts", 1},
      {"lm_head", "colwise", 1}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [pattern, style, parts] = want[i];
    EXPECT_EQ(f.tp_plan[i].pattern, pattern);
    EXPECT_EQ(f.tp_plan[i].style, style);
    EXPECT_EQ(f.tp_plan[i].fused_parts, parts);
    std::string path = pattern;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "0");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
  // Every layer is one kind: full attention with RoPE, and routed experts.
  const LayerStack stack = layer_stack(find_model_config("jetmoe-8b"));
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].ffn, FfnKind::kMoe);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kFull);
  EXPECT_TRUE(stack.kinds[0].rope);
}

TEST(JetMoeModels, AConfigBuiltInCodeMustKeepTheDerivedHeads) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.num_attention_heads = 2;  // not 2 key-value heads x top 2
  c.num_key_value_heads = 2;
  EXPECT_THAT([&] { build_model(c); },
              ThrowsMessage<Error>(HasSubstr("jetmoe: 2 query heads, expected num_key_value_heads "
                                             "x num_experts_per_tok = 2 x 2")));
  c = parse_model_config(tiny(), "tiny.json");
  c.partial_rotary_factor = 0.5;
  EXPECT_THAT([&] { build_model(c); },
              ThrowsMessage<Error>(HasSubstr("jetmoe: partial_rotary_factor 0.5")));
}

}  // namespace
}  // namespace shardplan::tensor
