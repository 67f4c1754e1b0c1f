// xlstm (NX-AI's xLSTM 7B) against hand formulas written here from transformers 5's
// modeling_xlstm.py and configuration_xlstm.py and the published total. h hidden, V vocabulary
// (embeddings and lm_head, never tied), H heads, K and Vh the query-key and value widths per head
// (K = int(h qk_dim_factor) / H, Vh = int(h v_dim_factor) / H), F the feed-forward's width:
//   mLSTM layer   q, k [H K, h]; v, ogate_preact [H Vh, h]; igate_preact, fgate_preact [H, h] +
//                 [H]; multihead_norm [H Vh]; out_proj [h, H Vh]
//   feed-forward  proj_up_gate, proj_up [F, h]; proj_down [h, F]
//   every block   norm_mlstm, norm_ffn [h]
//   model         embeddings [V, h], out_norm [h], lm_head [V, h]
// Note [mLSTM chunkwise work] (tensor/ops.h) for the chunkwise kernel's FLOPs.
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
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// One block, written out: two norms, the mLSTM layer, the feed-forward.
int64_t block_params(int64_t h, int64_t H, int64_t K, int64_t Vh, int64_t F) {
  const int64_t norms = 2 * h;
  const int64_t qkv_o = 2 * (H * K) * h + 2 * (H * Vh) * h;
  const int64_t gates = 2 * (H * h + H);
  const int64_t mlstm_out = H * Vh + h * (H * Vh);  // multihead_norm, out_proj
  const int64_t ffn = 3 * F * h;
  return norms + qkv_o + gates + mlstm_out + ffn;
}

// Two blocks, h 64, 4 heads of K = 32 / 4 = 8 and Vh = 64 / 4 = 16, F = round_up(64 x 2.667 =
// 170.688, 64) = 192, vocabulary 1,000; the Hub file's keys (embedding_dim, num_blocks) beside
// the attribute names.
nlohmann::json tiny() {
  return {{"model_type", "xlstm"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"embedding_dim", 64},
          {"num_hidden_layers", 2},
          {"num_blocks", 2},
          {"num_heads", 4},
          {"qk_dim_factor", 0.5},
          {"v_dim_factor", 1.0},
          {"ffn_proj_factor", 2.667},
          {"ffn_round_up_to_multiple_of", 64},
          {"chunkwise_kernel", "chunkwise--triton_xl_chunk"},
          {"mode", "train"},
          {"chunk_size", 64},
          {"torch_dtype", "bfloat16"}};
}

