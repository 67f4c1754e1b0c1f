// bitnet (Microsoft's BitNet b1.58 2B4T) against hand formulas written here from transformers 5's
// configuration_bitnet.py and modeling_bitnet.py, and the published size (the model card: "~2
// Billion" parameters; the bf16 master checkpoint's tensors sum to 2,412,820,480, "2.41B"). h
// hidden, V vocabulary, H query heads and K key-value heads of d (H d = h), I the MLP width, L
// layers; no biases unless attention_bias:
//   self_attn  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d], attn_sub_norm [h]
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I], ffn_sub_norm [I]
//   norms      input_layernorm, post_attention_layernorm [h]; model.norm [h]
//   total      L (2 h H d + 2 h K d + h + 3 h I + I + 2 h) + V h (tied; + V h untied) + h
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::Shapes;
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

struct Sizes {
  int64_t V, h, I, H, K, d, L;
  bool tied;
};

int64_t hand_total(const Sizes& s) {
  const int64_t attention = 2 * s.h * s.H * s.d + 2 * s.h * s.K * s.d + s.h;
  const int64_t mlp = 3 * s.h * s.I + s.I;
  return s.L * (attention + mlp + 2 * s.h) + (s.tied ? 1 : 2) * s.V * s.h + s.h;
}

// BitNet b1.58 2B4T: 2,560 / 30 layers / 20 heads of 128 (5 key-value heads) / MLP 6,912,
// vocabulary 128,256 tied.
constexpr Sizes kTwoBFourT{128256, 2560, 6912, 20, 5, 128, 30, true};

TEST(BitnetModels, TwoBFourTMatchesThePublishedTotal) {
  // Per layer: attention 13,107,200 + 3,276,800 + 2,560 = 16,386,560; MLP 53,084,160 + 6,912 =
  // 53,091,072; norms 5,120: 69,482,752. 30 layers 2,084,482,560 + embeddings 328,335,360 +
  // final norm 2,560 = 2,412,820,480 ("2.41B"; the card's "~2 Billion").
  EXPECT_EQ(hand_total(kTwoBFourT), 2'412'820'480);
  const ModelConfig c = find_model_config("bitnet-b1.58-2b-4t");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "BitNetForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 2'412'820'480);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Layer 0 in named_parameters order: BitNetAttention (q, k, v, o, attn_sub_norm), BitNetMLP
  // (gate, up, down, ffn_sub_norm), then the two norms.
  EXPECT_EQ(shapes_under(*m, "model.layers.0."),
            (Shapes{{"self_attn.q_proj.weight", {2560, 2560}},
                    {"self_attn.k_proj.weight", {640, 2560}},
                    {"self_attn.v_proj.weight", {640, 2560}},
                    {"self_attn.o_proj.weight", {2560, 2560}},
                    {"self_attn.attn_sub_norm.weight", {2560}},
                    {"mlp.gate_proj.weight", {6912, 2560}},
                    {"mlp.up_proj.weight", {6912, 2560}},
                    {"mlp.down_proj.weight", {2560, 6912}},
                    {"mlp.ffn_sub_norm.weight", {6912}},
                    {"input_layernorm.weight", {2560}},
                    {"post_attention_layernorm.weight", {2560}}}));
  // Outside the layers: the embedding and the final norm; lm_head is the embedding (tied).
  Names outside;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) outside.push_back(p.name);
  }
  EXPECT_EQ(outside, (Names{"model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "BitNetModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "BitNetDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "BitNetAttention");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "BitNetMLP");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "BitNetRotaryEmbedding");
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{64}));  // d / 2
  // The published file's quantization_config (packed ternary weights) is read and changes
  // nothing: the same model without it.
  nlohmann::json j = to_hf_json(c);
  j["quantization_config"] = {{"quant_method", "bitnet"},
                              {"linear_class", "autobitlinear"},
                              {"quantization_mode", "offline"}};
  EXPECT_EQ(parse_model_config(j, "quantized"), c);
}

