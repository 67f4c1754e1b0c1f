// The DeepSeek-shaped families added for 2026's releases, against hand formulas written here from
// transformers' modules (modeling_deepseek_v32.py, modular_glm_moe_dsa.py,
// modular_glm4_moe_lite.py) and the published totals:
//  - deepseek_v32 (DeepSeek-V3.2): DeepSeek-V3 plus a lightning indexer per layer, wq_b
//    [m e, q_lora], wk [e, h], k_norm LayerNorm [e] with a bias, weights_proj [m, h];
//  - glm_moe_dsa (GLM-5, "744B"): the same with GLM's sizes; "shared" layers have no indexer;
//  - glm4_moe_lite (GLM-4.7-Flash, "30B-A3B"): latent attention and DeepSeek's MoE, the dense
//    layers from mlp_layer_types only.
// Note [Lightning indexer trace] for the FLOPs: the indexer scores every earlier key, the attention
// reads index_topk of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::tensor {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Latent {
  int64_t h, n, q_lora, kv_lora, nope, rope, v;
};

// q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj.
int64_t latent_params(const Latent& a) {
  return a.h * a.q_lora + a.q_lora + a.q_lora * a.n * (a.nope + a.rope) +
         a.h * (a.kv_lora + a.rope) + a.kv_lora + a.kv_lora * a.n * (a.nope + a.v) +
         a.n * a.v * a.h;
}

// wq_b, wk, k_norm (weight and bias), weights_proj.
int64_t indexer_params(int64_t h, int64_t q_lora, int64_t m, int64_t e) {
  return q_lora * m * e + h * e + 2 * e + h * m;
}

// Routed experts (gate, up, down each), the router, one shared expert of the same width.
int64_t moe_params(int64_t h, int64_t experts, int64_t f) {
  return experts * 3 * h * f + experts * h + 3 * h * f;
}

nlohmann::json config_of(const std::string& name) { return to_hf_json(find_model_config(name)); }

TEST(SparseAttentionModels, DeepseekV32IsDeepseekV3WithAnIndexerPerLayer) {
  // DeepSeek-V3's published file: V 129,280, h 7,168, 61 layers of 128 heads (q_lora 1,536,
  // kv_lora 512, 128 + 64 / 128), 3 dense layers of 18,432, then 256 experts of 2,048 and one
  // shared. DeepSeek-V3.2 adds 64 indexer heads of 128.
  const int64_t V = 129280, h = 7168, L = 61;
  const int64_t attention = latent_params({h, 128, 1536, 512, 128, 64, 128});
  const int64_t v3 =
      2 * V * h + L * (attention + 2 * h) + 3 * 3 * h * 18432 + 58 * moe_params(h, 256, 2048) + h;
  EXPECT_EQ(v3, 671'026'404'352);  // the "671B" of DeepSeek-V3 (the MTP module apart)
  EXPECT_EQ(build_model(find_model_config("deepseek-v3"))->parameters_numel(), v3);
  const int64_t indexer = indexer_params(h, 1536, 64, 128);
  EXPECT_EQ(indexer, 13'959'424);
  const ModelConfig c = find_model_config("deepseek-v3.2");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), v3 + L * indexer);
  // Names and shapes as transformers registers them: the indexer after o_proj.
  std::vector<std::string> names;
  for (const auto& [name, t] : m->named_parameters()) {
    if (name.starts_with("model.layers.0.self_attn.")) names.push_back(name.substr(25));
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight",
                                      "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight",
                                      "kv_b_proj.weight", "o_proj.weight", "indexer.wq_b.weight",
                                      "indexer.wk.weight", "indexer.k_norm.weight",
                                      "indexer.k_norm.bias", "indexer.weights_proj.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.5.self_attn.indexer.wq_b.weight").sizes(),
            (DimVector{8192, 1536}));
  EXPECT_EQ(m->get_parameter("model.layers.5.self_attn.indexer.weights_proj.weight").sizes(),
            (DimVector{64, 7168}));
  // Every layer attends to the indexer's top 2048 keys and runs its own indexer.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sparse 2048 dense");
  EXPECT_EQ(describe(s.kinds[1]), "sparse 2048 moe");
  EXPECT_EQ(s.count(1), 58);
}

