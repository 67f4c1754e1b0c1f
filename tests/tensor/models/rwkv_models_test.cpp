// rwkv (RWKV-4) against hand formulas written here from transformers 5's modeling_rwkv.py and the
// published sizes. h hidden, A attention_hidden_size, F intermediate_size, V vocabulary, L layers:
//   every block   ln1, ln2 [h] + [h]                                          4 h
//   attention     time_decay, time_first [A], time_mix_{key,value,receptance} [1, 1, h],
//                 key, value, receptance [A, h], output [h, A]                2 A + 3 h + 4 A h
//   feed_forward  time_mix_{key,receptance} [1, 1, h], key [F, h],
//                 receptance [h, h], value [h, F]                             2 h + 2 F h + h^2
//   model         embeddings [V, h], blocks.0.pre_ln and ln_out [h] + [h], head [V, h] (untied)
// Note [WKV work] (tensor/ops.h) for the recurrence's FLOPs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
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
using test::ops_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

int64_t block_params(int64_t h, int64_t A, int64_t F) {
  return 4 * h + (2 * A + 3 * h + 4 * A * h) + (2 * h + 2 * F * h + h * h);
}

// Untied: the embeddings and head each V h; pre_ln and ln_out 2 h each.
int64_t model_params(int64_t V, int64_t h, int64_t L, int64_t A, int64_t F) {
  return 2 * V * h + 4 * h + L * block_params(h, A, F);
}

// Two blocks: h 64, A 96 (not h, as attention_hidden_size allows), F 160 (not 4 h), V 1,000.
nlohmann::json tiny() {
  return {{"model_type", "rwkv"},        {"vocab_size", 1000},         {"hidden_size", 64},
          {"attention_hidden_size", 96}, {"intermediate_size", 160},   {"num_hidden_layers", 2},
          {"context_length", 128},       {"layer_norm_epsilon", 1e-5}, {"torch_dtype", "bfloat16"}};
}

TEST(RwkvModels, FourteenBMatchesThePublished14B) {
  // RWKV/rwkv-4-14b-pile (BlinkDL's RWKV-4-Pile-14B, "L40-D5120"): V 50,277, h = A 5,120,
  // F 4 h = 20,480, 40 blocks, untied; the model card's "14B".
  const int64_t V = 50277, h = 5120, F = 20480;
  EXPECT_EQ(block_params(h, h, F), 340'843'520);
  const int64_t total = model_params(V, h, 40, h, F);
  EXPECT_EQ(total, 14'148'597'760);
  const ModelConfig c = find_model_config("rwkv-4-14b-pile");
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);  // as published (the converter's float32 save)
  EXPECT_EQ(c.max_position_embeddings, 1024);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "RwkvForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(s.count(0), 40);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The channel-mixing MLP counts as the MLP, the time mixing as the token mixer.
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("mlp"), 40 * (2 * h + 2 * F * h + h * h));
  EXPECT_EQ(kinds.at("attention"), 40 * (2 * h + 3 * h + 4 * h * h));
  EXPECT_EQ(kinds.at("norm"), 40 * 4 * h + 2 * h + 2 * h);  // every ln1 and ln2, pre_ln, ln_out
  EXPECT_EQ(kinds.at("embedding"), V * h);
  EXPECT_EQ(kinds.at("lm_head"), V * h);
}