TEST(BitnetModels, ClassDefaultsAreTheTwoBFourTSizes) {
  // BitNetConfig(): the 2B4T sizes, but untied, 2,048 positions: + V h = 328,335,360.
  const ModelConfig c = parse_model_config(nlohmann::json{{"model_type", "bitnet"}}, "defaults");
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.num_key_value_heads, 5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_FALSE(c.pad_token_id.has_value());
  Sizes untied = kTwoBFourT;
  untied.tied = false;
  EXPECT_EQ(hand_total(untied), 2'741'155'840);
  EXPECT_EQ(build_model(c)->parameters_numel(), 2'741'155'840);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A null num_key_value_heads is one per query head (BitNetConfig.__post_init__): k and v
  // [2560, 2560], 30 x 2 x (6,553,600 - 1,638,400) = 294,912,000 more.
  const ModelConfig mha = parse_model_config(
      nlohmann::json{{"model_type", "bitnet"}, {"num_key_value_heads", nullptr}}, "mha");
  EXPECT_EQ(mha.num_key_value_heads, 20);
  untied.K = 20;
  EXPECT_EQ(hand_total(untied), 2'741'155'840 + 294'912'000);
  EXPECT_EQ(build_model(mha)->parameters_numel(), hand_total(untied));
}

nlohmann::json tiny() {
  return {{"model_type", "bitnet"},   {"vocab_size", 128},
          {"hidden_size", 64},        {"intermediate_size", 96},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 256},
          {"torch_dtype", "bfloat16"}};
}

TEST(BitnetModels, TinyConfigByHand) {
  // h 64, 4 heads of 16, 2 kv heads, I 96, V 128 untied, 2 layers:
  //   q 4,096 + k 2,048 + v 2,048 + o 4,096 + attn_sub_norm 64     -> 12,352
  //   gate 6,144 + up 6,144 + down 6,144 + ffn_sub_norm 96         -> 18,528
  //   input and post-attention norms                                ->    128
  //   layer 31,008; 2 layers 62,016; embed 8,192; lm_head 8,192; model.norm 64: 78,464
  const Sizes s{128, 64, 96, 4, 2, 16, 2, false};
  EXPECT_EQ(hand_total(s), 78'464);
  nlohmann::json j = tiny();
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 78'464);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(shapes_under(*m, "model.layers.1."),
            (Shapes{{"self_attn.q_proj.weight", {64, 64}},
                    {"self_attn.k_proj.weight", {32, 64}},
                    {"self_attn.v_proj.weight", {32, 64}},
                    {"self_attn.o_proj.weight", {64, 64}},
                    {"self_attn.attn_sub_norm.weight", {64}},
                    {"mlp.gate_proj.weight", {96, 64}},
                    {"mlp.up_proj.weight", {96, 64}},
                    {"mlp.down_proj.weight", {64, 96}},
                    {"mlp.ffn_sub_norm.weight", {96}},
                    {"input_layernorm.weight", {64}},
                    {"post_attention_layernorm.weight", {64}}}));
  EXPECT_EQ(names_under(*m, "lm_head."), (Names{"weight"}));
  // attention_bias on q, k, v and o: 2 x (64 + 32 + 32 + 64); BitNetMLP has no bias whatever the
  // file says (mlp_bias is no BitNetConfig field).
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  const ModelConfig biased = parse_model_config(j, "tiny.json");
  const ModulePtr bm = build_model(biased);
  EXPECT_EQ(bm->parameters_numel(), 78'464 + 384);
  EXPECT_EQ(names_under(*bm, "model.layers.0.self_attn."),
            (Names{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                   "v_proj.bias", "o_proj.weight", "o_proj.bias", "attn_sub_norm.weight"}));
  EXPECT_EQ(
      names_under(*bm, "model.layers.0.mlp."),
      (Names{"gate_proj.weight", "up_proj.weight", "down_proj.weight", "ffn_sub_norm.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(biased), "round trip"), biased);
  // Tied: lm_head is the embedding, 8,192 fewer.
  j = tiny();
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(build_model(parse_model_config(j, "tiny.json"))->parameters_numel(), 78'464 - 8192);
  // A head_dim that spans hidden_size with the heads is accepted (the same model).
  j = tiny();
  j["head_dim"] = 16;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), c);
}

TEST(BitnetModels, InitIsPreTrainedModels) {
  // BitNetPreTrainedModel has no _init_weights: PreTrainedModel's fills Linear weights and the
  // embedding normal(0, initializer_range) and every RMSNorm (the sub-norms too) with ones.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  const ParameterInit one{ParameterInit::Kind::kConstant, 1.0, 0.0};
  EXPECT_EQ(init.at("model.embed_tokens.weight"), normal);  // no pad_token_id: no zero row
  EXPECT_EQ(init.at("model.layers.0.self_attn.o_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.mlp.down_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.0.self_attn.attn_sub_norm.weight"), one);
  EXPECT_EQ(init.at("model.layers.0.mlp.ffn_sub_norm.weight"), one);
  EXPECT_EQ(init.at("model.norm.weight"), one);
}

TEST(BitnetModels, WhatTransformersCannotBuildIsRefused) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* why) {
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT(
        [&] { parse_model_config(j, "bitnet.json"); },
        ThrowsMessage<Error>(AllOf(HasSubstr(std::string("field '") + key + "'"), HasSubstr(why))))
        << key << " " << value.dump();
  };
  // attn_sub_norm spans hidden_size: 4 heads of 32 are 128 channels.
  refused("head_dim", 32,
          "32 x 4 heads is not hidden_size 64, which BitNet's attn_sub_norm spans; expected 16");
  refused("num_attention_heads", 5, "does not divide hidden_size 64");
  // quantization_config: what BitNetQuantConfig raises on, and its RMSNorm inside every linear.
  refused("quantization_config", {{"quant_method", "bitnet"}, {"use_rms_norm", true}},
          "use_rms_norm true: transformers' BitNet quantizer then adds an RMSNorm");
  refused("quantization_config", {{"quant_method", "bitnet"}, {"linear_class", "ternary"}},
          "linear_class \"ternary\": BitNetQuantConfig raises; expected \"bitlinear\" or "
          "\"autobitlinear\"");
  refused("quantization_config", {{"quant_method", "bitnet"}, {"quantization_mode", "qat"}},
          "quantization_mode \"qat\": BitNetQuantConfig raises; expected \"online\" or "
          "\"offline\"");
  // What changes no shape passes: the -bf16 masters' online mode, use_rms_norm false, another
  // method's config (the checkpoint check names it).
  const ModelConfig plain = parse_model_config(tiny(), "tiny.json");
  for (const nlohmann::json& q : {nlohmann::json{{"quant_method", "bitnet"},
                                                 {"linear_class", "autobitlinear"},
                                                 {"quantization_mode", "online"},
                                                 {"use_rms_norm", false}},
                                  nlohmann::json{{"quant_method", "bitnet"}},
                                  nlohmann::json{{"quant_method", "fp8"}, {"linear_class", "x"}}}) {
    nlohmann::json j = tiny();
    j["quantization_config"] = q;
    EXPECT_EQ(parse_model_config(j, "tiny.json"), plain) << q.dump();
  }
}

TEST(BitnetModels, TraceNormsEachHalfBeforeItsOutputProjection) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 16);
  const double B = 2, S = 16, T = B * S, h = 64, H = 4, K = 2, d = 16, I = 96;
  const auto matmul_of = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  // q, k, v and o_proj, then the core's two products over all 16 keys (4 B H S S d).
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.self_attn"),
                   2 * T * h * (H * d + 2 * K * d) + 2 * T * H * d * h + 4 * B * H * S * S * d);
  // gate, up and down: three [T, h] x [h, I] products; relu2 is a relu and a square.
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.mlp"), 3 * 2 * T * h * I);
  EXPECT_EQ(ops_in(g, "relu", "model.layers.0.mlp"), 1);
  EXPECT_EQ(ops_in(g, "square", "model.layers.0.mlp"), 1);
  // Each sub-norm reads what its half made and feeds the output projection.
  const auto norm_between = [&](const std::string& norm, const std::string& proj) {
    int found = 0;
    for (const OpNode& n : g.nodes()) {
      if (n.op != "rms_norm" || n.module != norm) continue;
      ++found;
      const int64_t width = norm.ends_with("ffn_sub_norm") ? 96 : 64;  // I or h
      EXPECT_EQ(g.tensor(n.inputs[0]).sizes.back(), width);
      bool feeds = false;
      for (int64_t c : g.consumers(n.outputs[0])) {
        feeds = feeds || (g.node(c).op == "linear" && g.node(c).module == proj);
      }
      EXPECT_TRUE(feeds) << norm;
    }
    return found;
  };
  EXPECT_EQ(
      norm_between("model.layers.0.self_attn.attn_sub_norm", "model.layers.0.self_attn.o_proj"), 1);
  EXPECT_EQ(norm_between("model.layers.1.mlp.ffn_sub_norm", "model.layers.1.mlp.down_proj"), 1);
  // The MLP's norm reads the gated product: its input is the multiply's output.
  for (const OpNode& n : g.nodes()) {
    if (n.op == "rms_norm" && n.module == "model.layers.1.mlp.ffn_sub_norm") {
      EXPECT_EQ(g.node(g.tensor(n.inputs[0]).producer).op, "mul");
    }
  }
  // Four norms a layer (input, attn_sub, ffn_sub, post-attention), plus the final one.
  int64_t norms = 0;
  for (const OpNode& n : g.nodes()) norms += n.op == "rms_norm";
  EXPECT_EQ(norms, 2 * 4 + 1);
}

