// minimax (MiniMax-Text-01) against hand formulas written here from transformers'
// modeling_minimax.py (MiniMaxForCausalLM) and MiniMaxConfig. h hidden, V vocabulary, H heads and
// kv key-value heads of d, E experts of width I:
//   lightning attention (MiniMaxLightningAttention)  norm [H d], qkv_proj [3 H d, h],
//          out_proj [h, H d], output_gate [H d, h]:  H d + 5 H d h
//   softmax attention (MiniMaxAttention)  q, o [H d, h] and [h, H d], k, v [kv d, h]:
//          2 H d h + 2 kv d h
//   MoE (MiniMaxSparseMoeBlock)  gate [E, h], experts gate_up_proj [E, 2 I, h], down_proj
//          [E, h, I]:  E h + 3 E I h
//   layer  its attention + MoE + 2 h (input_layernorm, post_attention_layernorm)
//   model  embed_tokens [V, h] + the layers + norm [h] + lm_head [V, h] (untied)
// Buffers, not counted: each lightning layer's decays, rotary_emb's inv_freq.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
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
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Sizes {
  int64_t V, h, H, kv, d, E, I;
};
int64_t lightning(const Sizes& z) { return z.H * z.d + 5 * z.H * z.d * z.h; }
int64_t softmax_attention(const Sizes& z) { return 2 * z.H * z.d * z.h + 2 * z.kv * z.d * z.h; }
int64_t moe(const Sizes& z) { return z.E * z.h + 3 * z.E * z.I * z.h; }
int64_t total(const Sizes& z, int64_t linear, int64_t full) {
  return 2 * z.V * z.h + linear * (lightning(z) + moe(z) + 2 * z.h) +
         full * (softmax_attention(z) + moe(z) + 2 * z.h) + z.h;
}

// Three lightning layers then one softmax layer, 4 heads of 16 (2 kv heads), 4 experts of 32,
// top 2, blocks of 16 tokens.
nlohmann::json tiny() {
  return {{"model_type", "minimax"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"block_size", 16},
          {"layer_types",
           {"linear_attention", "linear_attention", "linear_attention", "full_attention"}},
          {"full_attn_alpha_factor", 2.0},
          {"linear_attn_alpha_factor", 2.0},
          {"mlp_alpha_factor", 2.0}};
}
constexpr Sizes kTiny{1000, 64, 4, 2, 16, 4, 32};

