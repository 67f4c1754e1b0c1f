// deepseek_v4 (DeepSeek-V4-Flash and -Pro) against hand formulas written here from transformers'
// modeling_deepseek_v4.py and the published "284B total / 13B active" (Flash) and "1.6T total /
// 49B active" (Pro). h hidden, V vocabulary, n heads of d, q q_lora_rank, g o_groups of rank r,
// E experts of width F (the shared expert as wide), s hc_mult streams (mix = (2 + s) s), i
// indexer heads of e, m and m' the CSA and HCA rates:
//   attention A  sinks [n], q_a_proj [q, h], q_a_norm [q], q_b_proj [n d, q], kv_proj [d, h],
//                kv_norm [d], o_a_proj [g r, n d / g], o_b_proj [h, g r]
//   CSA       C  compressor: position_bias [m, 2d], kv_proj, gate_proj [2d, h], kv_norm [d];
//                indexer: position_bias [m, 2e], kv_proj, gate_proj [2e, h], kv_norm [e],
//                q_b_proj [i e, q], scorer.weights_proj [i, h]
//   HCA       Hc compressor: position_bias [m', d], kv_proj, gate_proj [d, h], kv_norm [d]
//   MoE       M  gate.weight [E, h], experts.gate_up_proj [E, 2F, h], down_proj [E, h, F],
//                shared_experts gate/up [F, h], down [h, F]
//   layer        input_layernorm, post_attention_layernorm [h]; attn_hc and ffn_hc: fn
//                [mix, s h], base [mix], scale [3]
//   model        embed [V, h], norm [h], hc_head: hc_fn [s, s h], hc_base [s], hc_scale [1],
//                lm_head [V, h] unless tied
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t h, n, d, q, g, r, E, F, s, i, e, m, m2;
};
int64_t attention(const Sizes& z) {
  return z.n + z.q * z.h + z.q + z.n * z.d * z.q + z.d * z.h + z.d + z.r * z.n * z.d +
         z.h * z.g * z.r;
}
int64_t csa(const Sizes& z) {
  const int64_t indexer = z.m * 2 * z.e + 2 * (2 * z.e * z.h) + z.e + z.i * z.e * z.q + z.i * z.h;
  return z.m * 2 * z.d + 2 * (2 * z.d * z.h) + z.d + indexer;
}
int64_t hca(const Sizes& z) { return z.m2 * z.d + 2 * z.d * z.h + z.d; }
int64_t moe(const Sizes& z) { return z.E * z.h + 3 * z.E * z.h * z.F + 3 * z.h * z.F; }
int64_t layer_base(const Sizes& z) {
  const int64_t mix = (2 + z.s) * z.s;
  return attention(z) + moe(z) + 2 * z.h + 2 * (mix * z.s * z.h + mix + 3);
}
int64_t model_level(const Sizes& z, int64_t V, bool tied) {
  return V * z.h * (tied ? 1 : 2) + z.h + z.s * z.s * z.h + z.s + 1;
}

// The spec's tiny config: one layer of each attention type, two hash-routed layers.
nlohmann::json tiny() {
  return {
      {"model_type", "deepseek_v4"},
      {"vocab_size", 256},
      {"hidden_size", 64},
      {"moe_intermediate_size", 32},
      {"num_hidden_layers", 4},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 1},
      {"head_dim", 32},
      {"partial_rotary_factor", 0.25},
      {"q_lora_rank", 48},
      {"o_groups", 2},
      {"o_lora_rank", 16},
      {"n_routed_experts", 4},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", 2},
      {"index_n_heads", 2},
      {"index_head_dim", 16},
      {"index_topk", 2},
      {"sliding_window", 8},
      {"hc_mult", 2},
      {"hc_sinkhorn_iters", 3},
      {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 8}}},
      {"layer_types",
       {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
        "compressed_sparse_attention"}},
      {"mlp_layer_types", {"hash_moe", "hash_moe", "moe", "moe"}},
      {"max_position_embeddings", 256},
      {"num_nextn_predict_layers", 0},
      {"tie_word_embeddings", false}};
}
constexpr Sizes kTiny{64, 4, 32, 48, 2, 16, 4, 32, 2, 2, 16, 4, 8};

