// jamba (AI21's Jamba) against hand formulas written here from transformers 5's modeling_jamba.py
// and the published totals. h hidden, V vocabulary (embed_tokens and an untied lm_head), F the MLP
// and expert width, D = mamba_expand h channels, N the state width, R the time-step rank, K the
// convolution taps:
//   mamba      A_log [D, N], D [D], conv1d [D, 1, K] + [D], in_proj [2 D, h], x_proj [R + 2 N, D],
//              dt_proj [D, R] + [D], out_proj [h, D], dt_layernorm [R], b_ and c_layernorm [N]
//   self_attn  q_proj [heads hd, h], k_proj, v_proj [kv hd, h], o_proj [h, heads hd], no biases
//   feed_forward  a gated MLP (3 h F), or router [E, h] and E experts of 3 h F
//   every layer   input_layernorm and pre_ff_layernorm [h]; model.final_layernorm [h]
// Note [Mamba-1 scan work] (tensor/ops.h) for the scan's FLOPs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
#include "tensor/ops.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t mamba_params(int64_t h, int64_t d, int64_t n, int64_t r, int64_t k) {
  return d * n + d + d * k + d + 2 * d * h + (r + 2 * n) * d + r * d + d + h * d + r + 2 * n;
}

int64_t attention_params(int64_t h, int64_t heads, int64_t kv, int64_t hd) {
  return 2 * heads * hd * h + 2 * kv * hd * h;
}

// Four layers: Mamba (dense), Mamba (MoE), attention (dense), Mamba (MoE); h 64, F 96, 4 heads of
// 16 (2 kv heads), 4 experts (top 2), D 128, N 8, R "auto" = ceil(64 / 16) = 4, K 4.
nlohmann::json tiny() {
  return {{"model_type", "jamba"},    {"vocab_size", 1000},       {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 4},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"attn_layer_period", 4},   {"attn_layer_offset", 2},
          {"expert_layer_period", 2}, {"expert_layer_offset", 1}, {"num_experts", 4},
          {"num_experts_per_tok", 2}, {"mamba_d_state", 8},       {"mamba_d_conv", 4},
          {"mamba_expand", 2},        {"mamba_dt_rank", "auto"}};
}

