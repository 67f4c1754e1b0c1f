// mamba (MambaForCausalLM: state-spaces/mamba-2.8b-hf) against hand formulas written here from
// transformers 5's modeling_mamba.py and the published total. h hidden, V vocabulary (tied by
// default), D = intermediate_size (else expand x h) channels, N = state_size, R = time_step_rank
// ("auto": ceil(h / 16)), K = conv_kernel; per layer a norm [h] and the mixer: A_log [D, N], D [D],
// conv1d [D, 1, K] + bias [D], in_proj [2 D, h], x_proj [R + 2 N, D], dt_proj [D, R] + bias [D],
// out_proj [h, D]; then norm_f [h] and lm_head [V, h] (none when tied). Note [Mamba-1 scan work]
// (tensor/ops.h) for the scan's FLOPs. (mamba_models_test.cpp is Granite 4.0's Mamba-2.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t mixer_params(int64_t h, int64_t d, int64_t n, int64_t r, int64_t k) {
  return d * n + d + d * k + d + 2 * d * h + (r + 2 * n) * d + r * d + d + h * d;
}

// 2 layers, h 64, D = 2 x 64 = 128, N 8, R "auto" = ceil(64 / 16) = 4, K 4, V 1,000 (tied: the
// class's default).
nlohmann::json tiny() {
  return {{"model_type", "mamba"}, {"vocab_size", 1000},
          {"hidden_size", 64},     {"num_hidden_layers", 2},
          {"expand", 2},           {"state_size", 8},
          {"conv_kernel", 4},      {"torch_dtype", "bfloat16"}};
}