TEST(XlstmModels, SevenBMatchesThePublished7B) {
  // NX-AI/xLSTM-7b (Beck et al. 2025, "xLSTM 7B", arXiv 2503.13427: "7B"; the Hub lists 6.87B
  // params): h 4,096, 32 blocks, 8 heads, qk_dim_factor 0.5 (K = 2,048 / 8 = 256), v_dim_factor 1
  // (Vh = 512), ffn_proj_factor 2.667 rounded up to 64: 10,924.032 -> 10,944, vocabulary 50,304,
  // untied.
  const int64_t V = 50304, h = 4096, F = 10944;
  const int64_t block = block_params(h, 8, 256, 512, F);
  EXPECT_EQ(block, 201'666'576);
  const int64_t total = V * h + 32 * block + h + V * h;
  EXPECT_EQ(total, 6'865'424'896);
  const ModelConfig c = find_model_config("xlstm-7b");
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.linear_value_head_dim, 512);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_FALSE(c.fused_projections);
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);  // the Hub's weights are float32
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "xLSTMForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(s.count(0), 32);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(XlstmModels, NamesOrderAndShapesAreTransformers) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(
      names_under(*m, "backbone.blocks.0."),
      (Names{"norm_mlstm.weight", "mlstm_layer.q.weight", "mlstm_layer.k.weight",
             "mlstm_layer.v.weight", "mlstm_layer.ogate_preact.weight",
             "mlstm_layer.igate_preact.weight", "mlstm_layer.igate_preact.bias",
             "mlstm_layer.fgate_preact.weight", "mlstm_layer.fgate_preact.bias",
             "mlstm_layer.multihead_norm.weight", "mlstm_layer.out_proj.weight", "norm_ffn.weight",
             "ffn.proj_up_gate.weight", "ffn.proj_up.weight", "ffn.proj_down.weight"}));
  // The top level: embeddings, the blocks, out_norm, then lm_head (its own).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("backbone.blocks.")) top.push_back(p.name);
  }
  EXPECT_EQ(top,
            (Names{"backbone.embeddings.weight", "backbone.out_norm.weight", "lm_head.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  const std::string layer = "backbone.blocks.1.mlstm_layer.";
  EXPECT_EQ(shape(layer + "q.weight"), (DimVector{32, 64}));
  EXPECT_EQ(shape(layer + "k.weight"), (DimVector{32, 64}));
  EXPECT_EQ(shape(layer + "v.weight"), (DimVector{64, 64}));
  EXPECT_EQ(shape(layer + "ogate_preact.weight"), (DimVector{64, 64}));
  EXPECT_EQ(shape(layer + "igate_preact.weight"), (DimVector{4, 64}));
  EXPECT_EQ(shape(layer + "fgate_preact.bias"), (DimVector{4}));
  EXPECT_EQ(shape(layer + "multihead_norm.weight"), (DimVector{64}));
  EXPECT_EQ(shape(layer + "out_proj.weight"), (DimVector{64, 64}));
  EXPECT_EQ(shape("backbone.blocks.1.ffn.proj_up_gate.weight"), (DimVector{192, 64}));
  EXPECT_EQ(shape("backbone.blocks.1.ffn.proj_down.weight"), (DimVector{64, 192}));
  EXPECT_EQ(shape("backbone.embeddings.weight"), (DimVector{1000, 64}));
  EXPECT_EQ(shape("lm_head.weight"), (DimVector{1000, 64}));
  EXPECT_EQ(m->get_submodule("backbone").type_name(), "xLSTMModel");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0").type_name(), "xLSTMBlock");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0.norm_mlstm").type_name(), "xLSTMRMSNorm");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0.mlstm_layer").type_name(), "xLSTMLayer");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0.mlstm_layer.mlstm_backend").type_name(),
            "xLSTMBackend");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0.mlstm_layer.multihead_norm").type_name(),
            "xLSTMMultiHeadLayerNorm");
  EXPECT_EQ(m->get_submodule("backbone.blocks.0.ffn").type_name(), "xLSTMFeedForward");
  EXPECT_EQ(m->get_submodule("backbone.out_norm").type_name(), "xLSTMRMSNorm");
  EXPECT_TRUE(m->named_buffers().empty());
  // The mLSTM layer counts as the token mixer, the feed-forward as the MLP.
  EXPECT_EQ(block_kind(*m, layer + "q.weight"), "attention");
  EXPECT_EQ(block_kind(*m, layer + "igate_preact.bias"), "attention");
  EXPECT_EQ(block_kind(*m, layer + "out_proj.weight"), "attention");
  EXPECT_EQ(block_kind(*m, "backbone.blocks.0.ffn.proj_up.weight"), "mlp");
  EXPECT_EQ(block_kind(*m, "backbone.blocks.0.norm_ffn.weight"), "norm");
  // By hand: 2 blocks of 128 + 4,096 + 8,192 + 520 + 64 + 4,096 + 36,864, V h twice, out_norm h.
  const int64_t block = block_params(64, 4, 8, 16, 192);
  EXPECT_EQ(block, 53'960);
  const int64_t total = 2 * block + 2 * 1000 * 64 + 64;
  EXPECT_EQ(total, 235'984);
  EXPECT_EQ(m->parameters_numel(), total);

  // use_bias: every projection but the gates' (biased always) gains one, and so do the blocks'
  // norms and the multi-head norm; out_norm never has one.
  nlohmann::json j = tiny();
  j["use_bias"] = true;
  const ModulePtr b = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(names_under(*b, "backbone.blocks.0."), (Names{"norm_mlstm.weight",
                                                          "norm_mlstm.bias",
                                                          "mlstm_layer.q.weight",
                                                          "mlstm_layer.q.bias",
                                                          "mlstm_layer.k.weight",
                                                          "mlstm_layer.k.bias",
                                                          "mlstm_layer.v.weight",
                                                          "mlstm_layer.v.bias",
                                                          "mlstm_layer.ogate_preact.weight",
                                                          "mlstm_layer.ogate_preact.bias",
                                                          "mlstm_layer.igate_preact.weight",
                                                          "mlstm_layer.igate_preact.bias",
                                                          "mlstm_layer.fgate_preact.weight",
                                                          "mlstm_layer.fgate_preact.bias",
                                                          "mlstm_layer.multihead_norm.weight",
                                                          "mlstm_layer.multihead_norm.bias",
                                                          "mlstm_layer.out_proj.weight",
                                                          "mlstm_layer.out_proj.bias",
                                                          "norm_ffn.weight",
                                                          "norm_ffn.bias",
                                                          "ffn.proj_up_gate.weight",
                                                          "ffn.proj_up_gate.bias",
                                                          "ffn.proj_up.weight",
                                                          "ffn.proj_up.bias",
                                                          "ffn.proj_down.weight",
                                                          "ffn.proj_down.bias"}));
  EXPECT_EQ(names_under(*b, "backbone.out_norm."), (Names{"weight"}));
  // Per block: the norms 2 h, q and k 2 H K, v and o 2 H Vh, the multi-head norm H Vh, out_proj
  // h, the feed-forward 2 F + h.
  const int64_t biases = 2 * 64 + 2 * 32 + 2 * 64 + 64 + 64 + (2 * 192 + 64);
  EXPECT_EQ(biases, 896);
  EXPECT_EQ(b->parameters_numel(), total + 2 * biases);

  // weight_mode "fused": the same parameters in three fused projections.
  j = tiny();
  j["weight_mode"] = "fused";
  const ModulePtr fused = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_EQ(names_under(*fused, "backbone.blocks.0."),
            (Names{"norm_mlstm.weight", "mlstm_layer.qkv_opreact.weight",
                   "mlstm_layer.ifgate_preact.weight", "mlstm_layer.ifgate_preact.bias",
                   "mlstm_layer.multihead_norm.weight", "mlstm_layer.out_proj.weight",
                   "norm_ffn.weight", "ffn.proj_up_gate_z.weight", "ffn.proj_down.weight"}));
  EXPECT_EQ(fused->get_parameter(layer + "qkv_opreact.weight").sizes(),
            (DimVector{2 * 32 + 2 * 64, 64}));
  EXPECT_EQ(fused->get_parameter(layer + "ifgate_preact.bias").sizes(), (DimVector{8}));
  EXPECT_EQ(fused->get_parameter("backbone.blocks.1.ffn.proj_up_gate_z.weight").sizes(),
            (DimVector{2 * 192, 64}));
  EXPECT_EQ(fused->parameters_numel(), total);
}

TEST(XlstmModels, ConfigDefaultsRoundTripAndWidths) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(2, AttentionType::kLinear));
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.linear_num_key_heads, 4);
  EXPECT_EQ(c.linear_num_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.linear_key_head_dim, 8);
  EXPECT_EQ(c.linear_value_head_dim, 16);
  EXPECT_EQ(c.linear_conv_kernel_dim, 0);  // no convolution
  EXPECT_EQ(c.intermediate_size, 192);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.pad_token_id, 1);  // xLSTMConfig's default (not an embedding's padding row)
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The class's defaults are xLSTM-7B's sizes.
  c = parse_model_config({{"model_type", "xlstm"}}, "defaults.json");
  EXPECT_EQ(c.vocab_size, 50304);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.linear_value_head_dim, 512);
  EXPECT_EQ(c.intermediate_size, 10944);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), find_model_config("xlstm-7b"));
  // The widths are Python's int() of float products: 100 x 0.29 = 28.999999999999996 gives 28
  // query-key channels (7 a head), and the feed-forward rounds 100 x 2.667 = 266.7 up to 320.
  nlohmann::json j = tiny();
  j["hidden_size"] = j["embedding_dim"] = 100;
  j["qk_dim_factor"] = 0.29;
  j["v_dim_factor"] = 0.8;
  c = parse_model_config(j, "odd.json");
  EXPECT_EQ(c.head_dim, 7);
  EXPECT_EQ(c.linear_value_head_dim, 20);
  EXPECT_EQ(c.intermediate_size, 320);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // The Hub file's way: embedding_dim and num_blocks alone, the class's hidden_size and
  // num_hidden_layers defaults (4,096 and 32) agreeing; a null hidden_size is embedding_dim.
  c = parse_model_config({{"model_type", "xlstm"}, {"embedding_dim", 4096}, {"num_blocks", 32}},
                         "hub.json");
  EXPECT_EQ(c, parse_model_config({{"model_type", "xlstm"}}, "defaults.json"));
  j = tiny();
  j["hidden_size"] = nullptr;
  j["num_hidden_layers"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), parse_model_config(tiny(), "tiny.json"));
  // tie_word_embeddings true: xLSTMForCausalLM declares no tied weights, lm_head stays its own;
  // add_out_norm false: xLSTMModel builds and applies out_norm whatever it says.
  j = tiny();
  j["tie_word_embeddings"] = true;
  j["add_out_norm"] = false;
  c = parse_model_config(j, "tiny.json");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(build_model(c)->parameters_numel(), 235'984);
  // weight_mode, use_bias, a null pad_token_id and the planner's cut round-trip.
  j = tiny();
  j["weight_mode"] = "fused";
  j["use_bias"] = true;
  j["pad_token_id"] = nullptr;
  c = parse_model_config(j, "tiny.json");
  EXPECT_TRUE(c.fused_projections);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  const ModelConfig one = first_layers(c, 1);
  EXPECT_EQ(parse_model_config(to_hf_json(one), "cut"), one);
  EXPECT_EQ(to_hf_json(one).at("num_blocks"), 1);
}

