// lfm2 (Liquid AI's LFM2) against hand formulas written here from transformers 5's
// modular_lfm2.py and the published sizes (LFM2-1.2B, LFM2-350M). h hidden, V vocabulary, H heads
// and K key-value heads of d = h / H, the MLP f wide (Lfm2MLP's adjusted width), the
// convolution k taps wide:
//   conv layer       conv.conv [h, 1, k], conv.in_proj [3h, h], conv.out_proj [h, h] (each with a
//                    bias by conv_bias): 4 h^2 + k h (+ 5 h)
//   attention layer  q_proj, out_proj [H d, h], k_proj, v_proj [K d, h], q_layernorm,
//                    k_layernorm [d]
//   every layer      feed_forward w1, w3 [f, h], w2 [h, f]; operator_norm, ffn_norm [h]
//   model            embed_tokens [V, h] (tied lm_head), embedding_norm [h] (the final norm)
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
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t hand_total(int64_t V, int64_t h, int64_t H, int64_t K, int64_t f, int64_t conv_layers,
                   int64_t attention_layers) {
  const int64_t d = h / H, mlp = 3 * h * f + 2 * h;
  const int64_t conv = 4 * h * h + 3 * h, attention = 2 * h * H * d + 2 * h * K * d + 2 * d;
  return V * h + conv_layers * (conv + mlp) + attention_layers * (attention + mlp) + h;
}

TEST(Lfm2Models, Lfm2MatchesThePublishedSizes) {
  // LFM2-1.2B: 2,048 wide, 16 layers of which 6 attend (2, 5, 8, 10, 12, 14), 32 heads and 8 kv
  // heads, block_ff_dim 12,288 -> int(2 x 12,288 / 3) = 8,192 (a multiple of 256), vocabulary
  // 65,536 tied: "1.2B".
  EXPECT_EQ(hand_total(65536, 2048, 32, 8, 8192, 10, 6), 1'170'340'608);
  const ModelConfig c = find_model_config("lfm2-1.2b");
  EXPECT_EQ(c.intermediate_size, 8192);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Lfm2ForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 1'170'340'608);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"conv.conv.weight", "conv.in_proj.weight", "conv.out_proj.weight",
                   "feed_forward.w1.weight", "feed_forward.w3.weight", "feed_forward.w2.weight",
                   "operator_norm.weight", "ffn_norm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.2.self_attn."),
            (Names{"q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight",
                   "q_layernorm.weight", "k_layernorm.weight"}));
  EXPECT_EQ(names_under(*m, "model.embedding_norm."), (Names{"weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.0.conv").type_name(), "Lfm2ShortConv");
  EXPECT_EQ(layer_stack(c).kinds.size(), 2u);  // the conv layer and the attention layer
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // LFM2-350M: 1,024 wide, 16 heads, block_ff_dim 6,656 -> 4,437 -> 4,608, the same layers.
  nlohmann::json small = to_hf_json(c);
  small["hidden_size"] = 1024;
  small["num_attention_heads"] = 16;
  small["head_dim"] = 64;
  small["intermediate_size"] = 6656;
  small["block_auto_adjust_ff_dim"] = true;
  const ModelConfig s = parse_model_config(small, "lfm2-350m.json");
  EXPECT_EQ(s.intermediate_size, 4608);
  EXPECT_EQ(build_model(s)->parameters_numel(), hand_total(65536, 1024, 16, 8, 4608, 10, 6));
  EXPECT_EQ(hand_total(65536, 1024, 16, 8, 4608, 10, 6), 354'483'968);
}

nlohmann::json tiny() {
  return {{"model_type", "lfm2"},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 256},
          {"block_multiple_of", 64},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"layer_types", {"conv", "full_attention", "conv"}},
          {"conv_bias", true}};
}