TEST(MiniMaxModels, TextZeroOneIsTheHandTotal) {
  // MiniMaxAI/MiniMax-Text-01 ("456 billion total parameters, of which 45.9 billion are activated
  // per token", arXiv 2501.08313): V 200,064, h 6,144, 64 heads of 128 (8 kv heads), 32 experts
  // of 9,216, top 2, 80 layers of which every eighth is softmax attention.
  const Sizes z{200064, 6144, 64, 8, 128, 32, 9216};
  EXPECT_EQ(lightning(z), 251'666'432);
  EXPECT_EQ(softmax_attention(z), 113'246'208);
  EXPECT_EQ(moe(z), 5'436'014'592);
  EXPECT_EQ(total(z, 70, 10), 456'089'655'296);
  const ModelConfig c = find_model_config("minimax-text-01");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 456'089'655'296);
  // Two of 32 experts a layer: 3 x 2 x 9,216 x 6,144 = 339,738,624 instead of 5,435,817,984.
  const int64_t active = 456'089'655'296 - 80 * (5'435'817'984 - 339'738'624);
  EXPECT_EQ(active, 48'403'306'496);
  EXPECT_EQ(active_parameters(*m, c), active);
  // The published 45.9B counts neither the embedding nor the output layer.
  EXPECT_EQ(active - 2 * int64_t{200064} * 6144, 45'944'920'064);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear moe");
  EXPECT_EQ(describe(s.kinds[1]), "moe");
  EXPECT_EQ(s.count(0), 70);
  EXPECT_EQ(s.first_layer(1), 7);
  EXPECT_EQ(c.linear_block_size, 256);
  // transformers rotates all 128 channels of a head (the file's rotary_dim 64 is not read).
  EXPECT_EQ(c.partial_rotary_factor, 1);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.max_position_embeddings, 10'240'000);
}

TEST(MiniMaxModels, NamesAndShapesAreTransformers) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  // MiniMaxDecoderLayer registers self_attn first (a lightning layer replaces it in place), then
  // input_layernorm, post_attention_layernorm and mlp; MiniMaxLightningAttention its norm,
  // qkv_proj, out_proj and output_gate; the sparse block its router, then the experts.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (test::Shapes{{"self_attn.norm.weight", {64}},
                          {"self_attn.qkv_proj.weight", {192, 64}},
                          {"self_attn.out_proj.weight", {64, 64}},
                          {"self_attn.output_gate.weight", {64, 64}},
                          {"input_layernorm.weight", {64}},
                          {"post_attention_layernorm.weight", {64}},
                          {"mlp.gate.weight", {4, 64}},
                          {"mlp.experts.gate_up_proj", {4, 64, 64}},
                          {"mlp.experts.down_proj", {4, 64, 32}}}));
  EXPECT_EQ(shapes_under(*m, "model.layers.3."),
            (test::Shapes{{"self_attn.q_proj.weight", {64, 64}},
                          {"self_attn.k_proj.weight", {32, 64}},
                          {"self_attn.v_proj.weight", {32, 64}},
                          {"self_attn.o_proj.weight", {64, 64}},
                          {"input_layernorm.weight", {64}},
                          {"post_attention_layernorm.weight", {64}},
                          {"mlp.gate.weight", {4, 64}},
                          {"mlp.experts.gate_up_proj", {4, 64, 64}},
                          {"mlp.experts.down_proj", {4, 64, 32}}}));
  std::vector<std::string> top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight",
                                           "lm_head.weight"}));
  // The lightning layer's persistent decays (nn.Buffer's default), sized by block_size.
  std::vector<std::pair<std::string, DimVector>> buffers;
  for (const NamedTensor& b : m->named_buffers({.persistent_only = true})) {
    if (b.name.starts_with("model.layers.0.")) buffers.emplace_back(b.name, b.tensor.sizes());
  }
  EXPECT_EQ(buffers, (std::vector<std::pair<std::string, DimVector>>{
                         {"model.layers.0.self_attn.slope_rate", {4, 1, 1}},
                         {"model.layers.0.self_attn.query_decay", {4, 16, 1}},
                         {"model.layers.0.self_attn.key_decay", {4, 16, 1}},
                         {"model.layers.0.self_attn.diagonal_decay", {1, 4, 16, 16}}}));
  EXPECT_EQ(names_under(*m, "model.rotary_emb."), std::vector<std::string>{});
  EXPECT_EQ(m->type_name(), "MiniMaxForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "MiniMaxModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "MiniMaxDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.3").type_name(), "MiniMaxDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "MiniMaxLightningAttention");
  EXPECT_EQ(m->get_submodule("model.layers.3.self_attn").type_name(), "MiniMaxAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "MiniMaxSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.gate").type_name(), "MiniMaxTopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.experts").type_name(), "MiniMaxExperts");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "MiniMaxRotaryEmbedding");
  // What a parameter report counts each part as.
  EXPECT_EQ(block_kind(*m, "model.layers.0.self_attn.qkv_proj.weight"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mlp.gate.weight"), "router");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mlp.experts.down_proj"), "experts");
}