TEST(RwkvModels, SmallerPileModelsMatchTheirPublishedSizes) {
  // The other RWKV/rwkv-4-*-pile checkpoints (transformers' convert_rwkv_checkpoint_to_hf.py:
  // layers and width per size; A = h, F = 4 h, V 50,277).
  struct Size {
    const char* name;
    int64_t h, layers, total;
  };
  const Size sizes[] = {{"169M", 768, 12, 169'342'464},
                        {"430M", 1024, 24, 430'397'440},
                        {"1B5", 2048, 24, 1'515'106'304},
                        {"3B", 2560, 32, 2'984'627'200},
                        {"7B", 4096, 32, 7'392'649'216}};
  for (const Size& s : sizes) {
    EXPECT_EQ(model_params(50277, s.h, s.layers, s.h, 4 * s.h), s.total) << s.name;
    nlohmann::json j = to_hf_json(find_model_config("rwkv-4-14b-pile"));
    j["hidden_size"] = s.h;
    j["num_hidden_layers"] = s.layers;
    j.erase("attention_hidden_size");  // null or absent: hidden_size
    j.erase("intermediate_size");      // null or absent: 4 x hidden_size
    EXPECT_EQ(build_model(parse_model_config(j, s.name))->parameters_numel(), s.total) << s.name;
  }
}

TEST(RwkvModels, NamesOrderAndShapesAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  const Names block = {"ln1.weight",
                       "ln1.bias",
                       "ln2.weight",
                       "ln2.bias",
                       "attention.time_decay",
                       "attention.time_first",
                       "attention.time_mix_key",
                       "attention.time_mix_value",
                       "attention.time_mix_receptance",
                       "attention.key.weight",
                       "attention.value.weight",
                       "attention.receptance.weight",
                       "attention.output.weight",
                       "feed_forward.time_mix_key",
                       "feed_forward.time_mix_receptance",
                       "feed_forward.key.weight",
                       "feed_forward.receptance.weight",
                       "feed_forward.value.weight"};
  Names first = {"pre_ln.weight", "pre_ln.bias"};  // block 0 alone normalizes the embeddings
  first.insert(first.end(), block.begin(), block.end());
  EXPECT_EQ(names_under(*m, "rwkv.blocks.0."), first);
  EXPECT_EQ(names_under(*m, "rwkv.blocks.1."), block);
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("rwkv.blocks.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"rwkv.embeddings.weight", "rwkv.ln_out.weight", "rwkv.ln_out.bias",
                        "head.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  const std::string att = "rwkv.blocks.1.attention.", ffn = "rwkv.blocks.1.feed_forward.";
  EXPECT_EQ(shape("rwkv.embeddings.weight"), (DimVector{1000, 64}));
  EXPECT_EQ(shape("rwkv.blocks.0.pre_ln.bias"), (DimVector{64}));
  EXPECT_EQ(shape(att + "time_decay"), (DimVector{96}));
  EXPECT_EQ(shape(att + "time_first"), (DimVector{96}));
  EXPECT_EQ(shape(att + "time_mix_value"), (DimVector{1, 1, 64}));
  EXPECT_EQ(shape(att + "key.weight"), (DimVector{96, 64}));
  EXPECT_EQ(shape(att + "receptance.weight"), (DimVector{96, 64}));
  EXPECT_EQ(shape(att + "output.weight"), (DimVector{64, 96}));
  EXPECT_EQ(shape(ffn + "time_mix_receptance"), (DimVector{1, 1, 64}));
  EXPECT_EQ(shape(ffn + "key.weight"), (DimVector{160, 64}));
  EXPECT_EQ(shape(ffn + "receptance.weight"), (DimVector{64, 64}));
  EXPECT_EQ(shape(ffn + "value.weight"), (DimVector{64, 160}));
  EXPECT_EQ(shape("head.weight"), (DimVector{1000, 64}));
  EXPECT_EQ(m->get_parameter(att + "time_decay").dtype(), DType::kBFloat16);  // kept as loaded
  EXPECT_EQ(m->get_submodule("rwkv").type_name(), "RwkvModel");
  EXPECT_EQ(m->get_submodule("rwkv.blocks.0").type_name(), "RwkvBlock");
  EXPECT_EQ(m->get_submodule("rwkv.blocks.0.attention").type_name(), "RwkvSelfAttention");
  EXPECT_EQ(m->get_submodule("rwkv.blocks.0.feed_forward").type_name(), "RwkvFeedForward");
  EXPECT_EQ(m->get_submodule("rwkv.blocks.0.attention.time_shift").type_name(), "ZeroPad2d");
  EXPECT_EQ(m->get_submodule("rwkv.blocks.0.feed_forward.time_shift").type_name(), "ZeroPad2d");
  EXPECT_EQ(m->get_submodule("rwkv.ln_out").type_name(), "LayerNorm");
  EXPECT_TRUE(m->named_buffers().empty());
  EXPECT_EQ(block_kind(*m, att + "time_decay"), "attention");
  EXPECT_EQ(block_kind(*m, att + "output.weight"), "attention");
  EXPECT_EQ(block_kind(*m, ffn + "receptance.weight"), "mlp");
  EXPECT_EQ(block_kind(*m, "rwkv.blocks.1.ln2.weight"), "norm");
  // By hand: two blocks, pre_ln, ln_out, the embeddings and head.
  EXPECT_EQ(block_params(64, 96, 160), 49'920);
  const int64_t total = model_params(1000, 64, 2, 96, 160);
  EXPECT_EQ(total, 228'096);
  EXPECT_EQ(m->parameters_numel(), total);
  // tie_word_embeddings: head is the embeddings' weight, listed once under its first name.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  const ModulePtr tied = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(tied->parameters_numel(), total - 1000 * 64);
  EXPECT_EQ(names_under(*tied, "head."), Names{});
}

TEST(RwkvModels, ConfigDefaultsAndRoundTrip) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  // Note [RWKV in ModelConfig]: A channels as heads of width 1, every block linear, relu2.
  EXPECT_EQ(c.num_attention_heads, 96);
  EXPECT_EQ(c.num_key_value_heads, 96);
  EXPECT_EQ(c.head_dim, 1);
  EXPECT_EQ(c.linear_num_key_heads, 96);
  EXPECT_EQ(c.linear_num_value_heads, 96);
  EXPECT_EQ(c.linear_key_head_dim, 1);
  EXPECT_EQ(c.linear_value_head_dim, 1);
  EXPECT_EQ(c.linear_conv_kernel_dim, 2);  // the time shift: this token and the one before
  EXPECT_EQ(c.intermediate_size, 160);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_EQ(c.hidden_act, "relu2");
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(2, AttentionType::kLinear));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(to_hf_json(c).at("attention_hidden_size"), 96);
  EXPECT_EQ(to_hf_json(c).at("context_length"), 128);
  // The planner's cuts round-trip.
  const ModelConfig one = first_layers(c, 1);
  EXPECT_EQ(parse_model_config(to_hf_json(one), "cut"), one);
  // RwkvConfig's defaults: vocabulary 50,277, h 4,096, 32 layers, A = h, F = 4 h, 1,024 tokens,
  // eps 1e-5, untied, float32 (no torch_dtype).
  c = parse_model_config({{"model_type", "rwkv"}}, "defaults.json");
  EXPECT_EQ(c.vocab_size, 50277);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 4096);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // Null sizes are the same defaults; max_position_embeddings is context_length's attribute_map
  // name; rescale_every and use_cache are read without effect on the model.
  nlohmann::json j = tiny();
  j["attention_hidden_size"] = nullptr;
  j["intermediate_size"] = nullptr;
  j.erase("context_length");
  j["max_position_embeddings"] = 256;
  j["rescale_every"] = 0;
  j["use_cache"] = false;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  j["context_length"] = 256;  // both keys, one length
  EXPECT_EQ(parse_model_config(j, "tiny.json"), c);
  // A float16 model keeps time_decay and time_first in float32 (_keep_in_fp32_modules).
  const ModulePtr half = build_model(c, {.dtype = DType::kFloat16});
  const std::string att = "rwkv.blocks.0.attention.";
  EXPECT_EQ(half->get_parameter(att + "time_decay").dtype(), DType::kFloat32);
  EXPECT_EQ(half->get_parameter(att + "time_first").dtype(), DType::kFloat32);
  EXPECT_EQ(half->get_parameter(att + "time_mix_key").dtype(), DType::kFloat16);
  EXPECT_EQ(half->get_parameter(att + "key.weight").dtype(), DType::kFloat16);
}

TEST(RwkvModels, RefusesWhatItCannotBuild) {
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
  refused(with("max_position_embeddings", 512),
          "tiny.json: field 'max_position_embeddings': 512 beside context_length 128: RwkvConfig "
          "maps one onto the other; expected one length");
  refused(with("context_length", 0),
          "field 'context_length' (max_position_embeddings): must be a positive integer, got 0");
  refused(with("attention_hidden_size", 0),
          "field 'attention_hidden_size' (num_attention_heads): must be a positive integer, got 0");
  refused(with("attention_hidden_size", 70000),
          "field 'attention_hidden_size' (linear_num_key_heads): 70000 is beyond what shardplan "
          "builds (at most 65536)");
  refused(with("intermediate_size", 0), "field 'intermediate_size': must be a positive integer");
  refused(with("num_hidden_layers", 0), "field 'num_hidden_layers': 0 layers, expected 1..");
  refused(with("layer_norm_epsilon", 0.0),
          "field 'layer_norm_epsilon' (norm_eps): must be positive, got 0");
  refused(with("rescale_every", "6"), "field 'rescale_every': expected an integer, got \"6\"");
  nlohmann::json wide = with("hidden_size", int64_t{1} << 62);
  wide.erase("intermediate_size");
  refused(wide,
          "field 'hidden_size': 4611686018427387904: 4 x hidden_size (the default "
          "intermediate_size) overflows int64");
  // Configs built in code that RWKV does not build.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.layer_types[1] = AttentionType::kFull;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("rwkv: a layer attends full_attention; every RWKV "
                                             "block mixes tokens by its recurrence")));
  c = parse_model_config(tiny(), "tiny.json");
  c.head_dim = 8;
  EXPECT_THAT([&] { (void)to_hf_json(c); },
              ThrowsMessage<Error>(HasSubstr("rwkv: the 96 channels of attention_hidden_size are "
                                             "written as heads of width 1")));
  c = parse_model_config(tiny(), "tiny.json");
  c.hidden_act = "gelu";
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("rwkv: hidden_act 'gelu'; RwkvFeedForward squares a "
                                             "ReLU (relu2)")));
  c = parse_model_config(tiny(), "tiny.json");
  c.mlp_bias = true;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("rwkv: a bias on a projection")));
}

