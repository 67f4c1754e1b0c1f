// aria_text (Aria's language model) against hand formulas written here from transformers 5's
// configuration_aria.py and modeling_aria.py (AriaTextConfig, AriaTextForCausalLM, AriaConfig),
// and the published sizes (rhymes-ai/Aria: "25.3B total, 3.9B active"; Li et al. 2024, arXiv
// 2410.05993: a MoE decoder of 3.5B activated parameters per text token and a 438M vision
// encoder). h hidden, V vocabulary, L layers, H heads and K key-value heads of d, E experts of
// which a token takes k, F each expert's width, n shared experts:
//   self_attn  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d]
//   mlp        router [E, h]; experts.fc1 [E, h, 2F]; experts.fc2 [E, F, h];
//              shared_experts.gate_proj, up_proj [n F, h], down_proj [h, n F]
//   norms      input_layernorm, post_attention_layernorm [h]; model.norm [h]
//   model      embed_tokens [V, h]; lm_head [V, h], untied by default
// A layer: 2 h H d + 2 h K d + E h + 3 E h F + 3 h n F + 2 h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
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

// One layer's parameters by the formula above (no biases).
int64_t layer(int64_t h, int64_t H, int64_t K, int64_t d, int64_t E, int64_t F, int64_t n) {
  return 2 * h * H * d + 2 * h * K * d + E * h + 3 * E * h * F + 3 * h * n * F + 2 * h;
}

