// falcon (Falcon-7B, -40B, -180B, Falcon2-11B, Falcon-RW) against hand formulas written here from
// transformers 5's configuration_falcon.py and modeling_falcon.py, and the published sizes. h
// hidden, V vocabulary, H heads of d = h / H, kv key-value heads, F ffn_hidden_size (4 h unless
// given), every FalconLinear with a bias only with `bias`:
//   self_attention  query_key_value [W, h]: W = (H + 2 kv) d with new_decoder_architecture,
//                   (H + 2) d with multi_query, 3 h otherwise; dense [h, h]
//   mlp             dense_h_to_4h [F, h], dense_4h_to_h [h, F]
//   norms           after the MLP: post_attention_layernorm and input_layernorm (parallel_attn
//                   false), ln_attn and ln_mlp (num_ln_in_parallel_attn 2, the new decoder's
//                   default), else input_layernorm; each nn.LayerNorm [h] + [h]
//   model           word_embeddings [V, h], ln_f [h] + [h], lm_head [V, h] tied by default
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
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;
using Shapes = test::Shapes;

// The parameters of everything outside the layers, in named_parameters order.
Names outside_layers(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) out.push_back(p.name);
  }
  return out;
}

const Names kTwoNormLayer = {"self_attention.query_key_value.weight",
                             "self_attention.dense.weight",
                             "mlp.dense_h_to_4h.weight",
                             "mlp.dense_4h_to_h.weight",
                             "ln_attn.weight",
                             "ln_attn.bias",
                             "ln_mlp.weight",
                             "ln_mlp.bias"};
const Names kTiedTop = {"transformer.word_embeddings.weight", "transformer.ln_f.weight",
                        "transformer.ln_f.bias"};

