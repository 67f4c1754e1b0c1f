// falcon_mamba (FalconMambaForCausalLM: tiiuae/falcon-mamba-7b) against hand formulas written here
// from transformers 5's modeling_falcon_mamba.py and the published total. The parameters are
// Mamba-1's (mamba1_models_test.cpp: per layer a norm [h] and A_log [D, N], D [D], conv1d
// [D, 1, K] + [D], in_proj [2 D, h], x_proj [R + 2 N, D], dt_proj [D, R] + [D], out_proj [h, D]);
// the mixer's RMSNorms on dt, B and C have no weights (FalconMambaWeightlessRMSNorm).
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

int64_t mixer_params(int64_t h, int64_t d, int64_t n, int64_t r, int64_t k) {
  return d * n + d + d * k + d + 2 * d * h + (r + 2 * n) * d + r * d + d + h * d;
}

// 2 layers, h 64, untied V 1,000; as the released file, an expand (16) that intermediate_size (96)
// overrides; N 8, R 8, K 4, mixer_rms_eps 1e-3.
nlohmann::json tiny() {
  return {{"model_type", "falcon_mamba"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"num_hidden_layers", 2},
          {"expand", 16},
          {"intermediate_size", 96},
          {"state_size", 8},
          {"time_step_rank", 8},
          {"conv_kernel", 4},
          {"mixer_rms_eps", 1e-3},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(FalconMambaModels, FalconMamba7bMatchesThePublishedTotal) {
  // tiiuae/falcon-mamba-7b: V 65,024 untied, h 4,096, 64 layers, D 8,192 (its intermediate_size;
  // its expand says 16), N 16, R 256, K 4; the Hub lists 7.27B parameters.
  const int64_t V = 65024, h = 4096;
  const int64_t mixer = mixer_params(h, 8192, 16, 256, 4);
  EXPECT_EQ(mixer, 105'308'160);
  const int64_t total = 2 * V * h + h + 64 * (h + mixer);
  EXPECT_EQ(total, 7'272'665'088);
  const ModelConfig c = find_model_config("falcon-mamba-7b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "FalconMambaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.linear_num_value_heads, 8192);
  EXPECT_EQ(c.linear_norm_eps, 1e-6);  // FalconMambaConfig's mixer_rms_eps (not in the file)
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(FalconMambaModels, NamesAreMambasAndTheNormsHaveNoWeights) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(names_under(*m, "backbone.layers.0."),
            (Names{"norm.weight", "mixer.A_log", "mixer.D", "mixer.conv1d.weight",
                   "mixer.conv1d.bias", "mixer.in_proj.weight", "mixer.x_proj.weight",
                   "mixer.dt_proj.weight", "mixer.dt_proj.bias", "mixer.out_proj.weight"}));
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("backbone.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"backbone.embeddings.weight", "backbone.norm_f.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_submodule("backbone").type_name(), "FalconMambaModel");
  EXPECT_EQ(m->get_submodule("backbone.layers.0").type_name(), "FalconMambaBlock");
  EXPECT_EQ(m->get_submodule("backbone.layers.0.mixer").type_name(), "FalconMambaMixer");
  // The three norms are modules without parameters.
  for (const char* norm : {"dt_layernorm", "b_layernorm", "c_layernorm"}) {
    const std::string fqn = std::string("backbone.layers.0.mixer.") + norm;
    EXPECT_TRUE(m->get_submodule(fqn).named_parameters().empty()) << fqn;
  }
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  EXPECT_EQ(shape("backbone.layers.0.mixer.in_proj.weight"), (DimVector{192, 64}));
  EXPECT_EQ(shape("backbone.layers.0.mixer.x_proj.weight"), (DimVector{8 + 2 * 8, 96}));
  EXPECT_EQ(shape("backbone.layers.0.mixer.dt_proj.weight"), (DimVector{96, 8}));
  EXPECT_EQ(shape("backbone.layers.0.mixer.A_log"), (DimVector{96, 8}));
  // By hand: 2 x 1,000 x 64 + 64 + 2 x (64 + 768 + 96 + 384 + 96 + 12,288 + 2,304 + 768 + 96 +
  // 6,144).
  EXPECT_EQ(mixer_params(64, 96, 8, 8, 4), 22'944);
  EXPECT_EQ(m->parameters_numel(), 174'080);
}

TEST(FalconMambaModels, DefaultsRoundTripAndRefusals) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.linear_num_value_heads, 96);  // intermediate_size over expand x hidden_size
  EXPECT_EQ(c.linear_dt_rank, 8);
  EXPECT_EQ(c.linear_norm_eps, 1e-3);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(to_hf_json(c).at("mixer_rms_eps"), 1e-3);
  // FalconMambaConfig's defaults are MambaConfig's (tied, h 768, 32 layers, D 2 h) and
  // mixer_rms_eps 1e-6.
  c = parse_model_config(nlohmann::json{{"model_type", "falcon_mamba"}}, "defaults.json");
  EXPECT_EQ(c.vocab_size, 50280);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.linear_num_value_heads, 1536);
  EXPECT_EQ(c.linear_dt_rank, 48);
  EXPECT_EQ(c.linear_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  auto refused = [](const nlohmann::json& bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  nlohmann::json j = tiny();
  j["mixer_rms_eps"] = 0;
  refused(j, "tiny.json: field 'mixer_rms_eps': must be positive, got 0");
  j = tiny();
  j["hidden_act"] = "relu";
  refused(j, "field 'hidden_act': 'relu' is not built; expected \"silu\"");
  j = tiny();
  j["time_step_rank"] = "half";
  refused(j, "field 'time_step_rank': \"half\" is not a rank");
  // An epsilon set in code is checked too, under the file's name.
  c = parse_model_config(tiny(), "tiny.json");
  c.linear_norm_eps = -1;
  EXPECT_THAT([&] { validate(c, "code"); },
              ThrowsMessage<Error>(HasSubstr(
                  "code: field 'mixer_rms_eps' (linear_norm_eps): must be a finite epsilon >= 0")));
}

// One layer, 100 tokens: Mamba's products (in_proj 64 -> 192, x_proj 96 -> 24, dt_proj 8 -> 96,
// out_proj 96 -> 64, lm_head 64 -> 1,000) and three weightless RMSNorms on dt [B, T, 8], B and C
// [B, T, 8], between x_proj and dt_proj as transformers' forward runs them.
TEST(FalconMambaModels, ForwardTracesTheMixerNorms) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  const double matmuls =
      2 * T * h * 192 + 2 * T * 96 * 24 + 2 * T * 8 * 96 + 2 * T * 96 * h + 2 * T * h * 1000;
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, matmuls);
  EXPECT_EQ(test::ops_under(g, "rms_norm", "backbone.layers.0.mixer."), 3);
  int64_t dt_norm = -1, dt_proj = -1, x_proj = -1;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "rms_norm" && n.module == "backbone.layers.0.mixer.dt_layernorm") {
      dt_norm = n.id;
      EXPECT_EQ(n.inputs.size(), 1u);  // no weight
      EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 100, 8}));
    }
    if (n.op == "matmul" && n.module == "backbone.layers.0.mixer.dt_proj") dt_proj = n.id;
    if (n.op == "linear" && n.module == "backbone.layers.0.mixer.x_proj") x_proj = n.id;
  }
  EXPECT_LT(x_proj, dt_norm);
  EXPECT_LT(dt_norm, dt_proj);
}

}  // namespace
}  // namespace shardplan::tensor
