// phi (Phi-1, Phi-1.5, Phi-2) against hand formulas written here from transformers 5's
// modeling_phi.py and its conversion script (convert_phi_weights_to_hf.py: phi-1 and phi-1.5 are
// PhiConfig's defaults; phi-2 h 2,560, F 10,240, 32 layers, resid_pdrop 0.1, factor 0.4). h hidden,
// V vocabulary, F MLP width, H heads and kv key-value heads of d (q = H d, k = kv d), every Linear
// with a bias:
//   self_attn  q_proj [q, h] + [q], k_proj and v_proj [k, h] + [k], dense [h, q] + [h];
//              q_layernorm and k_layernorm (qk_layernorm) nn.LayerNorm [d] + [d] each
//   mlp        fc1 [F, h] + [F], fc2 [h, F] + [h] (no gate)
//   norms      input_layernorm (the layer's only one) and model.final_layernorm: [h] + [h]
//   model      embed_tokens [V, h], lm_head [V, h] (unless tied) + bias [V] (never tied)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

nlohmann::json tiny() {
  return {{"model_type", "phi"},      {"vocab_size", 128},
          {"hidden_size", 64},        {"intermediate_size", 96},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"partial_rotary_factor", 0.5},
          {"qk_layernorm", true},     {"resid_pdrop", 0.1},
          {"embd_pdrop", 0.1},        {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(PhiModels, TinyConfigByHand) {
  // d = 16, q = 64, k = 32, rotated width int(16 x 0.5) = 8.
  // Attention: weights 4,096 + 2,048 + 2,048 + 4,096 = 12,288, biases 64 + 32 + 32 + 64 = 192:
  // 12,480; q_layernorm and k_layernorm 2 x (16 + 16) = 64.
  // MLP: fc1 64 x 96 + 96 = 6,240, fc2 96 x 64 + 64 = 6,208: 12,448. input_layernorm 128.
  // A layer: 12,480 + 64 + 12,448 + 128 = 25,120; two: 50,240.
  // Model: embed_tokens 8,192, final_layernorm 128, lm_head 8,192 + 128: 66,880.
  const int64_t layer = 12'480 + 64 + 12'448 + 128;
  EXPECT_EQ(layer, 25'120);
  const int64_t total = 2 * layer + 8'192 + 128 + 8'192 + 128;
  EXPECT_EQ(total, 66'880);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_TRUE(c.lm_head_bias);
  EXPECT_TRUE(c.qk_norm_per_head);
  EXPECT_FALSE(c.pad_token_id.has_value());  // PhiConfig: None
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "PhiForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (Names{"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                   "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                   "self_attn.dense.weight", "self_attn.dense.bias", "self_attn.q_layernorm.weight",
                   "self_attn.q_layernorm.bias", "self_attn.k_layernorm.weight",
                   "self_attn.k_layernorm.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
                   "mlp.fc2.bias", "input_layernorm.weight", "input_layernorm.bias"}));
  EXPECT_EQ(names_under(*m, "model.final_layernorm."), (Names{"weight", "bias"}));
  EXPECT_EQ(names_under(*m, "lm_head."), (Names{"weight", "bias"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.q_layernorm.weight").sizes(),
            DimVector({16}));
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "PhiAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "PhiMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "PhiDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "PhiRotaryEmbedding");
  // Partial RoPE: inv_freq covers the 8 rotated channels of each 16-wide head.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({4}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Tied: lm_head's weight is the embedding's, its bias stays (58,688); no q/k layernorms: -128.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tied"))->parameters_numel(), 66'880 - 8'192);
  j = tiny();
  j["qk_layernorm"] = false;
  const ModelConfig plain = parse_model_config(j, "plain");
  EXPECT_EQ(build_model(plain)->parameters_numel(), 66'880 - 128);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
}

TEST(PhiModels, OneNormFeedsBothHalvesAndTrainingDropsOutEach) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // x + attn(n) + mlp(n): two adds in the layer, one norm read by both halves, the q/k norms per
  // head before RoPE, gelu_new (tanh GELU) between fc1 and fc2.
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.input_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.self_attn.q_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layers.0.self_attn.k_layernorm"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "model.final_layernorm"), 1);
  // A training build: embd_pdrop after the embedding, resid_pdrop on each half.
  const ModulePtr train = build_model(c, {.dtype = std::nullopt, .training = true});
  const OpGraph t = trace_model_forward(*train, 2, 8);
  EXPECT_EQ(ops_in(t, "dropout", "model"), 1);
  EXPECT_EQ(ops_in(t, "dropout", "model.layers.0"), 2);
  int64_t eval_dropouts = 0;
  for (const OpNode& n : g.nodes()) eval_dropouts += n.op == "dropout";
  EXPECT_EQ(eval_dropouts, 0);
}

TEST(PhiModels, RotaryFactorPrecedenceAndWhatIsRefused) {
  // PhiConfig's default factor when neither the file nor rope_parameters gives one.
  nlohmann::json j = tiny();
  j.erase("partial_rotary_factor");
  EXPECT_DOUBLE_EQ(parse_model_config(j, "default").partial_rotary_factor, 0.5);
  // rope_parameters' factor wins over the top-level key (convert_rope_params_to_dict).
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  EXPECT_DOUBLE_EQ(parse_model_config(j, "rope_parameters").partial_rotary_factor, 0.25);
  // q/k layernorms are hidden / heads wide: a head_dim of another width is refused with them...
  j = tiny();
  j["head_dim"] = 32;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr("head_dim")));
  // ... and sizes the projections without them (q 4 x 32 = 128 rows).
  j["qk_layernorm"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "wide heads"))
                ->get_parameter("model.layers.0.self_attn.q_proj.weight")
                .sizes(),
            DimVector({128, 64}));
  // Phi's output bias is the family's own: a file naming lm_head_bias is refused as unread.
  j = tiny();
  j["lm_head_bias"] = true;
  EXPECT_THAT([&] { parse_model_config(j, "bad"); },
              ThrowsMessage<Error>(HasSubstr("lm_head_bias")));
}