TEST(XlstmModels, RefusesWhatItCannotBuild) {
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
  refused(with("embedding_dim", 32),
          "tiny.json: field 'embedding_dim': 32 beside hidden_size 64: xLSTMModel embeds at "
          "embedding_dim and builds the blocks at hidden_size");
  nlohmann::json only_embedding = tiny();
  only_embedding.erase("hidden_size");
  refused(only_embedding,
          "field 'embedding_dim': 64 beside hidden_size 4096 (the class default: the file has "
          "none)");
  refused(with("num_blocks", 3),
          "field 'num_blocks': 3 beside num_hidden_layers 2: xLSTMModel builds num_blocks blocks");
  refused(with("num_blocks", 0), "field 'num_blocks': 0 blocks, expected 1..");
  nlohmann::json no_width = with("hidden_size", nullptr);
  no_width.erase("embedding_dim");
  refused(no_width, "field 'hidden_size': null and no embedding_dim");
  refused(with("num_heads", 0), "field 'num_heads': 0, expected a positive count");
  refused(with("num_heads", 5),
          "field 'qk_dim_factor': int(hidden_size x qk_dim_factor) = 32 is not a multiple of "
          "num_heads 5");
  refused(with("v_dim_factor", 0.9),
          "field 'v_dim_factor': int(hidden_size x v_dim_factor) = 57 is not a multiple of "
          "num_heads 4");
  refused(with("qk_dim_factor", 0.0), "field 'qk_dim_factor': 0.000000 makes int(hidden_size x");
  refused(with("ffn_round_up_to_multiple_of", 0),
          "field 'ffn_round_up_to_multiple_of': 0, expected 1 to 2^30");
  refused(with("ffn_proj_factor", -1.0), "field 'ffn_proj_factor': -1.000000 makes a feed-forward");
  refused(with("weight_mode", "packed"),
          "field 'weight_mode': \"packed\" is not one of \"single\", \"fused\"");
  refused(with("chunkwise_kernel", "parallel--native_autograd"),
          "field 'chunkwise_kernel': \"parallel--native_autograd\" is not a chunkwise kernel");
  refused(with("mode", "eval"),
          "field 'mode': \"eval\" is not one of \"train\", \"train_with_padding\", \"inference\"");
  refused(with("chunk_size", 0), "field 'chunk_size': must be positive, got 0");
  refused(with("autocast_kernel_dtype", "int8"), "field 'autocast_kernel_dtype': \"int8\"");
  refused(with("output_logit_soft_cap", 0.0),
          "field 'output_logit_soft_cap': 0.000000, expected a positive cap");
  refused(with("output_logit_soft_cap", nullptr), "field 'output_logit_soft_cap': null");
  refused(with("gate_soft_cap", -15.0), "field 'gate_soft_cap': -15.000000, expected a positive");
  refused(with("max_inference_chunksize", 0), "field 'max_inference_chunksize': must be positive");
  refused(with("vocab_size", 0), "field 'vocab_size': must be a positive integer, got 0");
  // A width that the rounding takes to 2^31 channels.
  nlohmann::json wide = with("ffn_proj_factor", 33554430.0);  // 64 x it = 2^31 - 128
  wide["ffn_round_up_to_multiple_of"] = 1 << 30;
  refused(wide,
          "field 'ffn_round_up_to_multiple_of': 1073741824 rounds hidden_size x "
          "ffn_proj_factor = 2147483520.000000 up to 2147483648.000000 channels");
  // A feed-forward narrower than one channel before its rounding.
  refused(with("ffn_proj_factor", 0.01),
          "field 'ffn_proj_factor': 0.010000 makes a feed-forward of hidden_size x ffn_proj_factor "
          "= 0.640000 channels, expected 1 to 2^31");
  // Configs built in code that xLSTM does not build.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.layer_types[1] = AttentionType::kFull;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("xlstm: a block attends full_attention")));
  c = parse_model_config(tiny(), "tiny.json");
  c.linear_conv_kernel_dim = 4;
  EXPECT_THAT([&] { validate(c, "built"); },
              ThrowsMessage<Error>(HasSubstr("built: field 'linear_conv_kernel_dim': 4, expected "
                                             "0: model_type 'xlstm' builds the mLSTM")));
  c = parse_model_config(tiny(), "tiny.json");
  c.mlp_bias = true;
  EXPECT_THAT([&] { (void)to_hf_json(c); },
              ThrowsMessage<Error>(HasSubstr("xlstm: biases on some projections only")));
  c = parse_model_config(tiny(), "tiny.json");
  c.tie_word_embeddings = true;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("xlstm: tied embeddings")));
}