TEST(Lfm2Models, TinyConfigByHandAndItsTrace) {
  // f: int(2 x 256 / 3) = 170, rounded up to 64: 192. Conv mixer 192 + 64 + 12,288 + 192 +
  // 4,096 + 64 = 16,896; attention 4,096 + 2,048 + 2,048 + 4,096 + 32 = 12,320; MLP 36,864;
  // norms 128; embeddings 16,384 (tied) and the final norm 64.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.intermediate_size, 192);
  EXPECT_EQ(build_model(c)->parameters_numel(),
            16384 + 2 * (16896 + 36864 + 128) + (12320 + 36864 + 128) + 64);  // 173,536
  nlohmann::json j = tiny();
  j["conv_bias"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 173536 - 640);
  // The convolution: one op of 2 k + 1 (the bias) FLOPs an element, no SiLU; the gates two
  // products of [batch, h, tokens].
  const ModulePtr m = build_model(c);
  const OpGraph g = trace_model_forward(*m, 1, 8);
  double conv_flops = 0;
  int64_t gates = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module != "model.layers.0.conv") continue;
    if (n.op == "causal_conv1d") conv_flops += n.flops;
    gates += n.op == "mul";
  }
  EXPECT_EQ(conv_flops, 8.0 * 64 * (2 * 3 + 1));
  EXPECT_EQ(gates, 2);
  // PreTrainedModel._init_weights: the convolution as a Linear, the embedding's pad row zero.
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  EXPECT_EQ(init.at("model.layers.0.conv.conv.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.layers.0.conv.conv.bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("model.embed_tokens.weight").zero_row, 0);
}

TEST(Lfm2Models, LayerTypesFromTheIndicesAndWhatIsRefused) {
  nlohmann::json j = tiny();
  j.erase("layer_types");
  EXPECT_EQ(parse_model_config(j, "f.json").layer_types,
            (std::vector<AttentionType>(3, AttentionType::kFull)));  // Lfm2Config: all attend
  j["full_attn_idxs"] = {1, 7};  // out of range: ignored, as Lfm2Config ignores it
  EXPECT_EQ(parse_model_config(j, "f.json").layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kFull,
                                        AttentionType::kLinear}));
  j["block_ff_dim"] = 384;  // the legacy key wins: 256, already a multiple of 64
  EXPECT_EQ(parse_model_config(j, "f.json").intermediate_size, 256);
  j["tie_embedding"] = false;  // the legacy key of tie_word_embeddings
  EXPECT_FALSE(parse_model_config(j, "f.json").tie_word_embeddings);
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json bad = tiny();
    bad[key] = value;
    EXPECT_THAT([&] { parse_model_config(bad, "lfm2.json"); },
                ThrowsMessage<Error>(AllOf(HasSubstr("field '"), HasSubstr(why))))
        << key;
  };
  refused("layer_types", {"conv", "sliding_attention", "conv"},
          "expected \"full_attention\" or \"conv\"");
  refused("block_ffn_dim_multiplier", nullptr, "is null");
  refused("conv_L_cache", 0, "positive");
  // Widths no model has are refused before any conversion could overflow.
  refused("block_ffn_dim_multiplier", 1e300, "beyond 2^53");  // named by the width it scales
  refused("block_multiple_of", int64_t{1} << 62, "expected at most 2^30");
}

// lfm2_moe: the same stack, the first num_dense_layers with a dense MLP of intermediate_size (no
// adjustment), the others Lfm2MoeSparseMoeBlock: experts gate_up_proj [E, 2F, h] and down_proj
// [E, h, F], then the router gate [E, h]; expert_bias [E] a buffer beside the model.
TEST(Lfm2Models, Lfm2MoeMatchesThePublishedSize) {
  // LFM2-8B-A1B: 2,048 wide, 24 layers (attention at 2, 6, 10, 14, 18, 21), layers 0 and 1 dense
  // (7,168), 22 MoE layers of 32 experts of 1,792, top 4: "8.3B total, 1.5B active".
  const int64_t h = 2048, V = 65536, conv = 4 * h * h + 3 * h,
                attention = 2 * h * 2048 + 2 * h * 512 + 2 * 64, dense = 3 * h * 7168,
                moe = 32 * 3 * h * 1792 + 32 * h;
  const int64_t total =
      V * h + h + 18 * (conv + 2 * h) + 6 * (attention + 2 * h) + 2 * dense + 22 * moe;
  EXPECT_EQ(total, 8'339'929'856);
  EXPECT_EQ(total - 22 * 28 * 3 * h * 1792, 1'557'740'288);  // 4 of 32 experts active
  const ModelConfig c = find_model_config("lfm2-8b-a1b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "Lfm2MoeForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.2.feed_forward."),
            (Names{"experts.gate_up_proj", "experts.down_proj", "gate.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.1.feed_forward."),
            (Names{"w1.weight", "w3.weight", "w2.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.2.feed_forward").type_name(), "Lfm2MoeSparseMoeBlock");
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 22 * 32);
  EXPECT_EQ(layer_stack(c).kinds.size(), 3u);  // conv dense, conv moe, attention moe
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The tiny config of all four kinds: 16,384 + (16,576 + 24,576 + 128) + (12,320 + 24,576 +
  // 128) + (16,576 + 24,832 + 128) + (12,320 + 24,832 + 128) + 64.
  nlohmann::json j = {{"model_type", "lfm2_moe"},
                      {"vocab_size", 256},
                      {"hidden_size", 64},
                      {"intermediate_size", 128},
                      {"moe_intermediate_size", 32},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"layer_types", {"conv", "full_attention", "conv", "full_attention"}},
                      {"num_dense_layers", 2},
                      {"num_experts", 4},
                      {"num_experts_per_tok", 2}};
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 173'568);
  j.erase("layer_types");
  EXPECT_THAT([&] { parse_model_config(j, "tiny.json"); },
              ThrowsMessage<Error>(HasSubstr("Lfm2MoeConfig derives none")));
}

}  // namespace
}  // namespace shardplan::tensor