TEST(Mamba1Models, Mamba28bMatchesThePublishedTotal) {
  // state-spaces/mamba-2.8b-hf: V 50,280 tied, h 2,560, 64 layers, D 5,120, N 16, R 160, K 4;
  // the Hub lists 2.77B parameters (the model's name: "2.8b").
  const int64_t V = 50280, h = 2560;
  const int64_t mixer = mixer_params(h, 5120, 16, 160, 4);
  EXPECT_EQ(mixer, 41'241'600);
  const int64_t total = V * h + h + 64 * (h + mixer);
  EXPECT_EQ(total, 2'768'345'600);
  const ModelConfig c = find_model_config("mamba-2.8b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MambaForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.residual_in_fp32);
  EXPECT_EQ(c.linear_dt_rank, 160);
  EXPECT_EQ(c.max_position_embeddings, int64_t{1} << 20);  // no positions, no limit
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
  EXPECT_EQ(s.count(0), 64);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(Mamba1Models, NamesOrderShapesAndTinyTotal) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  // The block's norm, then the mixer: its own A_log and D before its children, as PyTorch lists
  // them (MambaMixer registers conv1d, in_proj, x_proj, dt_proj, A_log, D, out_proj).
  EXPECT_EQ(names_under(*m, "backbone.layers.0."),
            (Names{"norm.weight", "mixer.A_log", "mixer.D", "mixer.conv1d.weight",
                   "mixer.conv1d.bias", "mixer.in_proj.weight", "mixer.x_proj.weight",
                   "mixer.dt_proj.weight", "mixer.dt_proj.bias", "mixer.out_proj.weight"}));
  // The top level: embeddings, the layers, norm_f; lm_head is the embedding (tied) and lists once.
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("backbone.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"backbone.embeddings.weight", "backbone.norm_f.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  EXPECT_EQ(shape("backbone.layers.1.mixer.A_log"), (DimVector{128, 8}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.D"), (DimVector{128}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.conv1d.weight"), (DimVector{128, 1, 4}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.in_proj.weight"), (DimVector{256, 64}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.x_proj.weight"), (DimVector{4 + 2 * 8, 128}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.dt_proj.weight"), (DimVector{128, 4}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.dt_proj.bias"), (DimVector{128}));
  EXPECT_EQ(shape("backbone.layers.1.mixer.out_proj.weight"), (DimVector{64, 128}));
  EXPECT_EQ(shape("lm_head.weight"), (DimVector{1000, 64}));
  EXPECT_EQ(m->get_submodule("backbone").type_name(), "MambaModel");
  EXPECT_EQ(m->get_submodule("backbone.layers.0").type_name(), "MambaBlock");
  EXPECT_EQ(m->get_submodule("backbone.layers.0.mixer").type_name(), "MambaMixer");
  EXPECT_EQ(m->get_submodule("backbone.layers.0.mixer.conv1d").type_name(), "Conv1d");
  EXPECT_THROW((void)m->get_submodule("backbone.layers.0.mixer.dt_layernorm"), Error);
  EXPECT_EQ(block_kind(*m, "backbone.layers.0.mixer.A_log"), "attention");
  // By hand: 1,000 x 64 (tied) + 64 + 2 x (64 + 1,024 + 128 + 512 + 128 + 16,384 + 2,560 + 512 +
  // 128 + 8,192).
  EXPECT_EQ(mixer_params(64, 128, 8, 4, 4), 29'568);
  EXPECT_EQ(m->parameters_numel(), 123'328);
  // Untied: lm_head its own [V, h].
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = false;
  const ModulePtr untied = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(untied->parameters_numel(), 123'328 + 64'000);
  EXPECT_EQ(untied->named_parameters().back().name, "lm_head.weight");
  // Biases as the file says: use_bias on in_proj and out_proj, none on the convolution.
  j = tiny();
  j["use_bias"] = true;
  j["use_conv_bias"] = false;
  const ModulePtr b = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(names_under(*b, "backbone.layers.0.mixer.conv1d."), (Names{"weight"}));
  EXPECT_EQ(b->get_parameter("backbone.layers.0.mixer.in_proj.bias").sizes(), (DimVector{256}));
  EXPECT_EQ(b->get_parameter("backbone.layers.0.mixer.out_proj.bias").sizes(), (DimVector{64}));
  EXPECT_EQ(names_under(*b, "backbone.layers.0.mixer.x_proj."), (Names{"weight"}));
}

TEST(Mamba1Models, DefaultsRoundTripAndTheWidthKeys) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(2, AttentionType::kLinear));
  EXPECT_EQ(c.no_ffn_layers, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.linear_num_value_heads, 128);  // the channels, heads of width 1
  EXPECT_EQ(c.linear_value_head_dim, 1);
  EXPECT_EQ(c.linear_num_key_heads, 1);
  EXPECT_EQ(c.linear_key_head_dim, 8);
  EXPECT_EQ(c.linear_dt_rank, 4);
  EXPECT_EQ(c.num_attention_heads, 128);  // the channels stand for the attention sizes
  EXPECT_EQ(c.head_dim, 1);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.linear_norm_eps, 0);  // no dt/B/C norms
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // MambaConfig's defaults: V 50,280, h 768, 32 layers, D 1,536, N 16, R ceil(768 / 16) = 48, K 4,
  // layer_norm_epsilon 1e-5, residual_in_fp32, tied.
  c = parse_model_config(nlohmann::json{{"model_type", "mamba"}}, "defaults.json");
  EXPECT_EQ(c.vocab_size, 50280);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.linear_num_value_heads, 1536);
  EXPECT_EQ(c.linear_key_head_dim, 16);
  EXPECT_EQ(c.linear_dt_rank, 48);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_TRUE(c.linear_conv_bias);
  EXPECT_FALSE(c.linear_proj_bias);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_TRUE(c.residual_in_fp32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(build_model(c)->parameters_numel(),
            50280 * 768 + 768 + 32 * (768 + mixer_params(768, 1536, 16, 48, 4)));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // A file's intermediate_size wins over expand (transformers sets the file's keys after
  // __post_init__ computes expand x hidden_size), and a rank given as a number is taken.
  nlohmann::json j = tiny();
  j["expand"] = 16;
  j["intermediate_size"] = 96;
  j["time_step_rank"] = 8;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.linear_num_value_heads, 96);
  EXPECT_EQ(c.linear_dt_rank, 8);
  EXPECT_EQ(build_model(c)->get_parameter("backbone.layers.0.mixer.dt_proj.weight").sizes(),
            (DimVector{96, 8}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);  // 96 is no multiple of 64
  EXPECT_FALSE(to_hf_json(c).contains("expand"));
  // "swish" is SiLU; the residual in the model's dtype round-trips.
  j = tiny();
  j["hidden_act"] = "swish";
  j["residual_in_fp32"] = false;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_FALSE(c.residual_in_fp32);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The planner's cut of the shipped model round-trips.
  const ModelConfig two = first_layers(find_model_config("mamba-2.8b"), 2);
  EXPECT_EQ(parse_model_config(to_hf_json(two), "cut"), two);
}

TEST(Mamba1Models, RefusesWhatItCannotBuild) {
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
  refused(with("time_step_rank", "big"), "field 'time_step_rank': \"big\" is not a rank");
  refused(with("time_step_rank", 0), "field 'time_step_rank': must be positive, got 0");
  refused(with("expand", 0),
          "field 'expand': 0 must be positive, with expand x hidden_size in int64");
  refused(with("intermediate_size", 0), "field 'intermediate_size': must be positive, got 0");
  refused(with("state_size", 0),
          "field 'state_size' (linear_key_head_dim): must be a positive integer");
  refused(with("conv_kernel", 0),
          "field 'conv_kernel' (linear_conv_kernel_dim): must be a positive integer");
  refused(with("num_hidden_layers", 0), "field 'num_hidden_layers': 0 layers, expected 1..");
  refused(with("num_hidden_layers", 5000), "field 'num_hidden_layers': 5000 layers, expected 1..");
  // A config built in code whose channels are not heads of width 1 cannot be written.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.head_dim = 2;
  EXPECT_THAT([&] { (void)to_hf_json(c); },
              ThrowsMessage<Error>(HasSubstr("mamba: a Mamba-1 mixer of 128 channels")));
}

// One layer, 100 tokens: in_proj (64 -> 256), x_proj (128 -> 4 + 16), dt_proj's weight times dt (4
// -> 128), out_proj (128 -> 64) and lm_head (64 -> 1,000) are the matrix products; the scan has
// none (Note [Mamba-1 scan work]: 7 per token, channel and state, 12 per token and channel).
TEST(Mamba1Models, ForwardTracesTheProjectionsAndOneScan) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  const double matmuls =
      2 * T * h * 256 + 2 * T * 128 * 20 + 2 * T * 4 * 128 + 2 * T * 128 * h + 2 * T * h * 1000;
  EXPECT_DOUBLE_EQ(matmuls, 18'329'600);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, matmuls);
  EXPECT_EQ(test::ops_in(g, "matmul", "backbone.layers.0.mixer.dt_proj"), 1);
  EXPECT_EQ(test::ops_in(g, "causal_conv1d", "backbone.layers.0.mixer"), 1);
  EXPECT_EQ(test::ops_under(g, "rms_norm", "backbone.layers.0.mixer"), 0);  // no dt/B/C norms
  int scans = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "selective_scan_fn") {
      ++scans;
      EXPECT_EQ(n.module, "backbone.layers.0.mixer");
      EXPECT_DOUBLE_EQ(n.matmul_flops, 0);
      EXPECT_DOUBLE_EQ(n.flops, T * 128 * 8 * 7 + T * 128 * 12);
    }
    // Note [Pure state-space blocks]: norm_f norms the float32 stream into float32, and lm_head
    // reads it cast to bfloat16.
    if (n.op == "rms_norm" && n.module == "backbone.norm_f") {
      EXPECT_EQ(g.tensor(n.outputs[0]).dtype, DType::kFloat32);
    }
    if (n.op == "linear" && n.module == "lm_head") {
      EXPECT_EQ(g.tensor(n.inputs[0]).dtype, DType::kBFloat16);
    }
  }
  EXPECT_EQ(scans, 1);
}

