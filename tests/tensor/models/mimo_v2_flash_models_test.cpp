// mimo_v2_flash (Xiaomi MiMo-V2-Flash) against hand formulas written here from transformers 5's
// modular_mimo_v2_flash.py and the published size ("309B total, 15B active": Xiaomi's README).
// h hidden, V vocabulary, H heads, q/k heads of D and v heads of Dv, kv key-value heads on full
// layers and 2 kv on sliding ones, E experts of width F, the dense MLP I wide:
//   full attention     q_proj [H D, h], k_proj [kv D, h], v_proj [kv Dv, h], o_proj [h, H Dv]
//   sliding attention  sinks [H] (the attention's own, listed first), then the same with 2 kv
//   dense              gate_proj, up_proj [I, h], down_proj [h, I]
//   moe                experts gate_up_proj [E, 2F, h], down_proj [E, h, F], gate [E, h]; no
//                      shared expert; e_score_correction_bias [E] a buffer of the router
//   layer              input_layernorm, post_attention_layernorm [h]; untied lm_head [V, h]
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t attention(int64_t h, int64_t H, int64_t kv, int64_t D, int64_t Dv) {
  return h * H * D + h * kv * D + h * kv * Dv + H * Dv * h;
}

TEST(MimoV2FlashModels, FlagshipMatchesThePublishedSize) {
  // 48 layers: 9 full (0 and each sixth) and 39 sliding with sinks; layer 0 dense (16,384), 47
  // MoE layers of 256 experts of 2,048.
  const int64_t V = 152576, h = 4096, H = 64, D = 192, Dv = 128;
  const int64_t full = attention(h, H, 4, D, Dv), sliding = attention(h, H, 8, D, Dv) + H;
  const int64_t moe = 3 * 256 * 2048 * h + 256 * h, dense = 3 * h * 16384;
  EXPECT_EQ(full, 89'128'960);
  EXPECT_EQ(sliding, 94'371'904);
  const int64_t total = 9 * full + 39 * sliding + dense + 47 * moe + 48 * 2 * h + 2 * V * h + h;
  EXPECT_EQ(total, 308'778'768'832);
  const ModelConfig c = find_model_config("mimo-v2-flash");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MiMoV2FlashForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.1."),
            (Names{"self_attn.sinks", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                   "self_attn.v_proj.weight", "self_attn.o_proj.weight", "mlp.experts.gate_up_proj",
                   "mlp.experts.down_proj", "mlp.gate.weight", "input_layernorm.weight",
                   "post_attention_layernorm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.5.self_attn."),
            (Names{"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}));
  const auto shape = [&](const std::string& name) {
    const Tensor t = m->get_parameter(name);
    return std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
  };
  EXPECT_EQ(shape("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{768, h}));
  EXPECT_EQ(shape("model.layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{1536, h}));
  EXPECT_EQ(shape("model.layers.1.self_attn.v_proj.weight"), (std::vector<int64_t>{1024, h}));
  EXPECT_EQ(shape("model.layers.1.self_attn.o_proj.weight"), (std::vector<int64_t>{h, 8192}));
  int64_t sliding_layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    sliding_layers += k.attention == AttentionType::kSliding;
    EXPECT_EQ(kv_heads_of(c, k), k.attention == AttentionType::kSliding ? 8 : 4) << i;
  }
  EXPECT_EQ(sliding_layers, 39);
  EXPECT_EQ(layer_stack(c).kinds.size(), 3u);  // full dense, sliding moe, full moe
  EXPECT_EQ(models::rotary_dim(c), 64);        // int(192 x 0.334)
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 47 * 256);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "mimo_v2_flash"},
          {"vocab_size", 128},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 1},
          {"head_dim", 24},
          {"v_head_dim", 16},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"sliding_window", 8},
          {"layer_types",
           {"full_attention", "sliding_attention", "sliding_attention", "full_attention"}}};
}

TEST(MimoV2FlashModels, TinyConfigByHandAndTheValueScale) {
  // Full attention 6,144 + 1,536 + 1,024 + 4,096 = 12,800; sliding 6,144 + 3,072 + 2,048 + 4,096
  // + 4 sinks = 15,364; dense 18,432; MoE 16,384 + 8,192 + 256 = 24,832; norms 128 a layer.
  EXPECT_EQ(attention(64, 4, 1, 24, 16), 12'800);
  EXPECT_EQ(attention(64, 4, 2, 24, 16) + 4, 15'364);
  const int64_t total =
      (12800 + 18432 + 128) + 2 * (15364 + 24832 + 128) + (12800 + 24832 + 128) + 2 * 8192 + 64;
  EXPECT_EQ(total, 166'216);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.partial_rotary_factor, 0.334);  // the class's RoPE: int(24 x 0.334) = 8 rotate
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.attention_value_scale, 0.707);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  // v times 0.707 on every layer: one more multiply in the attention than without the scale.
  const auto muls = [](Module& model) {
    const OpGraph g = trace_model_forward(model, 1, 8);
    int64_t n = 0;
    for (const OpNode& op : g.nodes())
      n += op.module == "model.layers.1.self_attn" && op.op == "mul";
    return n;
  };
  nlohmann::json plain = tiny();
  plain["attention_value_scale"] = nullptr;  // the attention's None: 1.0, still multiplied
  const ModelConfig p = parse_model_config(plain, "tiny.json");
  EXPECT_EQ(p.attention_value_scale, 1.0);
  EXPECT_EQ(muls(*m), muls(*build_model(p)));
  EXPECT_GE(muls(*m), 1);
}

TEST(MimoV2FlashModels, XiaomisOwnKeysMustSayWhatTransformersBuilds) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "mimo.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key;
  };
  refused("swa_num_key_value_heads", 1, "twice num_key_value_heads");
  refused("swa_v_head_dim", 24, "v_head_dim on every layer");
  refused("add_full_attention_sink_bias", true, "no sinks on the full layers");
  refused("hybrid_layer_pattern", {0, 1, 0, 0}, "these layer types");
  refused("moe_layer_freq", {1, 1, 1, 1}, "these feed-forwards");
  refused("n_shared_experts", 1, "no shared expert");
  refused("rope_theta", 1e6, "rope_parameters");
  refused("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "keyed by layer type");
  refused("rope_parameters",
          {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e6}}},
           {"sliding_attention",
            {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}},
          "expected one share for both");
  refused("layer_types",
          {"full_attention", "chunked_attention", "sliding_attention", "full_attention"},
          "full_attention and sliding_attention layers only");
  refused("sliding_window", nullptr, "is null");
  refused("v_head_dim", int64_t{1} << 62, "beyond what shardplan counts exactly");
  refused("num_key_value_heads", int64_t{1} << 62, "at most 2^40");
  nlohmann::json j = tiny();  // the published file's form of the same model
  j.erase("layer_types");
  j["num_hidden_layers"] = 6;
  j["hybrid_layer_pattern"] = {0, 1, 1, 1, 1, 0};
  j["moe_layer_freq"] = {0, 1, 1, 1, 1, 1};
  j["swa_num_key_value_heads"] = 2;
  j["add_swa_attention_sink_bias"] = true;
  j["add_full_attention_sink_bias"] = false;
  j["rope_theta"] = 5e6;
  j["partial_rotary_factor"] = 0.334;
  j["n_shared_experts"] = nullptr;
  j["routed_scaling_factor"] = nullptr;
  const ModelConfig c = parse_model_config(j, "mimo.json");
  EXPECT_EQ(c.sliding_num_key_value_heads, 2);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace shardplan::tensor
