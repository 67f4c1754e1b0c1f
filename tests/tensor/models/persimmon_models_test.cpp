// persimmon (Adept's Persimmon-8B; Fuyu-8B's language model) against hand formulas written here
// from transformers 5's configuration_persimmon.py, modeling_persimmon.py and
// configuration_fuyu.py, and the figure Adept published (its release post: "9.3B" parameters,
// "equivalent to an 8B parameter model" since the input and output embeddings are separate). h
// hidden, V vocabulary, F intermediate_size, H heads of d = h / H:
//   self_attn  query_key_value [3h, h] + [3h], dense [h, h] + [h], with qk_layernorm q_layernorm
//              and k_layernorm [d] + [d] each (one nn.LayerNorm over head_dim for all heads)
//   mlp        dense_h_to_4h [F, h] + [F], dense_4h_to_h [h, F] + [h]
//   norms      input_layernorm, post_attention_layernorm, model.final_layernorm: [h] + [h]
//   model      embed_tokens [V, h], lm_head [V, h] (no bias) unless tied
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
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
#include "tensor/ops.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::ops_under;
using ::testing::HasSubstr;
using Names = std::vector<std::string>;

// The header's formula: a layer of width h, MLP width F and head width d, and the model.
int64_t persimmon_layer(int64_t h, int64_t F, int64_t d, bool qk_norm) {
  return (3 * h * h + 3 * h) + (h * h + h) + (qk_norm ? 4 * d : 0) + (h * F + F) + (F * h + h) +
         4 * h;
}
int64_t persimmon_total(int64_t V, int64_t h, int64_t L, int64_t F, int64_t d, bool qk_norm,
                        bool tied) {
  return V * h + L * persimmon_layer(h, F, d, qk_norm) + 2 * h + (tied ? 0 : V * h);
}

// The parameter names outside the repeated layers, in named_parameters order.
Names top_level_names(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("model.layers.")) out.push_back(p.name);
  }
  return out;
}

const Names kLayerNames = {"self_attn.query_key_value.weight", "self_attn.query_key_value.bias",
                           "self_attn.dense.weight",           "self_attn.dense.bias",
                           "self_attn.q_layernorm.weight",     "self_attn.q_layernorm.bias",
                           "self_attn.k_layernorm.weight",     "self_attn.k_layernorm.bias",
                           "mlp.dense_h_to_4h.weight",         "mlp.dense_h_to_4h.bias",
                           "mlp.dense_4h_to_h.weight",         "mlp.dense_4h_to_h.bias",
                           "input_layernorm.weight",           "input_layernorm.bias",
                           "post_attention_layernorm.weight",  "post_attention_layernorm.bias"};
const Names kTopLevelNames = {"model.embed_tokens.weight", "model.final_layernorm.weight",
                              "model.final_layernorm.bias", "lm_head.weight"};