TEST(PhiModels, Phi15AndPhi2MatchTheHandTotals) {
  // phi-1 / phi-1.5 (PhiConfig's defaults): V 51,200, h 2,048, 24 layers of 32 heads, F 8,192.
  const auto total = [](int64_t V, int64_t h, int64_t F, int64_t L) {
    const int64_t layer = 4 * (h * h + h) + (h * F + F) + (F * h + h) + 2 * h;
    return L * layer + V * h + 2 * h + V * h + V;
  };
  EXPECT_EQ(total(51200, 2048, 8192, 24), 1'418'270'720);  // "1.3B"
  const nlohmann::json phi15 = {{"model_type", "phi"},           {"vocab_size", 51200},
                                {"hidden_size", 2048},           {"intermediate_size", 8192},
                                {"num_hidden_layers", 24},       {"num_attention_heads", 32},
                                {"num_key_value_heads", nullptr}};
  const ModelConfig c15 = parse_model_config(phi15, "phi-1_5");
  EXPECT_EQ(c15.num_key_value_heads, 32);
  EXPECT_EQ(build_model(c15)->parameters_numel(), 1'418'270'720);
  // phi-2: h 2,560, 32 layers of 32 heads of 80, F 10,240, RoPE on 32 channels (0.4).
  EXPECT_EQ(total(51200, 2560, 10240, 32), 2'779'683'840);  // "2.7B"
  const ModelConfig c = find_model_config("phi-2");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 2'779'683'840);
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), DimVector({16}));
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(PhiModels, NoHeadsIsRefusedNamingTheField) {
  // The head-width check divides by the head count: a file with none (found by fuzz_model_config,
  // a division by zero under UBSan) gets validate()'s error, not a crash.
  for (const int heads : {0, -4}) {
    nlohmann::json j = tiny();
    j["num_attention_heads"] = heads;
    EXPECT_THAT([&] { parse_model_config(j, "heads.json"); },
                ThrowsMessage<Error>(HasSubstr("field 'num_attention_heads'")));
  }
}

}  // namespace
}  // namespace shardplan::tensor
