// hy_v3 (Tencent HY 3) against hand formulas written here from transformers 5's modular_hy_v3.py
// and the published size. h hidden, V vocabulary, H heads and K key-value heads of d, E experts
// of width F, one shared expert of width F, the dense MLP I wide:
//   attention  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d], q_norm, k_norm [d]
//   dense      gate_proj, up_proj [I, h], down_proj [h, I]
//   moe        HYV3MoE: gate (HYV3TopKRouter) weight [E, h], experts gate_up_proj [E, 2F, h] and
//              down_proj [E, h, F], shared_experts (gate, up, down of F); the
//              e_score_correction_bias [E] a buffer of the block, not a parameter
//   layer      input_layernorm, post_attention_layernorm [h]; untied lm_head [V, h]
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t attention(int64_t h, int64_t H, int64_t K, int64_t d) {
  return 2 * h * H * d + 2 * h * K * d + 2 * d;
}
int64_t moe_block(int64_t h, int64_t E, int64_t F) { return E * h + 3 * E * h * F + 3 * h * F; }

TEST(HyV3Models, Hy3PreviewMatchesTheHandTotal) {
  // Hy3-preview: V 120,832 untied, h 4,096, 80 layers of 64 heads and 8 kv heads of 128, layer 0
  // dense (13,312), 79 MoE layers of 192 experts of 1,536 and one shared; "295B total, 21B
  // active".
  const int64_t V = 120832, h = 4096, layer_attention = attention(h, 64, 8, 128) + 2 * h;
  const int64_t total =
      2 * V * h + h + 80 * layer_attention + 3 * h * 13312 + 79 * moe_block(h, 192, 1536);
  EXPECT_EQ(total, 295'033'528'320);
  const ModelConfig c = find_model_config("hy3-preview");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "HYV3ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                   "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                   "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.1.mlp."),
            (Names{"gate.weight", "experts.gate_up_proj", "experts.down_proj",
                   "shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                   "shared_experts.down_proj.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "HYV3MoE");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.gate").type_name(), "HYV3TopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "HYV3Experts");
  // The checkpoint beside the model: 79 score-correction biases [192] (float32) and the
  // prediction layer model.layers.80 (one MoE layer, eh_proj [h, 2h], enorm, hnorm and
  // final_layernorm, its own bias). A third-party count of the Hub index: 298,786,140,416 BF16
  // and 15,360 F32 elements (80 x 192).
  const ParametersBeyondModel beyond = parameters_beyond_model(c);
  EXPECT_EQ(beyond.router_bias, 79 * 192);
  const int64_t mtp_layer = layer_attention + moe_block(h, 192, 1536);
  EXPECT_EQ(beyond.mtp, mtp_layer + 2 * h * h + 3 * h + 192);
  EXPECT_EQ(total + beyond.router_bias + beyond.mtp, 298'786'140'416 + 15'360);
  EXPECT_EQ(c.initializer_range, 0.006);  // HYV3Config's
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "hy_v3"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"num_shared_experts", 1},
          {"mlp_layer_types", {"dense", "sparse", "dense", "sparse"}},
          {"max_position_embeddings", 256}};
}

