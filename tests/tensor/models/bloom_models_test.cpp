// bloom (BigScience's BLOOM) against hand formulas written here from transformers 5's
// modeling_bloom.py and configuration_bloom.py, and the published sizes of BLOOM (176B: the model
// card's and the BLOOM paper's 176,247,271,424) and BLOOM-7B1 (the model card's 7,069,016,064).
// h hidden, V vocabulary, every nn.Linear but lm_head with a bias, every norm an nn.LayerNorm
// (weight and bias, [h]):
//   self_attention  query_key_value [3h, h] + [3h] (rows laid out [heads, 3, head_dim]),
//                   dense [h, h] + [h]
//   mlp             dense_h_to_4h [4h, h] + [4h], dense_4h_to_h [h, 4h] + [h]
//   norms           input_layernorm, post_attention_layernorm: 4h
//   a layer         12 h^2 + 13 h
//   model           word_embeddings [V, h], word_embeddings_layernorm and ln_f 4h, lm_head tied
//                   to the embedding (counted once) unless tie_word_embeddings is false
// Positions are ALiBi (no parameter; Note [ALiBi inside the fused kernel] in family_bloom.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// The parameters of a BLOOM model of width h, L layers and V tokens, tied (the header's formula).
int64_t bloom_total(int64_t h, int64_t L, int64_t V) {
  const int64_t layer =
      (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h) + 2 * 2 * h;
  EXPECT_EQ(layer, 12 * h * h + 13 * h);
  return V * h + L * layer + 2 * 2 * h;
}

const Names kLayerNames = {"input_layernorm.weight",
                           "input_layernorm.bias",
                           "self_attention.query_key_value.weight",
                           "self_attention.query_key_value.bias",
                           "self_attention.dense.weight",
                           "self_attention.dense.bias",
                           "post_attention_layernorm.weight",
                           "post_attention_layernorm.bias",
                           "mlp.dense_h_to_4h.weight",
                           "mlp.dense_h_to_4h.bias",
                           "mlp.dense_4h_to_h.weight",
                           "mlp.dense_4h_to_h.bias"};

TEST(BloomModels, Bloom176BIsThePublishedSize) {
  // bigscience/bloom: h 14,336, 70 layers of 112 heads of 128, V 250,880 (the tokenizer's
  // 250,680 padded), tied. Embedding 3,596,615,680; a layer 2,466,437,120.
  const int64_t total = bloom_total(14336, 70, 250880);
  EXPECT_EQ(total, 176'247'271'424);  // "176B": the model card's 176,247,271,424
  const ModelConfig c = find_model_config("bloom-176b");
  // The file says n_embed and num_attention_heads (the alias of n_head), and pretraining_tp 4.
  EXPECT_EQ(c.hidden_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 70);
  EXPECT_EQ(c.num_attention_heads, 112);
  EXPECT_EQ(c.num_key_value_heads, 112);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 4 * 14336);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(3));
  EXPECT_FALSE(c.apply_residual_connection_post_layernorm);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "BloomForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "transformer.h.69."), kLayerNames);
  EXPECT_EQ(m->get_submodule("transformer.h.0").type_name(), "BloomBlock");
  EXPECT_EQ(m->get_submodule("transformer.h.0.self_attention").type_name(), "BloomAttention");
  EXPECT_EQ(m->get_submodule("transformer.h.0.mlp").type_name(), "BloomMLP");
  EXPECT_EQ(m->get_submodule("transformer").type_name(), "BloomModel");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(BloomModels, Bloom7b1IsThePublishedSize) {
  // bigscience/bloom-7b1: h 4,096, 30 layers of 32 heads, V 250,880 tied; the embedding is the
  // model card's 1,027,604,480 "embedding parameters".
  EXPECT_EQ(int64_t{250880} * 4096, 1'027'604'480);
  const int64_t total = bloom_total(4096, 30, 250880);
  EXPECT_EQ(total, 7'069'016'064);  // the model card's 7,069,016,064
  const ModelConfig c = find_model_config("bloom-7b1");
  EXPECT_EQ(c.max_position_embeddings, 2048);  // its seq_length
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "bloom"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"n_layer", 2},
          {"n_head", 4},
          {"hidden_dropout", 0.1},
          {"attention_dropout", 0.1},
          {"torch_dtype", "bfloat16"}};
}

