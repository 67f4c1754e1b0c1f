// ernie4_5 (ERNIE 4.5 dense) and ernie4_5_moe (ERNIE 4.5 MoE) against hand formulas written here
// from transformers' modular_ernie4_5.py and modular_ernie4_5_moe.py and the published sizes.
// h hidden, V vocabulary, hd head_dim (128 in every released file, whatever h / heads is):
//   layer:      q, o [heads hd, h] / [h, heads hd]; k, v [kv hd, h]; biases on all four and the
//               MLP with use_bias; input_layernorm, post_attention_layernorm
//   sparse MLP: gate.weight [E, h] float32, gate.moe_statics.e_score_correction_bias [1, E]
//               float32 (a frozen parameter), experts.gate_up_proj [E, 2F, h], down_proj
//               [E, h, F], shared_experts.{gate,up,down}_proj of width n_shared F
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
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

TEST(ErnieModels, Ernie45MoeMatchesTheHandTotal) {
  // ERNIE-4.5-21B-A3B: V 103,424 tied, h 2,560, 28 layers of 20 heads of 128 (4 kv heads);
  // layer 0 dense (F 12,288), layers 1..27 sparse: 64 experts of 1,536, top 6, 2 shared.
  const int64_t V = 103424, h = 2560, E = 64, F = 1536;
  const int64_t attention = 2 * h * 20 * 128 + 2 * 4 * 128 * h;
  const int64_t dense = attention + 3 * h * 12288 + 2 * h;
  const int64_t experts = E * 3 * h * F;
  const int64_t sparse = attention + E * h + E + experts + 3 * h * 2 * F + 2 * h;
  const int64_t total = V * h + dense + 27 * sparse + h;
  EXPECT_EQ(total, 21'825'437'888);  // "21B"
  const ModelConfig c = find_model_config("ernie-4.5-21b-a3b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total - 27 * (E - 6) * 3 * h * F);
  EXPECT_EQ(active_parameters(*m, c), 3'352'150'208);  // "A3B"
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(s.count(0), 1);
  EXPECT_EQ(s.count(1), 27);
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 0);  // a parameter here, already counted
}

TEST(ErnieModels, Ernie45MoeNamesShapesDtypesAndOrder) {
  const ModulePtr m = build_model(find_model_config("ernie-4.5-21b-a3b"));
  EXPECT_EQ(m->type_name(), "Ernie4_5_MoeForCausalLM");
  EXPECT_EQ(names_under(*m, "model.layers.0.mlp."),
            (std::vector<std::string>{"gate_proj.weight", "up_proj.weight", "down_proj.weight"}));
  // The router and its statics, then the experts, then the shared experts (a module's own
  // parameters before its children's, as PyTorch lists them).
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "mlp.gate.weight",
                "mlp.gate.moe_statics.e_score_correction_bias", "mlp.experts.gate_up_proj",
                "mlp.experts.down_proj", "mlp.shared_experts.gate_proj.weight",
                "mlp.shared_experts.up_proj.weight", "mlp.shared_experts.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  const Tensor router = m->get_parameter("model.layers.1.mlp.gate.weight");
  const Tensor statics =
      m->get_parameter("model.layers.1.mlp.gate.moe_statics.e_score_correction_bias");
  EXPECT_EQ(router.sizes(), DimVector({64, 2560}));
  EXPECT_EQ(router.dtype(), DType::kFloat32);  // _keep_in_fp32_modules_strict
  EXPECT_EQ(statics.sizes(), DimVector({1, 64}));
  EXPECT_EQ(statics.dtype(), DType::kFloat32);
  EXPECT_FALSE(statics.requires_grad());
  EXPECT_TRUE(router.requires_grad());
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.gate_up_proj").sizes(),
            DimVector({64, 3072, 2560}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.shared_experts.down_proj.weight").sizes(),
            DimVector({2560, 3072}));
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.gate").type_name(), "Ernie4_5_MoeTopKRouter");
  // Made as zeros and left so by _init_weights (the router is not a Linear).
  int routers = 0;
  for (const NamedInit& p : parameter_inits(*m, find_model_config("ernie-4.5-21b-a3b"))) {
    if (p.name.starts_with("model.layers.1.mlp.gate.")) {
      EXPECT_EQ(p.init.kind, ParameterInit::Kind::kConstant) << p.name;
      EXPECT_EQ(p.init.a, 0.0) << p.name;
      ++routers;
    }
  }
  EXPECT_EQ(routers, 2);  // the weight and the statics' bias
}

TEST(ErnieModels, Ernie45DenseHeadDimIsNotHiddenOverHeads) {
  // ERNIE-4.5-0.3B: h 1,024 and 16 heads, but head_dim 128: q_proj [2,048, 1,024].
  const int64_t V = 103424, h = 1024;
  const int64_t layer = 2 * h * 16 * 128 + 2 * 2 * 128 * h + 3 * h * 3072 + 2 * h;
  EXPECT_EQ(V * h + 18 * layer + h, 360'748'032);  // "0.36B"
  const ModulePtr m = build_model(find_model_config("ernie-4.5-0.3b"));
  EXPECT_EQ(m->parameters_numel(), 360'748'032);
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_proj.weight").sizes(),
            DimVector({2048, 1024}));
  // use_bias: every projection of attention and MLP, never the output layer.
  nlohmann::json j = {{"model_type", "ernie4_5"}, {"vocab_size", 100},
                      {"hidden_size", 64},        {"intermediate_size", 96},
                      {"num_hidden_layers", 1},   {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 16},
                      {"use_bias", true},         {"attention_dropout", 0.1}};
  const ModelConfig c = parse_model_config(j, "biased");
  EXPECT_EQ(c.attention_dropout, 0.0);  // Ernie4_5Attention runs none
  const ModulePtr b = build_model(c);
  EXPECT_EQ(
      names_under(*b, "model.layers.0."),
      (std::vector<std::string>{
          "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
          "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
          "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.gate_proj.weight",
          "mlp.gate_proj.bias", "mlp.up_proj.weight", "mlp.up_proj.bias", "mlp.down_proj.weight",
          "mlp.down_proj.bias", "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_TRUE(names_under(*b, "lm_head.").empty());  // tied, and no bias
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A null head_dim is Ernie4_5Config's hidden / heads (an absent one its 128).
  j["head_dim"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null head_dim").head_dim, 16);
  j.erase("head_dim");
  EXPECT_EQ(parse_model_config(j, "no head_dim").head_dim, 128);
}

nlohmann::json tiny_moe() {
  return {
      {"model_type", "ernie4_5_moe"}, {"vocab_size", 100},           {"hidden_size", 64},
      {"intermediate_size", 96},      {"num_hidden_layers", 8},      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},     {"moe_num_experts", 4},        {"moe_k", 2},
      {"moe_intermediate_size", 32},  {"moe_num_shared_experts", 1}, {"moe_layer_start_index", 2},
      {"moe_layer_end_index", 5},     {"moe_layer_interval", 2},     {"torch_dtype", "bfloat16"}};
}

TEST(ErnieModels, SparseLayersFollowStartEndAndInterval) {
  // Layer i is sparse when (i + 1) % 2 == 0 and 2 <= i <= 5: layers 3 and 5.
  const ModelConfig c = parse_model_config(tiny_moe(), "tiny");
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 1, 2, 4, 6, 7}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A cut of the stack and a stack of one kind write back to the same layers.
  for (const ModelConfig& cut : {first_layers(c, 4), uniform_config(c, layer_kind(c, 3), 3),
                                 uniform_config(c, layer_kind(c, 0), 2)}) {
    EXPECT_EQ(parse_model_config(to_hf_json(cut), "round trip"), cut);
  }
  // -1 ends at the last layer (Ernie4_5_MoeConfig).
  nlohmann::json j = tiny_moe();
  j["moe_layer_end_index"] = -1;
  j["moe_layer_interval"] = 1;
  EXPECT_EQ(parse_model_config(j, "to the end").dense_layers, (std::vector<int64_t>{0, 1}));
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"moe_layer_interval", 0},
           {"moe_layer_start_index", -1},
           {"use_bias", true},
           {"moe_num_shared_experts", -2},
           {"moe_layer_end_index", -2},
           {"num_nextn_predict_layers", -1},
           {"moe_num_shared_experts", int64_t{1} << 62}}) {  // x 32 overflows int64
    SCOPED_TRACE(key);
    nlohmann::json bad = tiny_moe();
    bad[key] = value;
    EXPECT_THAT([&] { parse_model_config(bad, "ernie.json"); },
                ThrowsMessage<Error>(HasSubstr("ernie.json: field '" + key + "'")));
  }
  // transformers' aliases (Ernie4_5_MoeConfig.attribute_map) are read; two values must agree.
  nlohmann::json alias = tiny_moe();
  alias.erase("moe_k");
  alias["num_experts_per_tok"] = 3;
  EXPECT_EQ(parse_model_config(alias, "alias").num_experts_per_tok, 3);
  alias["moe_k"] = 2;
  EXPECT_THAT([&] { parse_model_config(alias, "both.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'moe_k': 2 while its alias")));
  // Another family's file with ERNIE's experts is refused, not planned dense.
  nlohmann::json llama = tiny_moe();
  llama["model_type"] = "llama";
  llama.erase("moe_intermediate_size");  // refused as well, and named first
  EXPECT_THAT([&] { parse_model_config(llama, "llama.json"); },
              ThrowsMessage<Error>(HasSubstr("'moe_num_experts'")));
}