TEST(AriaTextModels, AriaMatchesThePublishedSize) {
  // Aria's text_config: V 100,352, h 2,560, 28 layers, 20 heads of 128 (MHA), 64 experts of
  // 1,664, top 6, 2 shared (one MLP of 3,328), untied.
  const int64_t V = 100352, h = 2560, L = 28, E = 64, F = 1664;
  const int64_t attention = 4 * h * 20 * 128, experts = 3 * E * h * F, shared = 3 * h * 2 * F;
  EXPECT_EQ(attention, 26'214'400);
  EXPECT_EQ(experts, 817'889'280);
  EXPECT_EQ(shared, 25'559'040);
  EXPECT_EQ(layer(h, 20, 20, 128, E, F, 2), 869'831'680);
  const int64_t total = L * layer(h, 20, 20, 128, E, F, 2) + 2 * V * h + h;
  EXPECT_EQ(total, 24'869'091'840);  // the MoE decoder's "24.9B"
  // With the vision tower (idefics3_vision: 27 SigLIP layers of 1,152, 4,900 positions:
  // 417,792,240) and the projector (queries, cross-attention, MLP to 2,560: 20,427,136), neither
  // built: the model card's "25.3B".
  EXPECT_EQ(total + 417'792'240 + 20'427'136, 25'307'311'216);
  const int64_t active = total - L * experts + L * experts / E * 6;
  EXPECT_EQ(active, 4'115'151'360);
  EXPECT_EQ(active - V * h, 3'858'250'240);      // without the embedding lookup: "3.9B"
  EXPECT_EQ(active - 2 * V * h, 3'601'349'120);  // nor the output layer: the paper's "3.5B"

  const ModelConfig c = find_model_config("aria");
  EXPECT_EQ(c.model_type, "aria_text");
  EXPECT_EQ(c.multimodal_model_type, "aria");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);  // the outer file's
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_hidden_layers, L);
  EXPECT_EQ(c.num_attention_heads, 20);
  EXPECT_EQ(c.num_key_value_heads, 20);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.num_local_experts, E);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.shared_expert_intermediate_size, 2 * F);
  EXPECT_EQ(c.max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(2));
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "AriaTextForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("attention"), L * attention);
  EXPECT_EQ(kinds.at("router"), L * E * h);
  EXPECT_EQ(kinds.at("experts"), L * experts);
  EXPECT_EQ(kinds.at("mlp"), L * shared);
  EXPECT_EQ(kinds.at("norm"), L * 2 * h + h);
  EXPECT_EQ(kinds.at("embedding"), V * h);
  EXPECT_EQ(kinds.at("lm_head"), V * h);
  EXPECT_EQ(kinds.count("other"), 0u);
  EXPECT_EQ(layers_path(c), "model.layers");
  // The plan writes the language model alone; it reads back equal (the outer model_type is not
  // written).
  ModelConfig text = c;
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

TEST(AriaTextModels, NamesShapesAndOrderOfOneLayerAndTheTop) {
  const ModelConfig c = first_layers(find_model_config("aria"), 2);
  const ModulePtr m = build_model(c);
  const int64_t h = 2560, E = 64, F = 1664;
  // AriaTextDecoderLayer: self_attn, mlp (router, experts, shared_experts), then the two norms.
  EXPECT_EQ(shapes_under(*m, "model.layers.1."),
            (Shapes{{"self_attn.q_proj.weight", {h, h}},
                    {"self_attn.k_proj.weight", {h, h}},
                    {"self_attn.v_proj.weight", {h, h}},
                    {"self_attn.o_proj.weight", {h, h}},
                    {"mlp.router.weight", {E, h}},
                    {"mlp.experts.fc1.weight", {E, h, 2 * F}},
                    {"mlp.experts.fc2.weight", {E, F, h}},
                    {"mlp.shared_experts.gate_proj.weight", {2 * F, h}},
                    {"mlp.shared_experts.up_proj.weight", {2 * F, h}},
                    {"mlp.shared_experts.down_proj.weight", {h, 2 * F}},
                    {"input_layernorm.weight", {h}},
                    {"post_attention_layernorm.weight", {h}}}));
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_NE(m->get_parameter("lm_head.weight").impl(),
            m->get_parameter("model.embed_tokens.weight").impl());
  // rotary_emb comes last in AriaTextModel, its inv_freq not persistent.
  EXPECT_EQ(m->get_submodule("model").named_children().back().first, "rotary_emb");
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  // transformers' class names; fc1 and fc2 are grouped-experts projections [E, in, out].
  EXPECT_EQ(m->get_submodule("model").type_name(), "AriaTextModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "AriaTextDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "AriaTextAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "AriaTextMoELayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.router").type_name(), "Linear");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.experts").type_name(), "AriaExperts");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.shared_experts").type_name(),
            "AriaSharedExpertsMLP");
  const std::tuple<const char*, GroupedExperts::Projection, int64_t> projections[] = {
      {"mlp.experts.fc1", GroupedExperts::Projection::kFirst, 2},
      {"mlp.experts.fc2", GroupedExperts::Projection::kSecond, 1}};
  for (const auto& [name, which, parts] : projections) {
    const Module& p = m->get_submodule(std::string("model.layers.1.") + name);
    EXPECT_EQ(p.type_name(), "AriaGroupedExpertsGemm") << name;
    const auto* grouped = dynamic_cast<const GroupedExperts*>(&p);
    ASSERT_NE(grouped, nullptr) << name;
    ASSERT_TRUE(grouped->projection().has_value()) << name;
    EXPECT_EQ(*grouped->projection(), which) << name;
    EXPECT_EQ(grouped->projection_parts(), parts) << name;  // fc1: [projection; gate]
    EXPECT_EQ(grouped->layout(), GroupedExperts::Layout::kInOut) << name;
    EXPECT_FALSE(grouped->shared()) << name;  // routed: split by expert parallelism
  }
}

// V 128, h 64, 2 layers, 4 heads and 2 key-value heads of 16, 4 experts of 32 (top 2), 2 shared
// (64 wide), untied, pad_token_id 2 (AriaTextConfig's).
nlohmann::json tiny() {
  return {{"model_type", "aria_text"}, {"vocab_size", 128},
          {"hidden_size", 64},         {"intermediate_size", 32},
          {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},  {"max_position_embeddings", 256},
          {"moe_num_experts", 4},      {"moe_topk", 2},
          {"torch_dtype", "bfloat16"}};
}

