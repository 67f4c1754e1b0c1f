// mistral4 (Mistral Small 4), solar_open (Solar Open) and exaone_moe (K-EXAONE) against hand
// formulas written here from transformers 5's modular_mistral4.py, modular_solar_open.py and
// modular_exaone_moe.py, and the published sizes. h hidden, V vocabulary, L layers, E experts of
// width F, one shared expert of width F:
//   mistral4    DeepSeek's latent attention: q_a_proj [r_q, h], q_a_layernorm [r_q],
//               q_b_proj [heads (nope + rope), r_q], kv_a_proj_with_mqa [r_kv + rope, h],
//               kv_a_layernorm [r_kv], kv_b_proj [heads (nope + v), r_kv], o_proj [h, heads v];
//               its MoE block in every layer: experts (gate_up_proj [E, 2F, h], down_proj
//               [E, h, F]), the softmax router gate [E, h] (weight only), shared_experts
//   solar_open  Llama's attention (o_proj without bias) and GLM-4.5's MoE block in every layer,
//               its router holding the e_score_correction_bias buffer [E]
//   flex_olmo   OLMo 2's post-norm layer (full-width q_norm, k_norm) with OLMoE's block:
//               gate [E, h] before the experts
//   exaone_moe  EXAONE 4.0's attention (per-head q_norm, k_norm [hd]; sliding layers rotate,
//               full ones do not) in a pre-norm layer; DeepSeek's MoE block but where
//               mlp_layer_types says dense (gate, up, down of the dense width)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/ops.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// The MoE block of E experts of width F with one shared expert of width F, and the router.
int64_t moe_block(int64_t h, int64_t E, int64_t F) { return E * 3 * h * F + E * h + 3 * h * F; }

TEST(Mistral4Models, MistralSmall4MatchesTheHandTotal) {
  // Mistral4Config's defaults (its docstring's checkpoint, Mistral-Small-4-119B-2603): V 131,072
  // untied, h 4,096, 36 layers of 32 heads, r_q 1,024, r_kv 256, nope 64, rope 64, v 128, 128
  // experts of 2,048 and one shared, no dense layer.
  const int64_t V = 131072, h = 4096, H = 32, rq = 1024, rkv = 256, nope = 64, rope = 64, v = 128;
  const int64_t attention = h * rq + rq + rq * H * (nope + rope) + h * (rkv + rope) + rkv +
                            rkv * H * (nope + v) + H * v * h;
  EXPECT_EQ(attention, 28'050'688);
  const int64_t layer = attention + moe_block(h, 128, 2048) + 2 * h;
  const int64_t total = 2 * V * h + 36 * layer + h;
  EXPECT_EQ(total, 118'972'826'624);  // "119B"
  const ModelConfig c = find_model_config("mistral-small-4-119b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Mistral4ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight",
                   "self_attn.q_b_proj.weight", "self_attn.kv_a_proj_with_mqa.weight",
                   "self_attn.kv_a_layernorm.weight", "self_attn.kv_b_proj.weight",
                   "self_attn.o_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                   "mlp.gate.weight", "mlp.shared_experts.gate_proj.weight",
                   "mlp.shared_experts.up_proj.weight", "mlp.shared_experts.down_proj.weight",
                   "input_layernorm.weight", "post_attention_layernorm.weight"}));
  // Softmax routing: no score-correction buffer on the router (DeepSeek-V3's has one).
  for (const NamedTensor& b : m->named_buffers()) {
    EXPECT_THAT(b.name, ::testing::Not(HasSubstr("e_score_correction_bias")));
  }
  // The rotary tables are qk_rope_head_dim wide: head_dim 128 of which half rotates.
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").size(0), rope / 2);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_EQ(c.rope_scaling->rope_type, "yarn");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Every layer is MoE.
  const std::vector<LayerKind> kinds = layer_stack(c).kinds;
  ASSERT_FALSE(kinds.empty());
  for (const LayerKind& k : kinds) EXPECT_EQ(k.ffn, FfnKind::kMoe);
}