TEST(BloomModels, TinyConfigByHandWithHuggingFacesNames) {
  // A layer 12 x 64^2 + 13 x 64 = 49,984; two 99,968; embedding 64,000, its norm and ln_f 256:
  // 164,224 tied; untied, lm_head adds 64,000.
  EXPECT_EQ(bloom_total(64, 2, 1000), 164'224);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);  // no seq_length: BLOOM's training length
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 164'224);
  EXPECT_EQ(names_under(*m, "transformer.h.0."), kLayerNames);
  // The top level in named_parameters order; lm_head.weight is the embedding (listed once).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"transformer.word_embeddings.weight",
                        "transformer.word_embeddings_layernorm.weight",
                        "transformer.word_embeddings_layernorm.bias", "transformer.ln_f.weight",
                        "transformer.ln_f.bias"}));
  EXPECT_EQ(m->get_parameter("transformer.h.1.self_attention.query_key_value.weight").sizes(),
            DimVector({192, 64}));
  EXPECT_EQ(m->get_parameter("transformer.h.1.mlp.dense_4h_to_h.weight").sizes(),
            DimVector({64, 256}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = false;
  const ModelConfig untied = parse_model_config(j, "untied");
  const ModulePtr u = build_model(untied);
  EXPECT_EQ(u->parameters_numel(), 164'224 + 64'000);
  EXPECT_EQ(names_under(*u, "lm_head."), (Names{"weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(untied), "round trip"), untied);
}

TEST(BloomModels, ClassDefaultsAndTheAliasKeys) {
  // BloomConfig's defaults: V 250,880, hidden 64, 2 layers, 8 heads, eps 1e-5, tied, no dropout.
  const nlohmann::json bare = {{"model_type", "bloom"}};
  const ModelConfig d = parse_model_config(bare, "defaults");
  EXPECT_EQ(d.vocab_size, 250880);
  EXPECT_EQ(d.hidden_size, 64);
  EXPECT_EQ(d.num_hidden_layers, 2);
  EXPECT_EQ(d.num_attention_heads, 8);
  EXPECT_DOUBLE_EQ(d.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(d.resid_dropout, 0);
  EXPECT_FALSE(d.pad_token_id.has_value());
  // 250,880 x 64 + 2 x 49,984 + 256 = 16,156,544.
  EXPECT_EQ(build_model(d)->parameters_numel(), bloom_total(64, 2, 250880));
  EXPECT_EQ(bloom_total(64, 2, 250880), 16'156'544);
  // n_embed replaces hidden_size (BloomConfig.__post_init__); the attribute_map aliases
  // num_hidden_layers and num_attention_heads are set after the fields, so they win.
  nlohmann::json j = tiny();
  j["n_embed"] = 96;
  j["num_hidden_layers"] = 3;
  j["num_attention_heads"] = 6;
  const ModelConfig a = parse_model_config(j, "aliases");
  EXPECT_EQ(a.hidden_size, 96);
  EXPECT_EQ(a.num_hidden_layers, 3);
  EXPECT_EQ(a.num_attention_heads, 6);
  EXPECT_EQ(a.head_dim, 16);
  EXPECT_EQ(parse_model_config(to_hf_json(a), "round trip"), a);
  // A null n_embed is no n_embed.
  j = tiny();
  j["n_embed"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null n_embed").hidden_size, 64);
  // slow_but_exact changes nothing at pretraining_tp 1 (the slices run only above 1).
  j = tiny();
  j["slow_but_exact"] = true;
  j["pretraining_tp"] = 1;
  EXPECT_EQ(parse_model_config(j, "exact at tp 1"), parse_model_config(tiny(), "tiny"));
}

TEST(BloomModels, WhatIsRefusedNamesTheKey) {
  nlohmann::json j = tiny();
  j["slow_but_exact"] = true;
  j["pretraining_tp"] = 4;
  EXPECT_THAT([&] { parse_model_config(j, "exact.json"); },
              ThrowsMessage<Error>(HasSubstr(
                  "field 'slow_but_exact': true with pretraining_tp 4 splits dense and "
                  "dense_4h_to_h into 4 slices summed without their biases, which shardplan "
                  "does not build")));
  // BloomAttention raises unless the heads divide hidden_size; the error names the key read.
  j = tiny();
  j["n_head"] = 5;
  EXPECT_THAT([&] { parse_model_config(j, "heads.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'n_head': 5 does not divide hidden_size 64")));
  j = tiny();
  j["n_embed"] = 100;
  j["num_attention_heads"] = 8;
  EXPECT_THAT([&] { parse_model_config(j, "heads.json"); },
              ThrowsMessage<Error>(
                  HasSubstr("field 'num_attention_heads': 8 does not divide n_embed 100")));
  for (const int heads : {0, -4}) {
    j = tiny();
    j["n_head"] = heads;
    EXPECT_THAT([&] { parse_model_config(j, "heads.json"); },
                ThrowsMessage<Error>(HasSubstr("field 'n_head': must be a positive integer")));
  }
  j = tiny();
  j["num_attention_heads"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "null.json"); },
              ThrowsMessage<Error>(
                  HasSubstr("field 'num_attention_heads': is null, which sets n_head to None")));
  // Layers beyond shardplan's bound: validate() names BloomConfig's key.
  j = tiny();
  j["n_layer"] = 5000;
  EXPECT_THAT([&] { parse_model_config(j, "layers.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'n_layer' (num_hidden_layers)")));
}

// The traced forward of the tiny model (B 2, S 8: T 16 tokens): the embedding's LayerNorm, the
// attention as one fused causal kernel with no mask (ALiBi inside it), each half's residual add
// in its own module (BloomAttention's and BloomMLP's dropout_add), the tanh GELU.
TEST(BloomModels, TraceOfOneForward) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.word_embeddings_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "transformer.h.0.self_attention"), 1);
  EXPECT_EQ(ops_in(g, "add", "transformer.h.0.self_attention"), 1);
  EXPECT_EQ(ops_in(g, "add", "transformer.h.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "add", "transformer.h.0"), 0);
  EXPECT_EQ(ops_in(g, "gelu", "transformer.h.1.mlp"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.0.self_attention"), 0);  // not training
  // Projections 2 T (3h h + h h + 4h h + 4h h) = 24 T h^2; the core 2 x 2 B H S^2 d (Q K^T and
  // P V over every key, the causal half not subtracted).
  const double T = 16, h = 64;
  const auto& totals = g.module_totals();
  EXPECT_DOUBLE_EQ(totals.at("transformer.h.0.self_attention.query_key_value").matmul_flops,
                   2 * T * h * 3 * h);
  EXPECT_DOUBLE_EQ(totals.at("transformer.h.0.self_attention").matmul_flops,
                   2 * T * 4 * h * h + 4.0 * 2 * 4 * 8 * 8 * 16);
  EXPECT_DOUBLE_EQ(totals.at("transformer.h.1.mlp").matmul_flops, 2 * T * 8 * h * h);
  EXPECT_DOUBLE_EQ(totals.at("transformer.h.0").matmul_flops, 24 * T * h * h + 32'768);
  EXPECT_DOUBLE_EQ(totals.at("lm_head").matmul_flops, 2 * T * h * 1000);
}

// The id of the one tensor `op` writes in `module`.
int64_t output_of(const OpGraph& g, const std::string& op, const std::string& module) {
  for (const OpNode& n : g.nodes()) {
    if (n.op == op && n.module == module && n.outputs.size() == 1) return n.outputs[0];
  }
  return -1;
}
// Whether the `op` run by `module` reads tensor `t`.
bool reads(const OpGraph& g, const std::string& op, const std::string& module, int64_t t) {
  for (const OpNode& n : g.nodes()) {
    if (n.op != op || n.module != module) continue;
    for (const int64_t in : n.inputs) {
      if (in == t) return true;
    }
  }
  return false;
}

TEST(BloomModels, ResidualFromTheNormWithApplyResidualConnectionPostLayernorm) {
  // Default: the attention's residual is the block's input (layer 0: the embedding's norm), the
  // MLP's the attention's output. With the flag: each half adds its normed input.
  for (const bool post : {false, true}) {
    SCOPED_TRACE(post);
    nlohmann::json j = tiny();
    j["apply_residual_connection_post_layernorm"] = post;
    const ModelConfig c = parse_model_config(j, "post.json");
    EXPECT_EQ(c.apply_residual_connection_post_layernorm, post);
    EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
    const ModulePtr m = build_model(c);
    EXPECT_EQ(m->parameters_numel(), 164'224);  // no parameter either way
    const OpGraph g = trace_model_forward(*m, 2, 8);
    const std::string l = "transformer.h.0";
    const int64_t block_in = output_of(g, "layer_norm", "transformer.word_embeddings_layernorm");
    const int64_t n1 = output_of(g, "layer_norm", l + ".input_layernorm");
    const int64_t a = output_of(g, "add", l + ".self_attention");
    const int64_t n2 = output_of(g, "layer_norm", l + ".post_attention_layernorm");
    ASSERT_GE(block_in, 0);
    ASSERT_GE(n1, 0);
    ASSERT_GE(a, 0);
    ASSERT_GE(n2, 0);
    EXPECT_EQ(reads(g, "add", l + ".self_attention", n1), post);
    EXPECT_EQ(reads(g, "add", l + ".self_attention", block_in), !post);
    EXPECT_EQ(reads(g, "add", l + ".mlp", n2), post);
    EXPECT_EQ(reads(g, "add", l + ".mlp", a), !post);
  }
}

TEST(BloomModels, TrainingStepMatchesMegatronEquationSeven) {
  // BLOOM's layer is Megatron-LM's GPT layer (a 4h MLP, fused qkv), so its GEMMs are Narayanan et
  // al. 2021's Eq. 7: 72 B L s h^2 (1 + s / 6h + V / 12hL) = 72 B L s h^2 + 12 B L s^2 h +
  // 6 B s h V = 9,437,184 + 196,608 + 6,144,000 = 15,777,792 at B 2, L 2, s 8, h 64, V 1,000,
  // a third of it forward; the fused attention's backward recomputes Q K^T (2 B s^2 h a layer).
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops + st.totals.backward_matmul_flops, 15'777'792);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 5'259'264);
  EXPECT_DOUBLE_EQ(st.totals.recompute_flops, 2 * 2.0 * 2 * 8 * 8 * 64);
  EXPECT_EQ(st.totals.parameters, 164'224);
  // The blocks are transformer.h's layers; each drops out both halves' outputs (hidden_dropout)
  // and saves the GELU's input alone (BloomGelu's backward reads x).
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[1].type, "BloomBlock");
  int64_t dropouts = 0, gelus = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    dropouts += op.op == "dropout";
    if (op.op != "gelu") continue;
    ++gelus;
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].what, "input");
  }
  EXPECT_EQ(dropouts, 2);
  EXPECT_EQ(gelus, 1);
}

TEST(BloomModels, TensorParallelPlanIsMegatronsOverWholeHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_TRUE(f.fused_qkv);
  EXPECT_EQ(f.layers_path, "transformer.h");
  ASSERT_EQ(f.tp_plan.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"transformer.word_embeddings", "rowwise"},
      {"transformer.h.*.self_attention.query_key_value", "colwise"},
      {"transformer.h.*.self_attention.dense", "rowwise"},
      {"transformer.h.*.mlp.dense_h_to_4h", "colwise"},
      {"transformer.h.*.mlp.dense_4h_to_h", "rowwise"},
      {"lm_head", "colwise"}};
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // The qkv rows are [heads, 3, head_dim]: a contiguous split of 3h rows into tp parts is
    // heads / tp whole heads each, so no rule splits q, k and v apart (fused_parts 1).
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
