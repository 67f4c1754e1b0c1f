// Granite (granite, granitemoe, granitemoeshared) and Cohere (cohere, cohere2) against hand
// formulas written here from their transformers modules (modeling_granite*.py, modeling_cohere*.py,
// transformers 5.16) and the published totals. h hidden, V vocabulary, F MLP width, hd head_dim,
// kv key-value heads, E experts:
//   granite          Llama's layer; embeddings * embedding_multiplier, each half's output *
//                    residual_multiplier, logits / logits_scaling: elementwise ops, no parameter
//   granitemoe       its layer registers self_attn, the two norms, then block_sparse_moe: router
//                    [E, h], experts.gate_up_proj [E, 2F, h], experts.down_proj [E, h, F]
//   granitemoeshared + shared_mlp: input_linear [2S, h], output_linear [h, S]
//   cohere           one LayerNorm (weight, no bias) before attention and MLP side by side; with
//                    use_qk_norm per-head q_norm [heads, hd], k_norm [kv, hd]; logits *
//                    logit_scale; tied embeddings
//   cohere2          cohere without q/k norms; three sliding RoPE layers of four, the fourth full
//                    and NoPE
//   arcee            Llama's layer with an ungated MLP, down(relu(up(x))^2)
//   cohere2_moe      cohere2's layer with a sparse block or a dense prefix MLP
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Ops named `op` run by the module `module` itself (not its children).
int64_t ops_in(const OpGraph& g, const std::string& op, const std::string& module) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op && node.module == module;
  return n;
}

