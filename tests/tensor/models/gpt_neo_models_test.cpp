// gpt_neo (GPT-Neo 125M, 1.3B, 2.7B) against hand formulas written here from transformers 5's
// modeling_gpt_neo.py and configuration_gpt_neo.py. h hidden_size, V vocabulary, P
// max_position_embeddings, F intermediate_size (4 h when null), every layer:
//   attn       k_proj, v_proj, q_proj [h, h] without bias; out_proj [h, h] + [h]
//   mlp        c_fc [F, h] + [F], c_proj [h, F] + [h]
//   norms      ln_1, ln_2 and transformer.ln_f: nn.LayerNorm [h] + [h]
//   embeddings wte [V, h], wpe [P, h]; lm_head [V, h] tied to wte by default
// so a layer holds 4 h^2 + 2 h F + F + 6 h. Local layers attend the window_size latest keys.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
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

// One layer's parameters by hand (the formula of the head comment, term by term).
int64_t layer_by_hand(int64_t h, int64_t F) {
  const int64_t attention = 3 * h * h + (h * h + h);
  const int64_t mlp = (h * F + F) + (F * h + h);
  return attention + mlp + 2 * 2 * h;
}

// JSON text as a file holds it (nested lists written out, not as C++ initializer lists, whose
// one-element and pair forms nlohmann reads as other things).
nlohmann::json json_of(const char* text) { return nlohmann::json::parse(text); }

TEST(GptNeoModels, TwoPointSevenBMatchesTheHandTotal) {
  // EleutherAI/gpt-neo-2.7B: V 50,257 tied, h 2,560, 32 layers of 20 heads of 128, F null (10,240),
  // P 2,048, [[["global", "local"], 16]] with a window of 256. Published: "2.7B" (the model card).
  //   q, k, v 3 x 6,553,600 = 19,660,800; out_proj 6,556,160; c_fc 26,224,640;
  //   c_proj 26,216,960; norms 10,240 -> layer 78,668,800; 32 layers 2,517,401,600
  //   wte 128,657,920 + wpe 5,242,880 + ln_f 5,120
  const int64_t V = 50257, h = 2560, P = 2048, F = 10240;
  const int64_t layer = layer_by_hand(h, F);
  EXPECT_EQ(layer, 78'668'800);
  const int64_t total = V * h + P * h + 32 * layer + 2 * h;
  EXPECT_EQ(total, 2'651'307'520);  // "2.7B"
  const ModelConfig c = find_model_config("gpt-neo-2.7b");
  EXPECT_EQ(c.model_type, "gpt_neo");
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 20);
  EXPECT_EQ(c.num_key_value_heads, 20);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);  // the file states none; its weights are float32
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 256);
  ASSERT_EQ(c.layer_types.size(), 32u);
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(c.layer_types[i], i % 2 == 0 ? AttentionType::kFull : AttentionType::kSliding) << i;
  }
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "GPTNeoForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "transformer.h.0."),
            (Shapes{{"ln_1.weight", {h}},
                    {"ln_1.bias", {h}},
                    {"attn.attention.k_proj.weight", {h, h}},
                    {"attn.attention.v_proj.weight", {h, h}},
                    {"attn.attention.q_proj.weight", {h, h}},
                    {"attn.attention.out_proj.weight", {h, h}},
                    {"attn.attention.out_proj.bias", {h}},
                    {"ln_2.weight", {h}},
                    {"ln_2.bias", {h}},
                    {"mlp.c_fc.weight", {F, h}},
                    {"mlp.c_fc.bias", {F}},
                    {"mlp.c_proj.weight", {h, F}},
                    {"mlp.c_proj.bias", {h}}}));
  // A local layer has the same parameters.
  EXPECT_EQ(shapes_under(*m, "transformer.h.1."), shapes_under(*m, "transformer.h.0."));
  // The top level in named_parameters order; lm_head.weight is wte's (tied, listed once).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"transformer.wte.weight", "transformer.wpe.weight",
                        "transformer.ln_f.weight", "transformer.ln_f.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Two layer kinds: global (full) and local (a window of 256), 16 layers each.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "dense");
  EXPECT_EQ(describe(s.kinds[1]), "sliding 256 dense");
  EXPECT_EQ(s.count(0), 16);
  EXPECT_EQ(s.count(1), 16);
}

