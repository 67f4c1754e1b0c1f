// qwen3_next (Qwen3-Next-80B-A3B, Qwen3-Coder-Next) and Qwen3.5 (qwen3_5_text, qwen3_5_moe_text):
// Gated DeltaNet layers beside gated full attention, against hand formulas written here from
// transformers' modeling_qwen3_next.py and modeling_qwen3_5(_moe).py and the published total.
// Qwen3.5 keeps the projections apart: in_proj_qkv [2 n dk + m dv, h], in_proj_z [m dv, h],
// in_proj_b and in_proj_a [m, h], the same count as in_proj_qkvz and in_proj_ba. h hidden, n / m
// linear key / value heads of dk / dv channels, K conv taps:
//   linear_attn: dt_bias [m], A_log [m], conv1d [2 n dk + m dv, 1, K], in_proj_qkvz
//                [2 n dk + 2 m dv, h], in_proj_ba [2 m, h], norm [dv], out_proj [h, m dv]
//   self_attn:   q_proj [2 heads hd, h] (query and output gate), k_proj, v_proj [kv hd, h],
//                o_proj [h, heads hd], q_norm, k_norm [hd]
// Note [Gated delta rule work] (tensor/ops.h) for the FLOPs.
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

struct Linear {
  int64_t h, n, m, dk, dv, k;
};

int64_t gated_delta_params(const Linear& a) {
  const int64_t key = a.n * a.dk, value = a.m * a.dv;
  return 2 * a.m + (2 * key + value) * a.k + (2 * key + 2 * value) * a.h + 2 * a.m * a.h + a.dv +
         value * a.h;
}

// The small hybrid model the tests below vary: two linear layers, then one full.
nlohmann::json tiny() {
  return {{"model_type", "qwen3_next"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"linear_num_key_heads", 2},
          {"linear_num_value_heads", 4},
          {"linear_key_head_dim", 16},
          {"linear_value_head_dim", 8},
          {"linear_conv_kernel_dim", 4},
          {"num_experts", 4},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 32},
          {"shared_expert_intermediate_size", 32},
          {"full_attention_interval", 3}};
}

