// olmo3 (OLMo 3) and minimax_m2 (MiniMax-M2): the two families whose attention normalizes q and k
// over the whole projection width (OLMo 2's q_norm [heads hd], k_norm [kv hd], right after q_proj
// and k_proj), against hand formulas written here from transformers' modular_olmo3.py and
// modular_minimax_m2.py and the published totals. h hidden, V vocabulary, hd head_dim:
//   olmo3 layer:      q, o [h, heads hd]; k, v [kv hd, h]; q_norm, k_norm; gated MLP 3 h F;
//                     post_attention_layernorm, post_feedforward_layernorm (no input norm)
//   minimax_m2 layer: the same projections and norms; mlp.gate [E, h]; mlp.experts.gate_up_proj
//                     [E, 2F, h], down_proj [E, h, F]; input_layernorm, post_attention_layernorm
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

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using test::names_under;

TEST(FullWidthQkNormModels, Olmo3SevenBMatchesTheHandTotal) {
  // OLMo 3 7B: V 100,278 untied, h 4,096, 32 layers of 32 heads (no GQA), F 11,008.
  const int64_t V = 100278, h = 4096, F = 11008;
  const int64_t layer = 4 * h * h + 2 * h + 3 * h * F + 2 * h;
  const int64_t total = 2 * V * h + 32 * layer + h;
  EXPECT_EQ(total, 7'298'011'136);
  const ModelConfig c = find_model_config("olmo-3-7b");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  // Three sliding layers of every four (window 4,096), the fourth in full.
  ASSERT_EQ(c.layer_types.size(), 32u);
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(c.layer_types[static_cast<size_t>(i)],
              (i + 1) % 4 == 0 ? AttentionType::kFull : AttentionType::kSliding)
        << i;
  }
  EXPECT_EQ(c.sliding_window, 4096);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.count(0), 24);
  EXPECT_EQ(s.first_layer(1), 3);
}

nlohmann::json tiny_olmo3() {
  return {{"model_type", "olmo3"},    {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 8},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"torch_dtype", "bfloat16"}};
}