TEST(GptNeoModels, ClassDefaultsAreGptNeoOnePointThreeB) {
  // GPTNeoConfig() is EleutherAI/gpt-neo-1.3B: V 50,257, h 2,048, 24 layers of 16 heads, F 8,192,
  // P 2,048, [[["global", "local"], 12]], window 256. Published: "1.3B".
  //   layer 4 x 2,048^2 + 2 x 2,048 x 8,192 + 8,192 + 6 x 2,048 = 50,352,128
  //   24 layers 1,208,451,072 + wte 102,926,336 + wpe 4,194,304 + ln_f 4,096
  EXPECT_EQ(layer_by_hand(2048, 8192), 50'352'128);
  const int64_t total = 50257 * 2048 + 2048 * 2048 + 24 * int64_t{50'352'128} + 2 * 2048;
  EXPECT_EQ(total, 1'315'575'808);
  const ModelConfig c = parse_model_config({{"model_type", "gpt_neo"}}, "defaults");
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.sliding_window, 256);
  EXPECT_EQ(c.layer_types.size(), 24u);
  EXPECT_EQ(c.embd_dropout, 0.0);
  EXPECT_EQ(c.attention_dropout, 0.0);
  EXPECT_EQ(c.resid_dropout, 0.0);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // GPT-Neo 125M's sizes: h 768, 12 layers of 12 heads, [[["global", "local"], 6]]: 125,198,592
  // (EleutherAI/gpt-neo-125M's model card: "125M").
  //   layer 2,359,296 + 4,718,592 + 3,072 + 4,608 = 7,085,568; 12 layers 85,026,816
  //   wte 38,597,376 + wpe 1,572,864 + ln_f 1,536
  EXPECT_EQ(layer_by_hand(768, 3072), 7'085'568);
  const nlohmann::json small = {{"model_type", "gpt_neo"},
                                {"hidden_size", 768},
                                {"num_layers", 12},
                                {"num_heads", 12},
                                {"attention_types", json_of(R"([[["global", "local"], 6]])")}};
  EXPECT_EQ(build_model(parse_model_config(small, "125m"))->parameters_numel(), 125'198'592);
}

// A tiny config: h 64, 4 heads of 16, F null (256), V 1,000, P 128, a global then a local layer
// with a window of 4.
nlohmann::json tiny() {
  return {{"model_type", "gpt_neo"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"num_layers", 2},
          {"num_heads", 4},
          {"max_position_embeddings", 128},
          {"intermediate_size", nullptr},
          {"attention_types", json_of(R"([[["global", "local"], 1]])")},
          {"window_size", 4},
          {"embed_dropout", 0.1},
          {"attention_dropout", 0.1},
          {"resid_dropout", 0.1},
          {"torch_dtype", "bfloat16"}};
}

TEST(GptNeoModels, TinyConfigMatchesTheHandTotal) {
  //   q, k, v 3 x 4,096 = 12,288; out_proj 4,160; c_fc 64 x 256 + 256 = 16,640;
  //   c_proj 256 x 64 + 64 = 16,448; norms 256 -> layer 49,792
  //   wte 64,000 + wpe 8,192 + 2 x 49,792 + ln_f 128 = 171,904 (lm_head tied)
  EXPECT_EQ(layer_by_hand(64, 256), 49'792);
  const int64_t total = 64000 + 8192 + 2 * 49792 + 128;
  EXPECT_EQ(total, 171'904);
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.embd_dropout, 0.1);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias && c.mlp_bias);
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kFull, AttentionType::kSliding}));
  EXPECT_EQ(c.sliding_window, 4);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Untied: lm_head [1,000, 64] of its own.
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr u = build_model(parse_model_config(untied, "untied"));
  EXPECT_EQ(u->parameters_numel(), total + 64000);
  EXPECT_EQ(names_under(*u, "lm_head."), (Names{"weight"}));

  // An explicit intermediate_size: c_fc and c_proj 100 wide, (64 + 1) x 100 + 100 x 64 + 64 each
  // layer for the MLP.
  nlohmann::json narrow = tiny();
  narrow["intermediate_size"] = 100;
  EXPECT_EQ(build_model(parse_model_config(narrow, "narrow"))->parameters_numel(),
            total - 2 * (16640 + 16448) + 2 * (6500 + 6464));
}