TEST(RwkvModels, ForwardTracesTheProjectionsAndOneWkvPerBlock) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const double T = 32, h = 64, A = 96, F = 160, V = 1000;
  const OpGraph g = trace_model_forward(*m, 1, 32);
  // Time mixing: key, value, receptance [A, h] and output [h, A]; channel mixing: key [F, h],
  // receptance [h, h], value [h, F]. No attention scores.
  const double block = 2 * T * (4 * A * h) + 2 * T * (2 * F * h + h * h);
  EXPECT_DOUBLE_EQ(block, 3'145'728);
  EXPECT_DOUBLE_EQ(g.module_totals().at("rwkv.blocks.0").matmul_flops, block);
  EXPECT_DOUBLE_EQ(g.module_totals().at("rwkv.blocks.1").matmul_flops, block);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, 2 * block + 2 * T * h * V);
  const std::string att = "rwkv.blocks.0.attention";
  EXPECT_EQ(ops_in(g, "wkv", att), 1);
  EXPECT_EQ(ops_under(g, "wkv", "rwkv."), 2);
  EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", ""), 0);
  // The time shift is one copy in each half; pre_ln only in block 0.
  EXPECT_EQ(ops_in(g, "cat", att + ".time_shift"), 1);
  EXPECT_EQ(ops_in(g, "cat", "rwkv.blocks.0.feed_forward.time_shift"), 1);
  EXPECT_EQ(ops_under(g, "layer_norm", "rwkv.blocks.0."), 3);
  EXPECT_EQ(ops_under(g, "layer_norm", "rwkv.blocks.1."), 2);
  // The squared ReLU and the two receptance gates.
  EXPECT_EQ(ops_in(g, "relu", "rwkv.blocks.0.feed_forward"), 1);
  EXPECT_EQ(ops_in(g, "square", "rwkv.blocks.0.feed_forward"), 1);
  EXPECT_EQ(ops_in(g, "sigmoid", att), 1);
  EXPECT_EQ(ops_in(g, "sigmoid", "rwkv.blocks.0.feed_forward"), 1);
  for (const OpNode& n : g.nodes()) {
    if (n.op != "wkv") continue;
    EXPECT_DOUBLE_EQ(n.flops, 23 * T * A);  // Note [WKV work]: 23 per token and channel
    EXPECT_DOUBLE_EQ(n.matmul_flops, 0);
  }
  // A float16 model runs the float32 kernel: key, value and time_first cast up, the output back.
  const ModulePtr half =
      build_model(parse_model_config(tiny(), "tiny.json"), {.dtype = DType::kFloat16});
  const OpGraph gh = trace_model_forward(*half, 1, 32);
  EXPECT_EQ(ops_in(gh, "to", att), 3);  // key, value up; the output down (time_first is float32)
  EXPECT_EQ(ops_in(g, "to", att), 1);   // bfloat16: time_decay.float() only
}