TEST(FalconModels, Falcon180BMatchesTheHandTotal) {
  // Falcon-180B: V 65,024 tied, h 14,848, 80 layers of 232 heads of 64 in 8 key-value groups,
  // F 4 h = 59,392, no biases, new decoder with ln_attn and ln_mlp.
  const int64_t V = 65024, h = 14848, d = 64, H = 232, kv = 8, F = 4 * h;
  const int64_t W = (H + 2 * kv) * d;
  EXPECT_EQ(W, 15872);
  const int64_t layer = h * W + h * h + 2 * h * F + 2 * 2 * h;
  EXPECT_EQ(layer, 2'219'894'784);
  const int64_t total = V * h + 80 * layer + 2 * h;
  EXPECT_EQ(total, 178'557'088'768);
  // The published "179.5B" counts lm_head.weight [V, h] beside the embedding it is tied to, as
  // the checkpoint stores both: 178,557,088,768 + 965,476,352.
  EXPECT_EQ(total + V * h, 179'522'565'120);
  const ModelConfig c = find_model_config("falcon-180b");
  EXPECT_TRUE(c.new_decoder_architecture);
  EXPECT_EQ(c.num_ln_in_parallel_attn, 2);
  EXPECT_EQ(c.num_key_value_heads, 8);  // multi_query true in the file: the new decoder ignores it
  EXPECT_TRUE(c.use_parallel_residual);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "FalconForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "transformer.h.0."), kTwoNormLayer);
  EXPECT_EQ(outside_layers(*m), kTiedTop);
  EXPECT_EQ(m->get_parameter("transformer.h.79.self_attention.query_key_value.weight").sizes(),
            (DimVector{W, h}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").sizes(), (DimVector{V, h}));
  EXPECT_EQ(m->get_submodule("transformer.h.0").type_name(), "FalconDecoderLayer");
  EXPECT_EQ(m->get_submodule("transformer.h.0.self_attention").type_name(), "FalconAttention");
  EXPECT_EQ(m->get_submodule("transformer.h.0.mlp").type_name(), "FalconMLP");
  EXPECT_EQ(m->get_buffer("transformer.rotary_emb.inv_freq").sizes(), DimVector({32}));
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_TRUE(stack.kinds[0].rope);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(FalconModels, Falcon40BAndSevenBMatchTheHandTotals) {
  // Falcon-40B: h 8,192, 60 layers of 128 heads of 64 in 8 groups, F 32,768: W = 9,216.
  {
    const int64_t V = 65024, h = 8192, W = (128 + 16) * 64, F = 4 * h;
    const int64_t layer = h * W + h * h + 2 * h * F + 4 * h;
    const int64_t total = V * h + 60 * layer + 2 * h;
    EXPECT_EQ(total, 41'303'293'952);
    EXPECT_EQ(total + V * h, 41'835'970'560);  // the published "41.8B" with lm_head stored
    const ModelConfig c = find_model_config("falcon-40b");
    const ModulePtr m = build_model(c);
    EXPECT_EQ(m->parameters_numel(), total);
    EXPECT_EQ(names_under(*m, "transformer.h.0."), kTwoNormLayer);
    EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  }
  // Falcon-7B: h 4,544, 32 layers of 71 heads of 64, multi_query (one k and v head), one
  // input_layernorm: W = (71 + 2) x 64 = 4,672, F 18,176.
  const int64_t V = 65024, h = 4544, W = 73 * 64, F = 4 * h;
  const int64_t layer = h * W + h * h + 2 * h * F + 2 * h;
  const int64_t total = V * h + 32 * layer + 2 * h;
  EXPECT_EQ(total, 6'921'720'704);          // "7B" (6.92 B)
  EXPECT_EQ(total + V * h, 7'217'189'760);  // with lm_head stored beside the embedding
  const ModelConfig c = find_model_config("falcon-7b");
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_FALSE(c.new_decoder_architecture);
  EXPECT_EQ(c.num_ln_in_parallel_attn, 1);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(shapes_under(*m, "transformer.h.31."),
            (Shapes{{"self_attention.query_key_value.weight", {W, h}},
                    {"self_attention.dense.weight", {h, h}},
                    {"mlp.dense_h_to_4h.weight", {F, h}},
                    {"mlp.dense_4h_to_h.weight", {h, F}},
                    {"input_layernorm.weight", {h}},
                    {"input_layernorm.bias", {h}}}));
  EXPECT_EQ(outside_layers(*m), kTiedTop);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// 8 heads of 8 over h 64, 2 layers, V 128; F 256 by default.
nlohmann::json tiny() {
  return {{"model_type", "falcon"}, {"vocab_size", 128},        {"hidden_size", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"new_decoder_architecture", true},
          {"num_kv_heads", 2},      {"torch_dtype", "bfloat16"}};
}

TEST(FalconModels, EveryLayoutOfTheTinyConfigByHand) {
  // New decoder, 2 groups: W = (8 + 4) x 8 = 96. A layer: qkv 6,144, dense 4,096, MLP 2 x 64 x
  // 256 = 32,768, ln_attn and ln_mlp 256: 43,264. Model: embedding 8,192 (lm_head tied), two
  // layers 86,528, ln_f 128: 94,848.
  const ModelConfig nd = parse_model_config(tiny(), "tiny");
  const ModulePtr m = build_model(nd);
  EXPECT_EQ(m->parameters_numel(), 94'848);
  EXPECT_EQ(names_under(*m, "transformer.h.1."), kTwoNormLayer);
  EXPECT_EQ(outside_layers(*m), kTiedTop);
  EXPECT_EQ(m->get_parameter("lm_head.weight").sizes(), (DimVector{128, 64}));
  EXPECT_EQ(m->get_parameter("transformer.h.0.self_attention.query_key_value.weight").sizes(),
            (DimVector{96, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(nd), "round trip"), nd);

  // Falcon2-11B's layer: the new decoder on one input_layernorm (num_ln_in_parallel_attn 1):
  // 128 fewer a layer, 94,592.
  nlohmann::json j = tiny();
  j["num_ln_in_parallel_attn"] = 1;
  const ModelConfig one = parse_model_config(j, "one norm");
  const ModulePtr m1 = build_model(one);
  EXPECT_EQ(m1->parameters_numel(), 94'592);
  EXPECT_EQ(names_under(*m1, "transformer.h.0.input_layernorm."), (Names{"weight", "bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(one), "round trip"), one);

  // FalconConfig's defaults for the switches: multi_query and parallel_attn, no new decoder:
  // W = (8 + 2) x 8 = 80, qkv 5,120; a layer 5,120 + 4,096 + 32,768 + 128 = 42,112; 92,544. The
  // file's num_kv_heads is ignored (one k and v head).
  j = tiny();
  j.erase("new_decoder_architecture");
  const ModelConfig mq = parse_model_config(j, "multi query");
  EXPECT_EQ(mq.num_key_value_heads, 1);
  const ModulePtr mm = build_model(mq);
  EXPECT_EQ(mm->parameters_numel(), 92'544);
  EXPECT_EQ(mm->get_parameter("transformer.h.0.self_attention.query_key_value.weight").sizes(),
            (DimVector{80, 64}));
  EXPECT_EQ(parse_model_config(to_hf_json(mq), "round trip"), mq);

  // Falcon-RW's layer: per-head q/k/v (multi_query false), sequential (parallel_attn false),
  // biases, ALiBi, untied, F 96. qkv 64 x 192 + 192 = 12,480, dense 4,160, MLP 6,240 + 6,208 =
  // 12,448, two LayerNorms 256: 29,344 a layer; 8,192 + 58,688 + 128 + lm_head 8,192 = 75,200.
  j = tiny();
  j.erase("new_decoder_architecture");
  j.erase("num_kv_heads");
  j["multi_query"] = false;
  j["parallel_attn"] = false;
  j["bias"] = true;
  j["alibi"] = true;
  j["ffn_hidden_size"] = 96;
  j["tie_word_embeddings"] = false;
  const ModelConfig rw = parse_model_config(j, "rw");
  EXPECT_EQ(rw.num_key_value_heads, 8);
  EXPECT_EQ(rw.nope_layers, (std::vector<int64_t>{0, 1}));
  const ModulePtr mr = build_model(rw);
  EXPECT_EQ(mr->parameters_numel(), 75'200);
  EXPECT_EQ(
      names_under(*mr, "transformer.h.0."),
      (Names{"self_attention.query_key_value.weight", "self_attention.query_key_value.bias",
             "self_attention.dense.weight", "self_attention.dense.bias", "mlp.dense_h_to_4h.weight",
             "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias",
             "post_attention_layernorm.weight", "post_attention_layernorm.bias",
             "input_layernorm.weight", "input_layernorm.bias"}));
  EXPECT_EQ(outside_layers(*mr),
            (Names{"transformer.word_embeddings.weight", "transformer.ln_f.weight",
                   "transformer.ln_f.bias", "lm_head.weight"}));
  // ALiBi layers rotate nothing: the layer kind says so.
  const LayerStack stack = layer_stack(rw);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_FALSE(stack.kinds[0].rope);
  EXPECT_EQ(parse_model_config(to_hf_json(rw), "round trip"), rw);
}

TEST(FalconModels, EachLayoutSplitsTheFusedProjectionAsTransformersDoes) {
  const double B = 2, s = 16, T = B * s, h = 64, H = 8, d = 8, F = 256;
  const std::string a = "transformer.h.0.self_attention";
  auto matmul_of = [](const OpGraph& g, const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  // New decoder: every head attends (k and v copied out to the 4 queries of their group), so the
  // core is 2 products x 2 B H s^2 d; the projections 2 T h (96 + 64); the MLP 2 T 2 h F.
  const OpGraph g = trace_model_forward(*build_model(parse_model_config(tiny(), "tiny")), 2, 16);
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".query_key_value"), 2 * T * h * 96);
  EXPECT_DOUBLE_EQ(matmul_of(g, a), 2 * T * h * (96 + 64) + 2 * 2 * B * H * s * s * d);
  EXPECT_DOUBLE_EQ(matmul_of(g, "transformer.h.0.mlp"), 2 * T * 2 * h * F);
  // qkv[:, :, :, [-2]] and [[-1]] are copies; the queries, keys and values flatten to every head
  // by copies (reshape), and the output merges by one more.
  EXPECT_EQ(ops_in(g, "contiguous", a), 2);
  EXPECT_EQ(ops_in(g, "reshape", a), 4);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.h.0.ln_attn"), 1);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.h.0.ln_mlp"), 1);
  // Multi-query: one k and v head copied out of the projection and handed to SDPA as is.
  nlohmann::json j = tiny();
  j.erase("new_decoder_architecture");
  const OpGraph gq = trace_model_forward(*build_model(parse_model_config(j, "mq")), 2, 16);
  EXPECT_EQ(ops_in(gq, "contiguous", a), 2);
  EXPECT_EQ(ops_in(gq, "reshape", a), 1);
  int sdpa = 0;
  for (const OpNode& n : gq.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    ++sdpa;
    EXPECT_EQ(gq.tensor(n.inputs[0]).sizes, (DimVector{2, 8, 16, 8}));  // q: every head
    EXPECT_EQ(gq.tensor(n.inputs[1]).sizes, (DimVector{2, 1, 16, 8}));  // k: the one head
  }
  EXPECT_EQ(sdpa, 2);
  EXPECT_DOUBLE_EQ(matmul_of(gq, a), 2 * T * h * (80 + 64) + 2 * 2 * B * H * s * s * d);
  // Per head (Falcon-RW): three views, no copy before the output's merge; ALiBi leaves q and k
  // unrotated (no rotate_half cat), and the sequential layer norms the residual again.
  j.erase("num_kv_heads");
  j["multi_query"] = false;
  j["parallel_attn"] = false;
  j["alibi"] = true;
  const OpGraph gr = trace_model_forward(*build_model(parse_model_config(j, "rw")), 2, 16);
  EXPECT_EQ(ops_in(gr, "contiguous", a), 0);
  EXPECT_EQ(ops_in(gr, "reshape", a), 1);
  EXPECT_EQ(ops_in(gr, "cat", a), 0);
  EXPECT_EQ(ops_in(g, "cat", a), 2);  // the rotary layouts rotate q and k
  EXPECT_EQ(ops_in(gr, "layer_norm", "transformer.h.0.post_attention_layernorm"), 1);
  EXPECT_DOUBLE_EQ(matmul_of(gr, a), 2 * T * h * (192 + 64) + 2 * 2 * B * H * s * s * d);
}

TEST(FalconModels, TrainingTraceCountsEachLinearThreeTimes) {
  // A training step of the new decoder: each FalconLinear's product forward, and its input and
  // weight gradients backward (twice the forward FLOPs).
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "linear" || op.call < 0) continue;
    if (!st.calls[static_cast<size_t>(op.call)].fqn.starts_with("transformer.h.1.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // 2 T h (96 + 64 + 2 x 256), T = 32.
  EXPECT_DOUBLE_EQ(forward, 2.0 * 32 * 64 * (96 + 64 + 2 * 256));
  EXPECT_DOUBLE_EQ(backward, 2 * forward);
  // Without dropout probabilities nothing drops out; with hidden_dropout the parallel layer drops
  // out its summed branches once, and the sequential one its attention at attention_dropout too.
  int64_t dropouts = 0;
  for (const TrainingOp& op : st.ops) dropouts += op.op == "dropout";
  EXPECT_EQ(dropouts, 0);
  nlohmann::json j = tiny();
  j["hidden_dropout"] = 0.1;
  const OpGraph g = trace_model_forward(
      *build_model(parse_model_config(j, "dropout"), {.dtype = std::nullopt, .training = true}), 1,
      8);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.h.0"), 1);
  j.erase("new_decoder_architecture");
  j["parallel_attn"] = false;
  j["attention_dropout"] = 0.1;
  const OpGraph gs = trace_model_forward(
      *build_model(parse_model_config(j, "sequential"), {.dtype = std::nullopt, .training = true}),
      1, 8);
  EXPECT_EQ(ops_in(gs, "dropout", "transformer.h.0"), 2);
}

TEST(FalconModels, ConfigsTransformersCannotRunAreRefused) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); }, ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["parallel_attn"] = false;
  refused(j, "field 'parallel_attn': false with new_decoder_architecture");
  j = tiny();
  j.erase("new_decoder_architecture");
  j["num_ln_in_parallel_attn"] = 2;
  refused(j, "field 'num_ln_in_parallel_attn': 2 without new_decoder_architecture");
  j["num_ln_in_parallel_attn"] = 3;
  refused(j, "field 'num_ln_in_parallel_attn': 3, expected 1");
  j = tiny();
  j.erase("new_decoder_architecture");
  j["multi_query"] = false;  // num_kv_heads 2 of 8 heads, per-head layout
  refused(j, "field 'num_kv_heads': 2 without new_decoder_architecture or multi_query");
  j = tiny();
  j["num_kv_heads"] = 3;  // the new decoder's groups must divide the heads (validate)
  refused(j, "field 'num_kv_heads' (num_key_value_heads): 3 does not divide");
  j = tiny();
  j["hidden_size"] = 60;
  refused(j, "field 'num_attention_heads': 8 does not divide hidden_size 60");
  j = tiny();
  j["apply_residual_connection_post_layernorm"] = true;
  refused(j, "field 'apply_residual_connection_post_layernorm': true: transformers' Falcon");
  j = tiny();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  j["partial_rotary_factor"] = 0.5;
  refused(j, "field 'partial_rotary_factor': partial_rotary_factor 0.5 with rope type 'linear'");
  j = tiny();
  j["activation"] = "not_an_activation";
  refused(j, "field 'activation': 'not_an_activation' is not supported");
  j = tiny();
  j.erase("hidden_size");
  refused(j, "field 'hidden_size': missing");
  // FalconConfig's own defaults and aliases: n_embed for hidden_size, ffn_hidden_size 4 h, the
  // default RoPE ignoring a partial_rotary_factor, null num_kv_heads meaning every head.
  j = tiny();
  j.erase("hidden_size");
  j["n_embed"] = 64;
  j["partial_rotary_factor"] = 0.5;
  j["num_kv_heads"] = nullptr;
  const ModelConfig c = parse_model_config(j, "aliases");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  // transformers 5's rope_parameters over the legacy keys.
  j = tiny();
  j["rope_theta"] = 5000.0;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500042.0}};
  EXPECT_DOUBLE_EQ(parse_model_config(j, "rope").rope_theta, 500042.0);
}

TEST(FalconModels, ALayoutSetByHandThatTransformersCannotRunIsNotBuilt) {
  ModelConfig c = parse_model_config(tiny(), "tiny");
  c.use_parallel_residual = false;  // a new decoder without parallel_attn
  EXPECT_THAT([&] { build_model(c); }, ThrowsMessage<Error>(HasSubstr("new_decoder_architecture")));
  c = parse_model_config(tiny(), "tiny");
  c.new_decoder_architecture = false;  // 2 key-value heads of 8 in the per-head layout
  EXPECT_THAT([&] { build_model(c); },
              ThrowsMessage<Error>(HasSubstr("2 key-value heads of 8 without")));
  c = parse_model_config(tiny(), "tiny");
  c.nope_layers = {1};  // ALiBi on some layers only
  EXPECT_THAT([&] { build_model(c); }, ThrowsMessage<Error>(HasSubstr("nope_layers lists 1 of 2")));
}

}  // namespace
}  // namespace shardplan::tensor