TEST(GptNeoModels, EachAttentionKeepsItsMaskAsANonPersistentBuffer) {
  // GPTNeoSelfAttention.bias: tril(ones(P, P)) (xor'ed to the window on local layers) as bool
  // [1, 1, P, P], persistent=False: built, not in a state_dict.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  Names all, persistent;
  for (const NamedTensor& b : m->named_buffers()) {
    all.push_back(b.name);
    EXPECT_EQ(b.tensor.sizes(), DimVector({1, 1, 128, 128})) << b.name;
    EXPECT_EQ(b.tensor.dtype(), DType::kBool) << b.name;
  }
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true})) {
    persistent.push_back(b.name);
  }
  EXPECT_EQ(all,
            (Names{"transformer.h.0.attn.attention.bias", "transformer.h.1.attn.attention.bias"}));
  EXPECT_TRUE(persistent.empty());
}

TEST(GptNeoModels, AttentionLayersAndStandardNamesWinAsInTransformers) {
  // A file's attention_layers is set after attention_types is expanded (the published files
  // carry both): it decides.
  nlohmann::json j = tiny();
  j["attention_layers"] = json_of(R"(["local", "global"])");
  const ModelConfig c = parse_model_config(j, "layers");
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kSliding, AttentionType::kFull}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // attribute_map: num_hidden_layers is num_layers, num_attention_heads num_heads; set after the
  // fields, they win.
  nlohmann::json a = tiny();
  a["num_hidden_layers"] = 4;
  a["num_attention_heads"] = 8;
  a["attention_types"] = json_of(R"([[["global", "local"], 2]])");
  const ModelConfig ca = parse_model_config(a, "aliases");
  EXPECT_EQ(ca.num_hidden_layers, 4);
  EXPECT_EQ(ca.num_attention_heads, 8);
  EXPECT_EQ(ca.head_dim, 8);
  EXPECT_EQ(parse_model_config(to_hf_json(ca), "round trip"), ca);
  // Every layer global: the window is read but unused; a non-positive one is then no window.
  nlohmann::json g = tiny();
  g["attention_types"] = json_of(R"([[["global"], 2]])");
  g["window_size"] = 0;
  const ModelConfig cg = parse_model_config(g, "global");
  EXPECT_FALSE(cg.sliding_window.has_value());
  EXPECT_EQ(layer_stack(cg).kinds.size(), 1u);
  EXPECT_EQ(parse_model_config(to_hf_json(cg), "round trip"), cg);
  // Several items, each repeated: [["local"], 1] then [["global"], 1].
  nlohmann::json items = tiny();
  items["attention_types"] = json_of(R"([[["local"], 1], [["global"], 1]])");
  EXPECT_EQ(parse_model_config(items, "items").layer_types,
            (std::vector<AttentionType>{AttentionType::kSliding, AttentionType::kFull}));
}

