// diffllama (DiffLlama, the differential attention of Ye et al. 2024, arXiv:2410.05258, in Llama's
// decoder) against hand formulas written here from transformers 5's modeling_diffllama.py. h
// hidden, V vocabulary, F MLP width, H query heads and K key-value heads of d, L layers:
//   self_attn  lambda_q1, lambda_k1, lambda_q2, lambda_k2 [d] (before the projections: the
//              attention's own parameters), q_proj [H d, h], k_proj, v_proj [K d, h],
//              o_proj [h, H d]; groupnorm (RMSNorm over 2 d) has no weight
//   mlp        gate_proj, up_proj [F, h], down_proj [h, F], no biases
//   norms      input_layernorm, post_attention_layernorm [h]; model.norm [h]
//   total      L (2 h H d + 2 h K d + 4 d + 3 h F + 2 h) + 2 V h + h (untied)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t V, h, F, L, H, K, d;
};

int64_t hand_layer(const Sizes& s) {
  return 2 * s.h * s.H * s.d + 2 * s.h * s.K * s.d + 4 * s.d + 3 * s.h * s.F + 2 * s.h;
}
int64_t hand_total(const Sizes& s) { return s.L * hand_layer(s) + 2 * s.V * s.h + s.h; }

// DiffLlamaConfig's defaults (configs/models/diffllama-1b.json): 2,048 wide, 16 layers of 32
// heads of 64 (as many key-value heads), MLP 8,192, vocabulary 32,000 untied.
constexpr Sizes kDefaults{32000, 2048, 8192, 16, 32, 32, 64};

TEST(DiffLlamaModels, ShippedConfigMatchesTheHandTotal) {
  // A layer: attention 4 x 2,048 x 2,048 = 16,777,216, lambdas 4 x 64 = 256, MLP 3 x 2,048 x
  // 8,192 = 50,331,648, norms 4,096: 67,113,216; 16 of them 1,073,811,456, plus embed_tokens and
  // lm_head 2 x 65,536,000 and the final norm 2,048: 1,204,885,504 ("1B", the 1.2B of Llama's
  // shape at these sizes: the lambdas add 4,096 in all).
  EXPECT_EQ(hand_layer(kDefaults), 67'113'216);
  EXPECT_EQ(hand_total(kDefaults), 1'204'885'504);
  const ModelConfig c = find_model_config("diffllama-1b");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_DOUBLE_EQ(c.lambda_std_dev, 0.1);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_FALSE(c.rope_scaling.has_value());
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "DiffLlamaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 1'204'885'504);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // One layer kind: full attention, dense.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kFull);
}

TEST(DiffLlamaModels, NamesShapesAndOrderAreTransformers) {
  const ModulePtr m = build_model(find_model_config("diffllama-1b"));
  // The lambdas are DiffLlamaAttention's own parameters: named_parameters lists a module's own
  // before its children's.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"self_attn.lambda_q1", {64}},
                          {"self_attn.lambda_k1", {64}},
                          {"self_attn.lambda_q2", {64}},
                          {"self_attn.lambda_k2", {64}},
                          {"self_attn.q_proj.weight", {2048, 2048}},
                          {"self_attn.k_proj.weight", {2048, 2048}},
                          {"self_attn.v_proj.weight", {2048, 2048}},
                          {"self_attn.o_proj.weight", {2048, 2048}},
                          {"mlp.gate_proj.weight", {8192, 2048}},
                          {"mlp.up_proj.weight", {8192, 2048}},
                          {"mlp.down_proj.weight", {2048, 8192}},
                          {"input_layernorm.weight", {2048}},
                          {"post_attention_layernorm.weight", {2048}}}));
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "DiffLlamaModel");
  EXPECT_EQ(m->get_submodule("model.layers.15").type_name(), "DiffLlamaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "DiffLlamaAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "DiffLlamaMLP");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "DiffLlamaRotaryEmbedding");
  // The weightless groupnorm is a module of the attention, after its projections.
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn.groupnorm").type_name(), "RMSNorm");
  EXPECT_TRUE(names_under(*m, "model.layers.0.self_attn.groupnorm").empty());
  EXPECT_EQ(block_kind(*m, "model.layers.0.self_attn.lambda_q1"), "attention");
  // The rotary buffer: half of the 64-wide head.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{32}));
}