// Batch 2 of 64 tokens: one layer's products by hand, 2 x 128 tokens x (64 x 256 + 128 x 20 +
// 4 x 128 + 128 x 64) forward, each with both operands requiring grad (backward twice that); the
// scan's backward 16 per state and 2 x 12 per channel; the stream between blocks float32.
TEST(Mamba1Models, TrainingStepOfTheTinyModel) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  TraceOptions o;
  o.batch = 2;
  o.seq = 64;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  double forward = 0, backward = 0, residual_bytes = 0;
  int scans = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
    if (op.op == "add") residual_bytes += static_cast<double>(op.bytes_written);
    if (op.op != "selective_scan_fn") continue;
    ++scans;
    const double rows = 128.0 * 128;  // tokens x channels
    EXPECT_DOUBLE_EQ(op.flops, rows * (8 * 7 + 12));
    EXPECT_DOUBLE_EQ(op.backward_flops, rows * (8 * 16 + 24));
    EXPECT_DOUBLE_EQ(op.recompute_flops, rows * 8 * 5);
  }
  EXPECT_EQ(scans, 1);
  const double layer = 2.0 * 128 * (64 * 256 + 128 * 20 + 4 * 128 + 128 * 64);
  EXPECT_DOUBLE_EQ(layer, 7'077'888);
  EXPECT_DOUBLE_EQ(forward, layer);
  EXPECT_DOUBLE_EQ(backward, 2 * layer);
  EXPECT_DOUBLE_EQ(residual_bytes, 128 * 64 * 4);  // the block's one add, float32
}

}  // namespace
}  // namespace shardplan::tensor