TEST(GptNeoModels, RefusesWhatItCannotBuild) {
  // Each value as the file writes it (JSON text).
  const auto refused = [](const char* key, const char* value, const std::string& what) {
    nlohmann::json j = tiny();
    j[key] = json_of(value);
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); },
                ThrowsMessage<Error>(HasSubstr("bad.json: field '" + std::string(key) + "'")))
        << key;
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); }, ThrowsMessage<Error>(HasSubstr(what)))
        << key;
  };
  refused("attention_types", R"("global")", "is not a list");
  refused("attention_types", R"([["global", 2]])", "is not a [[types...], count] item");
  refused("attention_types", R"([[["global"], 2.5]])", "is not a [[types...], count] item");
  refused("attention_types", R"([[["global"], -1]])", "the count must be an integer >= 0");
  refused("attention_types", R"([[[1, "local"], 1]])", "1 is not a name");
  refused("attention_types", R"([[["global", "local"], 5]])", "gives more than 2 layer types");
  refused("attention_types", R"([[["global"], 1]])", "gives 1 layer types for num_layers = 2");
  refused("attention_types", R"([[["global", "sparse"], 1]])",
          "'sparse' is not a GPT-Neo attention");
  refused("attention_layers", R"(["global"])", "gives 1 layer types for num_layers = 2");
  refused("attention_layers", R"(["global", "dense"])", "'dense' is not a GPT-Neo attention type");
  refused("attention_layers", "null", "is null");
  refused("window_size", "0", "0 leaves a local layer's queries no key");
  refused("num_heads", "3", "3 does not divide hidden_size 64");
  refused("num_layers", "0", "0 layers, expected 1 to 1024");
  refused("max_position_embeddings", "2000000000", "mask buffer too large");
  refused("activation_function", R"("tanh")", "is not supported");
  // Keys another family's parse reads change the architecture: refused, not ignored.
  refused("layer_types", R"(["sliding_attention", "full_attention"])", "changes the architecture");

  // A config built in code asking for a chunked layer: GPTNeoAttention has global and local only.
  ModelConfig chunked = parse_model_config(tiny(), "tiny");
  chunked.layer_types[1] = AttentionType::kChunked;
  chunked.attention_chunk_size = 4;
  EXPECT_THAT([&] { build_model(chunked); },
              ThrowsMessage<Error>(HasSubstr("expected global (full_attention) or local")));
  // Longer than the learned positions: refused when traced, as transformers' index error.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 129); },
              ThrowsMessage<Error>(HasSubstr("exceeds max_position_embeddings 128")));
}

TEST(GptNeoModels, OneLayerMatmulFlopsByHandTheLocalLayerWithinItsWindow) {
  // B 2, S 8 (16 tokens), h 64, 4 heads of 16, F 256:
  //   q, k, v, out_proj 4 x 2 x 16 x 64 x 64 = 524,288; c_fc and c_proj 2 x 2 x 16 x 64 x 256 =
  //   1,048,576; attention 2 x (B x heads) x S x keys x (d + d): the global layer 8 keys,
  //   2 x 8 x 8 x 8 x 32 = 32,768; the local layer its window of 4, 16,384
  //   -> 1,605,632 and 1,589,248; lm_head 2 x 16 x 64 x 1,000 = 2,048,000
  const double dense = 524288 + 1048576;
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_DOUBLE_EQ(g.module_totals().at("transformer.h.0").matmul_flops, dense + 32768);
  EXPECT_DOUBLE_EQ(g.module_totals().at("transformer.h.1").matmul_flops, dense + 16384);
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    // q, k and v [B, heads, S, d]: every head its own keys and values.
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(g.tensors()[static_cast<size_t>(n.inputs[static_cast<size_t>(i)])].sizes,
                DimVector({2, 4, 8, 16}));
    }
  }
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "transformer.h.0.attn.attention"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "transformer.h.1.attn.attention"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "transformer.h.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.ln_f"), 1);

  // The training step of the whole model: two layers and the output layer (the embedding lookups
  // and the loss multiply no matrices).
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 2 * dense + 32768 + 16384 + 2048000);
  EXPECT_EQ(st.totals.parameters, 171'904);
}

TEST(GptNeoModels, TrainingDropsOutTheEmbeddingsTheAttentionAndEachHalf) {
  // embed_dropout after wte + wpe; attention_dropout inside the attention; resid_dropout after
  // out_proj (GPTNeoSelfAttention.resid_dropout) and after c_proj (GPTNeoMLP.dropout).
  const ModulePtr m =
      build_model(parse_model_config(tiny(), "tiny"), {.dtype = std::nullopt, .training = true});
  const OpGraph g = trace_model_forward(*m, 2, 8);
  EXPECT_EQ(ops_in(g, "dropout", "transformer"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.0.attn.attention"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.1.mlp"), 1);
  const ModulePtr eval = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph e = trace_model_forward(*eval, 2, 8);
  int64_t dropouts = 0;
  for (const OpNode& n : e.nodes()) dropouts += n.op == "dropout";
  EXPECT_EQ(dropouts, 0);
}

