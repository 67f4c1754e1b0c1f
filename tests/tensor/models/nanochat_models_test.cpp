// nanochat (Karpathy's nanochat) against hand formulas written here from transformers 5's
// modular_nanochat.py and configuration_nanochat.py. h hidden, V vocabulary, F MLP width,
// q = heads x head_dim, kv = kv heads x head_dim; no biases unless attention_bias:
//   self_attn  q_proj [q, h], k_proj, v_proj [kv, h], o_proj [h, q]; q_norm, k_norm (no weight)
//   mlp        fc1 [F, h], fc2 [h, F] (no gate, never a bias; relu2)
//   norms      input_layernorm, post_attention_layernorm, model.norm: NanoChatRMSNorm, no weight
// model.norm runs twice (on the embeddings, and after the last layer); logits 15 tanh(x / 15).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::Shapes;
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;
int64_t ops_named(const OpGraph& g, const std::string& op) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op;
  return n;
}

// A tiny config.
nlohmann::json tiny() {
  return {{"model_type", "nanochat"}, {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 256}, {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(NanoChatModels, TinyConfigMatchesTheHandTotal) {
  // h 64, 4 heads of 16 (q 64), 2 kv heads (kv 32), F 256, V 1,000 untied, 2 layers, no biases,
  // no norm parameters:
  //   q_proj 64*64 = 4,096; k_proj 64*32 = 2,048; v_proj 2,048; o_proj 4,096 -> 12,288
  //   fc1 64*256 = 16,384; fc2 256*64 = 16,384                              -> 32,768
  //   layer 45,056; 2 layers 90,112; embed 64,000; lm_head 64,000
  const int64_t layer = 12288 + 32768;
  EXPECT_EQ(layer, 45056);
  const int64_t total = 64000 + 2 * layer + 64000;
  EXPECT_EQ(total, 218112);
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.final_logit_softcapping, 15.0);
  ASSERT_TRUE(c.pad_token_id);
  EXPECT_EQ(*c.pad_token_id, 1);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "NanoChatForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "model.layers.0."), (Shapes{{"self_attn.q_proj.weight", {64, 64}},
                                                         {"self_attn.k_proj.weight", {32, 64}},
                                                         {"self_attn.v_proj.weight", {32, 64}},
                                                         {"self_attn.o_proj.weight", {64, 64}},
                                                         {"mlp.fc1.weight", {256, 64}},
                                                         {"mlp.fc2.weight", {64, 256}}}));
  EXPECT_EQ(names_under(*m, "model.norm."), Names{});  // parameterless
  EXPECT_EQ(
      names_under(*m, ""),
      (Names{"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
             "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.fc1.weight",
             "model.layers.0.mlp.fc2.weight", "model.layers.1.self_attn.q_proj.weight",
             "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight",
             "model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.fc1.weight",
             "model.layers.1.mlp.fc2.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{8}));  // all of d
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attention_bias: q, k, v and o: + 2 x (64 + 32 + 32 + 64) = + 384; the MLP never has one.
  nlohmann::json biased = tiny();
  biased["attention_bias"] = true;
  biased["mlp_bias"] = true;  // not a NanoChatConfig field: nothing
  const ModelConfig b = parse_model_config(biased, "biased");
  EXPECT_EQ(build_model(b)->parameters_numel(), total + 384);
  EXPECT_EQ(names_under(*build_model(b), "model.layers.0.mlp."),
            (Names{"fc1.weight", "fc2.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(b), "round trip"), b);
}

TEST(NanoChatModels, D32MatchesTheHandTotal) {
  // nanochat d32 (base_train.py: model_dim = 64 x depth, heads of 128, kv heads = heads, MLP
  // 4 x model_dim; vocabulary 65,536): h 2,048, 32 layers of 16 heads, F 8,192, untied.
  const int64_t V = 65536, h = 2048, F = 8192;
  const int64_t layer = 4 * h * h + 2 * h * F;
  EXPECT_EQ(layer, 50'331'648);
  const int64_t total = 2 * V * h + 32 * layer;
  EXPECT_EQ(total, 1'879'048'192);  // "1.9B"
  const nlohmann::json j = {{"model_type", "nanochat"},  {"vocab_size", V},
                            {"hidden_size", h},          {"intermediate_size", F},
                            {"num_hidden_layers", 32},   {"num_attention_heads", 16},
                            {"num_key_value_heads", 16}, {"max_position_embeddings", 2048},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "nanochat-d32");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(NanoChatModels, NormsSoftcapAndSquaredReluAreTraced) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  // model.norm on the embeddings and after the last layer (RotaryDecoderStyle::norm_embeddings).
  EXPECT_EQ(ops_in(g, "rms_norm", "model.norm"), 2);
  EXPECT_EQ(ops_in(g, "rms_norm", "model.layers.0.input_layernorm"), 1);
  // q and k normed per head after RoPE.
  EXPECT_EQ(ops_in(g, "rms_norm", "model.layers.0.self_attn.q_norm"), 1);
  EXPECT_EQ(ops_in(g, "rms_norm", "model.layers.0.self_attn.k_norm"), 1);
  // 2 norms a layer, 2 q/k norms a layer, 2 calls of model.norm.
  EXPECT_EQ(ops_named(g, "rms_norm"), 2 * 4 + 2);
  EXPECT_EQ(ops_in(g, "relu", "model.layers.1.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.1.mlp"), 1);
  EXPECT_EQ(ops_named(g, "tanh"), 1);  // the logit softcap
  // final_logit_softcapping null: no cap, and it stays none through a round trip.
  nlohmann::json j = tiny();
  j["final_logit_softcapping"] = nullptr;
  const ModelConfig none = parse_model_config(j, "none");
  EXPECT_EQ(none.final_logit_softcapping, 0.0);
  EXPECT_EQ(ops_named(trace_model_forward(*build_model(none), 2, 8), "tanh"), 0);
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
  j["final_logit_softcapping"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "zero"); },
              ThrowsMessage<Error>(HasSubstr("field 'final_logit_softcapping'")));
}

TEST(NanoChatModels, InitScalesOProjByDepth) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  // 0.02 / sqrt(2 x 2 layers) = 0.01.
  EXPECT_EQ(init.at("model.layers.0.self_attn.o_proj.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02 / std::sqrt(4.0)}));
  EXPECT_EQ(init.at("model.layers.0.self_attn.q_proj.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.layers.1.mlp.fc2.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.embed_tokens.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02, 1}));  // pad_token_id 1
  // No pad token: no zero row, and to_hf_json says null rather than the class's 1.
  nlohmann::json j = tiny();
  j["pad_token_id"] = nullptr;
  const ModelConfig unpadded = parse_model_config(j, "unpadded");
  EXPECT_FALSE(unpadded.pad_token_id);
  EXPECT_EQ(parse_model_config(to_hf_json(unpadded), "round trip"), unpadded);
}

}  // namespace
}  // namespace shardplan::tensor
