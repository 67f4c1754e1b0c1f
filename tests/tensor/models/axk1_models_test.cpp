// axk1 (SK Telecom A.X K1) against hand formulas written here from transformers 5's
// modular_axk1.py, and the published "519B total, 33B active". h hidden, V vocabulary, n heads,
// q q_lora_rank, c kv_lora_rank, dn/dr/dv the nope/rope/value widths, E experts of width F, S
// shared experts of F, the dense MLP I wide:
//   attention  q_a_proj [q, h], q_a_layernorm [q], q_b_proj [n (dn + dr), q],
//              kv_a_proj_with_mqa [c + dr, h], kv_a_layernorm [c], kv_b_proj [n (dn + dv), c],
//              o_proj [h, n dv]
//   dense      mlp.gate_proj, up_proj [I, h], down_proj [h, I] (layers < first_k_dense_replace)
//   moe        mlp.experts.gate_up_proj [E, 2F, h], down_proj [E, h, F], mlp.gate.weight [E, h]
//              (its e_score_correction_bias [E] a buffer), mlp.shared_experts.* (F S wide),
//              mlp.post_mlp_layernorm [h]                            <- A.X K1's one change
//   layer      input_layernorm, post_attention_layernorm [h]; final norm [h]; untied lm_head
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj.
int64_t latent(int64_t h, int64_t n, int64_t q, int64_t c, int64_t dn, int64_t dr, int64_t dv) {
  return h * q + q + q * n * (dn + dr) + h * (c + dr) + c + c * n * (dn + dv) + n * dv * h;
}
// Router, routed experts, S shared experts of F, and the block's output norm.
int64_t moe_block(int64_t h, int64_t E, int64_t F, int64_t S) {
  return E * h + 3 * E * h * F + 3 * h * F * S + h;
}

nlohmann::json tiny() {
  return {{"model_type", "axk1"},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 4},
          {"q_lora_rank", 32},
          {"kv_lora_rank", 16},
          {"qk_nope_head_dim", 16},
          {"qk_rope_head_dim", 8},
          {"v_head_dim", 16},
          {"n_routed_experts", 4},
          {"n_shared_experts", 1},
          {"num_experts_per_tok", 2},
          {"n_group", 2},
          {"topk_group", 1},
          {"first_k_dense_replace", 1},
          {"max_position_embeddings", 256},
          {"tie_word_embeddings", false}};
}