TEST(XlstmModels, ForwardTracesTheProjectionsAndOneChunkwiseOpPerBlock) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  const double T = 64, h = 64, qk = 32, v = 64, H = 4, K = 8, Vh = 16, F = 192, C = 64;
  const OpGraph g = trace_model_forward(*m, 1, 64);
  // The kernel per token and head (one value tile and one key tile of 128): the chunk states 2 K
  // Vh, Q K^T 2 C K, the scores times V 2 C Vh, Q times the entering state 2 K Vh.
  const double mlstm = T * H * (4 * K * Vh + 2 * C * K + 2 * C * Vh);
  EXPECT_DOUBLE_EQ(mlstm, 917'504);
  // A block's products: q, k, v, the output gate, the two gates, out_proj, the feed-forward.
  const double block = 2 * T * h * (2 * qk + 2 * v + 2 * H) + 2 * T * v * h + 3 * 2 * T * h * F;
  EXPECT_DOUBLE_EQ(block, 6'881'280);
  EXPECT_DOUBLE_EQ(g.module_totals().at("backbone.blocks.0").matmul_flops, block + mlstm);
  EXPECT_DOUBLE_EQ(g.module_totals().at("backbone.blocks.0.mlstm_layer.mlstm_backend").matmul_flops,
                   mlstm);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, 2 * (block + mlstm) + 2 * T * h * 1000);
  const std::string layer = "backbone.blocks.0.mlstm_layer";
  EXPECT_EQ(ops_in(g, "mlstm_chunkwise", layer + ".mlstm_backend"), 1);
  EXPECT_EQ(test::ops_under(g, "mlstm_chunkwise", "backbone."), 2);
  EXPECT_EQ(ops_in(g, "tanh", layer), 2);     // the two gates' soft caps
  EXPECT_EQ(ops_in(g, "sigmoid", layer), 1);  // the output gate
  EXPECT_EQ(ops_in(g, "layer_norm", layer + ".multihead_norm"), 1);
  EXPECT_EQ(ops_in(g, "rms_norm", "backbone.blocks.0.norm_mlstm"), 1);
  EXPECT_EQ(ops_in(g, "silu", "backbone.blocks.0.ffn"), 1);
  EXPECT_EQ(ops_in(g, "rms_norm", "backbone.out_norm"), 1);
  // The logits: cast to float32, then the soft cap (divide, tanh, multiply) on [1, 64, 1000].
  EXPECT_EQ(ops_in(g, "to", ""), 1);
  EXPECT_EQ(ops_in(g, "tanh", ""), 1);
  for (const OpNode& n : g.nodes()) {
    if (n.op != "mlstm_chunkwise") continue;
    EXPECT_DOUBLE_EQ(n.matmul_flops, mlstm);
    EXPECT_DOUBLE_EQ(n.flops, mlstm);  // the gates' elementwise work is not counted
  }
  // 100 tokens are two chunks of 64, as the kernels pad them.
  const OpGraph padded = trace_model_forward(*m, 1, 100);
  EXPECT_DOUBLE_EQ(
      padded.module_totals().at("backbone.blocks.1.mlstm_layer.mlstm_backend").matmul_flops,
      2 * mlstm);
  // weight_mode "fused": the same products in one qkv_opreact, one ifgate_preact and one
  // proj_up_gate_z; the gates' soft cap runs once on both.
  nlohmann::json j = tiny();
  j["weight_mode"] = "fused";
  const ModulePtr f = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph gf = trace_model_forward(*f, 1, 64);
  EXPECT_DOUBLE_EQ(gf.module_totals().at("backbone.blocks.0").matmul_flops, block + mlstm);
  EXPECT_EQ(ops_in(gf, "tanh", layer), 1);
  EXPECT_EQ(ops_in(gf, "mlstm_chunkwise", layer + ".mlstm_backend"), 1);
}