TEST(SparseAttentionModels, TheIndexerScoresEveryKeyTheAttentionReadsTopK) {
  // A two-layer DeepSeek-V3.2 of small width at 4,096 tokens: the attention counts 2,048 keys per
  // query (2 L min(S, 2048) (192 + 128) per head, 128 heads); the indexer's scoring every key (2 L
  // S (128 + 1) per indexer head: its products and the per-head weights, 64 heads).
  nlohmann::json j = config_of("deepseek-v3.2");
  j["num_hidden_layers"] = 2;
  j.erase("mlp_layer_types");  // per-layer lists of the 61 layers
  j.erase("layer_types");
  j["first_k_dense_replace"] = 1;
  j["n_routed_experts"] = 8;
  j["n_group"] = 1;
  j["topk_group"] = 1;
  const ModelConfig c = parse_model_config(j, "small.json");
  const double L = 4096, topk = 2048;
  const OpGraph g = trace_model_forward(*build_model(c), 1, 4096);
  const std::string a = "model.layers.1.self_attn";
  const double projections =
      2 * L *
      (7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 7168);
  const double indexer_projections = 2 * L * (1536.0 * 64 * 128 + 7168.0 * 128 + 7168.0 * 64);
  const double attention = 2 * 128 * L * topk * (192 + 128);
  const double scoring = 2 * 64 * L * L * (128 + 1);
  EXPECT_DOUBLE_EQ(g.module_totals().at(a + ".indexer").matmul_flops,
                   indexer_projections + scoring);
  EXPECT_DOUBLE_EQ(g.module_totals().at(a).matmul_flops,
                   projections + attention + indexer_projections + scoring);
}

TEST(SparseAttentionModels, Glm5AndItsSharedIndexerLayers) {
  // GLM-5: V 154,880, h 6,144, 78 layers of 64 heads (q_lora 2,048, kv_lora 512, 192 + 64 / 256),
  // 3 dense layers of 12,288, 75 of 256 experts of 2,048 and one shared, 32 indexer heads of 128.
  const int64_t V = 154880, h = 6144, L = 78;
  const int64_t attention = latent_params({h, 64, 2048, 512, 192, 64, 256});
  const int64_t indexer = indexer_params(h, 2048, 32, 128);
  const int64_t hand = 2 * V * h + L * (attention + indexer + 2 * h) + 3 * 3 * h * 12288 +
                       75 * moe_params(h, 256, 2048) + h;
  EXPECT_EQ(hand, 743'911'199'232);  // zai-org's "744B"
  EXPECT_EQ(build_model(find_model_config("glm-5"))->parameters_numel(), hand);
  // GlmMoeDsaConfig's schedule: layer i runs its indexer when max(i - offset + 1, 0) is a
  // multiple of the frequency. Offset 3, frequency 4: layers 0, 1, 2, then 6, 10, ..., 74
  // (18 of them): 21 indexers, 57 layers reusing the previous selection.
  nlohmann::json j = config_of("glm-5");
  j.erase("indexer_types");
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  const ModelConfig shared = parse_model_config(j, "glm-5.x.json");
  EXPECT_EQ(shared.shared_indexer_layers.size(), 57u);
  EXPECT_EQ(shared.shared_indexer_layers.front(), 3);
  EXPECT_EQ(build_model(shared)->parameters_numel(), hand - 57 * indexer);
  EXPECT_EQ(describe(layer_kind(shared, 3)), "sparse 2048 reused moe");
  EXPECT_EQ(describe(layer_kind(shared, 6)), "sparse 2048 moe");
  // The same schedule as a list, and as a pattern string; each round-trips.
  j.erase("index_topk_freq");
  j.erase("index_skip_topk_offset");
  j["indexer_types"] = to_hf_json(shared)["indexer_types"];
  EXPECT_EQ(parse_model_config(j, "list.json"), shared);
  std::string pattern;
  for (const auto& t : j["indexer_types"]) pattern += t == "full" ? 'F' : 'S';
  j.erase("indexer_types");
  j["index_topk_pattern"] = pattern;
  EXPECT_EQ(parse_model_config(j, "pattern.json"), shared);
  // transformers saves the schedule's keys beside the list it derived: the list decides.
  j.erase("index_topk_pattern");
  j["indexer_types"] = to_hf_json(shared)["indexer_types"];
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  j["index_topk_pattern"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "saved.json"), shared);
  j.erase("indexer_types");
  j.erase("index_topk_freq");
  j.erase("index_skip_topk_offset");
  j["index_topk_pattern"] = pattern;
  // No earlier selection for layer 0 to reuse.
  pattern[0] = 'S';
  j["index_topk_pattern"] = pattern;
  EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
              ThrowsMessage<Error>(HasSubstr("bad.json: field 'index_topk_pattern': layer 0")));
  j["index_topk_pattern"] = "FX";
  EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
              ThrowsMessage<Error>(HasSubstr("expected one entry per layer (78)")));
}