TEST(JambaModels, OneFiveLargeMatchesThePublished398BAnd94BActive) {
  // AI21-Jamba-1.5-Large ("398B total, 94B active", Jamba-1.5 paper §2): V 65,536 untied, h
  // 8,192, 72 layers, attention on i % 8 == 4 (9 layers: 64 heads of 128, 8 kv heads), Mamba-1
  // elsewhere (63: D 16,384, N 16, R 512, K 4), 16 experts of F 24,576 (top 2) on the odd layers
  // (36), a gated MLP of 24,576 on the even ones (36).
  const int64_t V = 65536, h = 8192, F = 24576;
  const int64_t mamba = mamba_params(h, 16384, 16, 512, 4);
  EXPECT_EQ(mamba, 420'332'064);
  const int64_t total = 2 * V * h + h + 72 * 2 * h + 63 * mamba +
                        9 * attention_params(h, 64, 8, 128) + 36 * 3 * h * F +
                        36 * (16 * h + 16 * 3 * h * F);
  EXPECT_EQ(total, 398'555'145'696);
  const ModelConfig c = find_model_config("jamba-1.5-large");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "JambaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  // Active: 2 of the 16 experts of each MoE layer.
  EXPECT_EQ(active_parameters(*m, c), total - 36 * 14 * 3 * h * F);
  EXPECT_EQ(active_parameters(*m, c), 94'149'338'592);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 3u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(describe(s.kinds[1]), "linear moe");
  EXPECT_EQ(describe(s.kinds[2]), "dense");
  EXPECT_EQ(s.count(0), 27);
  EXPECT_EQ(s.count(1), 36);
  EXPECT_EQ(s.count(2), 9);
  EXPECT_EQ(s.first_layer(2), 4);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(JambaModels, VZeroOneMatchesThePublished52BAnd12BActive) {
  // ai21labs/Jamba-v0.1 ("52B total, 12B active", Lieber et al. 2024, "Jamba", §3): h 4,096, 32
  // layers (4 attend: 32 heads of 128, 8 kv heads; 28 Mamba: D 8,192, N 16, R 256), 16 experts of
  // 14,336 on the 16 odd layers, MLPs of 14,336 on the 16 even ones.
  const int64_t V = 65536, h = 4096, F = 14336;
  const int64_t total = 2 * V * h + h + 32 * 2 * h + 28 * mamba_params(h, 8192, 16, 256, 4) +
                        4 * attention_params(h, 32, 8, 128) + 16 * 3 * h * F +
                        16 * (16 * h + 16 * 3 * h * F);
  EXPECT_EQ(total, 51'570'323'328);
  const ModelConfig c = find_model_config("jamba-v0.1");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), 12'110'311'296);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(JambaModels, NamesOrderAndShapesAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  // A module's own parameters list before its children's (A_log, D), as PyTorch lists them; the
  // mixer, feed_forward, then the two norms.
  const Names mixer = {"mamba.A_log",
                       "mamba.D",
                       "mamba.conv1d.weight",
                       "mamba.conv1d.bias",
                       "mamba.in_proj.weight",
                       "mamba.x_proj.weight",
                       "mamba.dt_proj.weight",
                       "mamba.dt_proj.bias",
                       "mamba.out_proj.weight",
                       "mamba.dt_layernorm.weight",
                       "mamba.b_layernorm.weight",
                       "mamba.c_layernorm.weight"};
  const Names mlp = {"feed_forward.gate_proj.weight", "feed_forward.up_proj.weight",
                     "feed_forward.down_proj.weight"};
  const Names moe = {"feed_forward.router.weight", "feed_forward.experts.gate_up_proj",
                     "feed_forward.experts.down_proj"};
  const Names norms = {"input_layernorm.weight", "pre_ff_layernorm.weight"};
  auto join = [](std::initializer_list<Names> parts) {
    Names out;
    for (const Names& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  EXPECT_EQ(names_under(*m, "model.layers.0."), join({mixer, mlp, norms}));
  EXPECT_EQ(names_under(*m, "model.layers.1."), join({mixer, moe, norms}));
  EXPECT_EQ(names_under(*m, "model.layers.2."),
            join({{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.o_proj.weight"},
                  mlp,
                  norms}));
  // The top level: embed_tokens, the layers, final_layernorm, then the untied lm_head.
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top,
            (Names{"model.embed_tokens.weight", "model.final_layernorm.weight", "lm_head.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  EXPECT_EQ(shape("model.layers.0.mamba.A_log"), (DimVector{128, 8}));
  EXPECT_EQ(shape("model.layers.0.mamba.D"), (DimVector{128}));
  EXPECT_EQ(shape("model.layers.0.mamba.conv1d.weight"), (DimVector{128, 1, 4}));
  EXPECT_EQ(shape("model.layers.0.mamba.in_proj.weight"), (DimVector{256, 64}));
  EXPECT_EQ(shape("model.layers.0.mamba.x_proj.weight"), (DimVector{4 + 2 * 8, 128}));
  EXPECT_EQ(shape("model.layers.0.mamba.dt_proj.weight"), (DimVector{128, 4}));
  EXPECT_EQ(shape("model.layers.0.mamba.dt_proj.bias"), (DimVector{128}));
  EXPECT_EQ(shape("model.layers.0.mamba.out_proj.weight"), (DimVector{64, 128}));
  EXPECT_EQ(shape("model.layers.0.mamba.dt_layernorm.weight"), (DimVector{4}));
  EXPECT_EQ(shape("model.layers.0.mamba.c_layernorm.weight"), (DimVector{8}));
  EXPECT_EQ(shape("model.layers.1.feed_forward.router.weight"), (DimVector{4, 64}));
  EXPECT_EQ(shape("model.layers.1.feed_forward.experts.gate_up_proj"), (DimVector{4, 192, 64}));
  EXPECT_EQ(shape("model.layers.1.feed_forward.experts.down_proj"), (DimVector{4, 64, 96}));
  EXPECT_EQ(shape("model.layers.2.self_attn.k_proj.weight"), (DimVector{32, 64}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "JambaModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "JambaMambaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.2").type_name(), "JambaAttentionDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "JambaMambaMixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.conv1d").type_name(), "Conv1d");
  EXPECT_EQ(m->get_submodule("model.layers.0.feed_forward").type_name(), "JambaMLP");
  EXPECT_EQ(m->get_submodule("model.layers.1.feed_forward").type_name(), "JambaSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.1.feed_forward.experts").type_name(), "JambaExperts");
  EXPECT_EQ(m->get_submodule("model.layers.2.self_attn").type_name(), "JambaAttention");
  // No position encoding at all: no rotary_emb.
  EXPECT_THROW((void)m->get_submodule("model.rotary_emb"), Error);
  // The mixers count as attention, the experts as experts (active: 2 of 4).
  EXPECT_EQ(block_kind(*m, "model.layers.0.mamba.A_log"), "attention");
  EXPECT_EQ(block_kind(*m, "model.layers.0.mamba.dt_layernorm.weight"), "norm");
  EXPECT_EQ(block_kind(*m, "model.layers.1.feed_forward.experts.down_proj"), "experts");
  EXPECT_EQ(block_kind(*m, "model.layers.1.feed_forward.router.weight"), "router");
  // By hand: 2 V h + h, 4 x 2 h of norms, three Mamba layers, one attention, two MLPs, two MoE.
  const int64_t h = 64, F = 96;
  const int64_t total = 2 * 1000 * h + h + 4 * 2 * h + 3 * mamba_params(h, 128, 8, 4, 4) +
                        attention_params(h, 4, 2, 16) + 2 * 3 * h * F + 2 * (4 * h + 4 * 3 * h * F);
  EXPECT_EQ(mamba_params(h, 128, 8, 4, 4), 29'588);
  EXPECT_EQ(total, 414'460);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total - 2 * 2 * 3 * h * F);
  // Biases as the file says: no convolution bias, in_proj and out_proj with one.
  nlohmann::json j = tiny();
  j["mamba_conv_bias"] = false;
  j["mamba_proj_bias"] = true;
  const ModulePtr b = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(names_under(*b, "model.layers.0.mamba.conv1d."), (Names{"weight"}));
  EXPECT_EQ(b->get_parameter("model.layers.0.mamba.in_proj.bias").sizes(), (DimVector{256}));
  EXPECT_EQ(b->get_parameter("model.layers.0.mamba.out_proj.bias").sizes(), (DimVector{64}));
  EXPECT_EQ(names_under(*b, "model.layers.0.mamba.x_proj."), (Names{"weight"}));
}

TEST(JambaModels, ConfigDefaultsRoundTripAndLayerPattern) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kLinear,
                                        AttentionType::kFull, AttentionType::kLinear}));
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.linear_num_value_heads, 128);  // the channels, heads of width 1
  EXPECT_EQ(c.linear_value_head_dim, 1);
  EXPECT_EQ(c.linear_num_key_heads, 1);
  EXPECT_EQ(c.linear_key_head_dim, 8);
  EXPECT_EQ(c.linear_dt_rank, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.pad_token_id, 0);  // JambaConfig's default, the embedding's padding_idx
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 3u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(describe(s.kinds[1]), "linear moe");
  EXPECT_EQ(describe(s.kinds[2]), "dense");
  // The class's defaults: 32 layers, attention every 8th from 4, experts every 2nd from 1, 16
  // experts, R = ceil(h / 16), N 16, K 4, rms_norm_eps 1e-6, 262,144 positions, untied.
  c = parse_model_config({{"model_type", "jamba"},
                          {"hidden_size", 72},
                          {"num_attention_heads", 6},
                          {"num_key_value_heads", nullptr},
                          {"intermediate_size", 32}},
                         "defaults.json");
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.vocab_size, 65536);
  EXPECT_EQ(c.num_key_value_heads, 6);  // null: the heads
  EXPECT_EQ(c.linear_dt_rank, 5);       // ceil(72 / 16)
  EXPECT_EQ(c.linear_key_head_dim, 16);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.num_local_experts, 16);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(layer_stack(c).count(2), 4);  // layers 4, 12, 20, 28 attend
  EXPECT_EQ(c.dense_layers.size(), 16u);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // One expert is no MoE: a dense MLP in every layer (JambaMLP), and it round-trips.
  nlohmann::json j = tiny();
  j["num_experts"] = 1;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.num_local_experts, 0);
  EXPECT_TRUE(c.dense_layers.empty());
  EXPECT_EQ(describe(layer_stack(c).kinds[1]), "dense");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // num_local_experts is JambaConfig's attribute_map name for num_experts, and wins.
  j = tiny();
  j["num_local_experts"] = 8;
  EXPECT_EQ(parse_model_config(j, "tiny.json").num_local_experts, 8);
  // A head_dim the file gives is JambaAttention's; it round-trips.
  j = tiny();
  j["head_dim"] = 32;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(build_model(c)->get_parameter("model.layers.2.self_attn.q_proj.weight").sizes(),
            (DimVector{128, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The planner's cuts round-trip: the first two layers (no attention, one MoE layer).
  const ModelConfig two = first_layers(parse_model_config(tiny(), "tiny.json"), 2);
  const nlohmann::json cut = to_hf_json(two);
  EXPECT_EQ(cut.at("attn_layer_period"), 3);  // none of layers 0 and 1: period 3, offset 2
  EXPECT_EQ(cut.at("attn_layer_offset"), 2);
  EXPECT_EQ(parse_model_config(cut, "cut"), two);
}

TEST(JambaModels, RefusesWhatItCannotBuild) {
  auto refused = [](const nlohmann::json& bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  auto with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json j = tiny();
    j[key] = v;
    return j;
  };
  refused(with("hidden_act", "gelu"),
          "tiny.json: field 'hidden_act': 'gelu' is not built; expected \"silu\"");
  refused(with("mamba_dt_rank", "big"), "field 'mamba_dt_rank': \"big\" is not a rank");
  refused(with("mamba_dt_rank", 0), "field 'mamba_dt_rank': must be positive, got 0");
  refused(with("attn_layer_offset", 4),
          "field 'attn_layer_offset': 4, expected 0 <= attn_layer_offset < attn_layer_period = 4");
  refused(with("expert_layer_period", 0), "field 'expert_layer_period': must be positive, got 0");
  refused(with("num_experts", 0),
          "field 'num_experts': must be positive (1: a dense MLP in every layer), got 0");
  refused(with("num_experts_per_tok", 5),
          "field 'num_experts_per_tok': must be in [1, num_local_experts = 4], got 5");
  refused(
      with("num_attention_heads", 5),
      "field 'num_attention_heads': 5 does not divide hidden_size 64 (and no head_dim is given)");
  refused(with("mamba_expand", 0),
          "field 'mamba_expand': 0 must be positive, with mamba_expand x hidden_size in int64");
  refused(with("mamba_d_state", 0),
          "field 'mamba_d_state' (linear_key_head_dim): must be a positive integer");
  refused(with("num_hidden_layers", 0), "field 'num_hidden_layers': 0 layers, expected 1..");
  // Another family's file with Jamba's layout is refused rather than built without it.
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["attn_layer_period"] = 8;
  refused(llama, "field 'attn_layer_period': 8 changes the architecture");
  // Configs built in code that JambaConfig cannot state, or whose layers it does not build.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.layer_types = {AttentionType::kLinear, AttentionType::kFull, AttentionType::kFull,
                   AttentionType::kLinear};  // layers 1 and 2: no one period
  EXPECT_THAT([&] { (void)to_hf_json(c); },
              ThrowsMessage<Error>(HasSubstr("jamba: the attention layers are not one period")));
  EXPECT_EQ(build_model(c)->get_submodule("model.layers.1").type_name(),
            "JambaAttentionDecoderLayer");  // built as said, not written
  c.sliding_window = 16;
  c.layer_types[0] = AttentionType::kSliding;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("jamba: a layer attends sliding_attention")));
}

TEST(JambaModels, ForwardTracesTheProjectionsAndOneSelectiveScan) {
  // One Mamba layer with a dense MLP, 100 tokens.
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  // in_proj (256 outputs), x_proj (128 -> 20), dt_proj's weight times dt (4 -> 128), out_proj
  // (128 -> 64), the MLP (three of 64 x 96), lm_head (1,000): the scan has no matrix product.
  const double matmuls = 2 * T * h * 256 + 2 * T * 128 * 20 + 2 * T * 4 * 128 + 2 * T * 128 * h +
                         3 * 2 * T * h * 96 + 2 * T * h * 1000;
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, matmuls);
  EXPECT_EQ(test::ops_in(g, "matmul", "model.layers.0.mamba.dt_proj"), 1);
  EXPECT_EQ(test::ops_in(g, "causal_conv1d", "model.layers.0.mamba"), 1);
  EXPECT_EQ(test::ops_under(g, "rms_norm", "model.layers.0.mamba."), 3);  // dt, B and C
  int scans = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "causal_conv1d") {
      // 128 channels x 100 tokens: 4 taps' multiply-adds, the bias and the SiLU (4).
      EXPECT_DOUBLE_EQ(n.flops, 128 * T * (2 * 4 + 1 + 4));
    }
    if (n.op != "selective_scan_fn") continue;
    ++scans;
    EXPECT_EQ(n.module, "model.layers.0.mamba");
    EXPECT_DOUBLE_EQ(n.matmul_flops, 0);
    // Note [Mamba-1 scan work]: 7 per token, channel and state; 12 per token and channel.
    EXPECT_DOUBLE_EQ(n.flops, T * 128 * 8 * 7 + T * 128 * 12);
  }
  EXPECT_EQ(scans, 1);
}

