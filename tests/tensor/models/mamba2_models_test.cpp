// mamba2 (Mamba2ForCausalLM: Mamba-Codestral-7B) against hand formulas written here from
// transformers 5's modeling_mamba2.py and the published total. h hidden, H heads of P, d_inner =
// H P, g groups of state N, K taps, conv = d_inner + 2 g N; per layer a norm [h] and the mixer:
// dt_bias, A_log, D [H], conv1d [conv, 1, K] + bias [conv], in_proj [d_inner + conv + H, h],
// norm [d_inner], out_proj [h, d_inner]; then norm_f [h] and lm_head [V, h] (untied).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/op_graph.h"
#include "tensor/ops.h"
#include "tensor/training.h"

namespace shardplan::tensor {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

int64_t mixer_params(int64_t h, int64_t heads, int64_t head_dim, int64_t groups, int64_t state,
                     int64_t taps) {
  const int64_t inner = heads * head_dim, conv = inner + 2 * groups * state;
  return 3 * heads + conv * taps + conv + (inner + conv + heads) * h + inner + inner * h;
}

// 2 layers, h 64, 4 heads of 32 (expand 2), 2 groups of state 8, 4 taps, V 1000.
nlohmann::json tiny() {
  return {{"model_type", "mamba2"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"num_hidden_layers", 2},
          {"num_heads", 4},
          {"head_dim", 32},
          {"expand", 2},
          {"n_groups", 2},
          {"state_size", 8},
          {"conv_kernel", 4},
          {"torch_dtype", "bfloat16"}};
}

TEST(Mamba2Models, MambaCodestralMatchesThePublishedTotal) {
  // mistralai/Mamba-Codestral-7B-v0.1: V 32,768 untied, h 4,096, 64 layers of 128 heads of 64, 8
  // groups of state 128, 4 taps; the Hub lists 7,285,403,648 parameters ("7.3B").
  const int64_t V = 32768, h = 4096;
  const int64_t total = 2 * V * h + h + 64 * (mixer_params(h, 128, 64, 8, 128, 4) + h);
  EXPECT_EQ(total, 7'285'403'648);
  const ModelConfig c = find_model_config("mamba-codestral-7b");
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_TRUE(c.residual_in_fp32);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
}

TEST(Mamba2Models, NamesShapesAndTinyTotal) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  std::vector<std::string> names;
  for (const auto& [name, t] : m->named_parameters()) names.push_back(name);
  const std::vector<std::string> layer0 = {
      "backbone.layers.0.norm.weight",          "backbone.layers.0.mixer.dt_bias",
      "backbone.layers.0.mixer.A_log",          "backbone.layers.0.mixer.D",
      "backbone.layers.0.mixer.conv1d.weight",  "backbone.layers.0.mixer.conv1d.bias",
      "backbone.layers.0.mixer.in_proj.weight", "backbone.layers.0.mixer.norm.weight",
      "backbone.layers.0.mixer.out_proj.weight"};
  ASSERT_EQ(names.size(), 1 + 2 * layer0.size() + 2);
  EXPECT_EQ(names.front(), "backbone.embeddings.weight");
  EXPECT_EQ(std::vector<std::string>(names.begin() + 1, names.begin() + 10), layer0);
  EXPECT_EQ(names[names.size() - 2], "backbone.norm_f.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  // d_inner 128, conv 128 + 2 x 2 x 8 = 160, in_proj 128 + 160 + 4 = 292.
  EXPECT_EQ(m->get_parameter("backbone.layers.1.mixer.in_proj.weight").sizes(),
            (DimVector{292, 64}));
  EXPECT_EQ(m->get_parameter("backbone.layers.1.mixer.conv1d.weight").sizes(),
            (DimVector{160, 1, 4}));
  EXPECT_EQ(m->get_parameter("backbone.layers.1.mixer.out_proj.weight").sizes(),
            (DimVector{64, 128}));
  // 2 x 1000 x 64 + 64 + 2 x (12 + 640 + 160 + 18,688 + 128 + 8,192 + 64) = 183,832.
  EXPECT_EQ(mixer_params(64, 4, 32, 2, 8, 4), 27'820);
  EXPECT_EQ(m->parameters_numel(), 183'832);
  EXPECT_EQ(m->get_submodule("backbone").type_name(), "Mamba2Model");
  EXPECT_EQ(m->get_submodule("backbone.layers.0").type_name(), "Mamba2Block");
  EXPECT_EQ(m->get_submodule("backbone.layers.0.mixer").type_name(), "Mamba2Mixer");
  EXPECT_EQ(m->get_submodule("backbone.layers.0.mixer.norm").type_name(), "MambaRMSNormGated");
  // Tied on request: lm_head is the embedding.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 183'832 - 64'000);
}

TEST(Mamba2Models, RoundTripAndDefaults) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(2, AttentionType::kLinear));
  EXPECT_EQ(c.no_ffn_layers, (std::vector<int64_t>{0, 1}));
  // Mamba2Config's defaults are Mamba-Codestral's sizes but a vocabulary of 32,768 and
  // residual_in_fp32 true: the shipped file equals them.
  const ModelConfig d = parse_model_config(
      nlohmann::json{{"model_type", "mamba2"}, {"torch_dtype", "bfloat16"}}, "defaults.json");
  EXPECT_EQ(build_model(d)->parameters_numel(),
            build_model(find_model_config("mamba-codestral-7b"))->parameters_numel());
  nlohmann::json j = tiny();
  j["residual_in_fp32"] = false;
  const ModelConfig bf16_residual = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(bf16_residual.residual_in_fp32);
  EXPECT_EQ(parse_model_config(to_hf_json(bf16_residual), "round trip"), bf16_residual);
}

TEST(Mamba2Models, BadConfigsAreRefusedByName) {
  auto refused = [](nlohmann::json j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["num_heads"] = 3;  // 3 x 32 is not 2 x 64
  refused(j, "'num_heads': 3 heads of head_dim 32 must be expand x hidden_size = 128 wide");
  j = tiny();
  j["expand"] = 0;
  refused(j, "'expand': 0 must be positive");
  j = tiny();
  j["hidden_act"] = "gelu";
  refused(j, "'hidden_act': 'gelu' is not built; expected \"silu\"");
  j = tiny();
  j["chunk_size"] = 0;
  refused(j, "'chunk_size': must be positive, got 0");
  j = tiny();
  j["n_groups"] = 3;
  refused(j, "is not a multiple of n_groups 3");
}

// The traced products: in_proj, out_proj and lm_head, 2 h (d_inner + conv + H) + 2 d_inner h per
// token and layer and 2 h V per token, and the fused scan's chunk products (Note [Mamba-2 scan
// work] in tensor/ops.h): per token of T padded to whole chunks of Q = 256, per head
// 4 N P + P (Q + 64) and per group 2 Q N.
TEST(Mamba2Models, TracedProductsAndFloat32Residual) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64, padded = 256, N = 8, P = 32, Q = 256;
  const double projections = 2 * (2 * T * h * 292 + 2 * T * 128 * h) + 2 * T * h * 1000;
  const double scan = 2 * padded * (4 * (4 * N * P + P * (Q + 64)) + 2 * (2 * Q * N));
  EXPECT_DOUBLE_EQ(scan, 27'262'976);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, projections + scan);
  // The residual stream leaves each block in float32: one add per block writes float32
  // [1, 100, 64] (4 bytes an element), against bfloat16 with residual_in_fp32 false.
  auto residual_bytes = [](const nlohmann::json& cfg) {
    const ModulePtr model = build_model(parse_model_config(cfg, "tiny.json"));
    TraceOptions o;
    o.batch = 1;
    o.seq = 100;
    const TrainingStep step = trace_training_step(*model, o);
    int64_t bytes = 0;
    for (const TrainingOp& op : step.ops) {
      if (op.op == "add" && op.call >= 0 &&
          step.calls[static_cast<size_t>(op.call)].fqn == "backbone.layers.0") {
        bytes += op.bytes_written;
      }
    }
    return bytes;
  };
  nlohmann::json bf16 = tiny();
  bf16["residual_in_fp32"] = false;
  EXPECT_EQ(residual_bytes(tiny()), 100 * 64 * 4);
  EXPECT_EQ(residual_bytes(bf16), 100 * 64 * 2);
}

}  // namespace
}  // namespace shardplan::tensor