TEST(HyV3Models, DenseLayersBiasesAndTheClassDefaults) {
  // Dense layer: attention 12,320 + norms 128 + MLP 3 x 64 x 96 = 30,880; MoE layer: 12,320 +
  // 128 + router 256 + experts 24,576 + shared 6,144 = 43,424; embeddings 2 x 8,192 + norm 64.
  const int64_t dense = 12320 + 128 + 18432, moe = 12320 + 128 + 256 + 24576 + 6144;
  EXPECT_EQ(attention(64, 4, 2, 16), 12320);
  EXPECT_EQ(dense, 30880);
  EXPECT_EQ(moe, 43424);
  nlohmann::json j = tiny();
  ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(build_model(c)->parameters_numel(), 2 * dense + 2 * moe + 16384 + 64);  // 165,056
  EXPECT_EQ(c.rope_theta, 11158840.0);
  EXPECT_TRUE(c.moe_float32_combine);
  // attention_bias: q, k, v (64 + 32 + 32) and o (64) per layer; mlp_bias: the dense MLP's (96 +
  // 96 + 64) and the shared expert's (32 + 32 + 64), never the routed experts'.
  j["attention_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 165056 + 4 * 192);
  j["attention_bias"] = false;
  j["mlp_bias"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(),
            165056 + 2 * 256 + 2 * 128);
  j["mlp_bias"] = false;
  j.erase("mlp_layer_types");  // HYV3Config: layer 0 dense, the rest sparse
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(build_model(c)->parameters_numel(), dense + 3 * moe + 16384 + 64);  // 177,600
  EXPECT_EQ(c.num_key_value_heads, 2);
  nlohmann::json no_kv = tiny();
  no_kv.erase("num_key_value_heads");
  no_kv["num_attention_heads"] = 8;
  no_kv["head_dim"] = 8;
  EXPECT_EQ(parse_model_config(no_kv, "tiny.json").num_key_value_heads, 8);  // HYV3Config's
  j["num_local_experts"] = 8;  // attribute_map's other name of num_experts
  j.erase("num_experts");
  EXPECT_EQ(parse_model_config(j, "tiny.json").num_local_experts, 8);
}

TEST(HyV3Models, HubKeysMustDescribeWhatTransformersBuilds) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j.erase("mlp_layer_types");
    j[key] = value;
    EXPECT_THAT([&] { parse_model_config(j, "hy.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")))
        << key;
    EXPECT_THAT([&] { parse_model_config(j, "hy.json"); }, ThrowsMessage<Error>(HasSubstr(why)))
        << key;
  };
  refused("first_k_dense_replace", 3, "builds that many leading dense layers; expected 1");
  refused("expert_hidden_dim", 64, "expected 32");
  refused("qk_norm", false, "q_norm and k_norm");
  refused("moe_router_use_sigmoid", false, "a sigmoid router");
  refused("num_shared_experts", 0, "would not vanish but take another width");
  refused("layer_types",
          {"full_attention", "sliding_attention", "full_attention", "full_attention"},
          "attends in full on every layer");
  nlohmann::json j = tiny();
  j.erase("mlp_layer_types");
  j["first_k_dense_replace"] = 1;  // what the published file says, and what is built
  j["expert_hidden_dim"] = 32;
  j["qk_norm"] = true;
  EXPECT_EQ(parse_model_config(j, "hy.json").dense_layers, (std::vector<int64_t>{0}));
}

// The router's logits are a float32 GEMM of a weight kept in the model's dtype, and with
// enable_moe_fp32_combine the routed and shared outputs meet in float32: two float32 copies of
// the tokens and a float32 sum, cast back, where a plain add writes one bfloat16 [T, h].
TEST(HyV3Models, RouterAndCombineRunInFloat32) {
  nlohmann::json j = tiny();
  const auto traced = [&](bool fp32_combine) {
    j["enable_moe_fp32_combine"] = fp32_combine;
    const ModelConfig c = parse_model_config(j, "tiny.json");
    const ModulePtr m = build_model(c, {.dtype = DType::kBFloat16, .training = true});
    EXPECT_EQ(m->get_parameter("model.layers.1.mlp.gate.weight").dtype(), DType::kBFloat16);
    const OpGraph g = trace_model_forward(*m, 1, 8);
    int64_t written = 0;
    double gate_flops = 0;
    for (const OpNode& n : g.nodes()) {
      if (n.module == "model.layers.1.mlp") written += n.bytes_written;
      if (n.module == "model.layers.1.mlp.gate") gate_flops += n.matmul_flops;
    }
    EXPECT_EQ(gate_flops, 2.0 * 8 * 64 * 4);  // 8 tokens x h 64 x 4 experts
    return written;
  };
  const int64_t plain = traced(false), fp32 = traced(true);
  const int64_t th = 8 * 64;  // tokens x hidden
  // float32: two up-casts (4 bytes each), the float32 add (4), the down-cast (2); plain: one add.
  EXPECT_EQ(fp32 - plain, th * (4 + 4 + 4 + 2) - th * 2);
}

}  // namespace
}  // namespace shardplan::tensor