TEST(JambaModels, TrainingSavesTheScanInputsOutputAndChunkStates) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  int found = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "selective_scan_fn") continue;
    ++found;
    EXPECT_TRUE(op.rule_known);
    int64_t out = -1, chunks = -1;
    for (const SavedTensor& s : op.saved) {
      if (s.what == "out") out = st.buffers[static_cast<size_t>(s.buffer)].bytes;
      if (s.what == "chunk_states") chunks = st.buffers[static_cast<size_t>(s.buffer)].bytes;
    }
    // The output before the gate, [2, 128, 64] bf16; one chunk of 2,048 tokens' running states,
    // [2, 128, 1, 2 x 8] fp32.
    EXPECT_EQ(out, 2 * 128 * 64 * 2);
    EXPECT_EQ(chunks, 2 * 128 * 1 * 16 * 4);
    // 128 tokens x 128 channels: backward 16 per state and 2 x 12 per channel, recompute 5 per
    // state.
    const double rows = 128.0 * 128;
    EXPECT_DOUBLE_EQ(op.flops, rows * (8 * 7 + 12));
    EXPECT_DOUBLE_EQ(op.backward_flops, rows * (8 * 16 + 24));
    EXPECT_DOUBLE_EQ(op.recompute_flops, rows * 8 * 5);
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 0);
  }
  EXPECT_EQ(found, 1);
}