TEST(RwkvModels, TrainingKeepsTheKernelsInputsAndOutput) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  const int64_t elements = 2 * 64 * 96;   // [B, T, A]
  const int64_t kv_bytes = elements * 2;  // bfloat16
  int scans = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "wkv") continue;
    ++scans;
    EXPECT_TRUE(op.rule_known);
    std::vector<std::string_view> whats;
    for (const SavedTensor& s : op.saved) whats.push_back(s.what);
    // w (-exp(time_decay), float32), u (time_first, a parameter), k, v and the output.
    EXPECT_EQ(whats,
              (std::vector<std::string_view>{"input", "weight", "input", "input", "output"}));
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[0].buffer)].bytes, 96 * 4);
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[4].buffer)].bytes, kv_bytes);
    // Note [WKV work]: 23 forward and 60 backward per element, no products.
    EXPECT_DOUBLE_EQ(op.flops, 23.0 * elements);
    EXPECT_DOUBLE_EQ(op.backward_flops, 60.0 * elements);
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 0);
    // Backward reads the output's gradient and the five saved tensors (w 384 bytes, u 192) and
    // writes the four inputs' gradients, plus 8 bytes of q and r scratch per element each way.
    const int64_t scratch = 8 * elements;
    EXPECT_EQ(op.backward_bytes_read, kv_bytes + (384 + 192 + 3 * kv_bytes) + scratch);
    EXPECT_EQ(op.backward_bytes_written, (384 + 192 + 2 * kv_bytes) + scratch);
  }
  EXPECT_EQ(scans, 1);
}