TEST(XlstmModels, TrainingKeepsTheKernelInputsAndItsNormalizerAndMaxState) {
  nlohmann::json j = tiny();
  j["num_blocks"] = j["num_hidden_layers"] = 1;
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  const double rows = 2.0 * 64 * 4;  // B T H
  const double K = 8, V = 16, C = 64;
  int found = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "mlstm_chunkwise") continue;
    ++found;
    EXPECT_TRUE(op.rule_known);
    std::vector<std::string_view> whats;
    for (const SavedTensor& s : op.saved) whats.push_back(s.what);
    EXPECT_EQ(whats, (std::vector<std::string_view>{"input", "input", "input", "input", "input",
                                                    "normalizer_max_state"}));
    // q and k [2, 64, 4, 8], v [2, 64, 4, 16], the gates [2, 64, 4], all bfloat16; the fp32
    // normalizer and max state, one each per token and head.
    const auto bytes = [&](size_t k) {
      return st.buffers[static_cast<size_t>(op.saved[k].buffer)].bytes;
    };
    EXPECT_EQ(bytes(2), 2 * 64 * 4 * 16 * 2);
    EXPECT_EQ(bytes(3), 2 * 64 * 4 * 2);
    EXPECT_EQ(bytes(5), 2 * 64 * 4 * 2 * 4);
    // Note [mLSTM chunkwise work], one chunk, one 128-wide tile of each width: forward 4 K V + 2
    // C K + 2 C V, backward 8 K V + 6 C K + 6 C V, the states recomputed 2 K V.
    EXPECT_DOUBLE_EQ(op.matmul_flops, rows * (4 * K * V + 2 * C * K + 2 * C * V));
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, rows * (8 * K * V + 6 * C * K + 6 * C * V));
    EXPECT_DOUBLE_EQ(op.recompute_flops, rows * 2 * K * V);
  }
  EXPECT_EQ(found, 1);
}

