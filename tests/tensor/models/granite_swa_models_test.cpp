// granite_swa and granitemoe_swa against hand formulas written here from transformers 5's
// modular_granite_swa.py and modular_granitemoe_swa.py. h hidden, V vocabulary, H heads of d, K
// key-value heads, I the MLP (or each expert's) width, E experts:
//   attention  sinks [H] (the attention's own, listed first), q_proj, o_proj [H d, h],
//              k_proj, v_proj [K d, h]
//   granite    mlp gate_proj, up_proj [I, h], down_proj [h, I]; the layer's norms [h]
//   moe        block_sparse_moe: router [E, h], experts gate_up_proj [E, 2I, h], down_proj
//              [E, h, I]; shared_mlp input_linear [2S, h], output_linear [h, S] when S > 0
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t attention(int64_t h, int64_t H, int64_t K, int64_t d) {
  return 2 * h * H * d + 2 * h * K * d + H;
}

TEST(GraniteSwaModels, ShippedConfigsMatchTheHandTotals) {
  // granite-swash-2b (GraniteSWAConfig's defaults): V 100,352 tied, h 2,560, 24 layers of 20
  // heads and 4 kv heads of 128, MLP 8,192.
  const int64_t dense =
      24 * (attention(2560, 20, 4, 128) + 3 * 2560 * 8192 + 2 * 2560) + 100352 * 2560 + 2560;
  EXPECT_EQ(dense, 2'144'463'840);
  ModelConfig c = find_model_config("granite-swash-2b");
  ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "GraniteSWAForCausalLM");
  EXPECT_EQ(m->parameters_numel(), dense);
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (Names{"self_attn.sinks", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                   "self_attn.v_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight",
                   "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
                   "post_attention_layernorm.weight"}));
  int64_t sliding = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    sliding += layer_kind(c, i).attention == AttentionType::kSliding;
  }
  EXPECT_EQ(sliding, 18);  // every layer but each fourth (0, 4, ..., 20)
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // GraniteMoeSWAConfig's defaults: V 32,000 untied, h 4,096, 32 layers of 32 heads (32 kv),
  // 8 experts of 11,008, no shared MLP.
  const int64_t moe =
      32 * (attention(4096, 32, 32, 128) + 8 * 4096 + 8 * 3 * 4096 * 11008 + 2 * 4096) +
      2 * 32000 * 4096 + 4096;
  EXPECT_EQ(moe, 37'039'117'312);
  c = find_model_config("granitemoe-swa");
  m = build_model(c);
  EXPECT_EQ(m->type_name(), "GraniteMoeSWAForCausalLM");
  EXPECT_EQ(m->parameters_numel(), moe);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(GraniteSwaModels, LayerRopeThetaZeroMeansNoRope) {
  const nlohmann::json j = {{"model_type", "granite_swa"},
                            {"vocab_size", 128},
                            {"hidden_size", 64},
                            {"intermediate_size", 96},
                            {"num_hidden_layers", 4},
                            {"num_attention_heads", 4},
                            {"num_key_value_heads", 2},
                            {"sliding_window", 8},
                            {"layer_rope_theta", {10000.0, 0, 500000.0, 0}}};
  const ModelConfig c = parse_model_config(j, "tiny.json");
  // Attention 2 x 4,096 + 2 x 2,048 + 4 sinks = 12,292; MLP 18,432; norms 128; tied V x h.
  EXPECT_EQ(build_model(c)->parameters_numel(), 4 * (12292 + 18432 + 128) + 128 * 64 + 64);
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{1, 3}));
  for (int64_t i = 0; i < 4; ++i) {
    const LayerKind k = layer_kind(c, i);
    EXPECT_EQ(k.rope, i % 2 == 0) << i;
    EXPECT_EQ(k.attention, i == 0 ? AttentionType::kFull : AttentionType::kSliding) << i;
  }
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // _init_weights: the sinks start at zero.
  std::map<std::string, ParameterInit> init;
  const ModulePtr m = build_model(c);
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  EXPECT_EQ(init.at("model.layers.2.self_attn.sinks"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  const auto refused = [&](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json bad = j;
    bad[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(bad, "swa.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("layer_rope_theta", {10000.0, 0, 500000.0}, "one RoPE base per layer");
  refused("layer_rope_theta", {10000.0, -1, 500000.0, 0}, "expected a number >= 0");
  refused("sliding_window", nullptr, "the sliding mask needs a window");
  refused("layer_types",
          {"full_attention", "chunked_attention", "sliding_attention", "full_attention"},
          "full_attention and sliding_attention only");
}

TEST(GraniteSwaModels, MoeLayerWithASharedMlp) {
  const nlohmann::json j = {
      {"model_type", "granitemoe_swa"}, {"vocab_size", 128},      {"hidden_size", 64},
      {"intermediate_size", 32},        {"num_hidden_layers", 4}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},       {"num_local_experts", 4}, {"num_experts_per_tok", 2},
      {"shared_intermediate_size", 48}};
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  // Attention 12,292; router 256; experts 4 x 3 x 64 x 32 = 24,576; shared 96 x 64 + 64 x 48 =
  // 9,216; norms 128; untied embeddings 2 x 8,192 and the norm.
  EXPECT_EQ(m->parameters_numel(), 4 * (12292 + 256 + 24576 + 9216 + 128) + 2 * 8192 + 64);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.sinks", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                   "self_attn.v_proj.weight", "self_attn.o_proj.weight", "input_layernorm.weight",
                   "post_attention_layernorm.weight", "block_sparse_moe.router.weight",
                   "block_sparse_moe.experts.gate_up_proj", "block_sparse_moe.experts.down_proj",
                   "shared_mlp.input_linear.weight", "shared_mlp.output_linear.weight"}));
  EXPECT_EQ(c.sliding_window, 128);  // the class's window on three layers of four
}

}  // namespace
}  // namespace shardplan::tensor