TEST(Mistral4Models, ClassDefaultsFillWhatTheFileOmits) {
  // A file with the sizes and experts alone takes Mistral4Config's latent widths, no dense
  // layer, YaRN by 128 and pad_token_id 11.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "mistral4"},
                                                          {"vocab_size", 1000},
                                                          {"hidden_size", 64},
                                                          {"intermediate_size", 96},
                                                          {"moe_intermediate_size", 32},
                                                          {"num_hidden_layers", 2},
                                                          {"num_attention_heads", 4},
                                                          {"n_routed_experts", 8},
                                                          {"num_experts_per_tok", 2}},
                                           "tiny");
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.kv_lora_rank, 256);
  EXPECT_EQ(c.qk_nope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_TRUE(c.dense_layers.empty());
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 128);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(11));
  // Latent widths whose sum overflows int64 are named, not wrapped.
  nlohmann::json huge = to_hf_json(c);
  huge["qk_nope_head_dim"] = int64_t{1} << 62;
  huge["qk_rope_head_dim"] = int64_t{1} << 62;
  EXPECT_THAT([&] { parse_model_config(huge, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("qk_nope_head_dim")));
  // A DeepSeek file's sigmoid scores are not what this router computes.
  nlohmann::json j = to_hf_json(c);
  j["scoring_func"] = "sigmoid";
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("scoring_func")));
}

TEST(SolarOpenModels, SolarOpen100BMatchesTheHandTotal) {
  // SolarOpenConfig's defaults (Solar-Open-100B): V 196,608 untied, h 4,096, 48 layers of 64
  // heads of 128 (8 kv heads), 128 experts of 1,280, top 8, one shared expert.
  const int64_t V = 196608, h = 4096, q = 64 * 128, kv = 8 * 128;
  const int64_t layer = 2 * h * q + 2 * h * kv + moe_block(h, 128, 1280) + 2 * h;
  const int64_t total = 2 * V * h + 48 * layer + h;
  EXPECT_EQ(total, 102'651'793'408);  // the card's 102B
  const ModelConfig c = find_model_config("solar-open-100b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "SolarOpenForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.47."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                   "mlp.gate.weight", "mlp.shared_experts.gate_proj.weight",
                   "mlp.shared_experts.up_proj.weight", "mlp.shared_experts.down_proj.weight",
                   "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  for (const LayerKind& k : layer_stack(c).kinds) EXPECT_EQ(k.ffn, FfnKind::kMoe);
}

TEST(SolarOpenModels, AttentionBiasLeavesOProjWithoutOne) {
  nlohmann::json j = to_hf_json(find_model_config("solar-open-100b"));
  j["num_hidden_layers"] = 1;
  j["attention_bias"] = true;
  const ModulePtr m = build_model(parse_model_config(j, "f.json"));
  EXPECT_TRUE(m->get_parameter("model.layers.0.self_attn.q_proj.bias").defined());
  EXPECT_TRUE(m->get_parameter("model.layers.0.self_attn.v_proj.bias").defined());
  const Names attn = names_under(*m, "model.layers.0.self_attn.o_proj.");
  EXPECT_EQ(attn, (Names{"weight"}));
}

TEST(SolarOpenModels, FieldsTheClassDeletedAreRefusedWhenTheyAskForMore) {
  // A file's intermediate_size is ignored (the class deletes it: no layer is dense) ...
  nlohmann::json j = to_hf_json(find_model_config("solar-open-100b"));
  j["intermediate_size"] = 10240;
  EXPECT_EQ(parse_model_config(j, "f.json"), find_model_config("solar-open-100b"));
  // ... dense layers or q/k norms it cannot build are refused, naming the key.
  j["first_k_dense_replace"] = 1;
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("first_k_dense_replace")));
  j["first_k_dense_replace"] = 0;
  j["use_qk_norm"] = true;
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("use_qk_norm")));
}

