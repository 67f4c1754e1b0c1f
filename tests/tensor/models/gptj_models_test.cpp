// gptj (EleutherAI's GPT-J) against hand formulas written here from transformers 5's
// configuration_gptj.py and modeling_gptj.py. h n_embd, V vocabulary, F n_inner (4 h when null),
// d = h / heads, r rotary_dim:
//   attn     k_proj, v_proj, q_proj, out_proj [h, h] each, no biases (registered in that order);
//            the non-persistent float32 buffer embed_positions [n_positions, r]
//   mlp      fc_in [F, h] + [F], fc_out [h, F] + [h]
//   norms    ln_1 (the layer's only one) and transformer.ln_f: [h] + [h]
//   model    wte [V, h], lm_head [V, h] (unless tied) + bias [V] (never tied)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
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
using test::ops_in;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// The parameter names outside the repeated blocks, in named_parameters order.
Names top_level_names(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) out.push_back(p.name);
  }
  return out;
}

TEST(GptjModels, Gptj6BMatchesTheHandTotal) {
  // GPT-J-6B: V 50,400, h 4,096, 28 layers of 16 heads of 256, F 16,384 (n_inner null), r 64.
  const int64_t V = 50400, h = 4096, F = 16384;
  const int64_t layer = 2 * h + 4 * h * h + (h * F + F) + (F * h + h);
  EXPECT_EQ(layer, 201'355'264);
  const int64_t total = V * h + 28 * layer + 2 * h + V * h + V;
  EXPECT_EQ(total, 6'050'882'784);
  // The model card's 6,053,381,344 counts mesh-transformer-jax's parameters over its 8 model-
  // parallel shards, each holding its own copy of every LayerNorm (scale and offset: 28 ln_1 and
  // the final one) and of every fc_out bias, plus a bias on its embedding projection: 7 more
  // copies of 29 x 2h, 7 more of 28 x h, and 8 x h that transformers' wte does not have.
  EXPECT_EQ(total + 7 * 29 * 2 * h + 7 * 28 * h + 8 * h, 6'053'381'344);

  const ModelConfig c = find_model_config("gpt-j-6b");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);  // 64 of 256
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);  // the file states no dtype
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "GPTJForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "transformer.h.0."),
            (Names{"ln_1.weight", "ln_1.bias", "attn.k_proj.weight", "attn.v_proj.weight",
                   "attn.q_proj.weight", "attn.out_proj.weight", "mlp.fc_in.weight",
                   "mlp.fc_in.bias", "mlp.fc_out.weight", "mlp.fc_out.bias"}));
  EXPECT_EQ(top_level_names(*m),
            (Names{"transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias",
                   "lm_head.weight", "lm_head.bias"}));
  EXPECT_EQ(m->get_submodule("transformer").type_name(), "GPTJModel");
  EXPECT_EQ(m->get_submodule("transformer.h.27").type_name(), "GPTJBlock");
  EXPECT_EQ(m->get_submodule("transformer.h.0.attn").type_name(), "GPTJAttention");
  EXPECT_EQ(m->get_submodule("transformer.h.0.mlp").type_name(), "GPTJMLP");
  // Each attention's sinusoid table: float32 rows of n_positions, not in a state_dict.
  const Tensor table = m->get_buffer("transformer.h.0.attn.embed_positions");
  EXPECT_EQ(table.sizes(), DimVector({2048, 64}));
  EXPECT_EQ(table.dtype(), DType::kFloat32);
  EXPECT_EQ(m->named_buffers().size(), 28u);
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // One layer kind: dense, full attention, rotated.
  EXPECT_EQ(layer_stack(c).kinds.size(), 1u);
}