TEST(Axk1Models, TinyConfigMatchesTheHandTotal) {
  // attention: 64 x 32 (2,048) + 32 + 32 x 4 x 24 (3,072) + 64 x 24 (1,536) + 16
  //            + 16 x 4 x 32 (2,048) + 4 x 16 x 64 (4,096) = 12,848
  // layer 0 (dense): 12,848 + norms 128 + 3 x 64 x 128 (24,576) = 37,552
  // layer 1 (MoE):   12,848 + 128 + experts 4 x 64 x 64 (16,384) + 4 x 64 x 32 (8,192)
  //                  + router 4 x 64 (256) + shared 3 x 64 x 32 (6,144) + post norm 64 = 44,016
  // embeddings 256 x 64 (16,384), untied lm_head 16,384, final norm 64: 114,400.
  EXPECT_EQ(latent(64, 4, 32, 16, 16, 8, 16), 12848);
  EXPECT_EQ(moe_block(64, 4, 32, 1), 31040);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.head_dim, 8);  // the rotated width, as AXK1Config sets head_dim
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "AXK1ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 114400);
  EXPECT_EQ(m->parameters_numel(), 2 * 256 * 64 + (12848 + 128 + 3 * 64 * 128) +
                                       (12848 + 128 + moe_block(64, 4, 32, 1)) + 64);
  // Names in transformers' registration order: the dense layer has no post_mlp_layernorm.
  const Names attention = {"self_attn.q_a_proj.weight",       "self_attn.q_a_layernorm.weight",
                           "self_attn.q_b_proj.weight",       "self_attn.kv_a_proj_with_mqa.weight",
                           "self_attn.kv_a_layernorm.weight", "self_attn.kv_b_proj.weight",
                           "self_attn.o_proj.weight"};
  Names dense = attention;
  for (const char* n : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                        "input_layernorm.weight", "post_attention_layernorm.weight"}) {
    dense.push_back(n);
  }
  EXPECT_EQ(names_under(*m, "model.layers.0."), dense);
  Names moe = attention;
  for (const char* n : {"mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.gate.weight",
                        "mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight",
                        "mlp.shared_experts.down_proj.weight", "mlp.post_mlp_layernorm.weight",
                        "input_layernorm.weight", "post_attention_layernorm.weight"}) {
    moe.push_back(n);
  }
  EXPECT_EQ(names_under(*m, "model.layers.1."), moe);
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.q_b_proj.weight").sizes(),
            (DimVector{96, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.kv_a_proj_with_mqa.weight").sizes(),
            (DimVector{24, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.kv_b_proj.weight").sizes(),
            (DimVector{128, 16}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.gate_up_proj").sizes(),
            (DimVector{4, 64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.down_proj").sizes(),
            (DimVector{4, 64, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.post_mlp_layernorm.weight").sizes(),
            (DimVector{64}));
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn").type_name(), "AXK1Attention");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "AXK1Experts");
  // attention_bias: q_a_proj (32), kv_a_proj_with_mqa (24) and o_proj (64) in each layer.
  nlohmann::json j = tiny();
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 114400 + 240);
  // to_hf_json reads back to the same config.
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Axk1Models, TheClassDefaultsAreTheFlagship) {
  // AXK1Config's defaults (docstring checkpoint skt/A.X-K1): V 163,840 untied, h 7,168, 61 layers
  // of 64 heads (q 1,536, c 512, 128 + 64 / 128), layer 0 dense of 18,432, 60 MoE layers of 192
  // experts of 2,048 (top 8) and one shared; the model card's "519B total, 33B active".
  const int64_t V = 163840, h = 7168, L = 61;
  const int64_t attention = latent(h, 64, 1536, 512, 128, 64, 128);
  EXPECT_EQ(attention, 101'124'096);
  const int64_t total = 2 * V * h + L * (attention + 2 * h) + 3 * h * 18432 +
                        (L - 1) * moe_block(h, 192, 2048, 1) + h;
  EXPECT_EQ(total, 518'983'052'288);
  const nlohmann::json j = {{"model_type", "axk1"},
                            {"vocab_size", V},
                            {"hidden_size", h},
                            {"intermediate_size", 18432},
                            {"moe_intermediate_size", 2048},
                            {"num_hidden_layers", L},
                            {"num_attention_heads", 64},
                            {"n_routed_experts", 192},
                            {"num_experts_per_tok", 8},
                            {"n_group", 8},
                            {"topk_group", 4},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "a.x-k1.json");
  EXPECT_EQ(c.num_key_value_heads, 64);  // AXK1Config's
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.max_position_embeddings, 32768);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  const int64_t active = total - (L - 1) * (192 - 8) * 3 * h * 2048;
  EXPECT_EQ(active, 32'779'332'608);
  EXPECT_EQ(active_parameters(*m, c), active);
  // The score-correction buffers beside the parameters: [192] per MoE layer.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 60 * 192);
}

TEST(Axk1Models, ConfigClassDefaultsAndRefusals) {
  // num_key_value_heads is 64 where the file has none (AXK1Config's), not the head count: with 4
  // heads the attention could not run, and the config is refused naming the field.
  nlohmann::json j = tiny();
  j.erase("num_key_value_heads");
  EXPECT_THAT([&] { (void)parse_model_config(j, "axk1.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_key_value_heads'")));
  j["num_attention_heads"] = 64;
  EXPECT_EQ(parse_model_config(j, "axk1.json").num_key_value_heads, 64);
  // q_lora_rank is an int in AXK1Config: null (DeepSeek-V2-Lite's "no query latent") is refused.
  j = tiny();
  j["q_lora_rank"] = nullptr;
  EXPECT_THAT([&] { (void)parse_model_config(j, "axk1.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'q_lora_rank'")));
  // first_k_dense_replace defaults to 1 (DeepSeek-V3's 3); more than the layers: all dense.
  j = tiny();
  j.erase("first_k_dense_replace");
  EXPECT_EQ(parse_model_config(j, "axk1.json").dense_layers, (std::vector<int64_t>{0}));
  j["first_k_dense_replace"] = 5;
  const ModelConfig all_dense = parse_model_config(j, "axk1.json");
  EXPECT_EQ(all_dense.dense_layers, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(build_model(all_dense)->parameters_numel(),
            2 * 256 * 64 + 2 * (12848 + 128 + 3 * 64 * 128) + 64);
  // AXK1Config's attribute_map also accepts num_local_experts for n_routed_experts; like
  // deepseek_v3, the family reads n_routed_experts only, and a file without it is refused.
  j = tiny();
  j.erase("n_routed_experts");
  j["num_local_experts"] = 4;
  EXPECT_THAT([&] { (void)parse_model_config(j, "axk1.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'n_routed_experts'")));
}

// The Hub's A.X K1 files keep the norm at the layer (model.layers.N.post_mlp_layernorm.weight)
// and the experts one by one; transformers renames the first into the block on load
// (conversion_mapping.py: post_mlp_layernorm -> mlp.post_mlp_layernorm) and fuses the second.
TEST(Axk1Models, HubCheckpointKeepsTheNormAtTheLayer) {
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  const ModelSource src = test::check_stored_as(cfg, *model, [](std::string n) {
    const std::string built = ".mlp.post_mlp_layernorm.";
    const size_t at = n.find(built);
    if (at != std::string::npos) n.replace(at, built.size(), ".post_mlp_layernorm.");
    return n;
  });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

// The MoE layer's output passes through the norm (routed + shared, then RMSNorm); the dense
// layer's does not.
TEST(Axk1Models, TheMoeOutputIsNormedBeforeTheResidual) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 8);
  int64_t moe_norm_ops = 0, dense_norm_ops = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "model.layers.1.mlp.post_mlp_layernorm") ++moe_norm_ops;
    if (n.module.starts_with("model.layers.0.mlp.post_mlp_layernorm")) ++dense_norm_ops;
  }
  EXPECT_GT(moe_norm_ops, 0);
  EXPECT_EQ(dense_norm_ops, 0);
}

}  // namespace
}  // namespace shardplan::tensor