TEST(DeepseekV4Models, TinyConfigMatchesTheHandTotal) {
  // A: sinks 4 + q_a_proj 48 x 64 (3,072) + q_a_norm 48 + q_b_proj 128 x 48 (6,144)
  //    + kv_proj 32 x 64 (2,048) + kv_norm 32 + o_a_proj [32, 64] (2,048) + o_b_proj [64, 32]
  //    (2,048) = 15,444
  // C: position_bias [4, 64] 256 + kv_proj, gate_proj [64, 64] 8,192 + kv_norm 32 + indexer
  //    (position_bias [4, 32] 128 + kv_proj, gate_proj [32, 64] 4,096 + kv_norm 16 + q_b_proj
  //    [32, 48] 1,536 + weights_proj [2, 64] 128 = 5,904) = 14,384
  // Hc: position_bias [8, 32] 256 + kv_proj, gate_proj [32, 64] 4,096 + kv_norm 32 = 4,384
  // M: gate 256 + gate_up_proj [4, 64, 64] 16,384 + down_proj [4, 64, 32] 8,192 + shared
  //    3 x 64 x 32 6,144 = 30,976
  // layer base: A + M + norms 128 + 2 x (fn [8, 128] 1,024 + base 8 + scale 3) 2,070 = 48,618
  // layers: 48,618 (sliding) + 63,002 (CSA) + 53,002 (HCA) + 63,002 (CSA) = 227,624
  // model: embed 16,384 + norm 64 + hc_head 256 + 2 + 1 + lm_head 16,384: 260,715.
  EXPECT_EQ(attention(kTiny), 15444);
  EXPECT_EQ(csa(kTiny), 14384);
  EXPECT_EQ(hca(kTiny), 4384);
  EXPECT_EQ(moe(kTiny), 30976);
  EXPECT_EQ(layer_base(kTiny), 48618);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "DeepseekV4ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 260715);
  EXPECT_EQ(m->parameters_numel(),
            model_level(kTiny, 256, false) + 4 * layer_base(kTiny) + 2 * csa(kTiny) + hca(kTiny));
  // A CSA layer in transformers' registration order (a module's own parameters first: sinks,
  // position_bias; the router before the experts).
  const Names csa_layer = {"self_attn.sinks",
                           "self_attn.q_a_proj.weight",
                           "self_attn.q_a_norm.weight",
                           "self_attn.q_b_proj.weight",
                           "self_attn.kv_proj.weight",
                           "self_attn.kv_norm.weight",
                           "self_attn.o_a_proj.weight",
                           "self_attn.o_b_proj.weight",
                           "self_attn.compressor.position_bias",
                           "self_attn.compressor.kv_proj.weight",
                           "self_attn.compressor.gate_proj.weight",
                           "self_attn.compressor.kv_norm.weight",
                           "self_attn.compressor.indexer.position_bias",
                           "self_attn.compressor.indexer.kv_proj.weight",
                           "self_attn.compressor.indexer.gate_proj.weight",
                           "self_attn.compressor.indexer.kv_norm.weight",
                           "self_attn.compressor.indexer.q_b_proj.weight",
                           "self_attn.compressor.indexer.scorer.weights_proj.weight",
                           "mlp.gate.weight",
                           "mlp.experts.gate_up_proj",
                           "mlp.experts.down_proj",
                           "mlp.shared_experts.gate_proj.weight",
                           "mlp.shared_experts.up_proj.weight",
                           "mlp.shared_experts.down_proj.weight",
                           "input_layernorm.weight",
                           "post_attention_layernorm.weight",
                           "attn_hc.fn",
                           "attn_hc.base",
                           "attn_hc.scale",
                           "ffn_hc.fn",
                           "ffn_hc.base",
                           "ffn_hc.scale"};
  EXPECT_EQ(names_under(*m, "model.layers.1."), csa_layer);
  EXPECT_EQ(test::shapes_under(*m, "model.layers.2.self_attn.compressor."),
            (test::Shapes{{"position_bias", {8, 32}},
                          {"kv_proj.weight", {32, 64}},
                          {"gate_proj.weight", {32, 64}},
                          {"kv_norm.weight", {32}}}));
  EXPECT_EQ(names_under(*m, "model.layers.0.self_attn.compressor."), Names{});
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.o_a_proj.weight").sizes(),
            (DimVector{32, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.compressor.position_bias").sizes(),
            (DimVector{4, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.attn_hc.fn").sizes(), (DimVector{8, 128}));
  EXPECT_EQ(test::shapes_under(*m, "model.hc_head."),
            (test::Shapes{{"hc_fn", {2, 128}}, {"hc_base", {2}}, {"hc_scale", {1}}}));
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.gate").type_name(), "DeepseekV4HashRouter");
  EXPECT_EQ(m->get_submodule("model.layers.2.mlp.gate").type_name(), "DeepseekV4TopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn.compressor").type_name(),
            "DeepseekV4CSACompressor");
  EXPECT_EQ(m->get_submodule("model.layers.2.self_attn.compressor").type_name(),
            "DeepseekV4HCACompressor");
  // Tied: lm_head shares the embedding (16,384 fewer).
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 244331);
  // The shared expert's three biases with mlp_bias: 32 + 32 + 64 per layer.
  j = tiny();
  j["mlp_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 260715 + 4 * 128);
  // to_hf_json reads back to the same config.
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The published files' legacy keys give the same model: compress_ratios (one more entry, the MTP
// layer's, cut; its 128 only tags HCA, the rate is compress_rate_hca's), num_hash_layers,
// qk_rope_head_dim.
TEST(DeepseekV4Models, LegacyKeysReadAsTheClassKeys) {
  nlohmann::json j = tiny();
  for (const char* k :
       {"partial_rotary_factor", "compress_rates", "layer_types", "mlp_layer_types"}) {
    j.erase(k);
  }
  j["qk_rope_head_dim"] = 8;
  j["compress_ratios"] = {0, 4, 128, 4, 0};
  j["compress_rate_hca"] = 8;
  j["num_hash_layers"] = 2;
  EXPECT_EQ(parse_model_config(j, "legacy.json"), parse_model_config(tiny(), "tiny.json"));
  // Tags other than 0, 4 and 128 raise in DeepseekV4Config; a list shorter than the layers too.
  j["compress_ratios"] = {0, 4, 8, 4};
  EXPECT_THAT([&] { (void)parse_model_config(j, "legacy.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'compress_ratios'")));
  j["compress_ratios"] = {0, 4, 128};
  EXPECT_THAT([&] { (void)parse_model_config(j, "legacy.json"); },
              ThrowsMessage<Error>(HasSubstr("one entry per layer (4)")));
}

TEST(DeepseekV4Models, ClassDefaultsAndRefusals) {
  // No layer types at all: HCA on layers 0-2, then CSA on odd layers and HCA on even ones.
  nlohmann::json j = tiny();
  j.erase("layer_types");
  j["num_hidden_layers"] = 6;
  j.erase("mlp_layer_types");
  const ModelConfig c = parse_model_config(j, "defaults.json");
  using T = AttentionType;
  EXPECT_EQ(c.layer_types,
            (std::vector<T>{T::kHeavilyCompressed, T::kHeavilyCompressed, T::kHeavilyCompressed,
                            T::kCompressedSparse, T::kHeavilyCompressed, T::kCompressedSparse}));
  EXPECT_EQ(c.hash_moe_layers, (std::vector<int64_t>{0, 1, 2}));  // num_hash_layers 3
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.shared_expert_intermediate_size, 32);
  // intermediate_size is the attribute_map name of moe_intermediate_size, and wins.
  j["intermediate_size"] = 16;
  EXPECT_EQ(parse_model_config(j, "defaults.json").intermediate_size, 16);
  // scoring_func "softmax" is no ACT2FN name: DeepseekV4TopKRouter cannot be built.
  j = tiny();
  j["scoring_func"] = "softmax";
  EXPECT_THAT([&] { (void)parse_model_config(j, "v4.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'scoring_func'")));
  // The grouped output projection splits whole heads.
  j = tiny();
  j["o_groups"] = 3;
  EXPECT_THAT([&] { (void)parse_model_config(j, "v4.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'o_groups'")));
  j = tiny();
  j["layer_types"][1] = "full_attention";
  EXPECT_THAT([&] { (void)parse_model_config(j, "v4.json"); },
              ThrowsMessage<Error>(HasSubstr("not a DeepSeek-V4 layer type")));
  j = tiny();
  j["index_head_dim"] = 4;  // narrower than the 8 rotated channels
  EXPECT_THAT([&] { (void)parse_model_config(j, "v4.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'index_head_dim'")));
  // A DeepSeek-V3 file carrying V4's hyper-connections describes another model: refused.
  nlohmann::json v3 = to_hf_json(find_model_source("deepseek-v3").config);
  v3["hc_mult"] = 4;
  EXPECT_THAT([&] { (void)parse_model_config(v3, "v3.json"); },
              ThrowsMessage<Error>(HasSubstr("hc_mult")));
}

// The stack's kinds: what the planner traces once each.
TEST(DeepseekV4Models, LayerKindsNameTheCompressionAndTheRouting) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 4u);
  EXPECT_EQ(describe(s.kinds[0]), "sliding 8 hash-moe");
  EXPECT_EQ(describe(s.kinds[1]), "csa 4 keys 10 hash-moe");  // window 8 + index_topk 2
  EXPECT_EQ(describe(s.kinds[2]), "hca 8 sliding 8 moe");
  EXPECT_EQ(describe(s.kinds[3]), "csa 4 keys 10 moe");
  for (const LayerKind& k : s.kinds) {
    const ModelConfig one = uniform_config(c, k);
    EXPECT_EQ(layer_kind(one, 0), k);
  }
  EXPECT_EQ(first_layers(c, 1).hash_moe_layers, (std::vector<int64_t>{0}));
}

// Note [Compressed attention trace] and Note [Hyper-connection trace]: the streams are hc_mult
// wide throughout, CSA layers run their indexer's fused scoring and the attention, HCA layers the
// attention alone, and each hyper-connection mixes the streams with one batched product.
TEST(DeepseekV4Models, TraceRunsCompressorsIndexerAndHyperConnections) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 32);
  const std::string sdpa = "scaled_dot_product_attention";
  EXPECT_EQ(ops_under(g, sdpa, "model.layers.0.self_attn"), 1);
  EXPECT_EQ(ops_under(g, sdpa, "model.layers.1.self_attn"), 2);  // indexer + attention
  EXPECT_EQ(ops_under(g, sdpa, "model.layers.1.self_attn.compressor.indexer"), 1);
  EXPECT_EQ(ops_under(g, sdpa, "model.layers.2.self_attn"), 1);
  EXPECT_EQ(ops_under(g, "softmax", "model.layers.2.self_attn.compressor"), 1);
  EXPECT_EQ(ops_under(g, "matmul", "model.layers.1.attn_hc"), 1);
  // The layer's output is the streams: [1, 32, 2, 64].
  bool streams_out = false;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.3.ffn_hc" && n.op == "add") {
      streams_out = g.tensor(n.outputs.back()).sizes == DimVector{1, 32, 2, 64};
    }
  }
  EXPECT_TRUE(streams_out);
}

