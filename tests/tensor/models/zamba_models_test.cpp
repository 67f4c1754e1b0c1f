// zamba (ZambaForCausalLM) against hand formulas written here from transformers 5's
// modeling_zamba.py and the published size. h hidden, V vocabulary, n heads and kv key-value heads
// of d (attention_head_dim, 2h / n by default), I the MLP width, a Mamba mixer of D = 2h channels
// (mamba_expand 2) in H heads of P = D / H, N the state, R the time-step rank, K taps; Y the
// hybrid layers, L all layers:
//   mixer    in_proj [2D, h]; conv1d [D, 1, K] + [D]; x_proj_weight [H, R + 2N, P];
//            dt_proj_weight [H, P, R]; dt_proj_bias, D [H, P]; A_log [H, P, N]; out_proj [h, D]
//                                    2 D h + D K + D + H (R + 2N) P + H P R + 2 H P + H P N + h D
//   layer    mixer + input_layernorm [h]  (every layer, a hybrid one's as mamba_decoder)
//   block    q [n d, 2h], k, v [kv d, 2h], o [h, n d]; gate, up [I, h], down [h, I];
//            input_layernorm [2h], pre_ff_layernorm [h]
//                                    2h n d + 4h kv d + n d h + 3 h I + 3 h
//   model    V h + L layer + Y h^2 (each hybrid layer's `linear`) + block (once: the hybrid
//            layers' blocks are tied to the first) + h (final_layernorm), lm_head tied
// Untied (tie_word_embeddings false), transformers ties no block either: every hybrid layer holds
// its block, and lm_head is V h more.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
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

struct Zamba {
  int64_t V, h, L, Y, n, kv, d, I, H, N, R, K;
};
int64_t mixer(const Zamba& z) {
  const int64_t D = 2 * z.h, P = D / z.H;
  return 2 * D * z.h + D * z.K + D + z.H * (z.R + 2 * z.N) * P + z.H * P * z.R + 2 * z.H * P +
         z.H * P * z.N + z.h * D;
}
int64_t layer(const Zamba& z) { return mixer(z) + z.h; }
int64_t block(const Zamba& z) {
  return 2 * z.h * z.n * z.d + 4 * z.h * z.kv * z.d + z.n * z.d * z.h + 3 * z.h * z.I + 3 * z.h;
}
int64_t total(const Zamba& z) {
  return z.V * z.h + z.L * layer(z) + z.Y * z.h * z.h + block(z) + z.h;
}