TEST(BitnetModels, TrainingTraceCountsEachProjectionThreeTimes) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  int64_t sub_norms = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.call < 0) continue;
    const std::string& fqn = st.calls[static_cast<size_t>(op.call)].fqn;
    if (op.op == "rms_norm" && fqn.ends_with("_sub_norm")) ++sub_norms;
    if (op.op != "linear" || !fqn.starts_with("model.layers.1.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // Layer 1's seven projections over 32 tokens: q 64, k 32, v 32, o 64 outputs of 64 inputs, and
  // the MLP's 3 x 64 x 96; backward twice the forward (the input and the weight gradients).
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (64 + 32 + 32 + 64) + 3 * 2.0 * 32 * 64 * 96);
  EXPECT_DOUBLE_EQ(backward, 2 * forward);
  EXPECT_EQ(sub_norms, 2 * 2);
}

TEST(BitnetModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_EQ(f.hf_class_prefix, "BitNet");
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_FALSE(f.moe);
  // q, k, v and gate, up column-parallel, o_proj and down_proj row-parallel; the sub-norms read
  // each rank's heads (MLP channels) between the two and have no rule (their weights whole).
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.o_proj", "rowwise"},
      {"model.layers.*.mlp.gate_proj", "colwise"},
      {"model.layers.*.mlp.up_proj", "colwise"},
      {"model.layers.*.mlp.down_proj", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "0");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