TEST(GptNeoModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  // wte by vocabulary rows (tied to lm_head, by vocabulary), q/k/v and c_fc column-parallel (each
  // its own Linear: no fused parts), out_proj and c_proj row-parallel.
  const ModelFamily* f = find_family("gpt_neo");
  ASSERT_NE(f, nullptr);
  std::vector<std::tuple<std::string, std::string, int64_t>> rules;
  for (const TensorParallelRule& r : f->tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  using Rule = std::tuple<std::string, std::string, int64_t>;
  EXPECT_EQ(rules, (std::vector<Rule>{{"transformer.wte", "rowwise", 1},
                                      {"transformer.h.*.attn.attention.q_proj", "colwise", 1},
                                      {"transformer.h.*.attn.attention.k_proj", "colwise", 1},
                                      {"transformer.h.*.attn.attention.v_proj", "colwise", 1},
                                      {"transformer.h.*.attn.attention.out_proj", "rowwise", 1},
                                      {"transformer.h.*.mlp.c_fc", "colwise", 1},
                                      {"transformer.h.*.mlp.c_proj", "rowwise", 1},
                                      {"lm_head", "colwise", 1}}));
  // Each pattern names a Linear or the Embedding in a global (0) and a local (1) layer, whose
  // first parameter is its weight.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  for (const char* layer : {"0", "1"}) {
    for (const auto& [pattern, style, parts] : rules) {
      std::string fqn = pattern;
      if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, layer);
      const std::string type = m->get_submodule(fqn).type_name();
      EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
      // lm_head.weight is wte's (tied): listed once, under wte.
      if (fqn != "lm_head") {
        EXPECT_EQ(names_under(*m, fqn + ".").front(), "weight") << fqn;
      }
    }
  }
  EXPECT_TRUE(f->learned_positions);
  EXPECT_FALSE(f->fused_qkv);
  EXPECT_FALSE(f->rotary);
  EXPECT_EQ(f->layers_path, "transformer.h");
  EXPECT_EQ(f->file_key("num_hidden_layers"), "num_layers");
  EXPECT_EQ(f->file_key("num_attention_heads"), "num_heads");
  EXPECT_EQ(f->file_key("sliding_window"), "window_size");
  EXPECT_EQ(f->file_key("layer_types"), "attention_types");
}

TEST(GptNeoModels, InitIsPreTrainedModelsWithoutDepthScaling) {
  nlohmann::json j = tiny();
  j["initializer_range"] = 0.02;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  const ParameterInit zero{ParameterInit::Kind::kConstant, 0.0, 0.0};
  EXPECT_EQ(init.at("transformer.h.0.attn.attention.q_proj.weight"), normal);
  EXPECT_EQ(init.at("transformer.h.1.attn.attention.out_proj.weight"), normal);
  EXPECT_EQ(init.at("transformer.h.1.attn.attention.out_proj.bias"), zero);
  EXPECT_EQ(init.at("transformer.h.0.mlp.c_proj.weight"), normal);  // no GPT-2 residual scaling
  EXPECT_EQ(init.at("transformer.h.0.mlp.c_fc.bias"), zero);
  EXPECT_EQ(init.at("transformer.h.0.ln_1.weight"), one);
  EXPECT_EQ(init.at("transformer.ln_f.bias"), zero);
  EXPECT_EQ(init.at("transformer.wte.weight"), normal);  // no padding_idx row
  EXPECT_EQ(init.at("transformer.wpe.weight"), normal);
  EXPECT_EQ(init.size(), 30u);  // 2 x 13 in the layers, wte, wpe, ln_f's two (lm_head tied)
}

}  // namespace
}  // namespace shardplan::tensor