TEST(ExaoneMoeModels, KExaoneMatchesTheHandTotal) {
  // K-EXAONE-236B-A23B: V 153,600 untied, h 6,144, 48 layers of 64 heads of 128 (8 kv heads)
  // with per-head q/k norms; layer 0 dense (18,432), 47 MoE layers of 128 experts of 2,048, top
  // 8, one shared. "236B total, 23B active".
  const int64_t V = 153600, h = 6144, hd = 128, q = 64 * hd, kv = 8 * hd;
  const int64_t attention = 2 * h * q + 2 * h * kv + 2 * hd + 2 * h;
  const int64_t total =
      2 * V * h + h + 48 * attention + 47 * moe_block(h, 128, 2048) + 3 * h * 18432;
  EXPECT_EQ(total, 236'571'150'336);
  const ModelConfig c = find_model_config("k-exaone-236b-a23b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "ExaoneMoeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                   "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                   "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.1.mlp."),
            (Names{"experts.gate_up_proj", "experts.down_proj", "gate.weight",
                   "shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                   "shared_experts.down_proj.weight"}));
  // Three sliding layers of four; the full ones take no RoPE (EXAONE 4.0's global NoPE).
  const std::vector<LayerKind> kinds = layer_stack(c).kinds;
  int64_t sliding = 0, nope = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    sliding += k.attention == AttentionType::kSliding;
    nope += !k.rope;
  }
  EXPECT_EQ(sliding, 36);
  EXPECT_EQ(nope, 12);
  EXPECT_EQ(kinds.size(), 3u);  // sliding dense, sliding moe, nope moe
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(ExaoneMoeModels, DenseLayersFromFirstKOrTheList) {
  nlohmann::json j = to_hf_json(find_model_config("k-exaone-236b-a23b"));
  j["num_hidden_layers"] = 4;
  j.erase("layer_types");
  j.erase("mlp_layer_types");
  j["first_k_dense_replace"] = 2;
  EXPECT_EQ(parse_model_config(j, "f.json").dense_layers, (std::vector<int64_t>{0, 1}));
  j["mlp_layer_types"] = {"sparse", "dense", "sparse", "dense"};  // wins over first_k
  EXPECT_EQ(parse_model_config(j, "f.json").dense_layers, (std::vector<int64_t>{1, 3}));
  j["mlp_layer_types"] = {"sparse", "moe", "sparse", "dense"};
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); },
              ThrowsMessage<Error>(HasSubstr("mlp_layer_types")));
  j.erase("mlp_layer_types");
  j["num_experts"] = 6;
  j["n_group"] = 4;
  EXPECT_THAT([&] { parse_model_config(j, "f.json"); }, ThrowsMessage<Error>(HasSubstr("n_group")));
}

// flex_olmo (modular_flex_olmo.py): OLMo 2's post-norm layer with full-width q/k norms and
// OLMoE's sparse block (gate before the experts).
TEST(FlexOlmoModels, FlexOlmo7x7BMatchesTheHandTotal) {
  // FlexOlmoConfig's defaults (FlexOlmo-7x7B-1T): V 100,352 untied, h 4,096, 32 layers of 32 heads
  // (32 kv heads), 7 experts of 11,008 with top 5; q_norm and k_norm [h].
  const int64_t V = 100352, h = 4096, E = 7, F = 11008;
  const int64_t layer = 4 * h * h + 2 * h + E * h + E * 3 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 32 * layer + h;
  EXPECT_EQ(total, 33'270'665'216);
  const ModelConfig c = find_model_config("flexolmo-7x7b-1t");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "FlexOlmoForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                   "mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                   "post_attention_layernorm.weight", "post_feedforward_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_norm.weight").size(0), h);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(100277));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

}  // namespace
}  // namespace shardplan::tensor