TEST(PersimmonModels, Persimmon8BBaseMatchesTheHandTotal) {
  // adept/persimmon-8b-base: V 262,144, h 4,096, 36 layers of 64 heads of 64, F 16,384, untied.
  // A layer: query_key_value 3 x 4,096^2 + 12,288 = 50,343,936; dense 4,096^2 + 4,096 =
  // 16,781,312; q/k norms 4 x 64 = 256; the MLP 2 x 4,096 x 16,384 + 16,384 + 4,096 =
  // 134,238,208; two norms 16,384: 201,380,096. 36 of them 7,249,683,456; the embedding and
  // lm_head 1,073,741,824 each; final_layernorm 8,192: 9,397,175,296 ("9.3B" in Adept's post).
  // Tied (one table), 8,323,433,472: the "8B" it names the model by.
  const int64_t V = 262144, h = 4096, F = 16384;
  EXPECT_EQ(persimmon_layer(h, F, 64, true), 201'380'096);
  EXPECT_EQ(50'343'936 + 16'781'312 + 256 + 134'238'208 + 16'384, 201'380'096);
  const int64_t total = persimmon_total(V, h, 36, F, 64, true, false);
  EXPECT_EQ(total, 36 * int64_t{201'380'096} + 2 * int64_t{1'073'741'824} + 8'192);
  EXPECT_EQ(total, 9'397'175'296);
  EXPECT_EQ(persimmon_total(V, h, 36, F, 64, true, true), 8'323'433'472);

  const ModelConfig c = find_model_config("persimmon-8b-base");
  EXPECT_EQ(c.model_type, "persimmon");
  EXPECT_EQ(c.vocab_size, V);
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 64);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.max_position_embeddings, 16384);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);  // not in the file: PersimmonConfig's 0.5
  EXPECT_DOUBLE_EQ(c.rope_theta, 25000.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_TRUE(c.qk_norm_per_head);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_FALSE(c.lm_head_bias);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.6);  // the file's hidden_dropout
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.pad_token_id.has_value());
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "PersimmonForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."), kLayerNames);
  EXPECT_EQ(names_under(*m, "model.layers.35."), kLayerNames);
  EXPECT_EQ(top_level_names(*m), kTopLevelNames);
  EXPECT_EQ(m->get_parameter("model.layers.35.self_attn.query_key_value.weight").sizes(),
            DimVector({3 * h, h}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_layernorm.weight").sizes(),
            DimVector({64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.dense_4h_to_h.weight").sizes(), DimVector({h, F}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").dtype(), DType::kBFloat16);
  EXPECT_EQ(m->get_submodule("model").type_name(), "PersimmonModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "PersimmonDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "PersimmonAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "PersimmonMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn.q_layernorm").type_name(), "LayerNorm");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "PersimmonRotaryEmbedding");
  // inv_freq of int(64 x 0.5) = 32 rotated channels: 16 float32 frequencies, not saved.
  const Tensor inv_freq = m->get_buffer("model.rotary_emb.inv_freq");
  EXPECT_EQ(inv_freq.sizes(), DimVector({16}));
  EXPECT_EQ(inv_freq.dtype(), DType::kFloat32);
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(layer_stack(c).kinds.size(), 1u);  // one kind: dense, full attention, rotated
}

nlohmann::json tiny() {
  return {{"model_type", "persimmon"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"max_position_embeddings", 64},
          {"partial_rotary_factor", 0.5},
          {"rope_theta", 25000.0},
          {"hidden_dropout", 0.1},
          {"attention_dropout", 0.1},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(PersimmonModels, TinyConfigByHand) {
  // 4 heads of d = 16, 8 channels of each rotated. Attention: query_key_value 3 x 64 x 64 + 192
  // = 12,480, dense 4,096 + 64 = 4,160, q/k norms 4 x 16 = 64. MLP: 64 x 96 + 96 = 6,240 and
  // 96 x 64 + 64 = 6,208. Norms 4 x 64 = 256. A layer: 29,408; two: 58,816. Model: embed_tokens
  // 8,192, final_layernorm 128, lm_head 8,192: 75,328.
  const int64_t layer = 12'480 + 4'160 + 64 + 6'240 + 6'208 + 256;
  EXPECT_EQ(layer, 29'408);
  EXPECT_EQ(persimmon_layer(64, 96, 16, true), layer);
  const int64_t total = 2 * layer + 8'192 + 128 + 8'192;
  EXPECT_EQ(total, 75'328);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_TRUE(c.qk_norm_per_head);  // PersimmonConfig's default
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.1."), kLayerNames);
  EXPECT_EQ(top_level_names(*m), kTopLevelNames);
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.query_key_value.bias").sizes(),
            DimVector({192}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.k_layernorm.bias").sizes(), DimVector({16}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({4}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Tied (PersimmonForCausalLM's _tied_weights_keys): lm_head is the embedding, once.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  const ModelConfig tied = parse_model_config(j, "tied");
  const ModulePtr t = build_model(tied);
  EXPECT_EQ(t->parameters_numel(), total - 8'192);
  EXPECT_EQ(t->parameters_numel(), persimmon_total(128, 64, 2, 96, 16, true, true));
  EXPECT_EQ(top_level_names(*t), (Names{"model.embed_tokens.weight", "model.final_layernorm.weight",
                                        "model.final_layernorm.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(tied), "round trip"), tied);

  // qk_layernorm false: no q/k norms, 2 x 64 fewer: 75,200.
  j = tiny();
  j["qk_layernorm"] = false;
  const ModelConfig plain = parse_model_config(j, "no qk norms");
  EXPECT_FALSE(plain.qk_norm_per_head);
  const ModulePtr p = build_model(plain);
  EXPECT_EQ(p->parameters_numel(), 75'200);
  EXPECT_EQ(persimmon_total(128, 64, 2, 96, 16, false, false), 75'200);
  EXPECT_EQ(
      names_under(*p, "model.layers.0.self_attn."),
      (Names{"query_key_value.weight", "query_key_value.bias", "dense.weight", "dense.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
}

TEST(PersimmonModels, ClassDefaults) {
  // PersimmonConfig's defaults fill every key: Persimmon-8B's sizes, relu2, eps 1e-5, 16,384
  // positions, qk_layernorm, half of each head rotated, untied, no dropout; transformers 5's
  // RoPE base 10,000 (PersimmonConfig names none; 4.x's class said 25,000); float32 with no dtype.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "persimmon"}}, "bare");
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 16384);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_TRUE(c.qk_norm_per_head);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_EQ(build_model(c)->parameters_numel(), 9'397'175'296);
}

TEST(PersimmonModels, RopeParametersAndTheKeysTransformersIgnores) {
  // transformers 5's rope_parameters wins over the legacy keys.
  nlohmann::json j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 500000.0}, {"partial_rotary_factor", 0.25}};
  const ModelConfig r = parse_model_config(j, "rope_parameters");
  EXPECT_DOUBLE_EQ(r.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(r.partial_rotary_factor, 0.25);
  EXPECT_EQ(build_model(r)->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({2}));
  EXPECT_EQ(parse_model_config(to_hf_json(r), "round trip"), r);
  // A rope_scaling is kept and written back.
  j = tiny();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const ModelConfig scaled = parse_model_config(j, "rope_scaling");
  ASSERT_TRUE(scaled.rope_scaling.has_value());
  EXPECT_EQ(scaled.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(scaled), "round trip"), scaled);
  // num_key_value_heads (Persimmon-8B's file says 64) is not PersimmonConfig's: every head has its
  // own k and v whatever it says. A head_dim equal to hidden / heads (or 0) is the same model.
  j = tiny();
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 16;
  EXPECT_EQ(parse_model_config(j, "ignored"), parse_model_config(tiny(), "tiny"));
  j["head_dim"] = 0;
  EXPECT_EQ(parse_model_config(j, "ignored"), parse_model_config(tiny(), "tiny"));
}

TEST(PersimmonModels, WhatIsRefused) {
  const auto error = [](const nlohmann::json& j) {
    try {
      (void)parse_model_config(j, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json j = tiny();
  j["num_attention_heads"] = 5;
  EXPECT_THAT(error(j), HasSubstr("field 'num_attention_heads': 5 does not divide hidden_size 64 "
                                  "(PersimmonAttention splits hidden_size into its heads)"));
  j = tiny();
  j["head_dim"] = 32;
  EXPECT_THAT(error(j), HasSubstr("field 'head_dim': 32 is not hidden_size / num_attention_heads "
                                  "= 16; PersimmonAttention's heads are that wide"));
  // int(16 x 0.3125) = 5 rotated channels: RoPE rotates pairs (PersimmonRotaryEmbedding's table
  // would be 6 wide, and its products with the 5 channels fail).
  j = tiny();
  j["partial_rotary_factor"] = 0.3125;
  EXPECT_THAT(error(j), HasSubstr("the rotary width head_dim * partial_rotary_factor = 5 must be "
                                  "a positive even number"));
  j["partial_rotary_factor"] = 0.0;
  EXPECT_THAT(error(j), HasSubstr("partial_rotary_factor"));
  // PersimmonConfig's non-optional fields: a null fails its type check in transformers.
  for (const char* key : {"hidden_size", "qk_layernorm", "hidden_dropout", "layer_norm_eps"}) {
    j = tiny();
    j[key] = nullptr;
    EXPECT_THAT(error(j), HasSubstr(std::string("field '") + key +
                                    "': is null; PersimmonConfig expects a value (or no key)"));
  }
  j = tiny();
  j["hidden_act"] = "swiglu";
  EXPECT_THAT(error(j), HasSubstr("field 'hidden_act': 'swiglu' is not supported"));
  j = tiny();
  j["hidden_dropout"] = 1.0;
  EXPECT_THAT(error(j), HasSubstr("field 'hidden_dropout' (resid_dropout): a dropout probability "
                                  "must be in [0, 1), got 1"));
  // The embedding takes pad_token_id as nn.Embedding's padding_idx.
  j = tiny();
  j["pad_token_id"] = 128;
  EXPECT_THAT(error(j), HasSubstr("field 'pad_token_id': expected a token id in [-vocab_size, "
                                  "vocab_size) = [-128, 128)"));
}

TEST(PersimmonModels, InitIsPreTrainedModels) {
  // PersimmonPreTrainedModel has no _init_weights: PreTrainedModel's. Linear weights normal, biases
  // zero, the embedding normal with its pad_token_id row zero, every LayerNorm one and zero.
  nlohmann::json j = tiny();
  j["pad_token_id"] = 0;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  ParameterInit padded = normal;
  padded.zero_row = 0;
  EXPECT_EQ(init.at("model.embed_tokens.weight"), padded);
  EXPECT_EQ(init.at("model.layers.0.self_attn.query_key_value.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.query_key_value.bias"), zero);
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_layernorm.weight"), one);
  EXPECT_EQ(init.at("model.layers.0.self_attn.k_layernorm.bias"), zero);
  EXPECT_EQ(init.at("model.layers.1.mlp.dense_4h_to_h.bias"), zero);
  EXPECT_EQ(init.at("model.final_layernorm.weight"), one);
  EXPECT_EQ(init.at("lm_head.weight"), normal);
}

TEST(PersimmonModels, TheFusedQkvIsSplitPerHeadAndNormedBeforeRope) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  const std::string attn = "model.layers.0.self_attn";
  // q, k and v picked out of [B, S, heads, 3, d] (_split_heads' views), one LayerNorm over
  // head_dim each for q and k, RoPE on 8 of 16 channels of q and k (a neg and a cat of the
  // rotated half, a cat of the rotated and passed channels each).
  EXPECT_EQ(ops_in(g, "select", attn), 3);
  EXPECT_EQ(ops_in(g, "layer_norm", attn + ".q_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", attn + ".k_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "neg", attn), 2);
  EXPECT_EQ(ops_in(g, "cat", attn), 4);
  int64_t sdpa = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention" || n.module != attn) continue;
    ++sdpa;
    ASSERT_EQ(n.inputs.size(), 3u);
    for (const int64_t in : n.inputs) {
      EXPECT_EQ(g.tensor(in).sizes, DimVector({2, 4, 8, 16}));
      EXPECT_EQ(g.tensor(in).dtype, DType::kBFloat16);
    }
  }
  EXPECT_EQ(sdpa, 1);
  // relu(x)^2 in the MLP; two residual adds in the layer (attention, then MLP).
  EXPECT_EQ(ops_in(g, "relu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  // The projections of one layer, T = 2 x 8 tokens: 2 T h (3h + h) + 2 x 2 T h F = 2 x 16 x 64
  // x 256 + 4 x 16 x 64 x 96 = 524,288 + 393,216 = 917,504 FLOPs; lm_head 2 T h V = 262,144.
  double layer0 = 0, head = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "linear") continue;
    if (n.module.starts_with("model.layers.0.")) layer0 += n.matmul_flops;
    if (n.module == "lm_head") head += n.matmul_flops;
  }
  EXPECT_DOUBLE_EQ(layer0, 917'504.0);
  EXPECT_DOUBLE_EQ(head, 262'144.0);
  // Without qk_layernorm the heads go straight to RoPE.
  nlohmann::json j = tiny();
  j["qk_layernorm"] = false;
  const OpGraph plain = trace_model_forward(*build_model(parse_model_config(j, "plain")), 2, 8);
  EXPECT_EQ(ops_under(plain, "layer_norm", attn), 0);
}

TEST(PersimmonModels, TrainingStepDropsOutTheMlpOutputAndDoublesTheProjectionsBackward) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.input = empty({2, 8}, {.dtype = DType::kInt64});
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_EQ(st.totals.parameters, 75'328);
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].type, "PersimmonDecoderLayer");
  double forward = 0, backward = 0;
  int64_t dropouts = 0;
  for (const TrainingOp& op : st.ops) {
    const std::string& fqn = op.call >= 0 ? st.calls[static_cast<size_t>(op.call)].fqn : "";
    if (op.op == "dropout") ++dropouts;
    if (op.op != "linear" || !fqn.starts_with("model.layers.0.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // As by hand above; backward takes each product twice (the input's and the weight's gradient).
  EXPECT_DOUBLE_EQ(forward, 917'504.0);
  EXPECT_DOUBLE_EQ(backward, 2 * 917'504.0);
  // hidden_dropout on each layer's MLP output (none on the attention's, none on the embeddings;
  // attention_dropout is inside the fused attention).
  EXPECT_EQ(dropouts, 2);
}

TEST(PersimmonModels, TensorParallelPlanIsMegatronsOverWholeHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_TRUE(f.fused_qkv);
  EXPECT_EQ(f.fused_qkv_blocks, 0);  // laid out per head
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.hf_class_prefix, "Persimmon");
  EXPECT_TRUE(embeds_with_padding_idx(f));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.query_key_value", "colwise"},
      {"model.layers.*.self_attn.dense", "rowwise"},
      {"model.layers.*.mlp.dense_h_to_4h", "colwise"},
      {"model.layers.*.mlp.dense_4h_to_h", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Rows [heads, 3, d]: a contiguous split hands a rank whole heads with their q, k and v.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

// Fuyu-8B's file: model_type fuyu with the language model's config as text_config (FuyuConfig,
// whose default text model_type is persimmon). FuyuForCausalLM owns lm_head, so FuyuConfig's own
// tie_word_embeddings (false by default) decides the tie; vision_embed_tokens is not built.
nlohmann::json fuyu(nlohmann::json text) {
  return {{"model_type", "fuyu"},    {"patch_size", 30},          {"num_channels", 3},
          {"image_token_id", 71011}, {"torch_dtype", "bfloat16"}, {"text_config", std::move(text)}};
}

TEST(PersimmonModels, FuyuParsesToItsLanguageModel) {
  nlohmann::json text = tiny();
  text.erase("model_type");   // FuyuConfig's default text model
  text.erase("torch_dtype");  // the outer file's
  const ModelConfig c = parse_model_config(fuyu(text), "fuyu.json");
  EXPECT_EQ(c.model_type, "persimmon");
  EXPECT_EQ(c.multimodal_model_type, "fuyu");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_THAT(multimodal_note(c), HasSubstr("'fuyu' is a multimodal model"));
  EXPECT_EQ(build_model(c)->parameters_numel(), 75'328);
  // The text config's own tie does not decide; the outer one does.
  nlohmann::json outer = fuyu(tiny());
  outer["text_config"]["tie_word_embeddings"] = true;
  EXPECT_FALSE(parse_model_config(outer, "fuyu.json").tie_word_embeddings);
  outer["tie_word_embeddings"] = true;
  outer["text_config"]["tie_word_embeddings"] = false;
  const ModelConfig tied = parse_model_config(outer, "fuyu.json");
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_EQ(build_model(tied)->parameters_numel(), 75'328 - 8'192);
  // The language model alone: to_hf_json writes the persimmon config, which reads back equal.
  ModelConfig text_only = c;
  text_only.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text_only);
}

// Fuyu's checkpoints (saved by transformers 4) hold the language model as language_model.model.*
// and language_model.lm_head.*, beside the image patch projection vision_embed_tokens [h, 30 x 30
// x 3] and its bias: matched (Note [Multimodal checkpoints]) and listed outside it.
TEST(PersimmonModels, FuyuCheckpointHoldsTheLanguageModelUnderItsPrefix) {
  const nlohmann::json outer = fuyu(tiny());
  const ModulePtr model = build_model(parse_model_config(outer, "fuyu.json"));
  const std::vector<test::StEntry> extra = {{"vision_embed_tokens.weight", "BF16", {64, 2700}},
                                            {"vision_embed_tokens.bias", "BF16", {64}}};
  const ModelSource src = test::check_stored_as(
      outer, *model, [](const std::string& n) { return "language_model." + n; }, extra);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_EQ(src.check.language_model_prefix, "language_model.");
  EXPECT_EQ(src.check.outside_language_model.size(), 2u);
}

}  // namespace
}  // namespace shardplan::tensor