nlohmann::json tiny(const std::string& type) {
  return {{"model_type", type},       {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 4},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(GraniteCohereModels, Granite31EightBMatchesTheHandTotal) {
  // granite-3.1-8b: V 49,155 tied, h 4,096, 40 layers of 32 heads of 128 (8 kv heads), F 12,800.
  const int64_t V = 49155, h = 4096, kv = 8 * 128, F = 12800;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + 2 * h;
  const int64_t total = V * h + 40 * layer + h;
  EXPECT_EQ(total, 8'170'848'256);  // "8B"
  const ModelConfig c = find_model_config("granite-3.1-8b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "GraniteForCausalLM");
  EXPECT_DOUBLE_EQ(c.embedding_multiplier, 12.0);
  EXPECT_DOUBLE_EQ(c.residual_multiplier, 0.22);
  EXPECT_DOUBLE_EQ(c.attention_multiplier, 1.0 / 128);
  EXPECT_DOUBLE_EQ(c.logits_scaling, 16.0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteCohereModels, GraniteMultipliersAreOpsLlamaDoesNotRun) {
  nlohmann::json j = tiny("granite");
  const ModelConfig granite = parse_model_config(j, "tiny granite");
  // GraniteConfig's defaults: every multiplier 1.0, applied all the same.
  EXPECT_DOUBLE_EQ(granite.attention_multiplier, 1.0);
  EXPECT_FALSE(granite.pad_token_id);
  j["model_type"] = "llama";
  const ModelConfig llama = parse_model_config(j, "tiny llama");
  const ModulePtr g = build_model(granite), l = build_model(llama);
  EXPECT_EQ(g->parameters_numel(), l->parameters_numel());
  const OpGraph gg = trace_model_forward(*g, 2, 8), lg = trace_model_forward(*l, 2, 8);
  // Two products per layer, on each half's output before its residual add.
  EXPECT_EQ(ops_in(gg, "mul", "model.layers.0"), ops_in(lg, "mul", "model.layers.0") + 2);
  EXPECT_EQ(ops_in(gg, "mul", "model"), ops_in(lg, "mul", "model") + 1);  // the embeddings
  EXPECT_EQ(ops_in(gg, "div", ""), ops_in(lg, "div", "") + 1);            // the logits
  EXPECT_EQ(gg.nodes().size(), lg.nodes().size() + 2 * 4 + 2);
  // Bad multipliers are refused, naming the key.
  j["model_type"] = "granite";
  j["attention_multiplier"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("attention_multiplier")));
  j["attention_multiplier"] = 0.125;
  j["logits_scaling"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("logits_scaling")));
  j["logits_scaling"] = "8";
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("expected a number")));
}

TEST(GraniteCohereModels, GraniteMoe3bA800mMatchesTheHandTotal) {
  // granite-3.0-3b-a800m: V 49,155 tied, h 1,536, 32 layers of 24 heads of 64 (8 kv heads),
  // 40 experts of F 512, top 8.
  const int64_t V = 49155, h = 1536, kv = 8 * 64, E = 40, F = 512;
  const int64_t layer = 2 * h * h + 2 * h * kv + E * h + E * 2 * F * h + E * h * F + 2 * h;
  const int64_t total = V * h + 32 * layer + h;
  EXPECT_EQ(total, 3'298'793'472);  // "3B"
  const ModelConfig c = find_model_config("granite-3.0-3b-a800m");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "GraniteMoeForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "input_layernorm.weight",
                "post_attention_layernorm.weight", "block_sparse_moe.router.weight",
                "block_sparse_moe.experts.gate_up_proj", "block_sparse_moe.experts.down_proj"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.block_sparse_moe.experts.gate_up_proj").sizes(),
            DimVector({E, 2 * F, h}));
  EXPECT_EQ(m->get_parameter("model.layers.0.block_sparse_moe.experts.down_proj").sizes(),
            DimVector({E, h, F}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // "a800m": attention, router, 8 of 40 experts and norms per layer, and the final norm (the
  // parameters a token meets outside the embedding), from the built model's expert tensors.
  const int64_t experts =
      m->get_parameter("model.layers.0.block_sparse_moe.experts.gate_up_proj").numel() +
      m->get_parameter("model.layers.0.block_sparse_moe.experts.down_proj").numel();
  const int64_t active = m->parameters_numel() -
                         m->get_parameter("model.embed_tokens.weight").numel() -
                         32 * experts / E * (E - 8);
  EXPECT_EQ(active, 807'372'288);
}

// GraniteMoe's router: the top k logits, then a softmax over those k (GraniteMoeTopKRouter), not
// a softmax over every expert.
TEST(GraniteCohereModels, GraniteMoeSoftmaxRunsOverTheTopKLogits) {
  nlohmann::json j = tiny("granitemoe");
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  const ModulePtr m = build_model(parse_model_config(j, "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  int64_t softmaxes = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.0.block_sparse_moe" && n.op == "softmax") {
      ++softmaxes;
      EXPECT_EQ(g.tensor(n.inputs[0]).sizes, DimVector({16, 2}));
    }
  }
  EXPECT_EQ(softmaxes, 1);
}

TEST(GraniteCohereModels, GraniteMoeSharedAddsItsSharedMlpBesideTheBlock) {
  nlohmann::json j = tiny("granitemoeshared");
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  j["shared_intermediate_size"] = 96;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "input_layernorm.weight",
                "post_attention_layernorm.weight", "block_sparse_moe.router.weight",
                "block_sparse_moe.experts.gate_up_proj", "block_sparse_moe.experts.down_proj",
                "shared_mlp.input_linear.weight", "shared_mlp.output_linear.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.shared_mlp.input_linear.weight").sizes(),
            DimVector({2 * 96, 64}));
  const int64_t h = 64, kv = 2 * 16,
                layer = 2 * h * h + 2 * h * kv + 4 * h + 4 * 3 * 128 * h + 3 * 96 * h + 2 * h;
  EXPECT_EQ(m->parameters_numel(), 2 * 1000 * h + 4 * layer + h);  // untied by default
  // The shared MLP reads the normed tokens the block reads; its sum joins before the residual
  // multiplier: the layer's own ops are attention's product and add, then the sum, the product
  // and the add of the feed-forward half.
  const OpGraph g = trace_model_forward(*m, 2, 8);
  std::vector<std::string> layer_ops;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.1") layer_ops.push_back(n.op);
  }
  EXPECT_EQ(layer_ops, (std::vector<std::string>{"mul", "add", "add", "mul", "add"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  j["shared_intermediate_size"] = 0;  // GraniteMoeSharedConfig's default: no shared MLP
  EXPECT_TRUE(names_under(*build_model(parse_model_config(j, "none")), "model.layers.1.shared_mlp")
                  .empty());
}

// The Hub's GraniteMoe files keep transformers 4's names: block_sparse_moe.input_linear.weight
// [E, 2F, h], output_linear.weight [E, h, F] and router.layer.weight [E, h], which transformers
// 5.13 renames on load to the model's experts.gate_up_proj, experts.down_proj and router.weight.
TEST(GraniteCohereModels, GraniteMoeHubCheckpointNamesFitTheModel) {
  nlohmann::json cfg = tiny("granitemoe");
  cfg["num_local_experts"] = 4;
  cfg["num_experts_per_tok"] = 2;
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  const ModelSource src = test::check_stored_as(cfg, *model, [](std::string n) {
    for (const auto& [built, stored] :
         {std::pair<std::string, std::string>{".experts.gate_up_proj", ".input_linear.weight"},
          {".experts.down_proj", ".output_linear.weight"},
          {".router.weight", ".router.layer.weight"}}) {
      if (n.ends_with(built)) n = n.substr(0, n.size() - built.size()) + stored;
    }
    return n;
  });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

TEST(GraniteCohereModels, GraniteMoeSharedSevenBMatchesItsCheckpointsSize) {
  // moe-7b-1b-active-shared-experts (a reconstructed config, docs/models.md): V 50,257 tied,
  // h 1,536, 40 layers of 12 heads of 128 (4 kv heads), 62 experts of F 512, top 6, shared S
  // 1,024. Its six float32 shards hold 25.49 GB on the Hub: 4 bytes per parameter.
  const int64_t V = 50257, h = 1536, kv = 4 * 128, E = 62, F = 512, S = 1024;
  const int64_t layer = 2 * h * h + 2 * h * kv + E * h + E * 3 * F * h + 3 * S * h + 2 * h;
  const int64_t total = V * h + 40 * layer + h;
  EXPECT_EQ(total, 6'372'584'448);
  EXPECT_EQ(total * 4 / 10'000'000, 2549);  // 25.49 GB
  const ModelConfig c = find_model_config("moe-7b-1b-active-shared-experts");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteCohereModels, CommandRMatchesTheHandTotal) {
  // c4ai-command-r-v01: V 256,000 tied, h 8,192, 40 layers of 64 heads of 128 (no GQA),
  // F 22,528; one LayerNorm weight per layer.
  const int64_t V = 256000, h = 8192, F = 22528;
  const int64_t layer = 4 * h * h + 3 * h * F + h;
  const int64_t total = V * h + 40 * layer + h;
  EXPECT_EQ(total, 34'980'831'232);  // "35B"
  const ModelConfig c = find_model_config("command-r-v01");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "CohereForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                      "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                      "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                      "mlp.down_proj.weight", "input_layernorm.weight"}));
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteCohereModels, CommandRPlusNormsQAndKPerHead) {
  // c4ai-command-r-plus: h 12,288, 64 layers of 96 heads of 128 (8 kv heads), F 33,792, and
  // use_qk_norm: q_norm [96, 128], k_norm [8, 128] per layer.
  const int64_t V = 256000, h = 12288, kv = 8 * 128, F = 33792;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + h + 96 * 128 + 8 * 128;
  const int64_t total = V * h + 64 * layer + h;
  EXPECT_EQ(total, 103'810'674'688);  // "104B"
  const ModelConfig c = find_model_config("command-r-plus");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_norm.weight").sizes(),
            DimVector({96, 128}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_norm.weight").sizes(),
            DimVector({8, 128}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteCohereModels, CohereRunsBothHalvesOnOneNormAndScalesTheLogits) {
  nlohmann::json j = tiny("cohere");
  j["use_qk_norm"] = true;
  const ModelConfig c = parse_model_config(j, "tiny cohere");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.logit_scale, 0.0625);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);  // CohereConfig's default_theta (transformers 5)
  const ModulePtr m = build_model(c);
  const OpGraph g = trace_model_forward(*m, 2, 8);
  // x + attn(n) + mlp(n): two adds in the layer and one norm, read by both halves.
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.self_attn.q_norm"), 1);
  EXPECT_EQ(ops_in(g, "mul", ""), 1);  // logits * logit_scale
  // q and k cast to float32 for RoPE and back (CohereAttention's apply_rotary_pos_emb); the
  // per-head norms run before, on the bfloat16 projections.
  EXPECT_EQ(ops_in(g, "to", "model.layers.0.self_attn"), 4);
  int64_t casts = 0, casts_before_q_norm = -1;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.0.self_attn" && n.op == "to") ++casts;
    if (n.module == "model.layers.0.self_attn.q_norm" && casts_before_q_norm < 0) {
      casts_before_q_norm = casts;
    }
  }
  EXPECT_EQ(casts_before_q_norm, 0);
  j["logit_scale"] = nullptr;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("logit_scale")));
}

TEST(GraniteCohereModels, CommandAMatchesTheHandTotalAndItsLayerKinds) {
  // c4ai-command-a-03-2025: h 12,288, 64 layers of 96 heads of 128 (8 kv heads), F 36,864.
  const int64_t V = 256000, h = 12288, kv = 8 * 128, F = 36864;
  const int64_t layer = 2 * h * h + 2 * h * kv + 3 * h * F + h;
  const int64_t total = V * h + 64 * layer + h;
  EXPECT_EQ(total, 111'057'580'032);  // "111B"
  const ModelConfig c = find_model_config("command-a-03-2025");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // Three sliding RoPE layers of four (window 4096), the fourth full and NoPE.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 4096 dense");
  EXPECT_EQ(describe(s.kinds[1]), "nope dense");
  EXPECT_EQ(s.count(1), 16);
  EXPECT_EQ(s.first_layer(1), 3);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Command R7B: h 4,096, 32 layers of 32 heads of 128 (8 kv heads), F 14,336.
  const int64_t h7 = 4096, F7 = 14336;
  const int64_t r7b = V * h7 + 32 * (2 * h7 * h7 + 2 * h7 * kv + 3 * h7 * F7 + h7) + h7;
  EXPECT_EQ(r7b, 8'028'033'024);
  EXPECT_EQ(build_model(find_model_config("command-r7b-12-2024"))->parameters_numel(), r7b);
}

TEST(GraniteCohereModels, Cohere2LayersFromItsPattern) {
  nlohmann::json j = tiny("cohere2");
  j["num_hidden_layers"] = 6;
  const ModelConfig dflt = parse_model_config(j, "default");
  EXPECT_EQ(dflt.sliding_window, 4096);
  EXPECT_EQ(dflt.nope_layers, (std::vector<int64_t>{3}));
  EXPECT_DOUBLE_EQ(dflt.rope_theta, 10000);  // Cohere2Config keeps the mixin's default
  EXPECT_EQ(build_model(dflt)->type_name(), "Cohere2ForCausalLM");
  j["sliding_window_pattern"] = 2;
  const ModelConfig two = parse_model_config(j, "two");
  EXPECT_EQ(two.nope_layers, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(two.layer_types[0], AttentionType::kSliding);
  EXPECT_EQ(parse_model_config(to_hf_json(two), "round trip"), two);
  // layer_types wins over the pattern.
  j["layer_types"] = {"full_attention",    "sliding_attention", "sliding_attention",
                      "sliding_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(parse_model_config(j, "types").nope_layers, (std::vector<int64_t>{0, 5}));
  j.erase("layer_types");
  j["sliding_window_pattern"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("sliding_window_pattern")));
  // No window: no layer has one, and Cohere2Attention rotates only where there is one.
  j["sliding_window_pattern"] = 4;
  j["sliding_window"] = nullptr;
  const ModelConfig none = parse_model_config(j, "no window");
  EXPECT_TRUE(none.layer_types.empty());
  EXPECT_EQ(none.nope_layers.size(), 6u);
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
}

// arcee (modeling_arcee.py): Llama's layer whose MLP has no gate, down_proj(relu(up_proj(x))^2).
TEST(GraniteCohereModels, ArceeAfmMatchesTheHandTotalAndSquaresItsRelu) {
  // AFM-4.5B: V 128,004 untied, h 2,560, 36 layers of 20 heads of 128 (4 kv heads), F 18,432
  // (up and down only).
  const int64_t V = 128004, h = 2560, kv = 4 * 128, F = 18432;
  const int64_t layer = 2 * h * h + 2 * h * kv + 2 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 36 * layer + h;
  EXPECT_EQ(total, 4'619'184'640);  // the Hub's 4.6 B
  const ModelConfig c = find_model_config("afm-4.5b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "ArceeForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp."),
            (std::vector<std::string>{"up_proj.weight", "down_proj.weight"}));
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The MLP traces relu then its square, no gate product.
  const ModulePtr tiny_m = build_model(parse_model_config(tiny("arcee"), "tiny"));
  const OpGraph g = trace_model_forward(*tiny_m, 2, 8);
  EXPECT_EQ(ops_in(g, "relu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.mlp"), 0);
}

// cohere2_moe (modeling_cohere2_moe.py): Cohere's parallel layer with a sparse block (router
// "gate" [E, h] before the fused experts of intermediate_size, shared_experts of
// num_shared_experts x intermediate_size) or, on the dense prefix, an MLP of
// prefix_dense_intermediate_size; RMSNorm with rms_norm_eps, else Cohere's LayerNorm.
TEST(GraniteCohereModels, Cohere2MoeDefaultsMatchTheHandTotal) {
  // Cohere2MoeConfig's defaults: V 256,000 tied, h 8,192, 40 layers of 64 heads of 128 (64 kv
  // heads), 8 experts of 22,528 with top 2, no shared expert; one LayerNorm per layer.
  const int64_t V = 256000, h = 8192, E = 8, F = 22528;
  const int64_t layer = 4 * h * h + E * h + E * 3 * h * F + h;
  const int64_t total = V * h + 40 * layer + h;
  EXPECT_EQ(total, 190'004'928'512);
  const ModelConfig c = find_model_config("cohere2-moe");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Cohere2MoeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                      "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                      "mlp.gate.weight", "mlp.experts.gate_up_proj",
                                      "mlp.experts.down_proj", "input_layernorm.weight"}));
  EXPECT_TRUE(c.mean_subtracting_norms);  // no rms_norm_eps: Cohere2MoeLayerNorm
  // Three sliding layers of four, the fourth full and NoPE.
  EXPECT_EQ(c.nope_layers.size(), 10u);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteCohereModels, Cohere2MoeDensePrefixRotatesAndSharedExpertsJoin) {
  nlohmann::json j = tiny("cohere2_moe");  // h 64, F 128, 4 layers
  j["num_experts"] = 4;
  j["num_shared_experts"] = 1;
  j["first_k_dense_replace"] = 1;
  j["prefix_dense_intermediate_size"] = 96;
  j["rms_norm_eps"] = 1e-6;
  j["sliding_window"] = 16;
  const ModelConfig c = parse_model_config(j, "tiny");
  EXPECT_FALSE(c.mean_subtracting_norms);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  // Layer 0 is the dense prefix (its own pattern 1: full, but rotated by force_rope); layers 1-3
  // are MoE with pattern 4 counted from layer 1: sliding, sliding, sliding.
  EXPECT_TRUE(c.nope_layers.empty());
  const ModulePtr m = build_model(c);
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp."),
            (std::vector<std::string>{"gate_proj.weight", "up_proj.weight", "down_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.gate_proj.weight").size(0), 96);
  EXPECT_EQ(
      names_under(*m, "model.layers.1.mlp."),
      (std::vector<std::string>{"gate.weight", "experts.gate_up_proj", "experts.down_proj",
                                "shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                                "shared_experts.down_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.shared_experts.up_proj.weight").size(0), 128);
  EXPECT_EQ(m->get_parameter("model.layers.1.input_layernorm.weight").size(0), 64);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A prefix pattern of 2 leaves the full dense layer without RoPE.
  j["prefix_dense_sliding_window_pattern"] = 2;
  j["first_k_dense_replace"] = 2;
  const ModelConfig nope = parse_model_config(j, "tiny");
  EXPECT_EQ(nope.nope_layers, (std::vector<int64_t>{1}));  // dense layer 1: (1 + 1) % 2 == 0
  EXPECT_EQ(parse_model_config(to_hf_json(nope), "round trip"), nope);
  j["expert_selection_fn"] = "relu";
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("expert_selection_fn")));
}

}  // namespace
}  // namespace shardplan::tensor