nlohmann::json tiny() {
  return {{"model_type", "gptj"},
          {"vocab_size", 128},
          {"n_embd", 64},
          {"n_layer", 2},
          {"n_head", 4},
          {"n_positions", 32},
          {"n_inner", 96},
          {"rotary_dim", 8},
          {"embd_pdrop", 0.1},
          {"attn_pdrop", 0.1},
          {"resid_pdrop", 0.1},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(GptjModels, TinyConfigByHand) {
  // d = 16, r = 8. Attention: 4 x 64 x 64 = 16,384. MLP: fc_in 64 x 96 + 96 = 6,240, fc_out
  // 96 x 64 + 64 = 6,208. ln_1 128. A layer: 28,960; two: 57,920.
  // Model: wte 8,192, ln_f 128, lm_head 8,192 + 128: 74,560.
  const int64_t layer = 16'384 + 6'240 + 6'208 + 128;
  EXPECT_EQ(layer, 28'960);
  const int64_t total = 2 * layer + 8'192 + 128 + 8'192 + 128;
  EXPECT_EQ(total, 74'560);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_TRUE(c.lm_head_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->get_parameter("transformer.h.1.mlp.fc_in.weight").sizes(), DimVector({96, 64}));
  EXPECT_EQ(m->get_parameter("lm_head.bias").sizes(), DimVector({128}));
  EXPECT_EQ(m->get_buffer("transformer.h.1.attn.embed_positions").sizes(), DimVector({32, 8}));
  EXPECT_EQ(m->get_parameter("transformer.wte.weight").dtype(), DType::kBFloat16);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Tied: lm_head's weight is wte's, its bias stays its own.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  const ModelConfig tied = parse_model_config(j, "tied");
  const ModulePtr t = build_model(tied);
  EXPECT_EQ(t->parameters_numel(), total - 8'192);
  EXPECT_EQ(top_level_names(*t), (Names{"transformer.wte.weight", "transformer.ln_f.weight",
                                        "transformer.ln_f.bias", "lm_head.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(tied), "round trip"), tied);
  // n_inner null: 4 h = 256. fc_in 64 x 256 + 256 = 16,640, fc_out 256 x 64 + 64 = 16,448:
  // a layer 49,600, the model 2 x 49,600 + 16,640 = 115,840.
  j = tiny();
  j["n_inner"] = nullptr;
  const ModelConfig wide = parse_model_config(j, "n_inner null");
  EXPECT_EQ(wide.intermediate_size, 256);
  EXPECT_EQ(build_model(wide)->parameters_numel(), 115'840);
  EXPECT_EQ(parse_model_config(to_hf_json(wide), "round trip"), wide);
}

TEST(GptjModels, ClassDefaults) {
  // GPTJConfig's defaults for every key but the sizes: 2,048 positions, rotary_dim 64, n_inner
  // 4 h, gelu_new, eps 1e-5, untied, no dropout; float32 without a dtype.
  const nlohmann::json j = {
      {"model_type", "gptj"}, {"vocab_size", 1000}, {"n_embd", 256}, {"n_layer", 2}, {"n_head", 2}};
  const ModelConfig c = parse_model_config(j, "defaults.json");
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);  // 64 of 128
  EXPECT_EQ(c.intermediate_size, 1024);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // GPT-J's fixed base
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_FALSE(c.pad_token_id.has_value());
}

TEST(GptjModels, RotaryWidthIsRotaryDim) {
  // rotary_dim 2 of heads of 98: 2 / 98 x 98 rounds to 1.9999999999999998 in doubles, which
  // would truncate to 1; the family's fraction truncates back to 2, and writes 2 again.
  nlohmann::json j = tiny();
  j["n_embd"] = 196;
  j["n_head"] = 2;
  j["rotary_dim"] = 2;
  const ModelConfig c = parse_model_config(j, "narrow.json");
  EXPECT_EQ(static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor), 2);
  EXPECT_EQ(to_hf_json(c)["rotary_dim"], 2);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(build_model(c)->get_buffer("transformer.h.0.attn.embed_positions").sizes(),
            DimVector({32, 2}));
  // The whole head (rotary_dim = head_dim) and a null rotary_dim on a single head, which
  // transformers then rotates whole.
  j = tiny();
  j["rotary_dim"] = 16;
  EXPECT_DOUBLE_EQ(parse_model_config(j, "whole").partial_rotary_factor, 1.0);
  j = tiny();
  j["n_head"] = 1;
  j["rotary_dim"] = nullptr;
  const ModelConfig one = parse_model_config(j, "one head");
  EXPECT_DOUBLE_EQ(one.partial_rotary_factor, 1.0);
  EXPECT_EQ(parse_model_config(to_hf_json(one), "round trip"), one);
  // GPTJConfig has no rope_parameters: one in the file changes nothing, as transformers ignores
  // it (its partial_rotary_factor does not replace rotary_dim).
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 500000.0}, {"partial_rotary_factor", 1.0}};
  const ModelConfig ignored = parse_model_config(j, "rope_parameters");
  EXPECT_DOUBLE_EQ(ignored.partial_rotary_factor, 0.5);
  EXPECT_DOUBLE_EQ(ignored.rope_theta, 10000.0);
  // rope_scaling is kept (a plan's --rope-scaling) and written back.
  j = tiny();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const ModelConfig scaled = parse_model_config(j, "rope_scaling");
  ASSERT_TRUE(scaled.rope_scaling.has_value());
  EXPECT_EQ(scaled.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(scaled), "round trip"), scaled);
}

TEST(GptjModels, WhatIsRefused) {
  const auto error = [](const nlohmann::json& j) {
    try {
      (void)parse_model_config(j, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json j = tiny();
  for (const int r : {7, 0, -2, 18}) {  // odd, none, negative, wider than a head of 16
    j["rotary_dim"] = r;
    EXPECT_THAT(error(j), HasSubstr("field 'rotary_dim': must be even and in (0, head_dim = 16], "
                                    "got " +
                                    std::to_string(r)));
  }
  j = tiny();
  j["rotary_dim"] = nullptr;
  EXPECT_THAT(error(j), HasSubstr("field 'rotary_dim': null makes GPTJAttention's tables n_embd = "
                                  "64 wide, which heads of 16 cannot take"));
  j = tiny();
  j["n_head"] = 5;
  EXPECT_THAT(error(j), HasSubstr("field 'n_head': 5 does not divide n_embd 64"));
  for (const int heads : {0, -4}) {  // validate's, named by the file's key
    j["n_head"] = heads;
    EXPECT_THAT(error(j), HasSubstr("field 'n_head'"));
  }
  j = tiny();
  j["n_positions"] = int64_t{1} << 60;
  EXPECT_THAT(error(j), HasSubstr("field 'n_positions'"));
  // GPT-J's output bias is the family's: a file naming lm_head_bias is refused as unread.
  j = tiny();
  j["lm_head_bias"] = true;
  EXPECT_THAT(error(j), HasSubstr("lm_head_bias"));
  // Required sizes.
  for (const char* key : {"vocab_size", "n_embd", "n_layer", "n_head"}) {
    j = tiny();
    j.erase(key);
    EXPECT_THAT(error(j), HasSubstr(std::string("field '") + key + "'"));
  }
  // The tables have n_positions rows: a longer sequence is one clear error, as transformers'
  // gather fails.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 33); },
              ThrowsMessage<Error>(HasSubstr("sequence length 33 exceeds n_positions 32")));
}

TEST(GptjModels, OneNormFeedsBothHalvesAndRopeIsTracedPerLayer) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  // x + attn(n) + mlp(n): two adds, one ln_1 read by both halves, gelu_new (tanh) in the MLP.
  EXPECT_EQ(ops_in(g, "add", "transformer.h.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.h.0.ln_1"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "transformer.h.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.ln_f"), 1);
  // Each attention gathers its table's rows, casts them to bfloat16, repeats sin and cos in
  // place for q and for k (4 copies) beside merge_heads' copy, and rotates q and k (a neg, two
  // products and a sum each).
  const std::string attn = "transformer.h.0.attn";
  EXPECT_EQ(ops_in(g, "embedding", attn), 1);
  EXPECT_EQ(ops_in(g, "to", attn), 1);
  EXPECT_EQ(ops_in(g, "reshape", attn), 5);
  EXPECT_EQ(ops_in(g, "neg", attn), 2);
  EXPECT_EQ(ops_in(g, "mul", attn), 4);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", attn), 1);
  // The projections of one layer, T = 2 x 8 tokens: 2 T h (4 h + 2 F) = 2 x 16 x 64 x (256 +
  // 192) = 917,504 FLOPs; the output layer 2 T h V = 262,144.
  double layer0 = 0, head = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "linear") continue;
    if (n.module.starts_with("transformer.h.0.")) layer0 += n.matmul_flops;
    if (n.module == "lm_head") head += n.matmul_flops;
  }
  EXPECT_DOUBLE_EQ(layer0, 917'504.0);
  EXPECT_DOUBLE_EQ(head, 262'144.0);
  // No dropout in an inference build.
  int64_t dropouts = 0;
  for (const OpNode& n : g.nodes()) dropouts += n.op == "dropout";
  EXPECT_EQ(dropouts, 0);
}

TEST(GptjModels, TrainingStepDropsOutAndDoublesTheProjectionsBackward) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.input = empty({2, 8}, {.dtype = DType::kInt64});
  const TrainingStep st = trace_training_step(*m, o);
  // The tables are buffers: the trainable elements are the 74,560 parameters.
  EXPECT_EQ(st.totals.parameters, 74'560);
  double forward = 0, backward = 0;
  int64_t dropouts = 0;
  for (const TrainingOp& op : st.ops) {
    const std::string& fqn = op.call >= 0 ? st.calls[static_cast<size_t>(op.call)].fqn : "";
    if (op.op == "dropout") ++dropouts;
    if (op.op != "linear" || !fqn.starts_with("transformer.h.0.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // As by hand above; backward multiplies each by its input's and its weight's gradient.
  EXPECT_DOUBLE_EQ(forward, 917'504.0);
  EXPECT_DOUBLE_EQ(backward, 2 * 917'504.0);
  // embd_pdrop once, resid_pdrop on each half's output in both layers (attn_pdrop is inside the
  // fused attention).
  EXPECT_EQ(dropouts, 1 + 2 * 2);
}

}  // namespace
}  // namespace shardplan::tensor
