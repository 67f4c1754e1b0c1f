// zamba2 (Zamba2ForCausalLM) against hand formulas written here from transformers 5's
// modeling_zamba2.py and the published sizes. h hidden, V vocabulary, n heads and kv key-value
// heads of d = 2h / n, I the MLP width, r adapter_rank, a Mamba-2 mixer of H heads of P (d_in =
// H P), g groups of state N, K taps, conv = d_in + 2 g N; B the shared blocks actually held
// (num_mem_blocks, or fewer hybrid layers), Y the hybrid layers, L all layers:
//   mamba    dt_bias, A_log, D [H]; conv1d [conv, 1, K] + [conv]; in_proj [d_in + conv + H, h];
//            norm [d_in]; out_proj [h, d_in]        3 H + conv K + conv + h (d_in + conv + H)
//                                                   + d_in + d_in h
//   layer    mamba + input_layernorm [h]  (every layer, a hybrid one's as mamba_decoder)
//   block    q [n d, 2h], k, v [kv d, 2h], o [h, n d]; gate_up [2I, h], down [h, I];
//            input_layernorm [2h], pre_ff_layernorm [h]
//                                                   2h n d + 4h kv d + n d h + 3 h I + 3 h
//   adapter  per hybrid layer: gate_up's r h + 2 I r, and with use_shared_attention_adapter
//            q's, k's and v's 3 (2h r + 2h r)
//   model    V h + L layer + Y h^2 (each hybrid layer's `linear`) + B block + Y adapter + h
//            (final_layernorm), lm_head tied to the embedding (no more)
// Untied (tie_word_embeddings false), transformers ties no block either: every hybrid layer holds
// its block and its block's adapter slots, and lm_head is V h more.
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

struct Zamba2 {
  int64_t V, h, L, Y, B, n, kv, I, r, H, P, g, N, K;
  bool attention_adapters;
};
int64_t mamba_layer(const Zamba2& z) {
  const int64_t in = z.H * z.P, conv = in + 2 * z.g * z.N;
  return 3 * z.H + conv * z.K + conv + z.h * (in + conv + z.H) + in + in * z.h + z.h;
}
int64_t block(const Zamba2& z) {
  const int64_t d = 2 * z.h / z.n;
  return 2 * z.h * z.n * d + 4 * z.h * z.kv * d + z.n * d * z.h + 3 * z.h * z.I + 3 * z.h;
}
int64_t adapter(const Zamba2& z) {
  return z.r * z.h + 2 * z.I * z.r + (z.attention_adapters ? 3 * 4 * z.h * z.r : 0);
}
int64_t total(const Zamba2& z) {
  return z.V * z.h + z.L * mamba_layer(z) + z.Y * z.h * z.h + z.B * block(z) + z.Y * adapter(z) +
         z.h;
}