TEST(JambaModels, ScanOpChecksItsOperands) {
  const TensorOptions o{};
  TensorOptions f32 = o;
  f32.dtype = DType::kFloat32;
  const Tensor u = empty({2, 16, 10}, o), a = empty({16, 4}, f32), bc = empty({2, 4, 10}, o);
  const Tensor d = empty({16}, f32);
  EXPECT_EQ(selective_scan(u, u, a, bc, bc, d, u, d).sizes(), (DimVector{2, 16, 10}));
  EXPECT_EQ(selective_scan(u, u, a, bc, bc).sizes(), (DimVector{2, 16, 10}));
  EXPECT_THAT(
      [&] {
        (void)selective_scan(u, u, empty({8, 4}, f32), bc, bc);
      },
      ThrowsMessage<Error>(HasSubstr("expected A as floating point [16, state]")));
  EXPECT_THAT(
      [&] {
        (void)selective_scan(u, u, a, empty({2, 5, 10}, o), bc);
      },
      ThrowsMessage<Error>(HasSubstr("expected B and C as floating point [2, 4, 10]")));
  EXPECT_THAT(
      [&] {
        (void)selective_scan(u, empty({2, 16, 9}, o), a, bc, bc);
      },
      ThrowsMessage<Error>(HasSubstr("expected delta as u [2, 16, 10]")));
  EXPECT_THAT([&] { (void)selective_scan(u, u, a, bc, bc, empty({8}, f32)); },
              ThrowsMessage<Error>(HasSubstr("expected D and delta_bias as [16]")));
  // The per-state work, by hand: 7, 16 and 5 per token, channel and state.
  const ChunkedScanWork w = selective_scan_work(4096, 16384, 16);
  EXPECT_DOUBLE_EQ(w.forward, 4096.0 * 16384 * 16 * 7);
  EXPECT_DOUBLE_EQ(w.backward, 4096.0 * 16384 * 16 * 16);
  EXPECT_DOUBLE_EQ(w.recompute, 4096.0 * 16384 * 16 * 5);
  EXPECT_EQ(chunked_scan_chunk("selective_scan_fn"), 0);  // no tensor-core tiles
}

