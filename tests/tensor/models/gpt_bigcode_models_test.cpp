// gpt_bigcode (StarCoder, SantaCoder) against hand formulas written here from transformers 5's
// modeling_gpt_bigcode.py and configuration_gpt_bigcode.py. h n_embd, V vocabulary, P n_positions,
// F n_inner, d = h / heads, kv = d with multi_query (one key/value head), h without; every
// projection an nn.Linear with a bias:
//   attn       c_attn [h + 2 kv, h] + [h + 2 kv], c_proj [h, h] + [h]
//   mlp        c_fc [F, h] + [F], c_proj [h, F] + [h]
//   norms      ln_1, ln_2 and transformer.ln_f: nn.LayerNorm [h] + [h]
//   embeddings wte [V, h], wpe [P, h]; lm_head [V, h] tied to wte by default
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
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
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

// One layer's parameters by hand (the formula of the head comment).
int64_t layer_by_hand(int64_t h, int64_t kv, int64_t F) {
  const int64_t attention = (h * (h + 2 * kv) + (h + 2 * kv)) + (h * h + h);
  const int64_t mlp = (h * F + F) + (F * h + h);
  return attention + mlp + 2 * 2 * h;
}

TEST(GptBigCodeModels, StarCoderMatchesTheHandTotal) {
  // bigcode/starcoder: V 49,152 tied, h 6,144, 40 layers of 48 heads of 128 sharing one
  // key/value head, F 24,576, P 8,192. Published: "15.5B parameters" (the model card).
  //   c_attn 6,144 x 6,400 + 6,400 = 39,328,000; c_proj 6,144^2 + 6,144 = 37,754,880
  //   c_fc 6,144 x 24,576 + 24,576 = 151,019,520; mlp.c_proj 151,001,088; norms 24,576
  //   layer 379,128,064; 40 layers 15,165,122,560; wte 301,989,888; wpe 50,331,648; ln_f 12,288
  const int64_t V = 49152, h = 6144, P = 8192, F = 24576, d = 128;
  const int64_t layer = layer_by_hand(h, d, F);
  EXPECT_EQ(layer, 379'128'064);
  const int64_t total = V * h + P * h + 40 * layer + 2 * h;
  EXPECT_EQ(total, 15'517'456'384);  // "15.5B"
  const ModelConfig c = find_model_config("starcoder");
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_TRUE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "GPTBigCodeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "transformer.h.0."), (Shapes{{"ln_1.weight", {h}},
                                                          {"ln_1.bias", {h}},
                                                          {"attn.c_attn.weight", {h + 2 * d, h}},
                                                          {"attn.c_attn.bias", {h + 2 * d}},
                                                          {"attn.c_proj.weight", {h, h}},
                                                          {"attn.c_proj.bias", {h}},
                                                          {"ln_2.weight", {h}},
                                                          {"ln_2.bias", {h}},
                                                          {"mlp.c_fc.weight", {F, h}},
                                                          {"mlp.c_fc.bias", {F}},
                                                          {"mlp.c_proj.weight", {h, F}},
                                                          {"mlp.c_proj.bias", {h}}}));
  // The top level in named_parameters order; lm_head.weight is wte's (tied, listed once).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"transformer.wte.weight", "transformer.wpe.weight",
                        "transformer.ln_f.weight", "transformer.ln_f.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(layer_stack(c).kinds.size(), 1u);
}

TEST(GptBigCodeModels, TheCausalMaskIsANonPersistentBuffer) {
  // GPTBigCodeModel.bias: tril(ones(P, P)) as bool, persistent=False: built, not in a state_dict.
  const ModelConfig c = find_model_config("starcoder");
  const ModulePtr m = build_model(first_layers(c, 1));
  Names all, persistent;
  for (const NamedTensor& b : m->named_buffers()) all.push_back(b.name);
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true})) {
    persistent.push_back(b.name);
  }
  EXPECT_EQ(all, (Names{"transformer.bias"}));
  EXPECT_TRUE(persistent.empty());
  const Tensor mask = m->named_buffers().front().tensor;
  EXPECT_EQ(mask.sizes(), DimVector({8192, 8192}));
  EXPECT_EQ(mask.dtype(), DType::kBool);
}

