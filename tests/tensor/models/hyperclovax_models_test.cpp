// hyperclovax (modular_hyperclovax.py): Granite's layer; with use_post_norm (the default) an
// RMSNorm on each half's output, post_norm1 and post_norm2, before the residual multiplier and the
// add; the softmax scale attention_multiplier defaults to head_dim^-0.5; the logits are multiplied
// by logits_scaling. Hand formulas written here from HyperCLOVAXForCausalLM's modules. h hidden,
// V vocabulary, F MLP width, H heads, K kv heads, d head_dim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

nlohmann::json tiny_hyperclovax() {
  return {
      {"model_type", "hyperclovax"}, {"vocab_size", 1000},          {"hidden_size", 64},
      {"intermediate_size", 128},    {"num_hidden_layers", 2},      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},    {"embedding_multiplier", 2.0}, {"residual_multiplier", 0.5},
      {"logits_scaling", 0.25},      {"torch_dtype", "bfloat16"}};
}

TEST(HyperClovaxModels, TinyMatchesTheHandTotalWithPeriLayerNorms) {
  // V 1000, h 64, F 128, 2 layers of 4 heads of 64 / 4 = 16 (2 kv heads), untied, no biases:
  //   embed 1000 x 64 = 64,000; lm_head 64,000
  //   per layer: q 4,096 + k 2,048 + v 2,048 + o 4,096 = 12,288; MLP 3 x 64 x 128 = 24,576;
  //              four norms (input, post_attention, post_norm1, post_norm2) 256 -> 37,120
  //   2 layers 74,240; final norm 64                                           -> 202,304
  const ModelConfig c = parse_model_config(tiny_hyperclovax(), "tiny hyperclovax");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.use_post_norm);                    // HyperCLOVAXConfig's default
  EXPECT_DOUBLE_EQ(c.attention_multiplier, 0.25);  // 16^-0.5
  EXPECT_DOUBLE_EQ(c.embedding_multiplier, 2.0);
  EXPECT_DOUBLE_EQ(c.residual_multiplier, 0.5);
  EXPECT_DOUBLE_EQ(c.logits_scaling, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "HyperCLOVAXForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 202'304);
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight",
                "post_norm1.weight", "post_norm2.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.post_norm2.weight").sizes(), DimVector({64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Every norm starts at one, every Linear and the embedding normal(0, 0.02).
  for (const NamedInit& p : parameter_inits(*m, c)) {
    SCOPED_TRACE(p.name);
    if (p.name.ends_with("norm.weight") || p.name.ends_with("norm1.weight") ||
        p.name.ends_with("norm2.weight")) {
      EXPECT_EQ(p.init, (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
    } else {
      EXPECT_EQ(p.init.kind, ParameterInit::Kind::kNormal);
    }
  }
}

TEST(HyperClovaxModels, EachHalfIsNormedThenScaledAndTheLogitsMultiplied) {
  const ModelConfig c = parse_model_config(tiny_hyperclovax(), "tiny hyperclovax");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // Four RMSNorms per layer: before and after each half.
  int64_t norms = 0;
  for (const OpNode& n : g.nodes()) {
    norms += n.op == "rms_norm" && n.module.starts_with("model.layers.1.");
  }
  EXPECT_EQ(norms, 4);
  // The layer's own ops: post_norm1's output times residual_multiplier, added; then the same
  // for the MLP's half (the norms run in their own modules).
  std::vector<std::string> layer_ops;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.1") layer_ops.push_back(n.op);
  }
  EXPECT_EQ(layer_ops, (std::vector<std::string>{"mul", "add", "mul", "add"}));
  // The embeddings times embedding_multiplier (one product Llama's model does not run); the
  // logits times logits_scaling, not divided.
  nlohmann::json lj = tiny_hyperclovax();
  lj["model_type"] = "llama";
  const OpGraph lg = trace_model_forward(*build_model(parse_model_config(lj, "llama")), 2, 8);
  EXPECT_EQ(ops_in(g, "mul", "model"), ops_in(lg, "mul", "model") + 1);
  EXPECT_EQ(ops_in(g, "mul", ""), 1);
  EXPECT_EQ(ops_in(g, "div", ""), 0);
}

TEST(HyperClovaxModels, WithoutPostNormsTheLayerIsGranites) {
  nlohmann::json j = tiny_hyperclovax();
  j["use_post_norm"] = false;
  const ModelConfig c = parse_model_config(j, "no post norms");
  const ModulePtr m = build_model(c);
  // Two norms per layer: 202,304 - 2 x 2 x 64 = 202,048.
  EXPECT_EQ(m->parameters_numel(), 202'048);
  EXPECT_EQ(
      names_under(*m, "model.layers.0."),
      (std::vector<std::string>{
          "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Granite's trace but for the logits: a product where Granite divides.
  nlohmann::json gj = j;
  gj["model_type"] = "granite";
  gj["attention_multiplier"] = 0.25;
  const ModelConfig granite = parse_model_config(gj, "granite");
  const OpGraph hg = trace_model_forward(*m, 2, 8);
  const OpGraph gg = trace_model_forward(*build_model(granite), 2, 8);
  EXPECT_EQ(hg.nodes().size(), gg.nodes().size());
  EXPECT_EQ(ops_in(hg, "mul", ""), ops_in(gg, "mul", "") + 1);
  EXPECT_EQ(ops_in(hg, "div", "") + 1, ops_in(gg, "div", ""));
}

TEST(HyperClovaxModels, BiasesHeadDimAndMultipliersAsTheConfigReadsThem) {
  nlohmann::json j = tiny_hyperclovax();
  j["attention_bias"] = true;
  // Biases on q [64], k [32], v [32] and o [64]: 202,304 + 2 x 192 = 202,688.
  const ModelConfig biased = parse_model_config(j, "attention_bias");
  const ModulePtr m = build_model(biased);
  EXPECT_EQ(m->parameters_numel(), 202'688);
  EXPECT_EQ(
      names_under(*m, "model.layers.0.self_attn."),
      (std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                "v_proj.weight", "v_proj.bias", "o_proj.weight", "o_proj.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  // An explicit head_dim sets the default softmax scale; a given multiplier wins.
  j = tiny_hyperclovax();
  j["head_dim"] = 32;
  EXPECT_DOUBLE_EQ(parse_model_config(j, "head_dim").attention_multiplier, std::pow(32.0, -0.5));
  j["attention_multiplier"] = nullptr;  // None: the same default
  EXPECT_DOUBLE_EQ(parse_model_config(j, "null").attention_multiplier, std::pow(32.0, -0.5));
  j["attention_multiplier"] = 0.015625;
  const ModelConfig given = parse_model_config(j, "given");
  EXPECT_DOUBLE_EQ(given.attention_multiplier, 0.015625);
  EXPECT_EQ(parse_model_config(to_hf_json(given), "round trip"), given);
  j["attention_multiplier"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "zero"); },
              ThrowsMessage<Error>(HasSubstr("attention_multiplier")));
  // validate_architecture: hidden_size a multiple of the heads even with head_dim given.
  j = tiny_hyperclovax();
  j["num_attention_heads"] = 6;
  j["head_dim"] = 16;
  EXPECT_THAT([&] { parse_model_config(j, "heads"); },
              ThrowsMessage<Error>(HasSubstr("64 is not a multiple of the 6 attention heads")));
  j = tiny_hyperclovax();
  j["use_post_norm"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null flag"); },
              ThrowsMessage<Error>(HasSubstr("field 'use_post_norm': is null")));
  j = tiny_hyperclovax();
  j.erase("num_key_value_heads");
  EXPECT_EQ(parse_model_config(j, "no kv").num_key_value_heads, 4);  // the head count
}

// HyperCLOVAX-SEED-Think-14B ("14.74B parameters", docs/model_doc/hyperclovax.md). The shipped
// config's sizes are not from the published file (not found; docs/models.md says so): this checks
// the builder against the hand total of those sizes.
TEST(HyperClovaxModels, SeedThink14BMatchesTheHandTotal) {
  const int64_t V = 110592, h = 6144, q = 48 * 128, kv = 8 * 128, F = 14336;
  const int64_t layer = 2 * h * q + 2 * h * kv + 3 * h * F + 4 * h;
  EXPECT_EQ(layer, 352'346'112);
  const int64_t total = 2 * V * h + 38 * layer + h;
  EXPECT_EQ(total, 14'748'112'896);
  const ModelConfig c = find_model_config("hyperclovax-seed-think-14b");
  EXPECT_TRUE(c.use_post_norm);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

}  // namespace
}  // namespace shardplan::tensor