TEST(MiniMaxModels, TinyConfigMatchesTheHandTotal) {
  EXPECT_EQ(lightning(kTiny), 20'544);
  EXPECT_EQ(softmax_attention(kTiny), 12'288);
  EXPECT_EQ(moe(kTiny), 24'832);
  EXPECT_EQ(total(kTiny, 3, 1), 301'824);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(build_model(c)->parameters_numel(), 301'824);
  // Tied: lm_head is the embedding, counted once.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tied.json"))->parameters_numel(),
            301'824 - 1000 * 64);
}

TEST(MiniMaxModels, ConfigDefaultsAndRoundTrip) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kLinear,
                                        AttentionType::kLinear, AttentionType::kFull}));
  EXPECT_EQ(c.linear_block_size, 16);
  EXPECT_EQ(c.linear_num_key_heads, 0);  // the lightning heads are the attention's
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // MiniMaxConfig's defaults: 131,072 positions, rms_norm_eps 1e-5, rope_theta 1e6, 8 experts,
  // top 2, blocks of 256, 8 key-value heads (as many as the heads when null), and without
  // layer_types full attention on the even layers, lightning on the odd ones.
  nlohmann::json j = {{"model_type", "minimax"}, {"vocab_size", 1000},
                      {"hidden_size", 256},      {"intermediate_size", 64},
                      {"num_hidden_layers", 4},  {"num_attention_heads", 16}};
  const ModelConfig d = parse_model_config(j, "defaults.json");
  EXPECT_EQ(d.num_key_value_heads, 8);
  EXPECT_EQ(d.head_dim, 16);
  EXPECT_EQ(d.max_position_embeddings, 131072);
  EXPECT_EQ(d.norm_eps, 1e-5);
  EXPECT_EQ(d.rope_theta, 1e6);
  EXPECT_EQ(d.num_local_experts, 8);
  EXPECT_EQ(d.num_experts_per_tok, 2);
  EXPECT_EQ(d.linear_block_size, 256);
  EXPECT_FALSE(d.tie_word_embeddings);
  EXPECT_FALSE(d.pad_token_id.has_value());
  EXPECT_EQ(d.layer_types,
            (std::vector<AttentionType>{AttentionType::kFull, AttentionType::kLinear,
                                        AttentionType::kFull, AttentionType::kLinear}));
  EXPECT_EQ(parse_model_config(to_hf_json(d), "round trip"), d);
  j["num_key_value_heads"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null-kv.json").num_key_value_heads, 16);
  // MiniMax's own keys, when they say what transformers builds: postnorm, no shared expert, and
  // attn_type_list agreeing with the layer types (0 lightning, 1 softmax); rotary_dim is ignored.
  j = tiny();
  j["postnorm"] = true;
  j["shared_intermediate_size"] = 0;
  j["shared_moe_mode"] = "sigmoid";
  j["attn_type_list"] = {0, 0, 0, 1};
  j["rotary_dim"] = 8;
  EXPECT_EQ(parse_model_config(j, "hub-keys.json"), c);
  // A sliding window bounds the softmax layers' keys; the lightning layers keep their state.
  j = tiny();
  j["sliding_window"] = 32;
  const ModelConfig w = parse_model_config(j, "window.json");
  EXPECT_EQ(w.layer_types[3], AttentionType::kSliding);
  EXPECT_EQ(w.layer_types[0], AttentionType::kLinear);
  EXPECT_EQ(layer_kind(w, 3).window, 32);
  const nlohmann::json back = to_hf_json(w);
  EXPECT_EQ(back.at("layer_types")[3], "full_attention");  // transformers' name for it
  EXPECT_EQ(parse_model_config(back, "round trip"), w);
  // A scaled RoPE (rope_parameters, or a legacy rope_scaling, which replaces them) round-trips;
  // partial_rotary_factor changes nothing under the default type.
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse_model_config(j, "default-rope.json").partial_rotary_factor, 1);
  EXPECT_EQ(parse_model_config(j, "default-rope.json").rope_theta, 5e6);
  j["rope_parameters"] = {{"rope_type", "yarn"},
                          {"factor", 8.0},
                          {"original_max_position_embeddings", 8192},
                          {"rope_theta", 5e6}};
  const ModelConfig y = parse_model_config(j, "yarn.json");
  ASSERT_TRUE(y.rope_scaling.has_value());
  EXPECT_EQ(y.rope_scaling->rope_type, "yarn");
  EXPECT_EQ(parse_model_config(to_hf_json(y), "round trip"), y);
  // The shipped file round-trips too.
  const ModelConfig text01 = find_model_config("minimax-text-01");
  EXPECT_EQ(parse_model_config(to_hf_json(text01), "round trip"), text01);
}