// 6 layers, hybrid at 1, 3 and 4 (blocks 0, 1, 0: layer 4's tied to layer 1's), h 32, V 128,
// 4 heads of 16 over 2h = 64 (MHA, so the attention adapters fit), I 48, r 8, Mamba-2 4 heads of
// 16 (mamba_expand 2) in 2 groups of state 8, 4 taps; RoPE on.
nlohmann::json tiny() {
  return {{"model_type", "zamba2"},
          {"vocab_size", 128},
          {"hidden_size", 32},
          {"num_hidden_layers", 6},
          {"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 4},
          {"intermediate_size", 48},
          {"hidden_act", "gelu"},
          {"num_mem_blocks", 2},
          {"adapter_rank", 8},
          {"use_shared_attention_adapter", true},
          {"use_shared_mlp_adapter", true},
          {"use_mem_rope", true},
          {"n_mamba_heads", 4},
          {"mamba_expand", 2},
          {"mamba_ngroups", 2},
          {"mamba_d_state", 8},
          {"mamba_d_conv", 4},
          {"chunk_size", 16},
          {"rms_norm_eps", 1e-5},
          {"torch_dtype", "bfloat16"}};
}
constexpr Zamba2 kTiny{128, 32, 6, 3, 2, 4, 4, 48, 8, 4, 16, 2, 8, 4, true};

ModulePtr build(const nlohmann::json& j) { return build_model(parse_model_config(j, "tiny.json")); }

TEST(Zamba2Models, SevenBMatchesThePublishedSize) {
  // Zyphra/Zamba2-7B: V 32,000 tied, h 3,584, 81 layers of which 13 hybrid, 2 shared blocks of
  // 32 heads of 224 (2h / 32) and an MLP of 14,336, MLP adapters of rank 128 only, Mamba-2 112
  // heads of 64 in 2 groups of state 64, 4 taps. "The Zamba2 Suite" (Glorioso et al. 2024)
  // gives 7.4B.
  const Zamba2 z{32000, 3584, 81, 13, 2, 32, 32, 14336, 128, 112, 64, 2, 64, 4, false};
  EXPECT_EQ(mamba_layer(z), 78'437'456);
  EXPECT_EQ(block(z), 333'982'208);
  EXPECT_EQ(adapter(z), 4'128'768);
  EXPECT_EQ(total(z), 7'356'749'648);
  const ModelConfig c = find_model_config("zamba2-7b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total(z));
  // The blocks live in the first two hybrid layers (4 and 10), each with the adapters of the
  // hybrid layers that take it: slots 0, 2, .., 12 in layer 4 and 1, 3, .., 11 in layer 10.
  auto slots = [&](int64_t layer) {
    Names out;
    for (const std::string& name :
         names_under(*m, "model.layers." + std::to_string(layer) +
                             ".shared_transformer.feed_forward.gate_up_proj_adapter_list.")) {
      if (name.ends_with(".0.weight")) out.push_back(name.substr(0, name.find('.')));
    }
    return out;
  };
  EXPECT_EQ(slots(4), (Names{"0", "2", "4", "6", "8", "10", "12"}));
  EXPECT_EQ(slots(10), (Names{"1", "3", "5", "7", "9", "11"}));
  EXPECT_TRUE(names_under(*m, "model.layers.16.shared_transformer.").empty());
  EXPECT_EQ(names_under(*m, "model.layers.16.").front(), "linear.weight");
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
  EXPECT_EQ(describe(s.kinds[1]), "dense");  // the hybrid layer: its block's MLP, RoPE on
  EXPECT_EQ(s.count(0), 68);
  EXPECT_EQ(s.count(1), 13);
  EXPECT_EQ(s.first_layer(1), 4);
}

TEST(Zamba2Models, OnePointTwoBMatchesItsSafetensorsCount) {
  // Zyphra/Zamba2-1.2B: 38 layers, ["mamba" x 5, "hybrid"] x 6 + ["mamba" x 2], one shared block
  // with attention adapters too, h 2,048, 32 heads of 128, MLP 8,192, Mamba-2 64 heads of 64 in
  // one group of state 128. A third party's reading of its model.safetensors header counts
  // 1,215,064,704 parameters (the "1.2B").
  const Zamba2 z{32000, 2048, 38, 6, 1, 32, 32, 8192, 128, 64, 64, 1, 128, 4, true};
  EXPECT_EQ(total(z), 1'215'064'704);
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 5; ++k) types.push_back("mamba");
    types.push_back("hybrid");
  }
  types.push_back("mamba");
  types.push_back("mamba");
  const nlohmann::json j = {{"model_type", "zamba2"},
                            {"hidden_size", 2048},
                            {"num_hidden_layers", 38},
                            {"layers_block_type", types},
                            {"hybrid_layer_ids", {5, 11, 17, 23, 29, 35}},
                            {"num_attention_heads", 32},
                            {"intermediate_size", 8192},
                            {"num_mem_blocks", 1},
                            {"use_shared_attention_adapter", true},
                            {"use_mem_rope", true},
                            {"n_mamba_heads", 64},
                            {"mamba_headdim", 64},
                            {"mamba_ngroups", 1},
                            {"mamba_d_state", 128},
                            {"torch_dtype", "bfloat16"}};
  EXPECT_EQ(build(j)->parameters_numel(), 1'215'064'704);
}

TEST(Zamba2Models, NamesAreTransformersInOrder) {
  const ModulePtr m = build(tiny());
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"model.embed_tokens.weight", "model.final_layernorm.weight"}));
  const Names mamba = {"dt_bias",     "A_log",          "D",           "conv1d.weight",
                       "conv1d.bias", "in_proj.weight", "norm.weight", "out_proj.weight"};
  Names layer0;
  for (const std::string& n : mamba) layer0.push_back("mamba." + n);
  layer0.push_back("input_layernorm.weight");
  EXPECT_EQ(names_under(*m, "model.layers.0."), layer0);
  // Layer 3: hybrid layer 1, block 1's source, with adapter slot 1 of the three.
  Names layer3 = {"linear.weight"};
  for (const std::string& n : mamba) layer3.push_back("mamba_decoder.mamba." + n);
  layer3.push_back("mamba_decoder.input_layernorm.weight");
  for (const char* n :
       {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
        "self_attn.o_proj.weight", "self_attn.linear_q_adapter_list.1.0.weight",
        "self_attn.linear_q_adapter_list.1.1.weight", "self_attn.linear_k_adapter_list.1.0.weight",
        "self_attn.linear_k_adapter_list.1.1.weight", "self_attn.linear_v_adapter_list.1.0.weight",
        "self_attn.linear_v_adapter_list.1.1.weight", "feed_forward.gate_up_proj.weight",
        "feed_forward.down_proj.weight", "feed_forward.gate_up_proj_adapter_list.1.0.weight",
        "feed_forward.gate_up_proj_adapter_list.1.1.weight", "input_layernorm.weight",
        "pre_ff_layernorm.weight"}) {
    layer3.push_back(std::string("shared_transformer.") + n);
  }
  EXPECT_EQ(names_under(*m, "model.layers.3."), layer3);
  // Layer 1 holds block 0 with slots 0 and 2 (its own and layer 4's); layer 4's block is tied to
  // it, listed nowhere, the same tensors.
  EXPECT_EQ(
      names_under(*m, "model.layers.1.shared_transformer.feed_forward.gate_up_proj_adapter_list."),
      (Names{"0.0.weight", "0.1.weight", "2.0.weight", "2.1.weight"}));
  Names layer4 = {"linear.weight"};
  for (const std::string& n : mamba) layer4.push_back("mamba_decoder.mamba." + n);
  layer4.push_back("mamba_decoder.input_layernorm.weight");
  EXPECT_EQ(names_under(*m, "model.layers.4."), layer4);
  for (const char* p : {"self_attn.q_proj.weight", "feed_forward.down_proj.weight",
                        "feed_forward.gate_up_proj_adapter_list.2.1.weight",
                        "self_attn.linear_v_adapter_list.0.0.weight", "input_layernorm.weight"}) {
    EXPECT_EQ(m->get_parameter(std::string("model.layers.4.shared_transformer.") + p).impl(),
              m->get_parameter(std::string("model.layers.1.shared_transformer.") + p).impl())
        << p;
  }
  EXPECT_EQ(m->get_parameter("lm_head.weight").impl(),
            m->get_parameter("model.embed_tokens.weight").impl());
  // Shapes: q from [x; e] (2h = 64), o back to h, gate_up [2I, h], the adapters [r, in], [out, r].
  const std::string b = "model.layers.3.shared_transformer.";
  EXPECT_EQ(m->get_parameter(b + "self_attn.q_proj.weight").sizes(), (DimVector{64, 64}));
  EXPECT_EQ(m->get_parameter(b + "self_attn.o_proj.weight").sizes(), (DimVector{32, 64}));
  EXPECT_EQ(m->get_parameter(b + "self_attn.linear_k_adapter_list.1.0.weight").sizes(),
            (DimVector{8, 64}));
  EXPECT_EQ(m->get_parameter(b + "self_attn.linear_k_adapter_list.1.1.weight").sizes(),
            (DimVector{64, 8}));
  EXPECT_EQ(m->get_parameter(b + "feed_forward.gate_up_proj.weight").sizes(), (DimVector{96, 32}));
  EXPECT_EQ(m->get_parameter(b + "feed_forward.gate_up_proj_adapter_list.1.1.weight").sizes(),
            (DimVector{96, 8}));
  EXPECT_EQ(m->get_parameter(b + "input_layernorm.weight").sizes(), (DimVector{64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mamba.in_proj.weight").sizes(),
            (DimVector{64 + 96 + 4, 32}));  // [z | x B C | dt]
  EXPECT_EQ(m->get_parameter("model.layers.0.mamba.conv1d.weight").sizes(), (DimVector{96, 1, 4}));
  // Module types as transformers names its classes.
  EXPECT_EQ(m->type_name(), "Zamba2ForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "Zamba2Model");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "Zamba2MambaDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "Zamba2MambaMixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.norm").type_name(), "Zamba2RMSNormGated");
  EXPECT_EQ(m->get_submodule("model.layers.3").type_name(), "Zamba2HybridLayer");
  EXPECT_EQ(m->get_submodule("model.layers.3.mamba_decoder").type_name(),
            "Zamba2MambaDecoderLayer");
  EXPECT_EQ(m->get_submodule(b.substr(0, b.size() - 1)).type_name(), "Zamba2AttentionDecoderLayer");
  EXPECT_EQ(m->get_submodule(b + "self_attn").type_name(), "Zamba2Attention");
  EXPECT_EQ(m->get_submodule(b + "feed_forward").type_name(), "Zamba2MLP");
  EXPECT_EQ(m->get_submodule(b + "feed_forward.gate_up_proj_adapter_list.0").type_name(),
            "Identity");
  EXPECT_EQ(m->get_submodule(b + "feed_forward.gate_up_proj_adapter_list.1").type_name(),
            "Sequential");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "Zamba2RotaryEmbedding");
}

