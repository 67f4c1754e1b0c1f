// axk2 (SK Telecom's A.X-K2) against hand formulas written here from transformers'
// modeling_axk2.py.
// Notation: h hidden, n heads, rq q_lora_rank, rkv kv_lora_rank, d qk_nope_head_dim,
// r qk_rope_head_dim, v v_head_dim, m and e the indexer's heads and head_dim, g gated_norm_rank,
// E experts of width Fe, S = n_shared_experts * Fe, F the dense MLP's width. Per layer:
//   self_attn  q_a_proj [rq, h], q_a_layernorm [rq], q_gate_proj [n (d + r + v), 2 rq],
//              kv_a_proj_with_mqa [rkv + r, h], kv_a_layernorm [rkv], kv_b_proj [n (d + v), rkv],
//              o_proj [h, n v], indexer wq_b [m e, rq], wk [e, h], k_norm [e] + bias [e],
//              weights_proj [m, h]
//   mlp        dense: gate_proj, up_proj [F, h], down_proj [h, F]; sparse: experts.gate_up_proj
//              [E, 2 Fe, h], experts.down_proj [E, h, Fe], gate [E, h], shared_experts [S, h] x 2
//              and [h, S]
//   norms      input_layernorm gated: norm [h], mlp.fc1 [g, h], mlp.fc2 [h, g]; and
//              post_attention_layernorm gated on sparse layers, a plain RMSNorm [h] on dense ones
// then model.norm [h] and an untied lm_head [V, h].
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A dense first layer and two sparse ones (first_k_dense_replace's default 1), with grouped
// routing set as the larger releases set it.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "model_type": "axk2", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128,
    "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "q_lora_rank": 16, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8, "v_head_dim": 16, "index_n_heads": 2, "index_head_dim": 16,
    "index_topk": 8, "gated_norm_rank": 4, "n_group": 2, "topk_group": 1,
    "torch_dtype": "bfloat16"
  })");
}