TEST(AriaTextModels, TinyConfigByHandAndItsInits) {
  // q 4,096, k and v 2,048 each, o 4,096; router 256; fc1 4 x 64 x 64 = 16,384, fc2 4 x 32 x 64
  // = 8,192; shared 3 x 64 x 64 = 12,288; norms 128: a layer 49,536. Two layers 99,072;
  // embed_tokens and lm_head 8,192 each, norm 64.
  EXPECT_EQ(4096 + 2048 + 2048 + 4096 + 256 + 16384 + 8192 + 12288 + 128, 49'536);
  EXPECT_EQ(layer(64, 4, 2, 16, 4, 32, 2), 49'536);
  const int64_t total = 2 * 49'536 + 2 * 8'192 + 64;
  EXPECT_EQ(total, 115'520);
  // Active: 2 of the 4 experts (24,576 a layer).
  const int64_t active = total - 2 * 24'576 + 2 * 24'576 / 4 * 2;
  EXPECT_EQ(active, 90'944);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.shared_expert_intermediate_size, 64);  // moe_num_shared_experts' default 2
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(2));
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.rope_theta, 10000.0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // AriaTextPreTrainedModel._init_weights: Linear weights and both fc weights normal(0, 0.02),
  // embed_tokens normal with its padding row (2) zero, norms one.
  std::map<std::string, ParameterInit> inits;
  for (const NamedInit& i : parameter_inits(*m, c)) inits[i.name] = i.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const std::string b = "model.layers.1.";
  for (const char* w : {"self_attn.q_proj.weight", "mlp.router.weight", "mlp.experts.fc1.weight",
                        "mlp.experts.fc2.weight", "mlp.shared_experts.down_proj.weight"}) {
    EXPECT_EQ(inits.at(b + w), normal) << w;
  }
  EXPECT_EQ(inits.at("lm_head.weight"), normal);
  EXPECT_EQ(inits.at(b + "input_layernorm.weight"), one);
  EXPECT_EQ(inits.at("model.norm.weight"), one);
  EXPECT_EQ(inits.at("model.embed_tokens.weight").zero_row, 2);
}

TEST(AriaTextModels, KeysDefaultsAndRoundTrips) {
  // Biases: attention_bias on q, k, v and o; mlp_bias on the shared experts only (fc1 and fc2
  // have none).
  nlohmann::json j = tiny();
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  j["moe_num_shared_experts"] = 3;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  j["attention_dropout"] = 0.1;
  j["hidden_act"] = "gelu";
  j["rms_norm_eps"] = 1e-5;
  j["tie_word_embeddings"] = true;
  j["pad_token_id"] = nullptr;
  const ModelConfig c = parse_model_config(j, "variant.json");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.shared_expert_intermediate_size, 96);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 2.0);
  EXPECT_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_FALSE(c.pad_token_id.has_value());
  const ModulePtr m = build_model(c);
  // 115,520 + biases (64 + 32 + 32 + 64) x 2 + a third shared expert (3 x 64 x 32) x 2 + the
  // shared biases (96 + 96 + 64) x 2, less the tied lm_head 8,192.
  EXPECT_EQ(m->parameters_numel(),
            115'520 + 2 * 192 + 2 * 3 * 64 * 32 + 2 * (96 + 96 + 64) - 8'192);
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp.experts."), (Names{"fc1.weight", "fc2.weight"}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").impl(),
            m->get_parameter("model.embed_tokens.weight").impl());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The converted files' moe_intermediate_size, equal to intermediate_size, and transformers 5's
  // rope_parameters (the base) are read.
  j = tiny();
  j["moe_intermediate_size"] = 32;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e6}};
  const ModelConfig r = parse_model_config(j, "converted.json");
  EXPECT_EQ(r.rope_theta, 5e6);
  EXPECT_EQ(r.intermediate_size, 32);
  // An explicit head_dim other than hidden / heads (the heads must still divide hidden_size).
  j = tiny();
  j["head_dim"] = 8;
  const ModelConfig narrow_heads = parse_model_config(j, "head_dim.json");
  EXPECT_EQ(
      build_model(narrow_heads)->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
      DimVector({32, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(narrow_heads), "round trip"), narrow_heads);
}