TEST(Zamba2Models, TinyTotalsByHand) {
  // mamba 12 + 384 + 96 + 32 x 164 + 64 + 64 x 32 = 7,852, + 32 = 7,884 a layer; block 3 x 64 x 64
  // + 64 x 32 + 3 x 32 x 48 + 96 = 19,040; adapter 8 x 32 + 96 x 8 + 3 x (64 x 8 + 64 x 8) =
  // 4,096; 4,096 + 6 x 7,884 + 3 x 1,024 + 2 x 19,040 + 3 x 4,096 + 32 = 104,872.
  EXPECT_EQ(mamba_layer(kTiny), 7'884);
  EXPECT_EQ(block(kTiny), 19'040);
  EXPECT_EQ(adapter(kTiny), 4'096);
  EXPECT_EQ(total(kTiny), 104'872);
  EXPECT_EQ(build(tiny())->parameters_numel(), 104'872);
  // Untied: lm_head, and a block in each hybrid layer with its block's slots (2, 1 and 2
  // adapters): 104,872 + 4,096 + 19,040 + 2 x 4,096 = 136,200.
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr u = build(untied);
  EXPECT_EQ(u->parameters_numel(), 136'200);
  EXPECT_FALSE(names_under(*u, "model.layers.4.shared_transformer.").empty());
  // One block for all (num_mem_blocks 1): block 0 holds all three slots; without attention
  // adapters and with add_bias_linear (gate_up 96 + down 32, in_proj 164 + out_proj 32 a mixer),
  // each slot's adapter 8 x 32 + 96 x 8 = 1,024:
  // 4,096 + 6 x (7,884 + 196) + 3 x 1,024 + (19,040 + 128) + 3 x 1,024 + 32 = 77,920.
  nlohmann::json one = tiny();
  one["num_mem_blocks"] = 1;
  one["use_shared_attention_adapter"] = false;
  one["add_bias_linear"] = true;
  const ModulePtr o = build(one);
  EXPECT_EQ(o->parameters_numel(), 77'920);
  EXPECT_EQ(
      names_under(*o, "model.layers.1.shared_transformer.feed_forward.gate_up_proj_adapter_list."),
      (Names{"0.0.weight", "0.1.weight", "1.0.weight", "1.1.weight", "2.0.weight", "2.1.weight"}));
  EXPECT_TRUE(names_under(*o, "model.layers.3.shared_transformer.").empty());
}

TEST(Zamba2Models, RoundTripDefaultsAndAliases) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kFull,
                                        AttentionType::kLinear, AttentionType::kFull,
                                        AttentionType::kFull, AttentionType::kLinear}));
  EXPECT_EQ(c.no_ffn_layers, (std::vector<int64_t>{0, 2, 5}));
  EXPECT_TRUE(c.nope_layers.empty());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.tie_word_embeddings);
  const ModelConfig seven = find_model_config("zamba2-7b");
  EXPECT_EQ(parse_model_config(to_hf_json(seven), "round trip"), seven);
  EXPECT_EQ(seven.head_dim, 224);
  EXPECT_EQ(seven.linear_value_head_dim, 64);
  // Zamba2Config's defaults: 54 layers (hybrid at 6, 12, .., 42, 47, 51), h 2,560, 32 heads of
  // 160, MLP 4h, 8 Mamba-2 heads of 640 in one group of state 64, one block, no RoPE, tied, pad 0:
  // 32,000 x 2,560 + 54 x 39,703,704 + 9 x 2,560^2 + 170,401,280 + 9 x (128 x 2,560 + 20,480 x
  // 128) + 2,560 = 2,481,848,336.
  const ModelConfig d = parse_model_config(
      nlohmann::json{{"model_type", "zamba2"}, {"torch_dtype", "bfloat16"}}, "defaults.json");
  std::vector<int64_t> hybrid;
  for (int64_t i = 0; i < d.num_hidden_layers; ++i) {
    if (d.layer_types[static_cast<size_t>(i)] == AttentionType::kFull) hybrid.push_back(i);
  }
  EXPECT_EQ(hybrid, (std::vector<int64_t>{6, 12, 18, 24, 30, 36, 42, 47, 51}));
  EXPECT_EQ(d.nope_layers, hybrid);  // use_mem_rope false
  EXPECT_EQ(d.head_dim, 160);
  EXPECT_EQ(d.intermediate_size, 10240);
  EXPECT_EQ(d.linear_value_head_dim, 640);
  EXPECT_EQ(d.num_mem_blocks, 1);
  EXPECT_EQ(d.adapter_rank, 128);
  EXPECT_EQ(d.max_position_embeddings, 4096);
  EXPECT_EQ(d.pad_token_id, 0);
  EXPECT_EQ(build_model(d)->parameters_numel(), 2'481'848'336);
  EXPECT_EQ(parse_model_config(to_hf_json(d), "round trip"), d);
  // transformers 5's names for the layers, layer_types for layers_block_type, use_long_context's
  // 16,384 positions, a null num_key_value_heads (all heads) and a null intermediate_size (4h).
  nlohmann::json j = tiny();
  j.erase("layers_block_type");
  j["layer_types"] = {"linear_attention", "hybrid", "linear_attention",
                      "hybrid",           "hybrid", "linear_attention"};
  j["use_long_context"] = true;
  j["num_key_value_heads"] = nullptr;
  j["intermediate_size"] = nullptr;
  const ModelConfig a = parse_model_config(j, "alias.json");
  EXPECT_EQ(a.layer_types, c.layer_types);
  EXPECT_EQ(a.max_position_embeddings, 16384);
  EXPECT_EQ(a.num_key_value_heads, 4);
  EXPECT_EQ(a.intermediate_size, 128);
  EXPECT_EQ(parse_model_config(to_hf_json(a), "round trip"), a);
  // No RoPE: the hybrid layers are NoPE layers, and the model has no rotary_emb.
  j = tiny();
  j["use_mem_rope"] = false;
  const ModelConfig nope = parse_model_config(j, "nope.json");
  EXPECT_EQ(nope.nope_layers, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(describe(layer_kind(nope, 1)), "nope dense");
  EXPECT_EQ(parse_model_config(to_hf_json(nope), "round trip"), nope);
  const ModulePtr m = build_model(nope);
  EXPECT_THROW((void)m->get_submodule("model.rotary_emb"), Error);
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.linear_attention);
  EXPECT_TRUE(f.shared_transformer_blocks);
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("linear_num_value_heads"), "n_mamba_heads");
  EXPECT_EQ(f.file_key("layer_types"), "layers_block_type");
}

TEST(Zamba2Models, RefusedOptionsNameTheirKey) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["layers_block_type"][2] = "full_attention";
  refused(j,
          "'layers_block_type': \"full_attention\" is not a Zamba2 layer; expected \"mamba\" (or "
          "\"linear_attention\") or \"hybrid\"");
  j = tiny();
  j["num_hidden_layers"] = 5;
  refused(j, "'layers_block_type': expected a list of num_hidden_layers = 5 entries");
  j = tiny();
  j.erase("layers_block_type");
  refused(j,
          "'num_hidden_layers': 6 layers and no layers_block_type: Zamba2Config's default list "
          "has 54 entries");
  j = tiny();
  j["layer_types"] = {"mamba", "mamba", "mamba", "hybrid", "hybrid", "mamba"};
  refused(j, "'layer_types': differs from layers_block_type");
  j = tiny();
  j["hybrid_layer_ids"] = {1, 3};
  refused(j,
          "'hybrid_layer_ids': [1,3] differs from the hybrid layers of layers_block_type "
          "[1,3,4]");
  j = tiny();
  j["mamba_headdim"] = 8;
  refused(j, "'mamba_headdim': 8 differs from 16");
  j = tiny();
  j["attention_hidden_size"] = 32;
  refused(j, "'attention_hidden_size': 32 differs from 64");
  j = tiny();
  j["n_mamba_heads"] = 3;
  refused(j, "'n_mamba_heads': 3 does not split mamba_expand x hidden_size = 64 into whole heads");
  j = tiny();
  j["use_shared_mlp_adapter"] = false;
  refused(j,
          "'use_shared_mlp_adapter': false: transformers' Zamba2MLP builds and runs the "
          "gate_up_proj adapters whatever it says");
  j = tiny();
  j["num_key_value_heads"] = 2;
  refused(j, "'use_shared_attention_adapter': true with 4 heads and 2 key-value heads of 16");
  j["use_shared_attention_adapter"] = false;  // GQA without the attention adapters builds
  EXPECT_EQ(parse_model_config(j, "gqa.json").num_key_value_heads, 2);
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}};
  refused(j, "partial_rotary_factor 0.5 with rope type 'linear'");
  j = tiny();
  j["num_mem_blocks"] = 0;
  refused(j, "expected at least one block and a positive rank");
  j = tiny();
  j["num_hidden_layers"] = 0;
  refused(j, "tiny.json: field 'num_hidden_layers'");
  // Another family's file with shared blocks (Note [Architecture fields nobody read]).
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["num_mem_blocks"] = 2;
  refused(llama, "field 'num_mem_blocks': 2 changes the architecture, and model_type 'llama'");
  // Built in code: a hybrid layer without its feed-forward is neither kind.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.no_ffn_layers = {0, 1, 2, 5};
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr(
                  "layer 1 attends full_attention without a feed-forward; expected a Mamba-2 "
                  "layer (linear_attention, no feed-forward) or a hybrid layer")));
}