TEST(GptBigCodeModels, SantaCoderMatchesThePublishedOnePointOneBillion) {
  // bigcode/gpt_bigcode-santacoder (the HF-format SantaCoder, SantaCoder paper: "1.1B"): V 49,280
  // tied, h 2,048, 24 layers of 16 heads of 128 with one key/value head, F 8,192, P 2,048.
  //   c_attn 2,048 x 2,304 + 2,304 = 4,720,896; c_proj 4,196,352; c_fc 16,785,408;
  //   mlp.c_proj 16,779,264; norms 8,192 -> layer 42,490,112
  //   24 layers 1,019,762,688 + wte 100,925,440 + wpe 4,194,304 + ln_f 4,096 = 1,124,886,528
  const int64_t V = 49280, h = 2048, P = 2048, F = 8192;
  const int64_t layer = layer_by_hand(h, 128, F);
  EXPECT_EQ(layer, 42'490'112);
  const int64_t total = V * h + P * h + 24 * layer + 2 * h;
  EXPECT_EQ(total, 1'124'886'528);
  const nlohmann::json j = {{"model_type", "gpt_bigcode"},
                            {"vocab_size", V},
                            {"n_embd", h},
                            {"n_layer", 24},
                            {"n_head", 16},
                            {"n_positions", P},
                            {"n_inner", F},
                            {"multi_query", true},
                            {"activation_function", "gelu_fast"}};
  EXPECT_EQ(build_model(parse_model_config(j, "santacoder.json"))->parameters_numel(), total);
}

// A tiny multi-query config: h 64, 4 heads of 16, F 256, V 1,000, P 128, 2 layers.
nlohmann::json tiny() {
  return {{"model_type", "gpt_bigcode"},
          {"vocab_size", 1000},
          {"n_embd", 64},
          {"n_layer", 2},
          {"n_head", 4},
          {"n_positions", 128},
          {"n_inner", 256},
          {"torch_dtype", "bfloat16"}};
}

TEST(GptBigCodeModels, TinyConfigMatchesTheHandTotal) {
  // Multi-query (the class's default): kv = d = 16.
  //   c_attn 64 x 96 + 96 = 6,240; c_proj 64 x 64 + 64 = 4,160; c_fc 64 x 256 + 256 = 16,640;
  //   mlp.c_proj 256 x 64 + 64 = 16,448; norms 256 -> layer 43,744
  //   wte 64,000 + wpe 8,192 + 2 x 43,744 + ln_f 128 = 159,808 (lm_head tied)
  EXPECT_EQ(layer_by_hand(64, 16, 256), 43'744);
  const int64_t total = 64000 + 8192 + 2 * 43744 + 128;
  EXPECT_EQ(total, 159'808);
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.attention_multiplier, 0);  // scale_attn_weights: 1 / sqrt(d)
  EXPECT_EQ(c.embd_dropout, 0.1);
  EXPECT_EQ(c.attention_dropout, 0.1);
  EXPECT_EQ(c.resid_dropout, 0.1);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->get_parameter("transformer.h.1.attn.c_attn.weight").sizes(), DimVector({96, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // multi_query false: one key/value head per query head, c_attn [3h, h] laid out per head.
  // c_attn 64 x 192 + 192 = 12,480: 6,240 more a layer.
  nlohmann::json mha = tiny();
  mha["multi_query"] = false;
  const ModelConfig cm = parse_model_config(mha, "mha");
  EXPECT_EQ(cm.num_key_value_heads, 4);
  EXPECT_EQ(build_model(cm)->parameters_numel(), total + 2 * 6240);
  EXPECT_EQ(parse_model_config(to_hf_json(cm), "round trip"), cm);

  // Untied: lm_head [1,000, 64] of its own.
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr u = build_model(parse_model_config(untied, "untied"));
  EXPECT_EQ(u->parameters_numel(), total + 64000);
  EXPECT_EQ(names_under(*u, "lm_head."), (Names{"weight"}));

  // scale_attn_weights false: the softmax scale 1 (attention_multiplier), same parameters.
  nlohmann::json unscaled = tiny();
  unscaled["scale_attn_weights"] = false;
  const ModelConfig cu = parse_model_config(unscaled, "unscaled");
  EXPECT_EQ(cu.attention_multiplier, 1.0);
  EXPECT_EQ(parse_model_config(to_hf_json(cu), "round trip"), cu);
}

TEST(GptBigCodeModels, ClassDefaultsFillEveryOmittedKey) {
  // GPTBigCodeConfig(): V 50,257, h 768, 12 layers of 12 heads of 64 with one key/value head,
  // F 4 x 768 = 3,072, P 1,024, tied.
  //   c_attn 768 x 896 + 896 = 689,024; c_proj 590,592; c_fc 2,362,368; mlp.c_proj 2,360,064;
  //   norms 3,072 -> layer 6,005,120; total 38,597,376 + 786,432 + 12 x 6,005,120 + 1,536
  EXPECT_EQ(layer_by_hand(768, 64, 3072), 6'005'120);
  const ModelConfig c = parse_model_config({{"model_type", "gpt_bigcode"}}, "defaults");
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_EQ(build_model(c)->parameters_numel(), 111'446'784);
  // n_inner null is 4 x n_embd too.
  nlohmann::json j = tiny();
  j["n_inner"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null n_inner").intermediate_size, 256);
}

TEST(GptBigCodeModels, StandardNamesSetTheSizesAsTransformersDoes) {
  // attribute_map: hidden_size is n_embd, ...; transformers sets such a key after the fields, so
  // it wins over the GPT-2 name.
  nlohmann::json j = tiny();
  j["hidden_size"] = 128;
  j["num_attention_heads"] = 8;
  j["num_hidden_layers"] = 3;
  j["max_position_embeddings"] = 256;
  const ModelConfig c = parse_model_config(j, "aliases");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GptBigCodeModels, RefusesWhatItCannotBuild) {
  nlohmann::json cross = tiny();
  cross["add_cross_attention"] = true;
  EXPECT_THAT([&] { parse_model_config(cross, "cross.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'add_cross_attention': true adds "
                                             "cross-attention to an encoder")));
  nlohmann::json uneven = tiny();
  uneven["n_head"] = 3;
  EXPECT_THAT([&] { parse_model_config(uneven, "uneven.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'n_head': 3 does not divide n_embd 64")));
  nlohmann::json huge = tiny();
  huge["n_positions"] = int64_t{4'000'000'000};
  EXPECT_THAT([&] { parse_model_config(huge, "huge.json"); },
              ThrowsMessage<Error>(HasSubstr("causal-mask buffer overflow int64")));
  nlohmann::json act = tiny();
  act["activation_function"] = "tanh";
  EXPECT_THAT([&] { parse_model_config(act, "act.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'activation_function'")));
  // Grouped key/value heads: GPTBigCodeAttention has one or all; a config built in code that asks
  // for two is refused when built.
  ModelConfig gqa = parse_model_config(tiny(), "tiny");
  gqa.num_key_value_heads = 2;
  EXPECT_THAT([&] { build_model(gqa); },
              ThrowsMessage<Error>(HasSubstr("expected 1 (multi_query) or every head")));
  // Longer than the learned positions: refused when traced, as transformers' index error.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 129); },
              ThrowsMessage<Error>(HasSubstr("exceeds n_positions 128")));
}

TEST(GptBigCodeModels, OneLayerMatmulFlopsByHand) {
  // B 2, S 8 (16 tokens), h 64, 4 heads of 16, F 256, multi-query:
  //   c_attn 2 x 16 x 64 x 96 = 196,608; c_proj 2 x 16 x 64 x 64 = 131,072;
  //   c_fc and mlp.c_proj 2 x 2 x 16 x 64 x 256 = 1,048,576; attention 2 x (B x heads) x S x S x
  //   (d + d) = 2 x 8 x 64 x 32 = 32,768 (the one key/value head serves all four)
  //   -> 1,409,024 per layer; lm_head 2 x 16 x 64 x 1,000 = 2,048,000
  const double layer = 196608 + 131072 + 1048576 + 32768;
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_DOUBLE_EQ(g.module_totals().at("transformer.h.0").matmul_flops, layer);
  EXPECT_DOUBLE_EQ(g.module_totals().at("transformer.h.1").matmul_flops, layer);
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    // q [B, 4, S, 16] against k and v [B, 1, S, 16]: the unsqueezed head of the split.
    EXPECT_EQ(g.tensors()[static_cast<size_t>(n.inputs[0])].sizes, DimVector({2, 4, 8, 16}));
    EXPECT_EQ(g.tensors()[static_cast<size_t>(n.inputs[1])].sizes, DimVector({2, 1, 8, 16}));
    EXPECT_EQ(g.tensors()[static_cast<size_t>(n.inputs[2])].sizes, DimVector({2, 1, 8, 16}));
  }
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "transformer.h.0.attn"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "transformer.h.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.ln_f"), 1);

  // The training step of the whole model: two layers and the output layer (the embedding lookups
  // and the loss multiply no matrices).
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 2 * layer + 2048000);
  EXPECT_EQ(st.totals.parameters, 159'808);
}

TEST(GptBigCodeModels, TrainingDropsOutTheEmbeddingsTheAttentionAndEachHalf) {
  // embd_pdrop after wte + wpe; attn_pdrop inside the attention; resid_pdrop after attn.c_proj
  // and after mlp.c_proj (GPTBigCodeAttention.resid_dropout, GPTBigCodeMLP.dropout).
  const ModulePtr m =
      build_model(parse_model_config(tiny(), "tiny"), {.dtype = std::nullopt, .training = true});
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_EQ(ops_in(g, "dropout", "transformer"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.0.attn"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.0.mlp"), 1);
  const ModulePtr eval = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph e = trace_model_forward(*eval, 2, 8);
  int64_t dropouts = 0;
  for (const OpNode& n : e.nodes()) dropouts += n.op == "dropout";
  EXPECT_EQ(dropouts, 0);
}

TEST(GptBigCodeModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  // wte by vocabulary rows (tied to lm_head, by vocabulary), c_attn and c_fc column-parallel with
  // no fused parts (see the plan's comment: per head without multi_query, unequal parts with),
  // c_proj row-parallel.
  const ModelFamily* f = find_family("gpt_bigcode");
  ASSERT_NE(f, nullptr);
  std::vector<std::pair<std::string, std::string>> plan;
  for (const TensorParallelRule& r : f->tp_plan) {
    EXPECT_EQ(r.fused_parts, 1) << r.pattern;
    plan.emplace_back(std::string(r.pattern), std::string(r.style));
  }
  EXPECT_EQ(plan, (std::vector<std::pair<std::string, std::string>>{
                      {"transformer.wte", "rowwise"},
                      {"transformer.h.*.attn.c_attn", "colwise"},
                      {"transformer.h.*.attn.c_proj", "rowwise"},
                      {"transformer.h.*.mlp.c_fc", "colwise"},
                      {"transformer.h.*.mlp.c_proj", "rowwise"},
                      {"lm_head", "colwise"}}));
  // Every rule names a module holding a weight (layer 1 standing in for the wildcard).
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr m = build_model(parse_model_config(untied, "untied"));
  for (const auto& [pattern, style] : plan) {
    std::string path = pattern;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    const Names names = names_under(*m, path + ".");
    ASSERT_FALSE(names.empty()) << pattern;
    EXPECT_EQ(names.front(), "weight") << pattern;
  }
  EXPECT_TRUE(f->learned_positions);
  EXPECT_TRUE(f->fused_qkv);
  EXPECT_FALSE(f->rotary);
}

TEST(GptBigCodeModels, InitIsGptTwosWithDepthScaledOutputProjections) {
  nlohmann::json j = tiny();
  j["initializer_range"] = 0.02;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit scaled{ParameterInit::Kind::kNormal, 0.0, 0.02 / 2.0};  // sqrt(2 x 2 layers)
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("transformer.h.0.attn.c_attn.weight"), normal);
  EXPECT_EQ(init.at("transformer.h.0.attn.c_attn.bias"), zero);
  EXPECT_EQ(init.at("transformer.h.0.attn.c_proj.weight"), scaled);
  EXPECT_EQ(init.at("transformer.h.1.mlp.c_proj.weight"), scaled);
  EXPECT_EQ(init.at("transformer.h.1.mlp.c_fc.weight"), normal);
  EXPECT_EQ(init.at("transformer.h.1.mlp.c_proj.bias"), zero);
  EXPECT_EQ(init.at("transformer.h.0.ln_1.weight"), one);
  EXPECT_EQ(init.at("transformer.ln_f.bias"), zero);
  EXPECT_EQ(init.at("transformer.wte.weight"), normal);  // no padding_idx row
  EXPECT_EQ(init.at("transformer.wpe.weight"), normal);
  EXPECT_EQ(init.size(), 28u);  // 2 x 12 in the layers, wte, wpe, ln_f's two (lm_head tied)
}

}  // namespace
}  // namespace shardplan::tensor