TEST(DiffLlamaModels, InitIsDiffLlamaPreTrainedModels) {
  // PreTrainedModel's Linear, Embedding and RMSNorm fills, then each lambda normal(0,
  // lambda_std_dev) (DiffLlamaPreTrainedModel._init_weights).
  nlohmann::json j = to_hf_json(find_model_config("diffllama-1b"));
  j["num_hidden_layers"] = 1;
  j["lambda_std_dev"] = 0.25;
  j["initializer_range"] = 0.01;
  const ModelConfig c = parse_model_config(j, "one-layer.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit lambda{ParameterInit::Kind::kNormal, 0.0, 0.25};
  for (const char* name : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) {
    EXPECT_EQ(init.at(std::string("model.layers.0.self_attn.") + name), lambda) << name;
  }
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.01};
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.mlp.down_proj.weight"), normal);
  EXPECT_EQ(init.at("lm_head.weight"), normal);
  EXPECT_EQ(init.at("model.embed_tokens.weight"), normal);  // no pad_token_id: no zero row
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  EXPECT_EQ(init.at("model.layers.0.input_layernorm.weight"), one);
  EXPECT_EQ(init.at("model.norm.weight"), one);
}

nlohmann::json tiny() {
  return {{"model_type", "diffllama"}, {"vocab_size", 128},
          {"hidden_size", 64},         {"intermediate_size", 96},
          {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},  {"max_position_embeddings", 256},
          {"torch_dtype", "bfloat16"}};
}