// Every hybrid layer runs its block whole (the weights are shared, the work is not): the GEMMs
// under hybrid layer 4 (block 0, tied to layer 1's) are layer 1's, per token
//   linear 2 h^2 = 2,048; in_proj 2 h 164 = 10,496; out_proj 2 x 64 h = 4,096;
//   q, k, v 3 x 2 x 64 x 64 = 24,576; o 2 x 64 h = 4,096; q, k, v adapters 3 x (2 x 64 x 8 +
//   2 x 8 x 64) = 6,144; gate_up 2 h 96 = 6,144; its adapter 2 h 8 + 2 x 8 x 96 = 2,048; down
//   2 x 48 h = 3,072: 62,720 a token; a Mamba-2 layer's in_proj and out_proj 14,592.
TEST(Zamba2Models, EveryHybridLayerRunsItsWholeBlock) {
  const ModulePtr m = build(tiny());
  const int64_t T = 8;
  const OpGraph g = trace_model_forward(*m, 1, T);
  auto linear_flops = [&](const std::string& prefix) {
    double f = 0;
    for (const OpNode& node : g.nodes()) {
      if (node.op == "linear" && node.module.starts_with(prefix)) f += node.matmul_flops;
    }
    return f;
  };
  EXPECT_DOUBLE_EQ(linear_flops("model.layers.1."), 62'720.0 * T);
  EXPECT_DOUBLE_EQ(linear_flops("model.layers.3."), 62'720.0 * T);
  EXPECT_DOUBLE_EQ(linear_flops("model.layers.4."), 62'720.0 * T);
  EXPECT_DOUBLE_EQ(linear_flops("model.layers.0."), 14'592.0 * T);
  for (const char* layer : {"model.layers.1", "model.layers.3", "model.layers.4"}) {
    const std::string block = std::string(layer) + ".shared_transformer";
    EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", block), 1) << layer;
    EXPECT_EQ(ops_in(g, "cat", block), 1) << layer;  // [x; e]
  }
  EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", "model.layers.0"), 0);
  EXPECT_EQ(ops_in(g, "to", "model"), 1);  // e = torch.clone(embeddings)
  // The training step: the same forward GEMMs and twice as much backward (input and weight
  // gradients) in layer 4, and its keys and values kept for the fused attention's backward.
  TraceOptions o;
  o.batch = 1;
  o.seq = T;
  const TrainingStep step = trace_training_step(*m, o);
  double forward = 0, backward = 0;
  int attentions = 0;
  for (const TrainingOp& op : step.ops) {
    if (op.call < 0) continue;
    const std::string& fqn = step.calls[static_cast<size_t>(op.call)].fqn;
    attentions += op.op == "scaled_dot_product_attention";
    if (op.op != "linear" || !fqn.starts_with("model.layers.4.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  EXPECT_EQ(attentions, 3);
  EXPECT_DOUBLE_EQ(forward, 62'720.0 * T);
  EXPECT_DOUBLE_EQ(backward, 2 * 62'720.0 * T);
}

// The plan names modules the model builds: each pattern, its first '*' a layer holding the module
// (0 for a Mamba-2 layer's mixer, 3 for a hybrid layer's) and its second the adapter slot layer 3
// holds (1), is a Linear or the Embedding. tests/planner/cost/zamba2_tensor_parallel_test.cpp
// applies it.
TEST(Zamba2Models, TensorParallelPlanNamesItsModules) {
  const ModelFamily& f = family_of(parse_model_config(tiny(), "tiny.json"));
  std::vector<std::tuple<std::string, std::string, int64_t>> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  const std::string st = "model.layers.*.shared_transformer.";
  using Rule = std::tuple<std::string, std::string, int64_t>;
  EXPECT_EQ(rules,
            (std::vector<Rule>{{"model.embed_tokens", "rowwise", 1},
                               {"model.layers.*.mamba.in_proj", "colwise", 1},
                               {"model.layers.*.mamba.out_proj", "rowwise", 1},
                               {"model.layers.*.mamba_decoder.mamba.in_proj", "colwise", 1},
                               {"model.layers.*.mamba_decoder.mamba.out_proj", "rowwise", 1},
                               {st + "self_attn.q_proj", "colwise", 1},
                               {st + "self_attn.k_proj", "colwise", 1},
                               {st + "self_attn.v_proj", "colwise", 1},
                               {st + "self_attn.o_proj", "rowwise", 1},
                               {st + "self_attn.linear_q_adapter_list.*.1", "colwise", 1},
                               {st + "self_attn.linear_k_adapter_list.*.1", "colwise", 1},
                               {st + "self_attn.linear_v_adapter_list.*.1", "colwise", 1},
                               {st + "feed_forward.gate_up_proj", "colwise", 2},
                               {st + "feed_forward.gate_up_proj_adapter_list.*.1", "colwise", 2},
                               {st + "feed_forward.down_proj", "rowwise", 1},
                               {"lm_head", "colwise", 1}}));
  const ModulePtr m = build(tiny());
  for (const auto& [pattern, style, parts] : rules) {
    std::string fqn = pattern;
    const bool mixer_layer = pattern.find(".mamba.") != std::string::npos &&
                             pattern.find("mamba_decoder") == std::string::npos;
    if (const size_t star = fqn.find('*'); star != std::string::npos) {
      fqn.replace(star, 1, mixer_layer ? "0" : "3");
    }
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "1");
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