TEST(RwkvModels, WkvOpChecksItsOperands) {
  const Tensor k = empty({2, 10, 64}, {.dtype = DType::kBFloat16});
  const Tensor w = empty({64}, {.dtype = DType::kFloat32});
  const Tensor u = empty({64}, {.dtype = DType::kBFloat16});
  EXPECT_EQ(wkv(w, u, k, k).sizes(), (DimVector{2, 10, 64}));
  EXPECT_EQ(wkv(w, u, k, k).dtype(), DType::kBFloat16);
  EXPECT_THAT([&] { (void)wkv(u, u, k, k); },
              ThrowsMessage<Error>(HasSubstr("wkv: expected the decay w as float32 [64]")));
  EXPECT_THAT([&] { (void)wkv(w, w, k, k); },
              ThrowsMessage<Error>(HasSubstr("wkv: expected the bonus u as bfloat16 [64]")));
  EXPECT_THAT(
      [&] {
        (void)wkv(w, u, k, empty({2, 10, 32}, {.dtype = DType::kBFloat16}));
      },
      ThrowsMessage<Error>(HasSubstr("wkv: expected v as k [2, 10, 64]")));
  const Tensor k16 = empty({2, 10, 64}, {.dtype = DType::kFloat16});
  EXPECT_THAT([&] { (void)wkv(w, empty({64}, {.dtype = DType::kFloat16}), k16, k16); },
              ThrowsMessage<Error>(HasSubstr("wkv: expected k as float32 or bfloat16")));
  // One batch row of 48 channels: blocks of 32 threads do not tile 48 rows.
  const Tensor k48 = empty({1, 10, 48}, {.dtype = DType::kFloat32});
  const Tensor w48 = empty({48}, {.dtype = DType::kFloat32});
  EXPECT_THAT([&] { (void)wkv(w48, w48, k48, k48); },
              ThrowsMessage<Error>(HasSubstr("wkv: the product of batch size (1) and hidden size "
                                             "(48) needs to be a round multiple of 32")));
  EXPECT_EQ(chunked_scan_chunk("wkv"), 0);  // no tensor-core tiles
}

TEST(RwkvModels, TensorParallelPlanSplitsTheChannels) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.init_rules.empty());  // orthogonal draws: refused by materialize
  EXPECT_EQ(f.layers_path, "rwkv.blocks");
  EXPECT_EQ(f.hf_class_prefix, "Rwkv");
  EXPECT_EQ(f.file_key("max_position_embeddings"), "context_length");
  EXPECT_EQ(f.file_key("num_attention_heads"), "attention_hidden_size");
  EXPECT_EQ(f.file_key("norm_eps"), "layer_norm_epsilon");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"rwkv.embeddings", "rowwise"},
      {"rwkv.blocks.*.attention.key", "colwise"},
      {"rwkv.blocks.*.attention.value", "colwise"},
      {"rwkv.blocks.*.attention.receptance", "colwise"},
      {"rwkv.blocks.*.attention.output", "rowwise"},
      {"rwkv.blocks.*.feed_forward.key", "colwise"},
      {"rwkv.blocks.*.feed_forward.value", "rowwise"},
      {"head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // Separate projections whose rows are channels: a contiguous split is whole channels.
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
  // The channel mix's receptance has no rule: replicated (its gate multiplies value's reduced
  // output).
  for (const TensorParallelRule& r : f.tp_plan) {
    EXPECT_EQ(std::string_view(r.pattern).find("feed_forward.receptance"), std::string_view::npos);
  }
}

}  // namespace
}  // namespace shardplan::tensor