TEST(Axk2Models, TinyMatchesTheHandTotal) {
  // V 1000, h 64, n 4, rq 16, rkv 32, d 16, r 8, v 16, m 2, e 16, g 4, E 4, Fe 32, S 32, F 128:
  //   attention  q_a_proj 64*16 = 1,024; q_a_layernorm 16; q_gate_proj 4*(16+8+16) * 2*16 = 5,120;
  //              kv_a_proj_with_mqa 64*(32+8) = 2,560; kv_a_layernorm 32;
  //              kv_b_proj 32 * 4*(16+16) = 4,096; o_proj 4*16 * 64 = 4,096;
  //              indexer wq_b 16 * 2*16 = 512, wk 64*16 = 1,024, k_norm 2*16 = 32,
  //              weights_proj 64*2 = 128 (1,696)                                      = 18,640
  //   gated norm 64 + 2 * 64*4                                                         =    576
  //   dense layer   18,640 + 3*64*128 (24,576) + 576 + 64                              = 43,856
  //   sparse layer  18,640 + experts 3*4*64*32 (24,576) + gate 4*64 (256)
  //                 + shared 3*64*32 (6,144) + 2 * 576                                 = 50,768
  //   total  embed 64,000 + 43,856 + 2 * 50,768 + norm 64 + lm_head 64,000           = 273,456
  const int64_t h = 64, V = 1000;
  const int64_t attention = h * 16 + 16 + 4 * (16 + 8 + 16) * 2 * 16 + h * (32 + 8) + 32 +
                            32 * 4 * (16 + 16) + 4 * 16 * h +
                            (16 * 2 * 16 + h * 16 + 2 * 16 + h * 2);
  EXPECT_EQ(attention, 18'640);
  const int64_t gated = h + 2 * h * 4;
  const int64_t dense = attention + 3 * h * 128 + gated + h;
  const int64_t sparse = attention + 3 * 4 * h * 32 + 4 * h + 3 * h * 32 + 2 * gated;
  EXPECT_EQ(dense, 43'856);
  EXPECT_EQ(sparse, 50'768);
  const int64_t total = V * h + dense + 2 * sparse + h + V * h;
  EXPECT_EQ(total, 273'456);

  const ModelConfig c = parse_model_config(tiny(), "tiny axk2");
  EXPECT_EQ(c.head_dim, 8);  // the rotated width, as AXK2Config sets head_dim
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.gated_norm_rank, 4);
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "AXK2ForCausalLM");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn").type_name(), "AXK2Attention");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn.indexer").type_name(), "AXK2Indexer");
  EXPECT_EQ(m->get_submodule("model.layers.1.input_layernorm").type_name(), "AXK2GatedRMSNorm");
  EXPECT_EQ(m->get_submodule("model.layers.1.input_layernorm.mlp").type_name(), "AXK2GateMLP");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "AXK2Experts");
  // A sparse layer, in AXK2DecoderLayer's registration order.
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{"self_attn.q_a_proj.weight",
                                      "self_attn.q_a_layernorm.weight",
                                      "self_attn.q_gate_proj.weight",
                                      "self_attn.kv_a_proj_with_mqa.weight",
                                      "self_attn.kv_a_layernorm.weight",
                                      "self_attn.kv_b_proj.weight",
                                      "self_attn.o_proj.weight",
                                      "self_attn.indexer.wq_b.weight",
                                      "self_attn.indexer.wk.weight",
                                      "self_attn.indexer.k_norm.weight",
                                      "self_attn.indexer.k_norm.bias",
                                      "self_attn.indexer.weights_proj.weight",
                                      "mlp.experts.gate_up_proj",
                                      "mlp.experts.down_proj",
                                      "mlp.gate.weight",
                                      "mlp.shared_experts.gate_proj.weight",
                                      "mlp.shared_experts.up_proj.weight",
                                      "mlp.shared_experts.down_proj.weight",
                                      "input_layernorm.norm.weight",
                                      "input_layernorm.mlp.fc1.weight",
                                      "input_layernorm.mlp.fc2.weight",
                                      "post_attention_layernorm.norm.weight",
                                      "post_attention_layernorm.mlp.fc1.weight",
                                      "post_attention_layernorm.mlp.fc2.weight"}));
  // The dense layer: a plain RMSNorm before its MLP, the gated one before its attention.
  const std::vector<std::string> dense_names = names_under(*m, "model.layers.0.");
  const std::vector<std::string> dense_tail(dense_names.end() - 7, dense_names.end());
  EXPECT_EQ(dense_tail, (std::vector<std::string>{
                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                            "input_layernorm.norm.weight", "input_layernorm.mlp.fc1.weight",
                            "input_layernorm.mlp.fc2.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.q_gate_proj.weight").sizes(),
            DimVector({160, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.1.input_layernorm.mlp.fc1.weight").sizes(),
            DimVector({4, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.input_layernorm.mlp.fc2.weight").sizes(),
            DimVector({64, 4}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.gate_up_proj").sizes(),
            DimVector({4, 64, 64}));
  // Every layer attends sparsely, with its own indexer.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sparse 8 dense");
  EXPECT_EQ(describe(s.kinds[1]), "sparse 8 moe");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Axk2Models, GatesTheAttentionOutputAndTheNorms) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 16);
  // DeepSeek-V3.2 of the same sizes: q_b_proj instead of q_gate_proj, no gate, plain norms.
  nlohmann::json v32 = tiny();
  v32["model_type"] = "deepseek_v32";
  v32["first_k_dense_replace"] = 1;
  v32.erase("gated_norm_rank");  // an architecture key DeepSeek-V3.2 does not read: refused
  const OpGraph base = trace_model_forward(*build_model(parse_model_config(v32, "v32")), 2, 16);
  const std::string attn = "model.layers.1.self_attn";
  // out * sigmoid(gate): the gate cast to float32, the product cast back; q_gate_proj reads
  // [q_a_layernorm(q_a); q_a], one concatenation more.
  EXPECT_EQ(ops_in(g, "sigmoid", attn), ops_in(base, "sigmoid", attn) + 1);
  EXPECT_EQ(ops_in(g, "to", attn), ops_in(base, "to", attn) + 2);
  EXPECT_EQ(ops_in(g, "cat", attn), ops_in(base, "cat", attn) + 1);
  EXPECT_EQ(ops_in(g, "mul", attn), ops_in(base, "mul", attn) + 1);
  // The gated norms: sigmoid of the float32 gate, the product cast back; the dense layer's
  // second norm is a plain RMSNorm.
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.post_attention_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.0.post_attention_layernorm"), 0);
  EXPECT_EQ(ops_in(g, "silu", "model.layers.1.input_layernorm.mlp"), 1);
}

TEST(Axk2Models, DenseLayersFromTheirListOrTheLegacyPeriod) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 6;
  // Legacy keys: sparse when i >= first_k_dense_replace and i % moe_layer_freq == 0.
  j["first_k_dense_replace"] = 1;
  j["moe_layer_freq"] = 2;
  const ModelConfig legacy = parse_model_config(j, "legacy");
  EXPECT_EQ(legacy.dense_layers, (std::vector<int64_t>{0, 1, 3, 5}));
  EXPECT_EQ(parse_model_config(to_hf_json(legacy), "round trip"), legacy);
  j["moe_layer_freq"] = 0;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("moe_layer_freq")));
  // mlp_layer_types decide when listed.
  j["moe_layer_freq"] = 1;
  j["mlp_layer_types"] = {"dense", "sparse", "dense", "sparse", "sparse", "dense"};
  EXPECT_EQ(parse_model_config(j, "listed").dense_layers, (std::vector<int64_t>{0, 2, 5}));
}