// DeepSeek-V4-Flash (configs/models/deepseek-v4-flash.json, the published config.json with its
// legacy keys): 2 sliding, 21 CSA and 20 HCA layers, hash routing on layers 0-2; "284B total,
// 13B active".
TEST(DeepseekV4Models, FlashAndProAreThePublishedSizes) {
  const Sizes flash{4096, 64, 512, 1024, 8, 1024, 256, 2048, 4, 64, 128, 4, 128};
  EXPECT_EQ(attention(flash), 106'956'352);
  EXPECT_EQ(csa(flash), 19'142'272);
  EXPECT_EQ(hca(flash), 4'260'352);
  const int64_t V = 129280;
  const int64_t flash_total =
      model_level(flash, V, false) + 43 * layer_base(flash) + 21 * csa(flash) + 20 * hca(flash);
  EXPECT_EQ(flash_total, 284'332'230'231);
  const ModelConfig fc = find_model_source("deepseek-v4-flash").config;
  const LayerStack fs = layer_stack(fc);
  EXPECT_EQ(fc.hash_moe_layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(fc.layer_types[1], AttentionType::kSliding);
  EXPECT_EQ(fc.layer_types[2], AttentionType::kCompressedSparse);
  EXPECT_EQ(fc.layer_types[42], AttentionType::kCompressedSparse);
  EXPECT_EQ(fs.kinds.size(), 4u);  // sliding hash, CSA hash, HCA, CSA
  const ModulePtr f = build_model(fc);
  EXPECT_EQ(f->parameters_numel(), flash_total);
  const int64_t flash_active = flash_total - int64_t{43} * (256 - 6) * 3 * 4096 * 2048;
  EXPECT_EQ(flash_active, 13'799'622'231);
  EXPECT_EQ(active_parameters(*f, fc), flash_active);
  // The score-correction buffers of the 40 top-k layers (the 3 hash-routed ones have none).
  EXPECT_EQ(parameters_beyond_model(fc).router_bias, 40 * 256);
  // Pro: 31 HCA and 30 CSA, no sliding-only layer; "1.6T total, 49B active".
  const Sizes pro{7168, 128, 512, 1536, 16, 1024, 384, 3072, 4, 64, 128, 4, 128};
  const int64_t pro_total =
      model_level(pro, V, false) + 61 * layer_base(pro) + 30 * csa(pro) + 31 * hca(pro);
  EXPECT_EQ(pro_total, 1'572'997'179'491);
  const ModelConfig pc = find_model_source("deepseek-v4-pro").config;
  EXPECT_EQ(std::count(pc.layer_types.begin(), pc.layer_types.end(), AttentionType::kSliding), 0);
  const ModulePtr p = build_model(pc);
  EXPECT_EQ(p->parameters_numel(), pro_total);
  EXPECT_EQ(active_parameters(*p, pc), pro_total - 61 * (384 - 6) * int64_t{3} * 7168 * 3072);
  EXPECT_EQ(active_parameters(*p, pc), 49'779'058'787);
}

}  // namespace
}  // namespace shardplan::tensor