TEST(AriaTextModels, RefusedOptionsNameTheirKeys) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); }, ThrowsMessage<Error>(HasSubstr(what)))
        << what;
  };
  nlohmann::json j = tiny();
  j["partial_rotary_factor"] = 0.5;
  refused(j,
          "field 'partial_rotary_factor': partial_rotary_factor 0.5: AriaTextAttention rotates "
          "every channel of q and k; expected 1 (or none)");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  refused(j, "field 'rope_parameters': partial_rotary_factor 0.25");
  j = tiny();
  j["moe_num_shared_experts"] = 0;
  refused(j,
          "field 'moe_num_shared_experts': 0: AriaTextMoELayer always builds its shared experts");
  j = tiny();
  j["moe_intermediate_size"] = 16;
  refused(j,
          "field 'moe_intermediate_size': 16: transformers' aria_text builds experts of "
          "intermediate_size 32; expected 32");
  j = tiny();
  j["hidden_size"] = 66;
  j["head_dim"] = 16;
  refused(j,
          "field 'num_attention_heads': 4 does not divide hidden_size 66 "
          "(AriaTextConfig.validate_architecture requires it)");
  j = tiny();
  j["hidden_act"] = "xielu";
  refused(j, "field 'hidden_act': 'xielu' has learned parameters");
  j = tiny();
  j.erase("moe_num_experts");
  refused(j, "field 'moe_num_experts': missing; it is required for this model_type");
  j = tiny();
  j["moe_topk"] = 5;
  refused(j, "field 'moe_topk' (num_experts_per_tok): must be in [1, num_local_experts = 4]");
  j = tiny();
  j["intermediate_size"] = "32";
  refused(j, "field 'intermediate_size': expected an integer");
}

// Note [Multimodal configs]: AriaConfig builds AriaTextConfig from any text_config that names a
// model_type (the original release's "aria_moe_lm" among them), AriaTextConfig() when the file
// has none, and ties lm_head by its own tie_word_embeddings (AriaForConditionalGeneration owns
// it; default false).
TEST(AriaTextModels, MultimodalWrapperParsesToTheLanguageModel) {
  nlohmann::json text = tiny();
  text.erase("torch_dtype");
  nlohmann::json j = {{"model_type", "aria"},
                      {"text_config", text},
                      {"vision_config", {{"model_type", "idefics3_vision"}, {"hidden_size", 32}}},
                      {"torch_dtype", "bfloat16"}};
  ModelConfig want = parse_model_config(tiny(), "tiny");
  want.multimodal_model_type = "aria";
  EXPECT_EQ(parse_model_config(j, "wrapper"), want);
  j["text_config"].erase("model_type");
  EXPECT_EQ(parse_model_config(j, "no text type"), want);
  j["text_config"]["model_type"] = "aria_moe_lm";
  EXPECT_EQ(parse_model_config(j, "original release"), want);
  // The text config's tie is not the one transformers reads; the wrapper's is.
  j["text_config"]["tie_word_embeddings"] = true;
  EXPECT_FALSE(parse_model_config(j, "text tie").tie_word_embeddings);
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(j, "outer tie").tie_word_embeddings);
  j["text_config"]["model_type"] = "llama";
  EXPECT_THAT([&] { parse_model_config(j, "other text"); },
              ThrowsMessage<Error>(
                  HasSubstr("'llama', but 'aria' always builds its text model aria_text")));
}