TEST(LinearAttentionModels, Qwen3NextMatchesThePublishedTotal) {
  // Qwen3-Next-80B-A3B's published file: V 151,936, h 2,048, 48 layers, every fourth full
  // attention (16 heads of 256 with 2 kv heads), the other 36 Gated DeltaNet (16 key heads and
  // 32 value heads of 128, 4 taps); 512 experts of 512 (top 10) and a shared expert of 512 with
  // its one-output gate in every layer.
  const int64_t V = 151936, h = 2048;
  const int64_t full = 2 * 16 * 256 * h + 2 * 2 * 256 * h + h * 16 * 256 + 2 * 256;
  EXPECT_EQ(full, 27'263'488);
  const int64_t linear = gated_delta_params({h, 16, 32, 128, 128, 4});
  EXPECT_EQ(linear, 33'718'464);
  const int64_t experts = 512 * 3 * h * 512;
  const int64_t moe = 512 * h + experts + 3 * h * 512 + h;
  const int64_t total = 2 * V * h + 36 * linear + 12 * full + 48 * (moe + 2 * h) + h;
  // The total safetensors headers give for Qwen3-Coder-Next (same architecture), the MTP module
  // apart: 79,674,391,296.
  EXPECT_EQ(total, 79'674'391'296);
  const ModelConfig c = find_model_config("qwen3-next-80b-a3b");
  const ModulePtr model = build_model(c);
  EXPECT_EQ(model->parameters_numel(), total);
  // Active: the 10 routed experts of 512 a token visits, the rest as is ("A3B").
  EXPECT_EQ(active_parameters(*model, c), total - 48 * (512 - 10) * 3 * h * 512);
  EXPECT_EQ(active_parameters(*model, c), 3'874'929'408);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear moe");
  EXPECT_EQ(describe(s.kinds[1]), "moe");
  EXPECT_EQ(s.count(0), 36);
  EXPECT_EQ(s.first_layer(1), 3);
}

TEST(LinearAttentionModels, NamesAndShapesAreTransformers) {
  const ModulePtr m = build_model(find_model_config("qwen3-next-80b-a3b"));
  std::vector<std::string> linear, full;
  for (const auto& [name, t] : m->named_parameters()) {
    if (name.starts_with("model.layers.0.")) linear.push_back(name.substr(15));
    if (name.starts_with("model.layers.3.self_attn.")) full.push_back(name.substr(25));
  }
  // A module's own parameters list before its children's, as PyTorch lists them.
  EXPECT_EQ(linear, (std::vector<std::string>{
                        "linear_attn.dt_bias", "linear_attn.A_log", "linear_attn.conv1d.weight",
                        "linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight",
                        "linear_attn.norm.weight", "linear_attn.out_proj.weight", "mlp.gate.weight",
                        "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                        "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                        "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight",
                        "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(full, (std::vector<std::string>{"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                            "o_proj.weight", "q_norm.weight", "k_norm.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  EXPECT_EQ(shape("model.layers.0.linear_attn.conv1d.weight"), (DimVector{8192, 1, 4}));
  EXPECT_EQ(shape("model.layers.0.linear_attn.in_proj_qkvz.weight"), (DimVector{12288, 2048}));
  EXPECT_EQ(shape("model.layers.0.linear_attn.in_proj_ba.weight"), (DimVector{64, 2048}));
  EXPECT_EQ(shape("model.layers.0.linear_attn.A_log"), (DimVector{32}));
  EXPECT_EQ(shape("model.layers.0.linear_attn.norm.weight"), (DimVector{128}));
  EXPECT_EQ(shape("model.layers.0.linear_attn.out_proj.weight"), (DimVector{2048, 4096}));
  EXPECT_EQ(shape("model.layers.3.self_attn.q_proj.weight"), (DimVector{8192, 2048}));
  EXPECT_EQ(shape("model.layers.3.self_attn.o_proj.weight"), (DimVector{2048, 4096}));
  EXPECT_EQ(shape("model.layers.3.self_attn.q_norm.weight"), (DimVector{256}));
  EXPECT_EQ(m->get_submodule("model.layers.0.linear_attn").type_name(), "Qwen3NextGatedDeltaNet");
  EXPECT_EQ(m->get_submodule("model.layers.0.linear_attn.norm").type_name(),
            "Qwen3NextRMSNormGated");
  EXPECT_EQ(m->get_submodule("model.norm").type_name(), "Qwen3NextRMSNorm");
}

TEST(LinearAttentionModels, Qwen35DenseAndMoeCountsAndNames) {
  // Qwen3.5-0.8B (qwen3_5 file, its text_config): V 248,320 tied, h 1,024, 24 layers (every
  // fourth full: 8 heads of 256, 2 kv heads), linear attention of 16 key and 16 value heads of
  // 128, a dense MLP of 3,584 everywhere.
  const int64_t V = 248320;
  {
    const int64_t h = 1024;
    const int64_t linear = gated_delta_params({h, 16, 16, 128, 128, 4});
    EXPECT_EQ(linear, 10'543'264);
    const int64_t full = 2 * 8 * 256 * h + 2 * 2 * 256 * h + 8 * 256 * h + 2 * 256;
    const int64_t total = V * h + 18 * linear + 6 * full + 24 * (3 * h * 3584 + 2 * h) + h;
    EXPECT_EQ(total, 752'393'024);  // "0.8B" with the vision encoder
    const ModelConfig c = find_model_config("qwen3.5-0.8b");
    EXPECT_EQ(c.model_type, "qwen3_5_text");
    EXPECT_TRUE(c.tie_word_embeddings);
    // The published file is the multimodal "qwen3_5" with this as its text_config: it plans the
    // same language model.
    nlohmann::json text = to_hf_json(c);
    text.erase("model_type");  // the wrapper's default text model_type stands in
    const ModelConfig wrapped = parse_model_config(
        {{"model_type", "qwen3_5"}, {"tie_word_embeddings", true}, {"text_config", text}},
        "qwen3.5-0.8b/config.json");
    EXPECT_EQ(wrapped.multimodal_model_type, "qwen3_5");
    EXPECT_EQ(first_layers(wrapped, 24).model_type, "qwen3_5_text");
    ModelConfig unwrapped = wrapped;
    unwrapped.multimodal_model_type.clear();
    EXPECT_EQ(unwrapped, c);
    EXPECT_EQ(c.rope_theta, 1e7);
    EXPECT_EQ(build_model(c)->parameters_numel(), total);
    EXPECT_EQ(describe(layer_stack(c).kinds[0]), "linear dense");
  }
  // Qwen3.5-35B-A3B (qwen3_5_moe): h 2,048, 40 layers (16 heads of 256, 2 kv heads), linear
  // attention as Qwen3-Next's, 256 experts of 512 (top 8) and a gated shared expert of 512 in
  // every layer; untied.
  const int64_t h = 2048;
  const int64_t linear = gated_delta_params({h, 16, 32, 128, 128, 4});
  const int64_t full = 2 * 16 * 256 * h + 2 * 2 * 256 * h + 16 * 256 * h + 2 * 256;
  const int64_t moe = 256 * h + 256 * 3 * h * 512 + 3 * h * 512 + h;
  const int64_t total = 2 * V * h + 30 * linear + 10 * full + 40 * (moe + 2 * h) + h;
  EXPECT_EQ(total, 34'660'610'688);
  const ModelConfig c = find_model_config("qwen3.5-35b-a3b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total - 40 * (256 - 8) * 3 * h * 512);
  std::vector<std::string> names;
  for (const auto& [name, t] : m->named_parameters()) {
    if (name.starts_with("model.layers.0.linear_attn.")) names.push_back(name.substr(27));
  }
  // Qwen3_5GatedDeltaNet registers its four projections after out_proj.
  EXPECT_EQ(names,
            (std::vector<std::string>{"dt_bias", "A_log", "conv1d.weight", "norm.weight",
                                      "out_proj.weight", "in_proj_qkv.weight", "in_proj_z.weight",
                                      "in_proj_b.weight", "in_proj_a.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.linear_attn.in_proj_qkv.weight").sizes(),
            (DimVector{8192, 2048}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.shared_expert_gate.weight").sizes(),
            (DimVector{1, 2048}));
  EXPECT_EQ(m->get_submodule("model.layers.0.linear_attn").type_name(), "Qwen3_5MoeGatedDeltaNet");
  // Qwen3_5MoeTextConfig has no dense layers: a file asking for one is refused, not ignored.
  nlohmann::json j = to_hf_json(c);
  EXPECT_EQ(parse_model_config(j, "round trip"), c);
  j["mlp_only_layers"] = {1};
  EXPECT_THAT(
      [&] { (void)parse_model_config(j, "moe.json"); },
      ThrowsMessage<Error>(HasSubstr("'mlp_only_layers': [1], but Qwen3.5-MoE has no dense")));
}

TEST(LinearAttentionModels, LayerTypesFromTheListOrTheInterval) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kLinear,
                                        AttentionType::kFull}));
  nlohmann::json j = tiny();
  j.erase("full_attention_interval");
  j["layer_types"] = {"full_attention", "linear_attention", "linear_attention"};
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.layer_types[0], AttentionType::kFull);
  EXPECT_EQ(layer_kind(c, 1).attention, AttentionType::kLinear);
  // transformers' legacy names (remap_legacy_layer_types): "mamba" is linear, "attention" full;
  // the interval beside a list is not used (nor checked).
  j["layer_types"] = {"attention", "mamba", "linear_attention"};
  j["full_attention_interval"] = 0;
  EXPECT_EQ(parse_model_config(j, "tiny.json").layer_types, c.layer_types);
  j["layer_types"] = {"full_attention", "linear_attention", "linear_attention"};
  j.erase("full_attention_interval");
  // What to_hf_json writes reads back to the same model.
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The config class's default: a full layer every fourth (none of three here).
  j.erase("layer_types");
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(3, AttentionType::kLinear));
  // Defaults of the linear attention: 16 key heads, 32 value heads of 128 channels, 4 taps.
  for (const char* k : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                        "linear_value_head_dim", "linear_conv_kernel_dim"}) {
    j.erase(k);
  }
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.head_dim, 16);
}

TEST(LinearAttentionModels, BadFieldsAreRefusedByName) {
  auto refused = [](nlohmann::json j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["layer_types"] = {"linear_attention", "sliding_attention", "full_attention"};
  refused(j, "'layer_types': \"sliding_attention\" is not a layer type");
  j["layer_types"] = {"linear_attention"};
  refused(j, "expected a list of num_hidden_layers = 3");
  j = tiny();
  j["linear_num_value_heads"] = 5;
  refused(j, "'linear_num_value_heads': 5 is not a multiple of linear_num_key_heads 2");
  j = tiny();
  j["linear_conv_kernel_dim"] = 0;
  refused(j, "'linear_conv_kernel_dim': must be a positive integer");
  j = tiny();
  j["linear_key_head_dim"] = int64_t{1} << 40;
  refused(j, "'linear_key_head_dim': 1099511627776 is beyond what shardplan builds");
  j = tiny();
  j["full_attention_interval"] = 0;
  refused(j, "'full_attention_interval': must be positive");
  // A config built in code with linear layers for a family that builds none is refused too.
  ModelConfig built = find_model_config("llama3-8b");
  built.layer_types.assign(32, AttentionType::kFull);
  built.layer_types[5] = AttentionType::kLinear;
  built.linear_num_key_heads = built.linear_num_value_heads = 4;
  built.linear_key_head_dim = built.linear_value_head_dim = built.linear_conv_kernel_dim = 4;
  EXPECT_THAT([&] { validate(built, "built"); },
              ThrowsMessage<Error>(HasSubstr("model_type 'llama' builds no linear attention")));
  // A family that builds no linear attention refuses the fields rather than ignore them.
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["linear_num_value_heads"] = 32;
  refused(llama, "'linear_num_value_heads': 32 changes the architecture");
}

TEST(LinearAttentionModels, TracedWorkIsTheProjectionsAndTheChunkedRule) {
  // One linear layer with a dense MLP (mlp_only_layers), 100 tokens: the rule pads to 128.
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  j["mlp_only_layers"] = {0};
  j["full_attention_interval"] = 4;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c);
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  // in_proj_qkvz (2 n dk + 2 m dv = 128), in_proj_ba (2 m = 8), out_proj (m dv = 32 in), the
  // gated MLP (3 products of 128), lm_head (1000).
  const double linears =
      2 * T * h * 128 + 2 * T * h * 8 + 2 * T * 32 * h + 3 * 2 * T * h * 128 + 2 * T * h * 1000;
  // Note [Gated delta rule work] per token and head at C 64, K 16, V 8 (one 128-wide tile
  // each), on 128 padded tokens of 4 value heads: 6 K V + 6 C K + 4 C V + C^2 / 2.
  const double rule = 128 * 4 * (6 * 16 * 8 + 6 * 64 * 16 + 4 * 64 * 8 + 64 * 64 / 2.0);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, linears + rule);
  int convs = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "causal_conv1d") continue;
    ++convs;
    // Depthwise over 2 n dk + m dv = 96 channels and 100 tokens, 4 taps each, and the SiLU.
    EXPECT_DOUBLE_EQ(n.flops, 96.0 * 100 * (2 * 4 + 4));
    EXPECT_EQ(n.module, "model.layers.0.linear_attn.conv1d");
  }
  EXPECT_EQ(convs, 1);
}