TEST(Axk2Models, RefusesWhatAxk2ConfigRefuses) {
  auto refused = [](const nlohmann::json& j, const char* what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr(what)));
  };
  nlohmann::json j = tiny();
  j.erase("topk_group");
  refused(j, "topk_group");
  j = tiny();
  j["n_group"] = 3;  // does not divide 4 experts
  refused(j, "n_group");
  j = tiny();
  j["q_lora_rank"] = nullptr;
  refused(j, "q_lora_rank");
  j = tiny();
  j["gated_norm_rank"] = 0;
  refused(j, "gated_norm_rank");
  j = tiny();
  j["layer_types"] = {"full_attention", "full_attention", "full_attention"};
  refused(j, "layer_types");
  // Both null: routing over every expert, as A.X-K2-Light does.
  j = tiny();
  j["n_group"] = nullptr;
  j["topk_group"] = nullptr;
  EXPECT_NO_THROW(parse_model_config(j, "ungrouped"));
}

TEST(Axk2Models, ClassDefaultsMatchTheHandTotal) {
  // AXK2Config's sizes (the docstring's A.X-K2-Light routing; no published config was found):
  // V 163,840 untied, h 2,048, 48 layers (the first dense, F 5,120), 32 heads, rq 384, rkv 128,
  // d 64, r 32, v 64, an indexer of 16 x 128, g 16, 128 experts of 512, one shared.
  //   attention 786,432 + 384 + 3,932,160 + 327,680 + 128 + 524,288 + 4,194,304
  //             + indexer (786,432 + 262,144 + 256 + 32,768 = 1,081,600)         = 10,846,976
  //   gated norm 2,048 + 2 * 2,048 * 16                                            =     67,584
  //   dense layer  10,846,976 + 3 * 2,048 * 5,120 + 67,584 + 2,048                 = 42,373,888
  //   sparse layer 10,846,976 + 3 * 128 * 2,048 * 512 + 128 * 2,048 + 3 * 2,048 * 512
  //                + 2 * 67,584                                                    = 417,043,200
  //   total 2 * 163,840 * 2,048 + 42,373,888 + 47 * 417,043,200 + 2,048            = 20,314,494,976
  const int64_t total = 2 * int64_t{163840} * 2048 + 42'373'888 + 47 * int64_t{417'043'200} + 2048;
  EXPECT_EQ(total, 20'314'494'976);
  const nlohmann::json j = {{"model_type", "axk2"},     {"vocab_size", 163840},
                            {"hidden_size", 2048},      {"intermediate_size", 5120},
                            {"num_hidden_layers", 48},  {"num_attention_heads", 32},
                            {"torch_dtype", "bfloat16"}};
  const ModelConfig c = parse_model_config(j, "defaults");
  EXPECT_EQ(c.qk_rope_head_dim, 32);
  EXPECT_EQ(c.index_n_heads, 16);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
}

// The Hub's A.X K2 files keep the fused query-and-gate projection under q_b_proj and the gated
// norms' gate MLP as W_down / W_up, and the experts one by one; transformers renames the first two
// on load (conversion_mapping.py "axk2") and fuses the third, as the checkpoint check does.
TEST(Axk2Models, HubCheckpointNamesAreRenamedAsTransformersLoadsThem) {
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  const ModelSource src = test::check_stored_as(cfg, *model, [](std::string n) {
    for (const auto& [built, stored] :
         {std::pair<std::string, std::string>{".self_attn.q_gate_proj.", ".self_attn.q_b_proj."},
          {".mlp.fc1.", ".W_down."},
          {".mlp.fc2.", ".W_up."}}) {
      const size_t at = n.find(built);
      if (at != std::string::npos) n.replace(at, built.size(), stored);
    }
    return n;
  });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

}  // namespace
}  // namespace shardplan::tensor