// 6 layers, hybrid at 1, 3 and 4 (3's and 4's blocks tied to 1's), h 32, V 128, 4 heads and 2
// key-value heads of 16 over 2h = 64, I 48, the mixer 2 heads of 32 channels (D 64), state 8,
// time-step rank 4, 4 taps.
nlohmann::json tiny() {
  return {{"model_type", "zamba"},
          {"vocab_size", 128},
          {"hidden_size", 32},
          {"num_hidden_layers", 6},
          {"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 48},
          {"hidden_act", "gelu"},
          {"n_mamba_heads", 2},
          {"mamba_expand", 2},
          {"mamba_d_state", 8},
          {"mamba_d_conv", 4},
          {"mamba_dt_rank", 4},
          {"rms_norm_eps", 1e-5},
          {"torch_dtype", "bfloat16"}};
}
constexpr Zamba kTiny{128, 32, 6, 3, 4, 2, 16, 48, 2, 8, 4, 4};

ModulePtr build(const nlohmann::json& j) { return build_model(parse_model_config(j, "tiny.json")); }

TEST(ZambaModels, SevenBMatchesThePublishedSize) {
  // Zyphra/Zamba-7B-v1: V 32,000 tied, h 3,712, 76 layers of which 13 hybrid (2, 7, 13, .., 73),
  // one shared block of 16 heads of 464 (2h / 16) over 2h = 7,424 and an MLP of 14,848, the mixer
  // D = 7,424 channels in 2 heads of 3,712, state 16, time-step rank 232 (ceil(h / 16)), 4 taps.
  // The model card and Glorioso et al. 2024 say "7B"; the Hub's safetensors count reads 7.23B.
  //   mixer  55,115,776 + 29,696 + 7,424 + 1,959,936 + 1,722,368 + 14,848 + 118,784
  //          + 27,557,888 = 86,526,720
  //   block  55,115,776 + 110,231,552 + 27,557,888 + 165,347,328 + 11,136 = 358,263,680
  //   model  118,784,000 + 76 x 86,530,432 + 13 x 13,778,944 + 358,263,680 + 3,712
  const Zamba z{32000, 3712, 76, 13, 16, 16, 464, 14848, 2, 16, 232, 4};
  EXPECT_EQ(mixer(z), 86'526'720);
  EXPECT_EQ(block(z), 358'263'680);
  EXPECT_EQ(total(z), 7'232'490'496);
  const ModelConfig c = find_model_config("zamba-7b-v1");
  EXPECT_EQ(c.linear_dt_rank, 232);
  EXPECT_EQ(c.head_dim, 464);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total(z));
  // The block lives in the first hybrid layer (2); layer 7's is tied to it.
  EXPECT_FALSE(names_under(*m, "model.layers.2.shared_transf.").empty());
  EXPECT_TRUE(names_under(*m, "model.layers.7.shared_transf.").empty());
  EXPECT_EQ(names_under(*m, "model.layers.7.").front(), "linear.weight");
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
  EXPECT_EQ(describe(s.kinds[1]), "dense");  // the hybrid layer: its block's MLP
  EXPECT_EQ(s.count(0), 63);
  EXPECT_EQ(s.count(1), 13);
  EXPECT_EQ(s.first_layer(1), 2);
  // ZambaConfig's defaults are this model: its layer list from attn_layer_period 6 and offset 4.
  const ModelConfig d = parse_model_config(
      nlohmann::json{{"model_type", "zamba"}, {"torch_dtype", "bfloat16"}}, "defaults.json");
  EXPECT_EQ(d.layer_types, c.layer_types);
  EXPECT_EQ(d.no_ffn_layers, c.no_ffn_layers);
  EXPECT_EQ(build_model(d)->parameters_numel(), total(z));
}

TEST(ZambaModels, NamesAreTransformersInOrder) {
  const ModulePtr m = build(tiny());
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.final_layernorm.weight"}));
  // The mixer's own per-head tensors first, then its children.
  const Names mamba = {"x_proj_weight", "dt_proj_weight", "dt_proj_bias",   "A_log",          "D",
                       "conv1d.weight", "conv1d.bias",    "in_proj.weight", "out_proj.weight"};
  Names layer0;
  for (const std::string& n : mamba) layer0.push_back("mamba." + n);
  layer0.push_back("input_layernorm.weight");
  EXPECT_EQ(names_under(*m, "model.layers.0."), layer0);
  // Layer 1: the first hybrid layer, holding the block (registered first), then linear and its
  // Mamba layer.
  Names layer1;
  for (const char* n :
       {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
        "self_attn.o_proj.weight", "feed_forward.gate_proj.weight", "feed_forward.up_proj.weight",
        "feed_forward.down_proj.weight", "input_layernorm.weight", "pre_ff_layernorm.weight"}) {
    layer1.push_back(std::string("shared_transf.") + n);
  }
  layer1.push_back("linear.weight");
  for (const std::string& n : mamba) layer1.push_back("mamba_decoder.mamba." + n);
  layer1.push_back("mamba_decoder.input_layernorm.weight");
  EXPECT_EQ(names_under(*m, "model.layers.1."), layer1);
  // Layers 3 and 4: their blocks are layer 1's tensors, listed nowhere.
  Names later = {"linear.weight"};
  for (const std::string& n : mamba) later.push_back("mamba_decoder.mamba." + n);
  later.push_back("mamba_decoder.input_layernorm.weight");
  EXPECT_EQ(names_under(*m, "model.layers.3."), later);
  EXPECT_EQ(names_under(*m, "model.layers.4."), later);
  for (const char* p : {"self_attn.q_proj.weight", "self_attn.v_proj.weight",
                        "feed_forward.down_proj.weight", "input_layernorm.weight"}) {
    for (const char* l : {"3", "4"}) {
      EXPECT_EQ(m->get_parameter(std::string("model.layers.") + l + ".shared_transf." + p).impl(),
                m->get_parameter(std::string("model.layers.1.shared_transf.") + p).impl())
          << l << " " << p;
    }
  }
  EXPECT_EQ(m->get_parameter("lm_head.weight").impl(),
            m->get_parameter("model.embed_tokens.weight").impl());
  // Shapes: q from [x; e] (2h = 64), k and v of 2 heads, o back to h; the mixer's per-head
  // tensors [H, R + 2N, P], [H, P, R], [H, P, N], [H, P].
  const std::string b = "model.layers.1.shared_transf.";
  EXPECT_EQ(m->get_parameter(b + "self_attn.q_proj.weight").sizes(), (DimVector{64, 64}));
  EXPECT_EQ(m->get_parameter(b + "self_attn.k_proj.weight").sizes(), (DimVector{32, 64}));
  EXPECT_EQ(m->get_parameter(b + "self_attn.o_proj.weight").sizes(), (DimVector{32, 64}));
  EXPECT_EQ(m->get_parameter(b + "feed_forward.gate_proj.weight").sizes(), (DimVector{48, 32}));
  EXPECT_EQ(m->get_parameter(b + "feed_forward.down_proj.weight").sizes(), (DimVector{32, 48}));
  EXPECT_EQ(m->get_parameter(b + "input_layernorm.weight").sizes(), (DimVector{64}));
  EXPECT_EQ(m->get_parameter(b + "pre_ff_layernorm.weight").sizes(), (DimVector{32}));
  EXPECT_EQ(m->get_parameter("model.layers.1.linear.weight").sizes(), (DimVector{32, 32}));
  const std::string x = "model.layers.0.mamba.";
  EXPECT_EQ(m->get_parameter(x + "in_proj.weight").sizes(), (DimVector{128, 32}));
  EXPECT_EQ(m->get_parameter(x + "conv1d.weight").sizes(), (DimVector{64, 1, 4}));
  EXPECT_EQ(m->get_parameter(x + "x_proj_weight").sizes(), (DimVector{2, 20, 32}));
  EXPECT_EQ(m->get_parameter(x + "dt_proj_weight").sizes(), (DimVector{2, 32, 4}));
  EXPECT_EQ(m->get_parameter(x + "dt_proj_bias").sizes(), (DimVector{2, 32}));
  EXPECT_EQ(m->get_parameter(x + "A_log").sizes(), (DimVector{2, 32, 8}));
  EXPECT_EQ(m->get_parameter(x + "D").sizes(), (DimVector{2, 32}));
  EXPECT_EQ(m->get_parameter(x + "out_proj.weight").sizes(), (DimVector{32, 64}));
  // Module types as transformers names its classes.
  EXPECT_EQ(m->type_name(), "ZambaForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "ZambaModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "ZambaMambaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "ZambaMambaMixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.conv1d").type_name(), "Conv1d");
  EXPECT_EQ(m->get_submodule("model.layers.1").type_name(), "ZambaHybridLayer");
  EXPECT_EQ(m->get_submodule("model.layers.1.mamba_decoder").type_name(), "ZambaMambaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.1.shared_transf").type_name(),
            "ZambaAttentionDecoderLayer");
  EXPECT_EQ(m->get_submodule(b + "self_attn").type_name(), "ZambaAttention");
  EXPECT_EQ(m->get_submodule(b + "feed_forward").type_name(), "ZambaMLP");
}

TEST(ZambaModels, TinyTotalsByHand) {
  // mixer 4,096 + 256 + 64 + 2 x 20 x 32 + 2 x 32 x 4 + 2 x 64 + 2 x 32 x 8 + 2,048 = 8,640, +
  // 32 = 8,672 a layer; block 2 x 32 x 64 + 4 x 32 x 32 + 64 x 32 + 3 x 32 x 48 + 96 = 14,944;
  // 4,096 + 6 x 8,672 + 3 x 1,024 + 14,944 + 32 = 74,176.
  EXPECT_EQ(mixer(kTiny), 8'640);
  EXPECT_EQ(block(kTiny), 14'944);
  EXPECT_EQ(total(kTiny), 74'176);
  EXPECT_EQ(build(tiny())->parameters_numel(), 74'176);
  // Untied: lm_head, and a block in each hybrid layer: 74,176 + 4,096 + 2 x 14,944 = 108,160.
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr u = build(untied);
  EXPECT_EQ(u->parameters_numel(), 108'160);
  EXPECT_FALSE(names_under(*u, "model.layers.4.shared_transf.").empty());
  // Projection biases on, the convolution's off: + 2D + h - D = 96 a mixer, 74,176 + 6 x 96.
  nlohmann::json biased = tiny();
  biased["mamba_proj_bias"] = true;
  biased["mamba_conv_bias"] = false;
  const ModulePtr bm = build(biased);
  EXPECT_EQ(bm->parameters_numel(), 74'752);
  EXPECT_EQ(names_under(*bm, "model.layers.0.mamba."),
            (Names{"x_proj_weight", "dt_proj_weight", "dt_proj_bias", "A_log", "D", "conv1d.weight",
                   "in_proj.weight", "in_proj.bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(bm->get_parameter("model.layers.0.mamba.in_proj.bias").sizes(), (DimVector{128}));
  // ZambaConfig's own list: 9 layers, attn_layer_period 2 and offset 0 make layers 0, 1 Mamba, 2
  // hybrid, then i + 3 hybrid for even i: 2, 3, 5, 7. 4,096 + 9 x 8,672 + 4 x 1,024 + 14,944 + 32.
  nlohmann::json listed = tiny();
  listed.erase("layers_block_type");
  listed["num_hidden_layers"] = 9;
  listed["attn_layer_period"] = 2;
  listed["attn_layer_offset"] = 0;
  const ModelConfig lc = parse_model_config(listed, "listed.json");
  std::vector<int64_t> hybrid;
  for (int64_t i = 0; i < lc.num_hidden_layers; ++i) {
    if (lc.layer_types[static_cast<size_t>(i)] == AttentionType::kFull) hybrid.push_back(i);
  }
  EXPECT_EQ(hybrid, (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(build_model(lc)->parameters_numel(), 101'216);
}

TEST(ZambaModels, RoundTripDefaultsAndAliases) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kFull,
                                        AttentionType::kLinear, AttentionType::kFull,
                                        AttentionType::kFull, AttentionType::kLinear}));
  EXPECT_EQ(c.no_ffn_layers, (std::vector<int64_t>{0, 2, 5}));
  EXPECT_TRUE(c.nope_layers.empty());
  EXPECT_EQ(c.head_dim, 16);  // 2h / n
  EXPECT_EQ(c.num_mem_blocks, 1);
  EXPECT_EQ(c.adapter_rank, 0);
  EXPECT_EQ(c.linear_num_value_heads, 64);  // the channels, each a value head of width 1
  EXPECT_EQ(c.linear_value_head_dim, 1);
  EXPECT_EQ(c.linear_num_key_heads, 2);  // n_mamba_heads, each with its own B and C
  EXPECT_EQ(c.linear_dt_rank, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.pad_token_id, 0);
  const ModelConfig seven = find_model_config("zamba-7b-v1");
  EXPECT_EQ(parse_model_config(to_hf_json(seven), "round trip"), seven);
  // transformers 5's names: layer_types for layers_block_type, head_dim for attention_head_dim;
  // "auto" rank ceil(32 / 16) = 2; num_key_value_heads absent is ZambaConfig's 16, not the heads.
  nlohmann::json j = tiny();
  j.erase("layers_block_type");
  j["layer_types"] = {"linear_attention", "hybrid", "linear_attention",
                      "hybrid",           "hybrid", "linear_attention"};
  j["head_dim"] = 8;
  j["mamba_dt_rank"] = "auto";
  j["num_attention_heads"] = 32;
  j.erase("num_key_value_heads");
  j["pad_token_id"] = nullptr;
  const ModelConfig a = parse_model_config(j, "alias.json");
  EXPECT_EQ(a.layer_types, c.layer_types);
  EXPECT_EQ(a.head_dim, 8);
  EXPECT_EQ(a.linear_dt_rank, 2);
  EXPECT_EQ(a.num_key_value_heads, 16);
  EXPECT_FALSE(a.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(a), "round trip"), a);
  const ModelFamily& f = family_of(c);
  EXPECT_FALSE(f.rotary);  // no position encoding at all
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.shared_transformer_blocks);
  EXPECT_TRUE(f.init_rules.empty());  // materialize refuses it (dt's log-uniform draws)
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("linear_num_key_heads"), "n_mamba_heads");
  EXPECT_EQ(f.file_key("layer_types"), "layers_block_type");
}

TEST(ZambaModels, RefusedOptionsNameTheirKey) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["layers_block_type"][2] = "full_attention";
  refused(j,
          "'layers_block_type': \"full_attention\" is not a Zamba layer; expected \"mamba\" (or "
          "\"linear_attention\") or \"hybrid\"");
  j = tiny();
  j["num_hidden_layers"] = 5;
  refused(j, "'layers_block_type': expected a list of num_hidden_layers = 5 entries");
  j = tiny();
  j["layer_types"] = {"mamba", "mamba", "mamba", "hybrid", "hybrid", "mamba"};
  refused(j, "'layer_types': differs from layers_block_type");
  j = tiny();
  j.erase("layers_block_type");
  j["num_hidden_layers"] = 2;
  refused(j,
          "'num_hidden_layers': 2 layers and no layers_block_type: ZambaConfig's default list has "
          "3 entries at least");
  j = tiny();
  j.erase("layers_block_type");
  j["attn_layer_period"] = 0;
  refused(j, "'attn_layer_period': must be positive, got 0");
  j = tiny();
  j["attention_hidden_size"] = 32;
  refused(j, "'attention_hidden_size': 32 differs from 64, 2 x hidden_size");
  j = tiny();
  j["n_mamba_heads"] = 3;
  refused(j, "'n_mamba_heads': 3 does not split mamba_expand x hidden_size = 64 into whole heads");
  j = tiny();
  j["hidden_mamba_act"] = "gelu";
  refused(j, "'hidden_mamba_act': 'gelu' is not built; expected \"silu\"");
  j = tiny();
  j["mamba_dt_rank"] = "big";
  refused(j, "'mamba_dt_rank': \"big\" is not a rank");
  j["mamba_dt_rank"] = 0;
  refused(j, "'mamba_dt_rank': must be positive, got 0");
  j = tiny();
  j["mamba_expand"] = 0;
  refused(j, "'mamba_expand': 0 must be positive");
  j = tiny();
  j["mamba_d_state"] = 0;
  refused(j, "field 'mamba_d_state' (linear_key_head_dim): must be a positive integer");
  j = tiny();
  j["num_key_value_heads"] = nullptr;
  refused(j, "'num_key_value_heads': null; expected an integer");
  j.erase("num_key_value_heads");  // ZambaConfig's 16 does not divide the 4 heads
  refused(j, "'num_key_value_heads': 16 does not divide num_attention_heads 4");
  j = tiny();
  j["attention_head_dim"] = 16;
  j["head_dim"] = 8;
  refused(j, "'head_dim': differs from attention_head_dim");
  j = tiny();
  j["num_hidden_layers"] = 0;
  refused(j, "tiny.json: field 'num_hidden_layers'");
  // Another family's file with Zamba's keys is refused rather than built without them.
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["mamba_dt_rank"] = 232;
  refused(llama, "field 'mamba_dt_rank': 232 changes the architecture, and model_type 'llama'");
  // Built in code: adapters or more blocks are Zamba2's, not Zamba's.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.adapter_rank = 8;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("zamba: 1 shared blocks with adapters of rank 8")));
  c = parse_model_config(tiny(), "tiny.json");
  c.no_ffn_layers = {0, 1, 2, 5};
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr("layer 1 attends full_attention without a "
                                             "feed-forward")));
  // validate() now takes adapter rank 0 for Zamba's block; a Zamba2 file still needs adapters.
  nlohmann::json zamba2 = to_hf_json(find_model_config("zamba2-7b"));
  zamba2["adapter_rank"] = 0;
  refused(zamba2, "'adapter_rank': 0, expected a positive rank");
}

// Every hybrid layer runs its block whole (the weights are shared, the work is not). The matrix
// products per token, by hand: a mixer's in_proj 2 h 2D = 8,192, x_proj 2 H (R + 2N) P = 2,560,
// dt_proj's weight times dt 2 H P R = 512, out_proj 2 D h = 4,096: 15,360; a hybrid layer adds
// linear 2 h^2 = 2,048, q 2 x 64 x 64 = 8,192, k and v 2 x 64 x 32 = 4,096 each, o 2 x 64 x 32
// = 4,096, gate, up and down 2 x 32 x 48 = 3,072 each: 47,104.
TEST(ZambaModels, TrainingTraceRunsEveryBlockAndOneScanPerHead) {
  const ModulePtr m = build(tiny());
  const int64_t T = 8;
  const OpGraph g = trace_model_forward(*m, 1, T);
  auto products = [&](const std::string& prefix) {
    double f = 0;
    for (const OpNode& node : g.nodes()) {
      if ((node.op == "linear" || node.op == "matmul") && node.module.starts_with(prefix)) {
        f += node.matmul_flops;
      }
    }
    return f;
  };
  EXPECT_DOUBLE_EQ(products("model.layers.0."), 15'360.0 * T);
  for (const char* layer : {"model.layers.1.", "model.layers.3.", "model.layers.4."}) {
    EXPECT_DOUBLE_EQ(products(layer), 47'104.0 * T) << layer;
  }
  for (const char* layer : {"model.layers.1", "model.layers.3", "model.layers.4"}) {
    const std::string blk = std::string(layer) + ".shared_transf";
    EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", blk), 1) << layer;
    EXPECT_EQ(ops_in(g, "cat", blk), 1) << layer;  // [x; e]
  }
  EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", "model.layers.0"), 0);
  EXPECT_EQ(ops_in(g, "to", "model"), 1);  // e = torch.clone(embeddings)
  // The mixer: one convolution, the two per-head products, a scan per head and their concat.
  const std::string mx = "model.layers.0.mamba";
  EXPECT_EQ(ops_in(g, "causal_conv1d", mx), 1);
  EXPECT_EQ(ops_in(g, "matmul", mx), 2);
  EXPECT_EQ(ops_in(g, "selective_scan_fn", mx), 2);
  EXPECT_EQ(ops_in(g, "cat", mx), 1);
  for (const OpNode& n : g.nodes()) {
    if (n.op != "selective_scan_fn" || n.module != mx) continue;
    // Note [Mamba-1 scan work] over a head's P = 32 channels: 7 per token, channel and state, 12
    // per token and channel.
    EXPECT_DOUBLE_EQ(n.flops, T * 32 * 8 * 7 + T * 32 * 12);
  }
  // The training step: the same forward products and twice as much backward (input and weight
  // gradients) in layer 4, whose block is layer 1's tensors.
  TraceOptions o;
  o.batch = 1;
  o.seq = T;
  const TrainingStep step = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  int attentions = 0, scans = 0;
  for (const TrainingOp& op : step.ops) {
    if (op.call < 0) continue;
    const std::string& fqn = step.calls[static_cast<size_t>(op.call)].fqn;
    attentions += op.op == "scaled_dot_product_attention";
    scans += op.op == "selective_scan_fn";
    if ((op.op != "linear" && op.op != "matmul") || !fqn.starts_with("model.layers.4.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  EXPECT_EQ(attentions, 3);
  EXPECT_EQ(scans, 12);  // 6 mixers of 2 heads
  EXPECT_DOUBLE_EQ(forward, 47'104.0 * T);
  EXPECT_DOUBLE_EQ(backward, 2 * 47'104.0 * T);
}

// The plan names modules the model builds: each pattern, its '*' a layer holding the module (0
// for a Mamba layer's mixer, 1 for a hybrid layer's), is a Linear or the Embedding.
// tests/planner/cost/zamba_tensor_parallel_test.cpp applies it.
TEST(ZambaModels, TensorParallelPlanNamesItsModules) {
  const ModelFamily& f = family_of(parse_model_config(tiny(), "tiny.json"));
  std::vector<std::tuple<std::string, std::string, int64_t>> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  const std::string st = "model.layers.*.shared_transf.";
  using Rule = std::tuple<std::string, std::string, int64_t>;
  EXPECT_EQ(rules, (std::vector<Rule>{{"model.embed_tokens", "rowwise", 1},
                                      {"model.layers.*.mamba.in_proj", "colwise", 1},
                                      {"model.layers.*.mamba.out_proj", "rowwise", 1},
                                      {"model.layers.*.mamba_decoder.mamba.in_proj", "colwise", 1},
                                      {"model.layers.*.mamba_decoder.mamba.out_proj", "rowwise", 1},
                                      {st + "self_attn.q_proj", "colwise", 1},
                                      {st + "self_attn.k_proj", "colwise", 1},
                                      {st + "self_attn.v_proj", "colwise", 1},
                                      {st + "self_attn.o_proj", "rowwise", 1},
                                      {st + "feed_forward.gate_proj", "colwise", 1},
                                      {st + "feed_forward.up_proj", "colwise", 1},
                                      {st + "feed_forward.down_proj", "rowwise", 1},
                                      {"lm_head", "colwise", 1}}));
  const ModulePtr m = build(tiny());
  for (const auto& [pattern, style, parts] : rules) {
    std::string fqn = pattern;
    const bool mixer_layer = pattern.find(".mamba.") != std::string::npos &&
                             pattern.find("mamba_decoder") == std::string::npos;
    if (const size_t star = fqn.find('*'); star != std::string::npos) {
      fqn.replace(star, 1, mixer_layer ? "0" : "1");
    }
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