TEST(JambaModels, InitRulesAreJambaPreTrainedModels) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init.emplace(p.name, p.init);
  using K = ParameterInit::Kind;
  // A_log = log(1 .. N) along each channel's row: the log-index fill restarting every N = 8.
  EXPECT_EQ(init.at("model.layers.0.mamba.A_log"), (ParameterInit{K::kLogIndex, 1.0, 8.0}));
  EXPECT_EQ(init.at("model.layers.0.mamba.D"), (ParameterInit{K::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.at("model.layers.0.mamba.conv1d.weight"), (ParameterInit{K::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.layers.0.mamba.conv1d.bias"), (ParameterInit{K::kConstant, 0.0, 0.0}));
  // dt_proj's bias is a Linear's: zero (the Mamba paper's inverse-softplus init is not Jamba's).
  EXPECT_EQ(init.at("model.layers.0.mamba.dt_proj.bias"), (ParameterInit{K::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("model.layers.0.mamba.dt_layernorm.weight"),
            (ParameterInit{K::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.at("model.layers.1.feed_forward.experts.gate_up_proj"),
            (ParameterInit{K::kNormal, 0.0, 0.02}));
  EXPECT_EQ(init.at("model.embed_tokens.weight"), (ParameterInit{K::kNormal, 0.0, 0.02, 0}));
  EXPECT_EQ(init.size(), m->named_parameters().size());
}

}  // namespace
}  // namespace shardplan::tensor