TEST(MiniMaxModels, RefusalsNameTheKey) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention",
                      "full_attention"};
  refused(j, "'layer_types': \"sliding_attention\" is not a MiniMax layer type");
  j["layer_types"] = {"linear_attention", "full_attention"};
  refused(j, "'layer_types': expected a list of num_hidden_layers = 4 entries");
  j = tiny();
  j["attn_type_list"] = {0, 1, 0, 1};
  refused(j,
          "'attn_type_list': [0,1,0,1] disagrees with the layer types transformers builds "
          "(layer_types)");
  j.erase("layer_types");
  j["attn_type_list"] = {0, 0, 0, 1};  // the default alternates: a file meaning 7:1 is refused
  refused(j, "(MiniMaxConfig's default, alternating); expected 0 where they say linear_attention");
  j = tiny();
  j["postnorm"] = false;
  refused(j,
          "'postnorm': false: transformers' MiniMax builds each half's residual from its "
          "normed input; expected true");
  j = tiny();
  j["shared_intermediate_size"] = 512;
  refused(j, "'shared_intermediate_size': 512: transformers' MiniMax builds no shared expert");
  j = tiny();
  j["block_size"] = 0;
  refused(j, "'block_size': 0 is not a lightning attention block, expected 1..65536 tokens");
  j = tiny();
  j["sliding_window"] = 0;
  refused(j, "'sliding_window': must be a positive window (or null: none), got 0");
  j = tiny();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  refused(j, "'rope_parameters': is keyed by layer type");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "linear"},
                          {"factor", 2.0},
                          {"rope_theta", 1e4},
                          {"partial_rotary_factor", 0.5}};
  refused(j, "'rope_parameters': partial_rotary_factor 0.5 with rope type 'linear'");
  j = tiny();
  j["rope_theta"] = nullptr;
  refused(j, "'rope_theta': rope_theta null, expected a positive base");
  j = tiny();
  j["router_jitter_noise"] = 1.5;
  refused(j, "'router_jitter_noise': 1.500000, expected a jitter in [0, 1)");
  j = tiny();
  j["mlp_beta_factor"] = "1";
  refused(j, "'mlp_beta_factor': expected a number");
  j = tiny();
  j["linear_num_key_heads"] = 16;  // Qwen3-Next's key: not MiniMaxConfig's
  refused(j, "'linear_num_key_heads': 16 changes the architecture");
  // Configs built in code: the Gated DeltaNet's sizes mean nothing here, a lightning layer needs
  // its block, no other family has one, and every layer routes to experts.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.linear_num_key_heads = 4;
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr("field 'linear_num_key_heads': 4, expected 0: "
                                             "model_type 'minimax' has lightning attention")));
  c = parse_model_config(tiny(), "tiny.json");
  c.linear_block_size = 0;
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr("field 'block_size' (linear_block_size): 0 is not a "
                                             "lightning attention block")));
  ModelConfig llama = find_model_config("llama3-8b");
  llama.linear_block_size = 256;
  EXPECT_THAT([&] { validate(llama); },
              ThrowsMessage<Error>(HasSubstr("'linear_block_size': 256 sets a lightning attention "
                                             "block, but model_type 'llama' builds no")));
  c = parse_model_config(tiny(), "tiny.json");
  c.dense_layers = {1};
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("minimax: layer 1 has a dense feed-forward")));
}