TEST(XlstmModels, ChunkwiseOpChecksItsOperandsAndCountsTheKernelsTiles) {
  const TensorOptions bf16{.dtype = DType::kBFloat16};
  const Tensor q = empty({2, 10, 4, 8}, bf16);
  const Tensor v = empty({2, 10, 4, 16}, bf16);
  const Tensor gate = empty({2, 10, 4}, bf16);
  const Tensor out = mlstm_chunkwise(q, q, v, gate, gate);
  EXPECT_EQ(out.sizes(), (DimVector{2, 10, 4, 16}));
  EXPECT_EQ(out.dtype(), DType::kBFloat16);
  EXPECT_THAT(
      [&] {
        (void)mlstm_chunkwise(q, empty({2, 10, 4, 4}, bf16), v, gate, gate);
      },
      ThrowsMessage<Error>(HasSubstr("mlstm_chunkwise: key of size [2, 10, 4, 4] must "
                                     "match query's [2, 10, 4, 8]")));
  EXPECT_THAT(
      [&] {
        (void)mlstm_chunkwise(q, q, empty({2, 10, 2, 16}, bf16), gate, gate);
      },
      ThrowsMessage<Error>(HasSubstr("mlstm_chunkwise: value of size [2, 10, 2, 16]")));
  EXPECT_THAT(
      [&] {
        (void)mlstm_chunkwise(q, q, v, empty({2, 4, 10}, bf16), gate);
      },
      ThrowsMessage<Error>(HasSubstr("the input gate [2, 4, 10] and the forget gate "
                                     "[2, 10, 4] must both be [batch, tokens, heads]")));
  EXPECT_THAT(
      [&] {
        (void)mlstm_chunkwise(q, q, empty({2, 10, 4, 16}, {.dtype = DType::kFloat32}), gate, gate);
      },
      ThrowsMessage<Error>(HasSubstr("query, key and value must share a dtype")));
  EXPECT_EQ(chunked_scan_chunk("mlstm_chunkwise"), 64);
  EXPECT_EQ(kMlstmChunk, 64);
  // xLSTM-7B's heads, K 256 and V 512: two key tiles and four value tiles of 128, per token and
  // head forward 4 x 131,072 + 2 x 4 x 64 x 256 + 2 x 64 x 512 = 720,896; backward 8 x 131,072 +
  // 12 x 64 x 256 + 10 x 64 x 512 = 1,572,864; recomputed 262,144.
  const ChunkedScanWork w = mlstm_chunkwise_work(1, 1, 256, 512, 64);
  EXPECT_DOUBLE_EQ(w.forward, 720'896);
  EXPECT_DOUBLE_EQ(w.backward, 1'572'864);
  EXPECT_DOUBLE_EQ(w.recompute, 262'144);
  // Against mlstm_kernels' own count (flops_mlstm.py), Q K^T once: 4 K V + 2 C (K + V) = 622,592.
  EXPECT_DOUBLE_EQ(w.forward - 3 * 2 * 64 * 256, 4.0 * 256 * 512 + 2.0 * 64 * (256 + 512));
  // Linear in tokens and heads.
  EXPECT_DOUBLE_EQ(mlstm_chunkwise_work(8192, 8, 256, 512, 64).forward, 8192.0 * 8 * 720'896);
}

TEST(XlstmModels, FlagsAndTensorParallelPlanByHeads) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_FALSE(f.moe);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.mlstm_mixer);
  EXPECT_TRUE(f.init_rules.empty());  // small_init, wang_init and linspace(3, 6) biases: refused
  EXPECT_EQ(f.layers_path, "backbone.blocks");
  EXPECT_EQ(f.hf_class_prefix, "xLSTM");
  EXPECT_EQ(f.file_key("num_hidden_layers"), "num_blocks");
  EXPECT_EQ(f.file_key("num_attention_heads"), "num_heads");
  EXPECT_EQ(f.file_key("final_logit_softcapping"), "output_logit_soft_cap");
  // Which weight mode builds the module a rule names: both, "single" or "fused".
  enum Mode { kBoth, kSingle, kFused };
  struct Want {
    std::string pattern, style;
    int64_t parts;
    Mode mode;
  };
  const std::vector<Want> want = {
      {"backbone.embeddings", "rowwise", 1, kBoth},
      {"backbone.blocks.*.mlstm_layer.q", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.k", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.v", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.ogate_preact", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.igate_preact", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.fgate_preact", "colwise", 1, kSingle},
      {"backbone.blocks.*.mlstm_layer.qkv_opreact", "colwise", 1, kFused},
      {"backbone.blocks.*.mlstm_layer.ifgate_preact", "colwise", 2, kFused},
      {"backbone.blocks.*.mlstm_layer.out_proj", "rowwise", 1, kBoth},
      {"backbone.blocks.*.ffn.proj_up_gate", "colwise", 1, kSingle},
      {"backbone.blocks.*.ffn.proj_up", "colwise", 1, kSingle},
      {"backbone.blocks.*.ffn.proj_up_gate_z", "colwise", 2, kFused},
      {"backbone.blocks.*.ffn.proj_down", "rowwise", 1, kBoth},
      {"lm_head", "colwise", 1, kBoth}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  nlohmann::json j = tiny();
  j["weight_mode"] = "fused";
  const ModulePtr single = build_model(c);
  const ModulePtr fused = build_model(parse_model_config(j, "tiny.json"));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].pattern);
    EXPECT_EQ(f.tp_plan[i].style, want[i].style);
    EXPECT_EQ(f.tp_plan[i].fused_parts, want[i].parts);
    std::string path = want[i].pattern;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    // A rule whose module the other weight mode does not build matches nothing there (the
    // planner drops it: tensor_parallel_rules).
    for (const auto& [model, mode] : {std::pair{single, kSingle}, std::pair{fused, kFused}}) {
      if (want[i].mode == kBoth || want[i].mode == mode) {
        EXPECT_NO_THROW((void)model->get_submodule(path)) << path;
      } else {
        EXPECT_ANY_THROW((void)model->get_submodule(path)) << path;
      }
    }
  }
}

}  // namespace
}  // namespace shardplan::tensor
