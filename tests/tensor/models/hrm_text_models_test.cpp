// hrm_text (HrmTextForCausalLM) against hand formulas written here from transformers 5's
// modeling_hrm_text.py and configuration_hrm_text.py. h hidden, V vocabulary, n heads of d
// (head_dim), I the MLP width, N layers per stack; no biases unless attention_bias / mlp_bias:
//   self_attn  q_proj, k_proj, v_proj [n d, h], o_proj [h, n d], gate_proj [n d, h]
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I]
//   norms      input_layernorm, post_attention_layernorm, each stack's final_norm: no weight
//   layer      4 h n d + n d h + 3 h I
//   model      z_L_init [h] + embed_tokens V h + 2 N layer + lm_head V h (untied by default)
// Forward: H_cycles times (L_cycles passes of L_module, then one of H_module), the same weights;
// in training the low-level passes before the last L_bp_cycles[i] of high cycle i run under
// torch.no_grad() (L_bp_cycles left-padded with 1s to H_cycles entries).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::Shapes;
using test::shapes_under;
using ::testing::HasSubstr;
using Names = std::vector<std::string>;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A tiny config written as a first construction does (num_hidden_layers the per-stack count):
// h 32, 4 heads of 16 (n d = 64), I 48, V 128, N 2; H_cycles 2, L_cycles 3, L_bp_cycles [2] and
// embedding_scale 1 / 0.02 by default.
nlohmann::json tiny() {
  return {{"model_type", "hrm_text"}, {"vocab_size", 128},        {"hidden_size", 32},
          {"intermediate_size", 48},  {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"head_dim", 16},           {"torch_dtype", "bfloat16"}};
}

ModelConfig parse(const nlohmann::json& j) { return parse_model_config(j, "tiny.json"); }

// HRM-Text-1B (configs/models/hrm-text-1b.json, HrmTextConfig's defaults): h 1,536, 12 heads of
// 128 (n d = h), I 4,096, 16 layers a stack, V 151,808 untied:
//   layer   5 x 1,536^2 = 11,796,480 + 3 x 1,536 x 4,096 = 18,874,368 -> 30,670,848
//   32 layers 981,467,136; embed_tokens and lm_head 2 x 233,177,088 = 466,354,176; z_L_init 1,536
//   total 1,447,822,848: "1B" names the layers' 0.98B; transformers' model page calls the release
//   "1.2B", which is this total without lm_head (1,214,645,760, or tied).
TEST(HrmTextModels, OneBMatchesTheHandTotal) {
  const int64_t h = 1536, I = 4096, V = 151808, N = 16;
  const int64_t layer = 5 * h * h + 3 * h * I;
  EXPECT_EQ(layer, 30'670'848);
  const int64_t total = h + 2 * V * h + 2 * N * layer;
  EXPECT_EQ(total, 1'447'822'848);
  const ModelConfig c = find_model_config("hrm-text-1b");
  EXPECT_EQ(c.num_hidden_layers, 16);  // num_layers_per_stack; the file's 128 = 16 x 2 x (3 + 1)
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.h_cycles, 2);
  EXPECT_EQ(c.l_cycles, 3);
  EXPECT_EQ(c.l_bp_cycles, (std::vector<int64_t>{2}));
  EXPECT_EQ(c.embedding_multiplier, 50.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "HrmTextForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  // Every size in the file is HrmTextConfig's default: a file of its model_type alone is the same
  // model (in float32, transformers' dtype without one).
  ModelConfig defaults =
      parse_model_config(nlohmann::json{{"model_type", "hrm_text"}}, "defaults.json");
  EXPECT_EQ(defaults.torch_dtype, DType::kFloat32);
  defaults.torch_dtype = DType::kBFloat16;
  EXPECT_EQ(defaults, c);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// h 32, n d 64, I 48, V 128, N 2: layer 4 x 32 x 64 + 64 x 32 + 3 x 32 x 48 = 8,192 + 2,048 +
// 4,608 = 14,848; 4 layers 59,392; embed_tokens and lm_head 2 x 4,096; z_L_init 32: 67,616.
// attention_bias adds 5 biases of n d, h, n d, n d, n d (q, k, v, o, gate) = 4 x 64 + 32 = 288 a
// layer; mlp_bias 48 + 48 + 32 = 128 a layer.
TEST(HrmTextModels, TinyTotalsByHand) {
  const ModelConfig c = parse(tiny());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.embedding_multiplier, 50.0);
  EXPECT_FALSE(c.pad_token_id);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 67'616);
  nlohmann::json j = tiny();
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  const ModelConfig b = parse(j);
  EXPECT_EQ(build_model(b)->parameters_numel(), 67'616 + 4 * (288 + 128));
  EXPECT_EQ(shapes_under(*build_model(b), "model.H_module.layers.1.self_attn."),
            (Shapes{{"q_proj.weight", {64, 32}},
                    {"q_proj.bias", {64}},
                    {"k_proj.weight", {64, 32}},
                    {"k_proj.bias", {64}},
                    {"v_proj.weight", {64, 32}},
                    {"v_proj.bias", {64}},
                    {"o_proj.weight", {32, 64}},
                    {"o_proj.bias", {32}},
                    {"gate_proj.weight", {64, 32}},
                    {"gate_proj.bias", {64}}}));
  EXPECT_EQ(parse_model_config(to_hf_json(b), "round trip"), b);
  // tie_word_embeddings: lm_head is embed_tokens (_tied_weights_keys), V h less.
  j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse(j))->parameters_numel(), 67'616 - 4'096);
}