TEST(MiniMaxModels, TracedLightningLayerIsTheProjectionsAndTheBlockedOp) {
  // One lightning layer (the stack's first kind, as the planner traces it), 100 tokens: the op
  // pads them to one block of 256 (kLightningBlock, whatever block_size says).
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelConfig one = uniform_config(c, layer_stack(c).kinds[0]);
  const ModulePtr m = build_model(one);
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64, V = 1000;
  // qkv_proj (192 outputs), output_gate and out_proj (64 each), the router (4), the experts at
  // their expected load (ceil(100 x 2 / 4) = 50 tokens each: 6 E n h I), lm_head.
  const double linears =
      2 * T * h * 192 + 2 * 2 * T * h * 64 + 2 * T * h * 4 + 6.0 * 4 * 50 * 64 * 32 + 2 * T * h * V;
  // Note [Lightning attention work] at d 16, B 256 on 256 padded tokens of 4 heads:
  // 4 d (d + B) per token and head.
  const double lightning = 256 * 4 * (4.0 * 16 * (16 + 256));
  EXPECT_DOUBLE_EQ(lightning, 17'825'792);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, linears + lightning);
  const std::string attn = "model.layers.0.self_attn";
  EXPECT_EQ(ops_in(g, "lightning_attention", attn), 1);
  EXPECT_EQ(ops_in(g, "silu", attn), 1);     // MiniMax's act_fn on qkv_proj's output
  EXPECT_EQ(ops_in(g, "sigmoid", attn), 1);  // the output gate
  EXPECT_EQ(ops_in(g, "rms_norm", attn + ".norm"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", attn), 0);
  // Each half: its normed input and its output scaled by the factors, then added.
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0"), 4);
  EXPECT_EQ(ops_in(g, "add", "model.layers.0"), 2);
  // The softmax layer's attention is the fused kernel with grouped-query heads.
  const ModulePtr f = build_model(uniform_config(c, layer_stack(c).kinds[1]));
  const OpGraph gf = trace_model_forward(*f, 1, 100);
  EXPECT_EQ(ops_in(gf, "scaled_dot_product_attention", attn), 1);
  EXPECT_EQ(ops_in(gf, "lightning_attention", attn), 0);
}

TEST(MiniMaxModels, TrainingStepOfTheTinyModel) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 64;
  const TrainingStep st = trace_training_step(*m, o);
  EXPECT_EQ(st.totals.parameters, 301'824);
  // Forward matrix products at 128 tokens, by hand:
  //   lightning layer  qkv_proj 2 x 128 x 64 x 192 = 3,145,728; output_gate and out_proj
  //                    1,048,576 each; the op, one padded block a sequence, 2 x 256 x 4 x
  //                    4 x 16 x 272 = 35,651,584; router 2 x 128 x 64 x 4 = 65,536; experts
  //                    (64 tokens each) 6 x 4 x 64 x 64 x 32 = 3,145,728: 44,105,728
  //   softmax layer  q, o 1,048,576 each, k, v 524,288 each; attention 2 x (2 x 4) x 64 x 64 x
  //                    (16 + 16) = 2,097,152; router 65,536; experts 3,145,728: 8,454,144
  //   lm_head 2 x 128 x 64 x 1,000 = 16,384,000
  //   3 x 44,105,728 + 8,454,144 + 16,384,000 = 157,155,328
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 157'155'328);
  ASSERT_EQ(st.blocks.size(), 4u);
  EXPECT_EQ(st.blocks[0].type, "MiniMaxDecoderLayer");
  int ops = 0, attentions = 0;
  for (const TrainingOp& op : st.ops) {
    attentions += op.op == "scaled_dot_product_attention";
    if (op.op != "lightning_attention") continue;
    ++ops;
    // Note [Lightning attention work]: backward twice the forward's products, and the scores
    // and states recomputed, half of them.
    EXPECT_DOUBLE_EQ(op.matmul_flops, 35'651'584);
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 2 * 35'651'584.0);
    EXPECT_DOUBLE_EQ(op.recompute_flops, 35'651'584 / 2.0);
    EXPECT_EQ(op.saved.size(), 4u);  // q, k, v (views of one SiLU output) and the decays
  }
  EXPECT_EQ(ops, 3);
  EXPECT_EQ(attentions, 1);
  EXPECT_EQ(chunked_scan_chunk("lightning_attention"), kLightningBlock);
}

TEST(MiniMaxModels, LightningOpChecksItsOperands) {
  const TensorOptions o{.dtype = DType::kBFloat16};
  const Tensor q = empty({1, 8, 4, 16}, o), slope = empty({4, 1, 1}, o);
  EXPECT_EQ(lightning_attention(q, q, q, slope).sizes(), (DimVector{1, 8, 4, 16}));
  EXPECT_THAT(
      [&] {
        (void)lightning_attention(q, q, empty({1, 8, 4, 8}, o), slope);
      },
      ThrowsMessage<Error>(HasSubstr("must match the query's")));
  EXPECT_THAT([&] { (void)lightning_attention(q, q, q, empty({2}, o)); },
              ThrowsMessage<Error>(HasSubstr("expected one decay per head (4)")));
  // 4 d (d + B), 8 d (d + B), 2 d (d + B) per token and head: 196,608 forward at MiniMax-Text-01's
  // d = 128, B = 256.
  const ChunkedScanWork w = lightning_attention_work(1, 1, 128, 256);
  EXPECT_DOUBLE_EQ(w.forward, 196'608);
  EXPECT_DOUBLE_EQ(w.backward, 393'216);
  EXPECT_DOUBLE_EQ(w.recompute, 98'304);
}

TEST(MiniMaxModels, TensorParallelPlanIsMegatronsOverWholeHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.lightning_mixer);
  EXPECT_EQ(f.experts_class, "MiniMaxExperts");
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_FALSE(f.init_rules.empty());
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.self_attn.qkv_proj", "colwise"},
      {"model.layers.*.self_attn.output_gate", "colwise"},
      {"model.layers.*.self_attn.out_proj", "rowwise"},
      {"model.layers.*.mlp.experts", "experts"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  const std::vector<std::string> softmax_only = {"q_proj", "k_proj", "v_proj", "o_proj"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // qkv_proj's rows run head by head ([q | k | v] per head): a contiguous split is whole heads.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) {
      bool softmax = false;
      for (const std::string& p : softmax_only) softmax = softmax || path.ends_with("." + p);
      path.replace(star, 1, softmax ? "3" : "0");
    }
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