TEST(SparseAttentionModels, Glm47FlashTakesItsDenseLayersFromMlpLayerTypes) {
  // GLM-4.7-Flash: V 154,880, h 2,048, 47 layers of 20 heads (which do not divide h: head_dim is
  // the rotated 64), q_lora 768, kv_lora 512, 192 + 64 / 256; layer 0 dense of 10,240, then 64
  // experts of 1,536 (top 4) and one shared.
  const int64_t V = 154880, h = 2048, L = 47;
  const int64_t attention = latent_params({h, 20, 768, 512, 192, 64, 256});
  const int64_t hand =
      2 * V * h + L * (attention + 2 * h) + 3 * h * 10240 + 46 * moe_params(h, 64, 1536) + h;
  EXPECT_EQ(hand, 29'943'390'976);  // "30B-A3B"
  const ModelConfig c = find_model_config("glm-4.7-flash");
  EXPECT_EQ(build_model(c)->parameters_numel(), hand);
  const int64_t active = hand - 46 * 60 * 3 * h * 1536;
  EXPECT_EQ(active_parameters(*build_model(c), c), active);
  EXPECT_NEAR(static_cast<double>(active) / 1e9, 3.9, 0.05);
  // Glm4MoeLiteConfig has no first_k_dense_replace: a file naming another count is refused, the
  // list decides.
  nlohmann::json j = config_of("glm-4.7-flash");
  j.erase("mlp_layer_types");
  j["first_k_dense_replace"] = 3;
  EXPECT_THAT([&] { (void)parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("f.json: field 'first_k_dense_replace': 3")));
  std::vector<std::string> types(47, "sparse");
  types[0] = types[1] = types[2] = "dense";
  j["mlp_layer_types"] = types;
  const ModelConfig three = parse_model_config(j, "f.json");
  EXPECT_EQ(three.dense_layers, (std::vector<int64_t>{0, 1, 2}));
  types[5] = "mixed";
  j["mlp_layer_types"] = types;
  EXPECT_THAT([&] { (void)parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("\"mixed\" is not a layer type")));
}

// Small variants transformers builds: fewer layers than first_k_dense_replace's default (3) are
// all dense (min(first_k_dense_replace, layers)); one GLM-5 layer runs its indexer whatever the
// schedule's default offset.
TEST(SparseAttentionModels, SmallVariantsAsTransformersBuildsThem) {
  nlohmann::json j = config_of("deepseek-v3.2");
  for (const char* list : {"mlp_layer_types", "layer_types", "first_k_dense_replace"})
    j.erase(list);
  j["num_hidden_layers"] = 2;
  const ModelConfig two = parse_model_config(j, "two.json");
  EXPECT_EQ(two.dense_layers, (std::vector<int64_t>{0, 1}));
  j = config_of("glm-5");
  for (const char* list : {"mlp_layer_types", "layer_types", "indexer_types"}) j.erase(list);
  j["num_hidden_layers"] = 1;
  const ModelConfig one = parse_model_config(j, "one.json");
  EXPECT_TRUE(one.shared_indexer_layers.empty());
  EXPECT_TRUE(layer_kind(one, 0).indexer);
  // Layer counts beyond what shardplan builds are refused before any per-layer list is made.
  j["num_hidden_layers"] = int64_t{1} << 40;
  EXPECT_THAT([&] { (void)parse_model_config(j, "huge.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_hidden_layers': 1099511627776 layers")));
  j["num_hidden_layers"] = 0;
  j["indexer_types"] = nlohmann::json::array();
  EXPECT_THAT([&] { (void)parse_model_config(j, "zero.json"); },
              ThrowsMessage<Error>(HasSubstr("num_hidden_layers")));
}

// The multi-token-prediction layer (not the transformers model's) is a DeepSeek-V3.2 layer: its
// own indexer beside DeepSeek-V3's prediction layer.
TEST(SparseAttentionModels, ThePredictionLayerHasItsIndexer) {
  const ModelConfig v3 = find_model_config("deepseek-v3");
  const ModelConfig v32 = find_model_config("deepseek-v3.2");
  EXPECT_EQ(parameters_beyond_model(v32).mtp,
            parameters_beyond_model(v3).mtp + indexer_params(7168, 1536, 64, 128));
}

TEST(SparseAttentionModels, BadIndexerFieldsNameTheField) {
  nlohmann::json j = config_of("deepseek-v3.2");
  j["index_n_heads"] = 0;
  EXPECT_THAT([&] { (void)parse_model_config(j, "v.json"); },
              ThrowsMessage<Error>(HasSubstr("v.json: field 'index_n_heads'")));
  j = config_of("deepseek-v3.2");
  j["q_lora_rank"] = nullptr;
  EXPECT_THAT([&] { (void)parse_model_config(j, "v.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'q_lora_rank'")));
  j = config_of("deepseek-v3.2");
  j["layer_types"] = std::vector<std::string>(61, "full_attention");
  EXPECT_THAT([&] { (void)parse_model_config(j, "v.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'layer_types'")));
  j = config_of("deepseek-v3.2");
  j["index_head_dim"] = 32;  // narrower than the 64 rotated channels
  EXPECT_THAT([&] { (void)parse_model_config(j, "v.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'index_head_dim': 32")));
  // DeepSeek-V3 reads no indexer: a V3 file with one is refused, not built without it.
  j = config_of("deepseek-v3");
  j["index_n_heads"] = 64;
  EXPECT_THAT([&] { (void)parse_model_config(j, "v3.json"); },
              ThrowsMessage<Error>(HasSubstr("index_n_heads")));
}

// transformers 5.x saves DeepSeek Sparse Attention layers as "indexed_attention"
// (remap_legacy_layer_types); both names read as the same layers.
TEST(SparseAttentionModels, IndexedAttentionIsTheNewNameOfTheSparseLayers) {
  const ModelConfig c = find_model_config("deepseek-v3.2");
  nlohmann::json j = to_hf_json(c);
  j["layer_types"] = std::vector<std::string>(61, "indexed_attention");
  EXPECT_EQ(parse_model_config(j, "v32.json"), c);
  j["layer_types"][3] = "full_attention";
  EXPECT_THAT([&] { (void)parse_model_config(j, "v32.json"); },
              ThrowsMessage<Error>(HasSubstr("'layer_types'")));
}

}  // namespace
}  // namespace shardplan::tensor