// named_parameters as PyTorch lists them: HrmTextModel's own z_L_init first (a module's own
// parameters before its children's), then embed_tokens, the low-level stack, the high-level one,
// lm_head; no norm has a parameter.
TEST(HrmTextModels, NamesAreTransformersInOrder) {
  const ModulePtr m = build_model(parse(tiny()));
  const Names all = names_under(*m, "");
  ASSERT_EQ(all.size(), 1u + 1u + 4 * 8u + 1u);
  EXPECT_EQ(all[0], "model.z_L_init");
  EXPECT_EQ(all[1], "model.embed_tokens.weight");
  EXPECT_EQ(all[2], "model.L_module.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(all[10], "model.L_module.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(all[18], "model.H_module.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(all[26], "model.H_module.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(all.back(), "lm_head.weight");
  EXPECT_EQ(shapes_under(*m, "model.L_module.layers.0."),
            (Shapes{{"self_attn.q_proj.weight", {64, 32}},
                    {"self_attn.k_proj.weight", {64, 32}},
                    {"self_attn.v_proj.weight", {64, 32}},
                    {"self_attn.o_proj.weight", {32, 64}},
                    {"self_attn.gate_proj.weight", {64, 32}},
                    {"mlp.gate_proj.weight", {48, 32}},
                    {"mlp.up_proj.weight", {48, 32}},
                    {"mlp.down_proj.weight", {32, 48}}}));
  EXPECT_EQ(names_under(*m, "model.L_module.final_norm"), Names{});
  EXPECT_EQ(m->get_submodule("model.H_module.final_norm").type_name(), "HrmTextRMSNorm");
  EXPECT_EQ(m->get_submodule("model.L_module").type_name(), "HrmTextStack");
  EXPECT_EQ(m->get_submodule("model.L_module.layers.1").type_name(), "HrmTextDecoderLayer");
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{8}));  // all of d
  // z_L_init is frozen (requires_grad False); the rest trains.
  EXPECT_FALSE(m->get_parameter("model.z_L_init").requires_grad());
  EXPECT_TRUE(m->get_parameter("model.embed_tokens.weight").requires_grad());
  const ModelFamily& f = family_of(parse(tiny()));
  EXPECT_EQ(f.layers_path, "model.L_module.layers");
  EXPECT_EQ(f.paired_layers_path, "model.H_module.layers");
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
}

// _init_weights: PreTrainedModel's normal(0, initializer_range) for Linear weights and the
// embedding (no padding row without a pad_token_id), then z_L_init zeros.
TEST(HrmTextModels, InitRules) {
  const ModelConfig c = parse(tiny());
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*build_model(c), c)) init[p.name] = p.init;
  EXPECT_EQ(init.at("model.z_L_init"), (ParameterInit{ParameterInit::Kind::kConstant, 0.0}));
  EXPECT_EQ(init.at("model.embed_tokens.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.H_module.layers.0.self_attn.gate_proj.weight"),
            (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("lm_head.weight"), (ParameterInit{ParameterInit::Kind::kNormal, 0.0, 0.02}));
}