// The Hub's ERNIE 4.5 MoE files store each expert apart (mlp.experts.<e>.{gate,up,down}_proj) and
// the statics beside the router (mlp.moe_statics.*), as transformers 4 built them.
TEST(ErnieModels, HubCheckpointNamesFitTheModel) {
  const fs::path dir =
      fs::temp_directory_path() / ("shardplan_ernie_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // The larger files' prediction layer (ERNIE-4.5-300B-A47B: num_nextn_predict_layers 1), whose
  // tensors transformers skips by the pattern "mtp".
  nlohmann::json cfg = tiny_moe();
  cfg["num_nextn_predict_layers"] = 1;
  std::ofstream(dir / "config.json") << cfg.dump(1);
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  std::vector<test::StEntry> e;
  for (const NamedTensor& t : model->named_parameters()) {
    const std::vector<int64_t> shape(t.tensor.sizes().begin(), t.tensor.sizes().end());
    const std::string& n = t.name;
    const std::string dtype = t.tensor.dtype() == DType::kFloat32 ? "F32" : "BF16";
    if (n.ends_with(".gate.moe_statics.e_score_correction_bias")) {
      e.push_back(
          {n.substr(0, n.find(".gate.")) + ".moe_statics.e_score_correction_bias", dtype, shape});
    } else if (n.ends_with(".experts.gate_up_proj") || n.ends_with(".experts.down_proj")) {
      test::append_experts_one_by_one(e, n.substr(0, n.find(".experts.")), n, shape,
                                      {"gate_proj", "up_proj", "down_proj"});
    } else {
      e.push_back({n, dtype, shape});
    }
  }
  e.push_back({"model.mtp_block.0.self_attn.q_proj.weight", "BF16", {64, 64}});
  e.push_back({"model.mtp_linear_proj.0.weight", "BF16", {64, 128}});
  const test::StHeader h = test::make_header(e);
  test::write_bytes(dir / "model.safetensors", test::file_bytes(h.json, h.data_bytes));
  const ModelSource src = find_model_source(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.dtype_mismatches.empty());
  EXPECT_EQ(src.check.beyond_model,
            (std::vector<std::string>{"model.mtp_block.0.self_attn.q_proj.weight",
                                      "model.mtp_linear_proj.0.weight"}));
  EXPECT_EQ(src.check.stacked_experts.size(), 4U);  // layers 3 and 5, gate_up and down
}

}  // namespace
}  // namespace shardplan::tensor