// Note [Gated delta rule work] at Qwen3-Next's K = V = 128 and flash-linear-attention's C = 64,
// per token and head, summed by hand from the kernels' products:
//   forward: 6 x 16,384 (K V) + 6 x 8,192 (C K) + 4 x 8,192 (C V) + 2,048 (C^2 / 2) = 182,272;
//   backward with its recomputation: 16 x 16,384 + 18 x 8,192 + 10 x 8,192 + 4 x 4,096 = 507,904.
TEST(LinearAttentionModels, GatedDeltaRuleWorkPerTokenAndHead) {
  const ChunkedScanWork w = gated_delta_rule_work(1, 1, 128, 128, 64);
  EXPECT_DOUBLE_EQ(w.forward, 182'272);
  EXPECT_DOUBLE_EQ(w.backward + w.recompute, 507'904);
  EXPECT_DOUBLE_EQ(w.recompute, 2 * 64 * 256 + 4 * 16'384);
  // Linear in tokens and heads; a 256-wide value is two 128-wide tiles, each recomputing the
  // in-chunk q k^T: (4 + 2 x 2) C K.
  EXPECT_DOUBLE_EQ(gated_delta_rule_work(4096, 32, 128, 128, 64).forward, 4096.0 * 32 * 182'272);
  EXPECT_DOUBLE_EQ(gated_delta_rule_work(1, 1, 128, 256, 64).forward,
                   6.0 * 128 * 256 + 8.0 * 64 * 128 + 4.0 * 64 * 256 + 2048);
}

TEST(LinearAttentionModels, TrainingSavesTheRuleInputsAndItsChunks) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  j["mlp_only_layers"] = {0};
  j["full_attention_interval"] = 4;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  int found = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "chunk_gated_delta_rule") continue;
    ++found;
    // q, k, v, g, beta, then A [B, T, H, 64] in bf16 and two fp32 norms per token and head.
    ASSERT_EQ(op.saved.size(), 7u);
    const int64_t rows = 2 * 64 * 4;
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[5].buffer)].bytes, rows * 64 * 2);
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[6].buffer)].bytes, rows * 2 * 4);
    // Backward: 12 K V + 16 C K + 8 C V + 4 C^2 (one 128-wide key tile), and the recomputed
    // w, u and chunk states, 2 C K + 2 C V + 4 K V, per token and head (64 tokens: one chunk).
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops,
                     rows * (12.0 * 16 * 8 + 16.0 * 64 * 16 + 8.0 * 64 * 8 + 4.0 * 64 * 64));
    EXPECT_DOUBLE_EQ(op.recompute_flops, rows * (2.0 * 64 * (16 + 8) + 4.0 * 16 * 8));
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace shardplan::tensor