TEST(DiffLlamaModels, TinyConfigByHand) {
  // A layer: q and o 2 x 64 x 64 = 8,192, k and v 2 x 64 x 32 = 4,096, lambdas 4 x 16 = 64, MLP
  // 3 x 64 x 96 = 18,432, norms 128: 30,912; two of them, embed_tokens and lm_head 2 x 8,192,
  // norm 64: 78,272.
  const Sizes s{128, 64, 96, 2, 4, 2, 16};
  EXPECT_EQ(hand_layer(s), 30'912);
  EXPECT_EQ(hand_total(s), 78'272);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.lambda_std_dev, 0.1);  // the class's default
  EXPECT_EQ(build_model(c)->parameters_numel(), 78'272);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attention_bias on q, k, v and o: 2 x (64 + 32 + 32 + 64).
  j["attention_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(biased)->parameters_numel(), 78'272 + 384);
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  // Tied: lm_head is the embedding.
  j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 78'272 - 8192);
  // A head_dim of its own (the heads then need not span hidden_size): 4 x 32 wide q.
  j = tiny();
  j["head_dim"] = 32;
  const ModelConfig wide = parse_model_config(j, "tiny.json");
  EXPECT_EQ(build_model(wide)->parameters_numel(), hand_total({128, 64, 96, 2, 4, 2, 32}));
  EXPECT_EQ(parse_model_config(to_hf_json(wide), "round trip"), wide);
}

TEST(DiffLlamaModels, ClassDefaultsFillWhatTheFileOmits) {
  // DiffLlamaConfig(): the shipped config's sizes, float32.
  const nlohmann::json defaults = {{"model_type", "diffllama"}};
  const ModelConfig c = parse_model_config(defaults, "defaults.json");
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_hidden_layers, 16);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(build_model(c)->parameters_numel(), hand_total(kDefaults));
  ModelConfig shipped = find_model_config("diffllama-1b");
  shipped.torch_dtype = DType::kFloat32;
  EXPECT_EQ(c, shipped);
  // No key-value heads: as many as the file's heads (DiffLlamaConfig.__post_init__), not 32.
  const nlohmann::json heads = {{"model_type", "diffllama"}, {"num_attention_heads", 16}};
  const ModelConfig sixteen = parse_model_config(heads, "sixteen.json");
  EXPECT_EQ(sixteen.num_key_value_heads, 16);
  EXPECT_EQ(sixteen.head_dim, 128);
}

TEST(DiffLlamaModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "diffllama.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("num_key_value_heads", 1, "1 is odd; DiffLlamaAttention cuts the values");
  refused("attention_dropout", 0.1, "no dropout of its differential attention");
  refused("attention_dropout", nullptr, "is null");
  refused("lambda_std_dev", nullptr, "is null");
  refused("lambda_std_dev", -0.1, "expected a finite standard deviation >= 0");
  refused("hidden_act", "xielu", "not built");
  // DiffLlamaModel masks every layer causally in full: sliding layer types describe another
  // model (refused as a key the family does not read).
  refused("layer_types", {"sliding_attention", "full_attention"}, "does not build it");
}

TEST(DiffLlamaModels, EachLayerRunsTwoAttentionCallsAndTheDifferentialCombination) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const double B = 2, S = 16, T = B * S, h = 64, H = 4, K = 2, d = 16;
  const std::string a = "model.layers.1.self_attn";
  // q, k, v and o_proj, then two calls of all H heads at width d: each Q K^T and scores x V,
  // 4 B H S S d (a causal mask skips no work in the count).
  EXPECT_DOUBLE_EQ(g.module_totals().at(a).matmul_flops,
                   2 * T * h * (H * d + 2 * K * d) + 2 * T * H * d * h + 2 * 4 * B * H * S * S * d);
  EXPECT_DOUBLE_EQ(g.module_totals().at(a).matmul_flops, 1'048'576);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", a), 2);
  // rotate_half's cat for q and for k, each half of v tiled back (Tensor.repeat), the two
  // outputs side by side: five.
  EXPECT_EQ(ops_in(g, "cat", a), 5);
  // lambda: two exp(sum(...)) of the [d] vectors.
  EXPECT_EQ(ops_in(g, "exp", a), 2);
  EXPECT_EQ(ops_in(g, "sum", a), 2);
  // The differential output normed over 2 d, no weight.
  EXPECT_EQ(ops_in(g, "rms_norm", a + ".groupnorm"), 1);
  // The MLP as Llama's: three [T, h] x [h, F] products.
  EXPECT_DOUBLE_EQ(g.module_totals().at("model.layers.1.mlp").matmul_flops, 3 * 2 * T * h * 96);
}

TEST(DiffLlamaModels, TrainingTraceCountsBothAttentionCalls) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double linear = 0, linear_backward = 0, core = 0;
  int cores = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.call < 0) continue;
    if (!st.calls[static_cast<size_t>(op.call)].fqn.starts_with("model.layers.0.self_attn")) {
      continue;
    }
    if (op.op == "linear") {
      linear += op.matmul_flops;
      linear_backward += op.backward_matmul_flops;
    } else if (op.op == "scaled_dot_product_attention") {
      ++cores;
      core += op.matmul_flops;
    }
  }
  // q 64, k 32, v 32 and o_proj 64 x 64 over 32 tokens; both calls 2 x 4 x 2 x 4 x 16 x 16 x 16.
  EXPECT_DOUBLE_EQ(linear, 2.0 * 32 * 64 * (64 + 32 + 32) + 2.0 * 32 * 64 * 64);
  EXPECT_DOUBLE_EQ(linear, 786'432);
  EXPECT_DOUBLE_EQ(linear_backward, 2 * linear);
  EXPECT_EQ(cores, 2);
  EXPECT_DOUBLE_EQ(core, 262'144);
}

TEST(DiffLlamaModels, FlagsAndTensorParallelPlan) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_FALSE(f.moe);
  EXPECT_EQ(f.attentions_per_layer, 2);
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.hf_class_prefix, "DiffLlama");
  EXPECT_EQ(f.file_key("norm_eps"), "rms_norm_eps");
  EXPECT_EQ(f.file_key("qkv_bias"), "attention_bias");
  // Note [DiffLlama tensor parallelism]: q, k and v each split as two halves (a differential
  // head reads one head from each), o_proj row-parallel by whole differential heads; the MLP as
  // Llama's; the embedding and lm_head by vocabulary.
  const std::vector<std::tuple<std::string, std::string, int64_t>> want = {
      {"model.embed_tokens", "rowwise", 1},
      {"model.layers.*.self_attn.q_proj", "colwise", 2},
      {"model.layers.*.self_attn.k_proj", "colwise", 2},
      {"model.layers.*.self_attn.v_proj", "colwise", 2},
      {"model.layers.*.self_attn.o_proj", "rowwise", 1},
      {"model.layers.*.mlp.gate_proj", "colwise", 1},
      {"model.layers.*.mlp.up_proj", "colwise", 1},
      {"model.layers.*.mlp.down_proj", "rowwise", 1},
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
}

}  // namespace
}  // namespace shardplan::tensor