// The saved pair: num_hidden_layers the layer calls N x H x (L + 1) = 2 x 2 x 4 = 16, and
// num_layers_per_stack 2; a saved file reads back to the same model, a first construction too.
TEST(HrmTextModels, RoundTripWritesTheSavedLayerCounts) {
  const ModelConfig c = parse(tiny());
  const nlohmann::json j = to_hf_json(c);
  EXPECT_EQ(j.at("num_hidden_layers"), 16);
  EXPECT_EQ(j.at("num_layers_per_stack"), 2);
  EXPECT_EQ(j.at("H_cycles"), 2);
  EXPECT_EQ(j.at("L_cycles"), 3);
  EXPECT_EQ(j.at("L_bp_cycles"), nlohmann::json::array({2}));
  EXPECT_EQ(j.at("embedding_scale"), 50.0);
  EXPECT_FALSE(j.contains("prefix_lm"));  // the default (true)
  EXPECT_EQ(parse_model_config(j, "round trip"), c);
  // L_bp_cycles null is [2]; a list of its own, and another embedding_scale, round-trip.
  nlohmann::json k = tiny();
  k["L_bp_cycles"] = nullptr;
  EXPECT_EQ(parse(k).l_bp_cycles, (std::vector<int64_t>{2}));
  k["L_bp_cycles"] = nlohmann::json::array({0, 3, 1});
  k["H_cycles"] = 3;
  k["embedding_scale"] = 1.0;
  k["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 5e5}};
  const ModelConfig d = parse(k);
  EXPECT_EQ(d.l_bp_cycles, (std::vector<int64_t>{0, 3, 1}));
  EXPECT_EQ(d.embedding_multiplier, 1.0);
  EXPECT_EQ(d.rope_theta, 5e5);
  ASSERT_TRUE(d.rope_scaling);
  EXPECT_EQ(d.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(d), "round trip"), d);
  // FlashAttention is accepted with prefix_lm false, and written back with it.
  k = tiny();
  k["prefix_lm"] = false;
  k["attn_implementation"] = "flash_attention_2";
  const ModelConfig fa = parse(k);
  EXPECT_EQ(to_hf_json(fa).at("prefix_lm"), false);
  EXPECT_EQ(parse_model_config(to_hf_json(fa), "round trip"), fa);
  // The default RoPE type rotates all of head_dim whatever partial_rotary_factor says.
  k = tiny();
  k["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse(k).partial_rotary_factor, 1.0);
}

TEST(HrmTextModels, RefusedOptionsNameTheirKey) {
  const auto refused = [](const char* key, const nlohmann::json& value) {
    nlohmann::json j = tiny();
    j[key] = value;
    return error_of([&] { parse(j); });
  };
  // validate_architecture: the heads divide hidden_size, whatever head_dim is.
  EXPECT_THAT(refused("num_attention_heads", 3), HasSubstr("field 'num_attention_heads'"));
  // Multi-head whatever the file says.
  EXPECT_THAT(refused("num_key_value_heads", 2), HasSubstr("field 'num_key_value_heads'"));
  EXPECT_EQ(refused("num_key_value_heads", 4), "");
  EXPECT_THAT(refused("head_dim", nullptr), HasSubstr("field 'head_dim'"));
  EXPECT_THAT(refused("initializer_range", 1.5), HasSubstr("field 'initializer_range'"));
  EXPECT_THAT(refused("initializer_range", 0.0), HasSubstr("field 'embedding_scale'"));
  EXPECT_THAT(refused("attn_implementation", "flash_attention_2"),
              HasSubstr("field 'attn_implementation'"));
  EXPECT_THAT(refused("_attn_implementation", "paged|flash_attention_3"),
              HasSubstr("field '_attn_implementation'"));
  EXPECT_EQ(refused("attn_implementation", "sdpa"), "");
  EXPECT_THAT(refused("L_bp_cycles", 2), HasSubstr("field 'L_bp_cycles'"));
  EXPECT_THAT(refused("L_bp_cycles", nlohmann::json::array({2.5})),
              HasSubstr("field 'L_bp_cycles'"));
  EXPECT_THAT(refused("L_bp_cycles", nlohmann::json::array({-1})),
              HasSubstr("field 'L_bp_cycles' (l_bp_cycles)"));
  EXPECT_THAT(refused("H_cycles", 0), HasSubstr("field 'H_cycles' (h_cycles)"));
  EXPECT_THAT(refused("L_cycles", -1), HasSubstr("field 'L_cycles' (l_cycles)"));
  EXPECT_THAT(refused("num_hidden_layers", 0), HasSubstr("field 'num_hidden_layers'"));
  // 200 layers a stack run 2 x (3 + 1) times: 1,600 layer calls, beyond base/limits.h's 1,024.
  EXPECT_THAT(refused("num_hidden_layers", 200),
              HasSubstr("field 'num_layers_per_stack' (num_hidden_layers)"));
  // The saved pair: beside num_layers_per_stack 2, num_hidden_layers is 2 x 2 x (3 + 1) = 16
  // (or absent: the cache's count, which is not modelled); another value is refused.
  nlohmann::json j = tiny();
  j["num_layers_per_stack"] = 2;
  j["num_hidden_layers"] = 16;
  EXPECT_EQ(parse(j), parse(tiny()));
  j.erase("num_hidden_layers");
  EXPECT_EQ(parse(j), parse(tiny()));
  j["num_hidden_layers"] = 2;
  EXPECT_THAT(error_of([&] { parse(j); }), HasSubstr("field 'num_hidden_layers'"));
  j["num_layers_per_stack"] = 0;
  EXPECT_THAT(error_of([&] { parse(j); }), HasSubstr("field 'num_layers_per_stack'"));
  // A scaled RoPE of part of the head: the narrower table does not cover the rotated head.
  EXPECT_THAT(refused("rope_parameters",
                      {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}),
              HasSubstr("field 'rope_parameters'"));
  // Another family refuses a recurrence set in code.
  ModelConfig llama = find_model_config("llama3-8b");
  llama.h_cycles = 2;
  llama.l_cycles = 3;
  EXPECT_THAT(error_of([&] { validate(llama); }), HasSubstr("field 'h_cycles'"));
}

// transformers' padding of L_bp_cycles: left with 1s to H_cycles entries, each clamped to
// 0..L_cycles in effect (a count of the last low-level passes); longer lists give their first
// H_cycles entries.
TEST(HrmTextModels, GradientCyclesFollowTransformersPadding) {
  ModelConfig c = parse(tiny());
  EXPECT_EQ(l_grad_cycles(c, 0), 1);  // [1, 2]
  EXPECT_EQ(l_grad_cycles(c, 1), 2);
  EXPECT_EQ(layer_passes(c), (LayerPasses{.forward = 8, .backward = 5, .layers = 2}));
  c.h_cycles = 3;  // [1, 1, 2]
  EXPECT_EQ(l_grad_cycles(c, 1), 1);
  EXPECT_EQ(l_grad_cycles(c, 2), 2);
  c.h_cycles = 2;
  c.l_bp_cycles = {0, 7, 1};  // the first two; 7 counts as all 3
  EXPECT_EQ(l_grad_cycles(c, 0), 0);
  EXPECT_EQ(l_grad_cycles(c, 1), 3);
  EXPECT_EQ(layer_passes(c), (LayerPasses{.forward = 8, .backward = 5, .layers = 2}));
  EXPECT_EQ(layer_passes(find_model_config("llama3-8b")), LayerPasses{});
}

// The training step of the tiny model (bf16, one sequence of T = 8): every layer runs once per
// pass, 16 layer calls; the low-level passes 0 and 1 of high cycle 0 and pass 0 of cycle 1 run
// under no_grad: 3 passes of 2 layers keep nothing and have no backward. A layer call's GEMMs per
// token are 2 x 14,848 (no biases): 237,568 FLOPs over T tokens, twice that in backward (input
// and weight gradients; every graph-keeping pass reads z_H, which requires grad).
TEST(HrmTextModels, NoGradPassesRunForwardOnly) {
  const ModelConfig c = parse(tiny());
  const ModulePtr m = build_model(c);
  const int64_t T = 8;
  const OpGraph g = trace_model_forward(*m, 1, T);
  EXPECT_EQ(test::ops_under(g, "scaled_dot_product_attention", "model.L_module"), 12);
  EXPECT_EQ(test::ops_under(g, "scaled_dot_product_attention", "model.H_module"), 4);
  TraceOptions o;
  o.batch = 1;
  o.seq = T;
  const TrainingStep step = trace_training_step(*m, o);
  const double call = 2.0 * T * 14'848;
  EXPECT_EQ(call, 237'568.0);
  auto linears = [&](const std::string& prefix, bool backward) {
    double f = 0;
    for (const TrainingOp& op : step.ops) {
      if (op.op != "linear" || op.call < 0) continue;
      if (!step.calls[static_cast<size_t>(op.call)].fqn.starts_with(prefix)) continue;
      f += backward ? op.backward_matmul_flops : op.matmul_flops;
    }
    return f;
  };
  EXPECT_DOUBLE_EQ(linears("model.L_module.layers.0.", false), 6 * call);
  EXPECT_DOUBLE_EQ(linears("model.L_module.layers.0.", true), 3 * 2 * call);
  EXPECT_DOUBLE_EQ(linears("model.H_module.layers.1.", false), 2 * call);
  EXPECT_DOUBLE_EQ(linears("model.H_module.layers.1.", true), 2 * 2 * call);
  // Blocks are layer calls: 16, of which 6 (low-level) keep nothing. The others keep alike, but
  // for the first of them, which also keeps the rotary tables cos and sin [1, 1, T, d] bf16
  // (2 x 8 x 16 x 2 = 512 bytes: made once, before the layers, and first saved there).
  ASSERT_EQ(step.blocks.size(), 16u);
  std::vector<int64_t> kept;
  for (const StepBlock& b : step.blocks) {
    SCOPED_TRACE(b.fqn);
    EXPECT_GT(b.flops, 0);
    double backward = 0;
    for (int64_t i = b.first_op; i < b.end_op; ++i) {
      backward += step.ops[static_cast<size_t>(i)].backward_flops;
    }
    if (b.activation_bytes == 0) {
      EXPECT_TRUE(b.fqn.starts_with("model.L_module.layers."));
      EXPECT_EQ(backward, 0);
      continue;
    }
    EXPECT_GT(backward, 0);
    kept.push_back(b.activation_bytes);
  }
  ASSERT_EQ(kept.size(), 10u);
  const int64_t base = kept.back();
  EXPECT_EQ(kept.front(), base + 2 * T * 16 * 2);
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_EQ(kept[i], base);
  for (const TrainingOp& op : step.ops) {
    if (!op.no_grad) continue;
    EXPECT_TRUE(op.saved.empty()) << op.op;
    EXPECT_EQ(op.backward_flops, 0) << op.op;
    EXPECT_EQ(op.recompute_flops, 0) << op.op;
  }
  // Every pass with a graph (L_bp_cycles [3, 3]): the 6 blocks keep as the others, and the 3 more
  // low-level passes' final_norm keeps its input [T, h] bf16 and its rstd (fp32 a row):
  // 6 x base + 3 x (8 x 32 x 2 + 8 x 4) = 6 x base + 1,632 bytes more.
  nlohmann::json j = tiny();
  j["L_bp_cycles"] = nlohmann::json::array({3, 3});
  const TrainingStep all = trace_training_step(*build_model(parse(j)), o);
  EXPECT_EQ(all.totals.activation_bytes - step.totals.activation_bytes, 6 * base + 1'632);
  EXPECT_DOUBLE_EQ(all.totals.forward_flops, step.totals.forward_flops);
  EXPECT_GT(all.totals.backward_flops, step.totals.backward_flops);
  // Full recomputation re-runs a graph-keeping call's forward before its backward (on top of
  // the flash attention's Q K^T every such call recomputes anyway), and no no-grad call.
  o.recompute = RecomputePolicy::kFull;
  const TrainingStep full = trace_training_step(*m, o);
  ASSERT_EQ(full.blocks.size(), step.blocks.size());
  int rerun = 0;
  for (size_t i = 0; i < full.blocks.size(); ++i) {
    const bool graph = step.blocks[i].activation_bytes > 0;
    rerun += graph;
    EXPECT_DOUBLE_EQ(full.blocks[i].recompute_flops - step.blocks[i].recompute_flops,
                     graph ? step.blocks[i].flops : 0.0)
        << step.blocks[i].fqn;
  }
  EXPECT_EQ(rerun, 10);
}

// The plan names modules the model builds (a Linear or the Embedding at each pattern, its '*'
// layer 1); tests/planner/cost/hrm_text_parallel_test.cpp applies it.
TEST(HrmTextModels, TensorParallelPlanNamesItsModules) {
  const ModelConfig c = parse(tiny());
  const ModulePtr m = build_model(c);
  int colwise = 0, rowwise = 0;
  for (const TensorParallelRule& r : family_of(c).tp_plan) {
    std::string fqn(r.pattern);
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "1");
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
    EXPECT_EQ(r.fused_parts, 1) << fqn;
    (r.style == "colwise" ? colwise : rowwise) += 1;
  }
  // Per stack q, k, v, gate and the MLP's gate and up column-parallel, o and down row-parallel;
  // the embedding by rows, lm_head by columns.
  EXPECT_EQ(colwise, 2 * 6 + 1);
  EXPECT_EQ(rowwise, 2 * 2 + 1);
}

}  // namespace
}  // namespace shardplan::tensor