TEST(AriaTextModels, ForwardMatmulsByHandAndTheOps) {
  // Batch 2 of 8 tokens (T = 16), h 64, 4 heads and 2 key-value heads of 16, 4 experts of 32, top
  // 2: each expert runs on its expected ceil(16 x 2 / 4) = 8 picks.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  auto matmul = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  const std::string b = "model.layers.1.";
  EXPECT_DOUBLE_EQ(matmul(b + "self_attn.q_proj"), 2.0 * 16 * 64 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "self_attn.k_proj"), 2.0 * 16 * 64 * 32);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.router"), 2.0 * 16 * 64 * 4);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.experts.fc1"), 2.0 * 4 * 8 * 64 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.experts.fc2"), 2.0 * 4 * 8 * 32 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "mlp.shared_experts"), 3 * 2.0 * 16 * 64 * 64);
  // QK^T and PV over 2 x 4 heads of 8 x 8 scores, 16 wide.
  EXPECT_DOUBLE_EQ(matmul(b + "self_attn") - 2 * 2.0 * 16 * 64 * 64 - 2 * 2.0 * 16 * 64 * 32,
                   2.0 * 2 * 2 * 4 * 8 * 8 * 16);
  for (const OpNode& node : g.nodes()) {
    if (node.op != "scaled_dot_product_attention" || node.module != b + "self_attn") continue;
    ASSERT_GE(node.inputs.size(), 3u);
    EXPECT_EQ(g.tensor(node.inputs[0]).sizes, DimVector({2, 4, 8, 16}));
    EXPECT_EQ(g.tensor(node.inputs[1]).sizes, DimVector({2, 2, 8, 16}));  // grouped-query
  }
  // One batched GEMM per expert projection, silu(projection) * gate between them (silu hard-coded
  // in AriaExperts), the shared experts' hidden_act; the top k's softmax in the model's dtype (no
  // cast to float32).
  EXPECT_EQ(ops_in(g, "bmm", b + "mlp.experts.fc1"), 1);
  EXPECT_EQ(ops_in(g, "bmm", b + "mlp.experts.fc2"), 1);
  EXPECT_EQ(ops_in(g, "silu", b + "mlp.experts"), 1);
  EXPECT_EQ(ops_under(g, "silu", b + "mlp.shared_experts"), 1);
  EXPECT_EQ(ops_in(g, "softmax", b + "mlp"), 1);
  EXPECT_EQ(ops_under(g, "to", b + "mlp"), 0);
  EXPECT_EQ(ops_under(g, "rms_norm", b), 2);
  EXPECT_DOUBLE_EQ(matmul("lm_head"), 2.0 * 16 * 64 * 128);
  // With gelu the shared experts change activation and the routed experts keep silu.
  nlohmann::json j = tiny();
  j["hidden_act"] = "gelu";
  const OpGraph gelu = trace_model_forward(*build_model(parse_model_config(j, "gelu")), 2, 8);
  EXPECT_EQ(ops_in(gelu, "silu", b + "mlp.experts"), 1);
  EXPECT_EQ(ops_under(gelu, "silu", b + "mlp.shared_experts"), 0);
}

TEST(AriaTextModels, TrainingStepOfTheTinyModel) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  // Block 0's forward matmuls (T = 16, 8 picks an expert): q and o 131,072 each, k and v 65,536
  // each, attention 32,768; router 8,192, fc1 262,144, fc2 131,072; shared experts 3 x 131,072.
  double block0 = 0, backward0 = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    block0 += op.matmul_flops;
    if (op.op == "bmm") backward0 += op.backward_matmul_flops;
  }
  EXPECT_DOUBLE_EQ(block0, 2 * 131072.0 + 2 * 65536 + 32768 + 8192 + 262144 + 131072 + 3 * 131072);
  EXPECT_DOUBLE_EQ(block0, 1'220'608.0);
  // The two grouped GEMMs' backward: both input and weight gradients, twice their forward.
  EXPECT_DOUBLE_EQ(backward0, 2 * (262144.0 + 131072));
}