TEST(FullWidthQkNormModels, Olmo3NamesAreOlmo2sAndLayerTypesAsTransformersReadsThem) {
  const ModelConfig c = parse_model_config(tiny_olmo3(), "tiny olmo3");
  EXPECT_EQ(c.sliding_window, 4096);  // Olmo3Config's default window
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Olmo3ForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "post_attention_layernorm.weight", "post_feedforward_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_norm.weight").sizes(), DimVector({64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_norm.weight").sizes(), DimVector({32}));
  // The file's layer_types wins over the three-in-four rule.
  nlohmann::json j = tiny_olmo3();
  j["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 8; ++i)
    j["layer_types"].push_back(i < 2 ? "full_attention" : "sliding_attention");
  j["sliding_window"] = 512;
  const ModelConfig listed = parse_model_config(j, "listed");
  EXPECT_EQ(listed.layer_types[0], AttentionType::kFull);
  EXPECT_EQ(listed.layer_types[3], AttentionType::kSliding);
  EXPECT_EQ(listed.sliding_window, 512);
  EXPECT_EQ(parse_model_config(to_hf_json(listed), "round trip"), listed);
  // No window (null): Olmo3Attention passes none, so every layer attends in full.
  j["sliding_window"] = nullptr;
  const ModelConfig none = parse_model_config(j, "no window");
  EXPECT_FALSE(none.sliding_window);
  for (const AttentionType t : none.layer_types) EXPECT_EQ(t, AttentionType::kFull);
  EXPECT_EQ(parse_model_config(to_hf_json(none), "round trip"), none);
  j["layer_types"][5] = "chunked_attention";
  EXPECT_THAT([&] { parse_model_config(j, "chunked"); },
              ThrowsMessage<Error>(HasSubstr("has chunked_attention, which OLMo 3 does not run")));
}

TEST(FullWidthQkNormModels, MinimaxM2MatchesThePublishedTotal) {
  // MiniMax-M2: V 200,064 untied, h 3,072, 62 layers of 48 heads of 128 with 8 kv heads; 256
  // experts of F 1,536, top 8, no shared expert, every layer sparse. "230B total, 10B active".
  const int64_t V = 200064, h = 3072, F = 1536, E = 256;
  const int64_t attention = 2 * h * 48 * 128 + 2 * 8 * 128 * h + 48 * 128 + 8 * 128;
  EXPECT_EQ(attention, 44'047'360);
  const int64_t experts = E * 2 * F * h + E * h * F;
  const int64_t layer = attention + E * h + experts + 2 * h;
  const int64_t total = 2 * V * h + 62 * layer + h;
  EXPECT_EQ(total, 228'689'748'992);
  const ModelConfig c = find_model_config("minimax-m2");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  // A token passes through 8 of the 256 experts: 11.0 B with the embeddings, 9.8 B without.
  EXPECT_EQ(active_parameters(*m, c), total - 62 * (E - 8) * 3 * h * F);
  EXPECT_EQ(active_parameters(*m, c), 11'030'537'216);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);  // rotary_dim 64 of head_dim 128
  // The router's score-correction bias: a buffer of every MoE layer, outside the count.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 62 * E);
}

nlohmann::json tiny_minimax() {
  return {{"model_type", "minimax_m2"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 32},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"rotary_dim", 8},
          {"use_qk_norm", true},
          {"qk_norm_type", "per_layer"},
          {"scoring_func", "sigmoid"},
          {"use_routing_bias", true},
          {"shared_intermediate_size", 0},
          {"attn_type_list", {1, 1}},
          {"torch_dtype", "bfloat16"}};
}

// rotary_dim 30 of head_dim 44: 30 / 44 x 44 truncates to 29 in double arithmetic; the parsed
// fraction gives 30 back, as MiniMaxM2's rotary_dim says.
TEST(FullWidthQkNormModels, MinimaxM2RotaryDimSurvivesTheFraction) {
  nlohmann::json j = tiny_minimax();
  j["head_dim"] = 44;
  j["rotary_dim"] = 30;
  ASSERT_EQ(static_cast<int64_t>(44 * (30.0 / 44)), 29);
  const ModelConfig c = parse_model_config(j, "m.json");
  EXPECT_EQ(static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor), 30);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(FullWidthQkNormModels, MinimaxM2NamesShapesAndOrder) {
  const ModulePtr m = build_model(parse_model_config(tiny_minimax(), "tiny minimax"));
  EXPECT_EQ(m->type_name(), "MiniMaxM2ForCausalLM");
  // Mixtral's layer: attention, then the block with its router before the fused experts, then
  // the two pre-norms; q_norm and k_norm follow o_proj (FlexOlmoAttention registers them after
  // the projections, which MiniMaxM2Attention reassigns in place).
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  auto shape = [&](const std::string& p) {
    return m->get_parameter("model.layers.1." + p).sizes();
  };
  EXPECT_EQ(shape("self_attn.q_proj.weight"), DimVector({64, 64}));
  EXPECT_EQ(shape("self_attn.k_proj.weight"), DimVector({32, 64}));
  EXPECT_EQ(shape("self_attn.q_norm.weight"), DimVector({64}));
  EXPECT_EQ(shape("self_attn.k_norm.weight"), DimVector({32}));
  EXPECT_EQ(shape("mlp.gate.weight"), DimVector({4, 64}));
  EXPECT_EQ(shape("mlp.experts.gate_up_proj"), DimVector({4, 64, 64}));
  EXPECT_EQ(shape("mlp.experts.down_proj"), DimVector({4, 64, 32}));
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "MiniMaxM2SparseMoeBlock");
}

TEST(FullWidthQkNormModels, MinimaxM2RefusesWhatTransformersDoesNotBuild) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"use_qk_norm", false},
      {"qk_norm_type", "per_head"},
      {"scoring_func", "softmax"},
      {"use_routing_bias", false},
      {"shared_intermediate_size", 1536},
      {"attn_type_list", {0, 1}},
      {"rotary_dim", 7},
      {"rotary_dim", 32}};
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key + " = " + value.dump());
    nlohmann::json j = tiny_minimax();
    j[key] = value;
    EXPECT_THAT([&] { parse_model_config(j, "minimax.json"); },
                ThrowsMessage<Error>(HasSubstr("minimax.json: field '" + key + "'")));
  }
  // Without MiniMax's own keys the file is transformers' (they are optional there).
  nlohmann::json plain = tiny_minimax();
  for (const char* k : {"rotary_dim", "use_qk_norm", "qk_norm_type", "scoring_func",
                        "use_routing_bias", "shared_intermediate_size", "attn_type_list"}) {
    plain.erase(k);
  }
  const ModelConfig c = parse_model_config(plain, "plain");
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// A MiniMax-M2 folder named as the Hub's files name it: Mixtral's older block_sparse_moe module
// with one tensor per expert (w1 gate, w3 up, w2 down) and the block's router bias beside them.
TEST(FullWidthQkNormModels, MinimaxM2HubCheckpointFitsWithTheRouterBiasAsABuffer) {
  const fs::path dir =
      fs::temp_directory_path() / ("shardplan_minimax_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << tiny_minimax().dump(1);
  const ModulePtr model = build_model(parse_model_config(tiny_minimax(), "tiny minimax"));
  std::vector<test::StEntry> e;
  for (const NamedTensor& t : model->named_parameters()) {
    const std::vector<int64_t> shape(t.tensor.sizes().begin(), t.tensor.sizes().end());
    std::string n = t.name;
    const size_t mlp = n.find(".mlp.");
    if (mlp == std::string::npos) {
      e.push_back({n, "BF16", shape});
      continue;
    }
    const std::string block = n.substr(0, mlp) + ".block_sparse_moe.";
    if (n.ends_with("gate.weight")) {
      e.push_back({block + "gate.weight", "BF16", shape});
      e.push_back({block + "e_score_correction_bias", "F32", {shape[0]}});
    } else {
      test::append_experts_one_by_one(e, n.substr(0, mlp) + ".block_sparse_moe", n, shape,
                                      {"w1", "w3", "w2"});
    }
  }
  const test::StHeader h = test::make_header(e);
  test::write_bytes(dir / "model.safetensors", test::file_bytes(h.json, h.data_bytes));
  const ModelSource src = find_model_source(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_EQ(src.check.buffers,
            (std::vector<std::string>{"model.layers.0.block_sparse_moe.e_score_correction_bias",
                                      "model.layers.1.block_sparse_moe.e_score_correction_bias"}));
  EXPECT_EQ(src.check.stacked_experts.size(), 4U);  // 2 layers x gate_up and down
}

}  // namespace
}  // namespace shardplan::tensor