TEST(AriaTextModels, ACheckpointOfTheMultimodalModelFitsItsLanguageModel) {
  // The Hub's files (transformers 4.48's layout) name the language model language_model.model.*
  // and language_model.lm_head.*, beside the vision tower and the projector, which are listed
  // outside the language model, neither loaded nor unexpected.
  nlohmann::json text = tiny();
  text.erase("torch_dtype");
  const nlohmann::json config = {{"model_type", "aria"},
                                 {"torch_dtype", "bfloat16"},
                                 {"text_config", text},
                                 {"vision_config", {{"model_type", "idefics3_vision"}}}};
  const ModulePtr model = build_model(parse_model_config(config, "config.json"));
  const ModelSource src = test::check_stored_as(
      config, *model, [](const std::string& n) { return "language_model." + n; },
      {{"vision_tower.encoder.layers.0.mlp.fc1.weight", "BF16", {4304, 1152}},
       {"multi_modal_projector.query", "BF16", {256, 1152}}});
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_EQ(src.check.language_model_prefix, "language_model.");
  EXPECT_EQ(src.check.outside_language_model.size(), 2u);
}

TEST(AriaTextModels, FlagsAndTheTensorParallelPlan) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.experts_class, "AriaExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.hf_class_prefix, "AriaText");
  EXPECT_EQ(f.file_key("num_local_experts"), "moe_num_experts");
  EXPECT_EQ(f.file_key("num_experts_per_tok"), "moe_topk");
  EXPECT_EQ(f.file_key("shared_expert_intermediate_size"), "moe_num_shared_experts");
  EXPECT_FALSE(f.init_rules.empty());
  // Note [Aria tensor parallelism] in family_aria_text.cpp; tests/planner/cost/
  // aria_text_tensor_parallel_test.cpp applies it.
  using Rule = std::tuple<std::string, std::string, int64_t>;
  std::vector<Rule> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  EXPECT_EQ(rules, (std::vector<Rule>{{"model.embed_tokens", "rowwise", 1},
                                      {"model.layers.*.self_attn.q_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.k_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.v_proj", "colwise", 1},
                                      {"model.layers.*.self_attn.o_proj", "rowwise", 1},
                                      {"model.layers.*.mlp.experts.fc1", "experts", 1},
                                      {"model.layers.*.mlp.experts.fc2", "experts", 1},
                                      {"model.layers.*.mlp.shared_experts.gate_proj", "colwise", 1},
                                      {"model.layers.*.mlp.shared_experts.up_proj", "colwise", 1},
                                      {"model.layers.*.mlp.shared_experts.down_proj", "rowwise", 1},
                                      {"lm_head", "colwise", 1}}));
  const ModulePtr m = build_model(c);
  for (const auto& [pattern, style, parts] : rules) {
    std::string fqn = pattern;
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "1");
    std::string want = "Linear";
    if (style == "experts") want = "AriaGroupedExpertsGemm";
    if (fqn == "model.embed_tokens") want = "Embedding";
    EXPECT_EQ(m->get_submodule(fqn).type_name(), want) << fqn;
  }
  // The router is in no rule: replicated.
  for (const TensorParallelRule& r : f.tp_plan) EXPECT_NE(r.pattern, "model.layers.*.mlp.router");
  // Every layer is one kind: full attention with RoPE, and routed experts.
  const LayerStack stack = layer_stack(find_model_config("aria"));
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].ffn, FfnKind::kMoe);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kFull);
  EXPECT_TRUE(stack.kinds[0].rope);
  EXPECT_EQ(stack.count(0), 28);
}

TEST(AriaTextModels, AConfigBuiltInCodeKeepsTheLayout) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.shared_expert_intermediate_size = 0;
  EXPECT_THAT([&] { build_model(c); },
              ThrowsMessage<Error>(HasSubstr("aria_text: shared experts of width 0")));
  c = parse_model_config(tiny(), "tiny.json");
  c.partial_rotary_factor = 0.5;
  EXPECT_THAT([&] { build_model(c); },
              ThrowsMessage<Error>(HasSubstr("aria_text: partial_rotary_factor 0.5")));
  c = parse_model_config(tiny(), "tiny.json");
  c.dense_layers = {0};
  EXPECT_THAT([&] { build_model(c); }, ThrowsMessage<Error>(HasSubstr("expected no layer types")));
}

}  // namespace
}  // namespace shardplan::tensor
