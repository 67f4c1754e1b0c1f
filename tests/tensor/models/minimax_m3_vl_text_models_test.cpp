// minimax_m3_vl_text (MiniMax-M3's language model) against hand formulas written here from
// transformers' configuration_minimax_m3_vl.py and modeling_minimax_m3_vl.py
// (MiniMaxM3VLTextConfig, MiniMaxM3VLForCausalLM). Notation: h hidden, H heads, K key-value heads,
// d head_dim, m index_n_heads, e index_head_dim, E experts, F intermediate_size (each expert), S
// shared_intermediate_size, D dense_intermediate_size, V vocabulary. Per layer:
//   self_attn  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d], q_norm, k_norm [d]
//   indexer    (sparse layers) q_proj [m e, h], k_proj [e, h], q_norm, k_norm [e]
//   mlp        dense layers: gate_up_proj [2 D, h], down_proj [h, D]; sparse layers: gate [E, h],
//              experts.gate_up_proj [E, 2F, h], experts.down_proj [E, h, F],
//              shared_experts.gate_up_proj [2 S, h], shared_experts.down_proj [h, S]
//   norms      input_layernorm, post_attention_layernorm [h]
// then model.norm [h] and an untied lm_head [V, h].
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
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::ops_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Three layers: layer 0 dense with full attention, layers 1 and 2 sparse (MoE) with the indexer
// picking 2 blocks of 4 keys (8 keys a query). V 1000, h 64, H 4, K 2, d 16 (8 rotated), m 2,
// e 8, E 4 (top 2), F 32, S 48, D 96.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "model_type": "minimax_m3_vl_text", "vocab_size": 1000, "hidden_size": 64,
    "intermediate_size": 32, "dense_intermediate_size": 96, "shared_intermediate_size": 48,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rotary_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "layer_types": ["full_attention", "minimax_m3_sparse", "minimax_m3_sparse"],
    "index_n_heads": 2, "index_head_dim": 8, "index_block_size": 4, "index_topk_blocks": 2,
    "index_local_blocks": 1, "max_position_embeddings": 128, "torch_dtype": "bfloat16"
  })");
}

// V 1000, h 64, H 4, K 2, d 16, m 2, e 8, E 4, F 32, S 48, D 96:
//   attention  q 64*64 = 4,096; k, v 64*32 = 2,048 each; o 4,096; q_norm, k_norm 16 each = 12,320
//   indexer    q_proj 64*16 = 1,024; k_proj 64*8 = 512; q_norm, k_norm 8 each          =  1,552
//   dense MLP  gate_up 64*192 = 12,288; down 96*64 = 6,144                              = 18,432
//   MoE        gate 4*64 = 256; experts 4*64*64 + 4*64*32 = 24,576;
//              shared 64*96 + 48*64 = 9,216                                              = 34,048
//   layer 0    12,320 + 18,432 + 2 norms 128                                             = 30,880
//   layers 1-2 12,320 + 1,552 + 34,048 + 128                                             = 48,048
//   total      embed 64,000 + 30,880 + 2 * 48,048 + norm 64 + lm_head 64,000             = 255,040
TEST(MinimaxM3VlTextModels, TinyMatchesTheHandTotal) {
  const int64_t h = 64, V = 1000;
  const int64_t attention = h * 64 + 2 * h * 32 + 64 * h + 2 * 16;
  EXPECT_EQ(attention, 12'320);
  const int64_t indexer = h * 16 + h * 8 + 2 * 8;
  EXPECT_EQ(indexer, 1'552);
  const int64_t dense = h * 192 + 96 * h;
  const int64_t moe = 4 * h + 4 * 64 * h + 4 * h * 32 + h * 96 + 48 * h;
  EXPECT_EQ(moe, 34'048);
  const int64_t layer0 = attention + dense + 2 * h,
                sparse_layer = attention + indexer + moe + 2 * h;
  EXPECT_EQ(layer0, 30'880);
  EXPECT_EQ(sparse_layer, 48'048);
  const int64_t total = V * h + layer0 + 2 * sparse_layer + h + V * h;
  EXPECT_EQ(total, 255'040);

  const ModelConfig c = parse_model_config(tiny(), "tiny minimax_m3_vl_text");
  EXPECT_EQ(c.hidden_act, "silu");  // MiniMaxM3VLTextConfig forces it
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.dense_intermediate_size, 96);
  EXPECT_EQ(c.shared_expert_intermediate_size, 48);
  EXPECT_EQ(c.index_topk, 8);  // 2 blocks of 4 keys
  EXPECT_EQ(c.index_block_size, 4);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);  // rotary_dim 8 of 16
  EXPECT_EQ(c.rope_theta, 5e6);                    // default_theta
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "MiniMaxM3VLForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "MiniMaxM3VLTextModel");
  EXPECT_EQ(m->get_submodule("model.layers.1").type_name(), "MiniMaxM3VLDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn").type_name(), "MiniMaxM3VLAttention");
  EXPECT_EQ(m->get_submodule("model.layers.1.self_attn.indexer").type_name(), "MiniMaxM3VLIndexer");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "MiniMaxM3VLSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.gate").type_name(), "MiniMaxM3VLTopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.experts").type_name(), "MiniMaxM3VLExperts");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp.shared_experts").type_name(),
            "MiniMaxM3VLDenseMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "MiniMaxM3VLDenseMLP");
  EXPECT_EQ(m->get_submodule("model.norm").type_name(), "MiniMaxM3VLRMSNorm");
  // Every parameter outside the layers, in MiniMaxM3VLForCausalLM's order.
  std::vector<std::string> top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight",
                                           "lm_head.weight"}));
  // A dense full-attention layer and a sparse one, in MiniMaxM3VLDecoderLayer's order (self_attn,
  // mlp, input_layernorm, post_attention_layernorm), the attention's in its __init__'s (the four
  // projections, the two norms, the indexer), the MoE block's gate, experts, shared_experts.
  EXPECT_EQ(names_under(*m, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
                "post_attention_layernorm.weight"}));
  EXPECT_EQ(names_under(*m, "model.layers.2."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "self_attn.indexer.q_proj.weight", "self_attn.indexer.k_proj.weight",
                "self_attn.indexer.q_norm.weight", "self_attn.indexer.k_norm.weight",
                "mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                "mlp.shared_experts.gate_up_proj.weight", "mlp.shared_experts.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.indexer.q_proj.weight").sizes(),
            DimVector({16, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.self_attn.indexer.k_proj.weight").sizes(),
            DimVector({8, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.gate_up_proj").sizes(),
            DimVector({4, 64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.experts.down_proj").sizes(),
            DimVector({4, 64, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mlp.shared_experts.gate_up_proj.weight").sizes(),
            DimVector({96, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.gate_up_proj.weight").sizes(),
            DimVector({192, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.k_proj.weight").sizes(),
            DimVector({32, 64}));
  // Two kinds: the dense full layer, and the sparse layers whose queries read 8 keys each.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "dense");
  EXPECT_EQ(describe(s.kinds[1]), "sparse 8 moe");
  EXPECT_EQ(s.count(1), 2);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// A token reaches 2 of the 4 experts: active = total - 2 layers x 2 unpicked experts x 3 F h.
//   255,040 - 2 * 2 * 3 * 32 * 64 (24,576)                                          = 230,464
TEST(MinimaxM3VlTextModels, ActiveParametersAndTheRouterBuffer) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  EXPECT_EQ(active_parameters(*build_model(c), c), 255'040 - 2 * 2 * 3 * 32 * 64);
  EXPECT_EQ(active_parameters(*build_model(c), c), 230'464);
  // e_score_correction_bias [E] is a buffer of each router (mlp.gate): counted aside.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 2 * 4);
  EXPECT_EQ(parameters_beyond_model(c).mtp, 0);
}

// MiniMax-M3 (configs/models/minimax-m3.json, the multimodal minimax_m3_vl file): V 200,064,
// h 6,144, 60 layers, H 64, K 4, d 128 (64 rotated), m 4, e 128, E 128 (top 4), F 3,072,
// S 3,072, D 12,288; the first 3 layers dense, every layer sparse (16 blocks of 128 keys).
//   attention  6,144 * 8,192 + 2 * 6,144 * 512 + 8,192 * 6,144 + 2 * 128        =    106,955,008
//   indexer    6,144 * 512 + 6,144 * 128 + 2 * 128                               =      3,932,416
//   dense MLP  3 * 6,144 * 12,288                                                =    226,492,416
//   MoE        gate 786,432 + experts 128 * 3 * 3,072 * 6,144 (7,247,757,312)
//              + shared 3 * 6,144 * 3,072 (56,623,104)                           =  7,305,166,848
//   dense layer  106,955,008 + 3,932,416 + 226,492,416 + 12,288                  =    337,392,128
//   sparse layer 106,955,008 + 3,932,416 + 7,305,166,848 + 12,288                =  7,416,066,560
//   total      3 * 337,392,128 + 57 * 7,416,066,560 + 2 * 200,064 * 6,144 + 6,144
//                                                                                = 426,186,362,880
// The published "428B total, 23B active" (MiniMax's release, June 2026; "~427B" in ports) counts
// the vision tower (32 layers of 1,280: 631,185,920) and projector (234,381,312) as well:
// 427,051,930,112. Active, 4 of 128 experts a layer: 25,974,263,808; 23,515,877,376 without the
// embedding and output layer (the "23B").
TEST(MinimaxM3VlTextModels, FlagshipMatchesTheHandTotal) {
  const int64_t V = 200064, h = 6144;
  const int64_t attention = h * 8192 + 2 * h * 512 + 8192 * h + 2 * 128;
  EXPECT_EQ(attention, 106'955'008);
  const int64_t indexer = h * 512 + h * 128 + 2 * 128;
  EXPECT_EQ(indexer, 3'932'416);
  const int64_t experts = int64_t{128} * 3 * 3072 * h;
  EXPECT_EQ(experts, 7'247'757'312);
  const int64_t moe = 128 * h + experts + 3 * h * 3072;
  EXPECT_EQ(moe, 7'305'166'848);
  const int64_t dense_layer = attention + indexer + 3 * h * 12288 + 2 * h;
  const int64_t sparse_layer = attention + indexer + moe + 2 * h;
  EXPECT_EQ(dense_layer, 337'392'128);
  EXPECT_EQ(sparse_layer, 7'416'066'560);
  const int64_t total = 3 * dense_layer + 57 * sparse_layer + 2 * V * h + h;
  EXPECT_EQ(total, 426'186'362'880);
  EXPECT_EQ(total + 631'185'920 + 234'381'312, 427'051'930'112);  // with the vision side
  const int64_t active = total - 57 * experts + 57 * 4 * 3 * 3072 * h;
  EXPECT_EQ(active, 25'974'263'808);
  EXPECT_EQ(active - 2 * V * h, 23'515'877'376);

  const ModelConfig c = find_model_config("minimax-m3");
  EXPECT_EQ(c.model_type, "minimax_m3_vl_text");
  EXPECT_EQ(c.multimodal_model_type, "minimax_m3_vl");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);  // the outer file's
  EXPECT_EQ(c.hidden_act, "silu");             // the file's "swigluoai", normalized
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.index_n_heads, 4);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 2048);
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 57 * 128);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 2u);
  EXPECT_EQ(describe(s.kinds[0]), "sparse 2048 dense");
  EXPECT_EQ(describe(s.kinds[1]), "sparse 2048 moe");
  EXPECT_EQ(s.count(0), 3);
  EXPECT_EQ(s.count(1), 57);
  // The plan writes the language model alone, in the flat keys; it reads back equal (the outer
  // model_type is not written).
  ModelConfig text = c;
  text.multimodal_model_type.clear();
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), text);
}

// MiniMaxM3VLTextConfig's defaults: every layer sparse (MoE) and full attention (no layer_types,
// no sparse_attention_config), so no indexer:
//   layer  106,955,008 + 7,305,166,848 + 12,288 = 7,412,134,144
//   total  60 * 7,412,134,144 + 2 * 200,064 * 6,144 + 6,144 = 447,186,441,216
TEST(MinimaxM3VlTextModels, ClassDefaultsBuildEveryLayerSparseAndFull) {
  const ModelConfig c = parse_model_config(
      nlohmann::json{{"model_type", "minimax_m3_vl_text"}, {"torch_dtype", "bfloat16"}},
      "defaults");
  EXPECT_EQ(c.num_hidden_layers, 60);
  EXPECT_TRUE(c.dense_layers.empty());
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);  // no factor, no rotary_dim: the whole head
  EXPECT_EQ(c.max_position_embeddings, 524288);
  EXPECT_EQ(int64_t{60} * 7'412'134'144 + 2 * int64_t{200064} * 6144 + 6144, 447'186'441'216);
  EXPECT_EQ(build_model(c)->parameters_numel(), 447'186'441'216);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "moe");
}

// The checkpoints' own keys, as the config class reads them: moe_layer_freq (when no
// mlp_layer_types), sparse_attention_config (its sparse_* sizes win over the flat index_* keys;
// sparse_attention_freq gives layer_types when none is listed), num_experts for
// num_local_experts, partial_rotary_factor over rotary_dim.
TEST(MinimaxM3VlTextModels, LegacyKeysReadAsTheConfigClassReadsThem) {
  const ModelConfig flat = parse_model_config(tiny(), "flat");
  nlohmann::json j = tiny();
  j.erase("mlp_layer_types");
  j.erase("layer_types");
  j.erase("num_local_experts");
  j["num_experts"] = 4;
  j["moe_layer_freq"] = {0, 1, true};
  j["index_block_size"] = 128;  // the legacy block size below wins
  j["sparse_attention_config"] = {
      {"sparse_attention_freq", {0, 1, 1}}, {"sparse_block_size", 4}, {"sparse_topk_blocks", 2},
      {"sparse_num_index_heads", 2},        {"sparse_index_dim", 8},  {"sparse_local_block", 1}};
  j["hidden_act"] = "swigluoai";
  j["n_shared_experts"] = 1;
  j["use_routing_bias"] = true;
  j["scoring_func"] = "sigmoid";
  j["use_qk_norm"] = true;
  EXPECT_EQ(parse_model_config(j, "legacy"), flat);
  // partial_rotary_factor wins over rotary_dim, here or in rope_parameters.
  j = tiny();
  j["partial_rotary_factor"] = 0.25;
  EXPECT_DOUBLE_EQ(parse_model_config(j, "factor").partial_rotary_factor, 0.25);
  j = tiny();
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.25}};
  EXPECT_DOUBLE_EQ(parse_model_config(j, "rope_parameters").partial_rotary_factor, 0.25);
  // mlp_layer_types decides over moe_layer_freq, which the class pops unread.
  j = tiny();
  j["moe_layer_freq"] = {1, 1, 1};
  EXPECT_EQ(parse_model_config(j, "both").dense_layers, (std::vector<int64_t>{0}));
}

// The multimodal file (Note [Multimodal configs]): minimax_m3_vl builds its own text class
// whatever text_config's model_type says (MiniMaxM3VLConfig pops it), takes it when absent, and
// ties the output layer when its own tie_word_embeddings or the text config's says so.
TEST(MinimaxM3VlTextModels, MultimodalWrapperParsesToTheLanguageModel) {
  nlohmann::json text = tiny();
  text.erase("model_type");
  text.erase("torch_dtype");
  nlohmann::json j = {{"model_type", "minimax_m3_vl"},
                      {"text_config", text},
                      {"vision_config", {{"hidden_size", 32}}},
                      {"torch_dtype", "bfloat16"}};
  ModelConfig want = parse_model_config(tiny(), "tiny");
  want.multimodal_model_type = "minimax_m3_vl";
  EXPECT_EQ(parse_model_config(j, "wrapper"), want);
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(j, "outer tie").tie_word_embeddings);
  j.erase("tie_word_embeddings");
  j["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(j, "text tie").tie_word_embeddings);
  j["text_config"]["model_type"] = "minimax_m2";
  EXPECT_THAT([&] { parse_model_config(j, "other text"); },
              ThrowsMessage<Error>(
                  HasSubstr("'minimax_m2', but 'minimax_m3_vl' always builds its text model "
                            "minimax_m3_vl_text")));
}

TEST(MinimaxM3VlTextModels, RefusesWhatTransformersCannotBuildOrBuildsOtherwise) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr(what)));
  };
  nlohmann::json j = tiny();
  j["shared_intermediate_size"] = 0;
  refused(j, "field 'shared_intermediate_size': 0, expected a positive width");
  j = tiny();
  j["n_shared_experts"] = 2;
  refused(j, "field 'n_shared_experts': 2: transformers' MiniMax-M3 builds one shared expert");
  j = tiny();
  j["use_routing_bias"] = false;
  refused(j, "field 'use_routing_bias': false");
  j = tiny();
  j["scoring_func"] = "softmax";
  refused(j, "field 'scoring_func': \"softmax\"");
  j = tiny();
  j["use_qk_norm"] = false;
  refused(j, "field 'use_qk_norm': false");
  j = tiny();
  j["num_experts"] = 8;  // beside num_local_experts 4
  refused(j, "field 'num_experts': 8 differs from num_local_experts 4");
  j = tiny();
  j["layer_types"][1] = "sliding_attention";  // transformers' attention would attend in full
  refused(j, "field 'layer_types': \"sliding_attention\" is not built");
  j = tiny();
  j["layer_types"] = {"full_attention", "minimax_m3_sparse"};
  refused(j, "field 'layer_types': expected a list of num_hidden_layers = 3 entries");
  j = tiny();
  j["mlp_layer_types"][0] = "moe";
  refused(j, "field 'mlp_layer_types': \"moe\" is not built");
  j = tiny();
  j.erase("mlp_layer_types");
  j["moe_layer_freq"] = 1;  // the class iterates it
  refused(j, "field 'moe_layer_freq': expected a list of num_hidden_layers = 3 flags");
  j = tiny();
  j["sparse_attention_config"] = 3;
  refused(j, "field 'sparse_attention_config': expected an object or null");
  j = tiny();
  j.erase("layer_types");
  j["sparse_attention_config"] = {{"sparse_attention_freq", {1, 1}}};
  refused(j, "field 'sparse_attention_config': sparse_attention_freq: expected a list");
  j = tiny();
  j["index_n_heads"] = 3;  // the block mask repeats each indexer head over H / m query heads
  refused(j, "field 'index_n_heads': 3 does not divide num_attention_heads 4");
  j = tiny();
  j["index_head_dim"] = 7;
  refused(j, "field 'index_head_dim': 7, expected an even width");
  j = tiny();
  j["index_block_size"] = 0;
  refused(j, "field 'index_block_size': 0, expected a positive integer");
  j = tiny();
  j["index_topk_blocks"] = -1;
  refused(j, "field 'index_topk_blocks': -1, expected a positive integer");
  j = tiny();
  j["index_local_blocks"] = -1;
  refused(j, "field 'index_local_blocks': -1, expected >= 0");
  j = tiny();
  j["dense_intermediate_size"] = 0;  // layer 0 is dense
  refused(j, "field 'dense_intermediate_size': 0, expected a positive width");
  j = tiny();
  j["rotary_dim"] = 18;  // wider than the head
  refused(j, "field 'rotary_dim': must be even and in (0, head_dim = 16], got 18");
  // Block-sparse attention needs no latent, but only this family picks blocks: a DeepSeek-V3.2
  // config built in code with a block size is refused, and so is a block that does not divide
  // the keys.
  ModelConfig v32 = find_model_config("deepseek-v3.2");
  v32.index_block_size = 128;
  EXPECT_THAT([&] { validate(v32); }, ThrowsMessage<Error>(HasSubstr("field 'index_block_size'")));
  ModelConfig c = parse_model_config(tiny(), "tiny");
  c.index_topk = 6;
  EXPECT_THAT([&] { validate(c); }, ThrowsMessage<Error>(HasSubstr("field 'index_block_size'")));
}

// The traced forward at 2 x 16 tokens (T = 32). Matrix products, by module:
//   layer 1 self_attn  q, k, v 2*32*64*(64 + 32 + 32) = 524,288; o 2*32*64*64 = 262,144;
//                      the attention over 2 blocks of 4 = 8 keys a query, 2 B H L 8 (d + d)
//                      = 2*2*4*16*8*32 = 65,536; the indexer's projections 2*32*64*(16 + 8)
//                      = 98,304 and its scoring over all 16 keys, 2 B m L S (e + 1)
//                      = 2*2*2*16*16*9 = 18,432                                        = 968,704
//   layer 0 self_attn  786,432 of projections and 2*2*4*16*16*32 = 131,072            = 917,504
//   layer 1 mlp        router 2*32*64*4 = 16,384; 4 experts on ceil(32*2/4) = 16 tokens,
//                      2*4*16*64*64 + 2*4*16*32*64 = 786,432; shared expert
//                      2*32*64*96 + 2*32*48*64 = 589,824                               = 1,392,640
//   layer 0 mlp        2*32*64*192 + 2*32*96*64                                        = 1,179,648
TEST(MinimaxM3VlTextModels, TraceScoresEveryKeyAndAttendsTheTopBlocks) {
  const OpGraph g = trace_model_forward(*build_model(parse_model_config(tiny(), "tiny")), 2, 16);
  const auto matmul_of = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.self_attn.indexer"), 98'304.0 + 18'432.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.self_attn"),
                   524'288.0 + 262'144.0 + 65'536.0 + 98'304.0 + 18'432.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.self_attn"), 968'704.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.self_attn"), 917'504.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp"), 16'384.0 + 786'432.0 + 589'824.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.1.mlp.experts"), 786'432.0);
  EXPECT_DOUBLE_EQ(matmul_of("model.layers.0.mlp"), 1'179'648.0);
  // One attention call for the layer and one for the indexer's scoring.
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "model.layers.1.self_attn"), 1);
  EXPECT_EQ(ops_in(g, "scaled_dot_product_attention", "model.layers.1.self_attn.indexer"), 1);
  EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", "model.layers.0."), 1);
  // SwiGLU-OAI: the gate clamped above (a minimum), the up clamped both ways (a maximum and a
  // minimum), one sigmoid; in the dense MLP, the shared expert and the experts alike.
  for (const char* mlp :
       {"model.layers.0.mlp", "model.layers.1.mlp.shared_experts", "model.layers.1.mlp.experts"}) {
    EXPECT_EQ(ops_in(g, "minimum", mlp), 2) << mlp;
    EXPECT_EQ(ops_in(g, "maximum", mlp), 1) << mlp;
    EXPECT_EQ(ops_in(g, "sigmoid", mlp), 1) << mlp;
  }
  // The router's sigmoid scores.
  EXPECT_EQ(ops_in(g, "sigmoid", "model.layers.1.mlp.gate"), 1);
  // Gemma-style norms: per head on q and k (and on the indexer's), two per layer, and the final.
  EXPECT_EQ(ops_under(g, "rms_norm", "model.layers.1."), 6);
  EXPECT_EQ(ops_under(g, "rms_norm", "model.layers.0."), 4);
}

// The training step of the tiny model: layer 1's matrix products outside its two attention calls
// (968,704 - 65,536 - 18,432 of the attention, 1,392,640 of the MoE block) forward, and each
// linear layer's backward twice its forward (the input's and the weight's gradients).
TEST(MinimaxM3VlTextModels, TrainingTraceOfASparseLayer) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double matmul = 0, linear_forward = 0, linear_backward = 0;
  int attention_calls = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block < 0 || !st.blocks[static_cast<size_t>(op.block)].fqn.ends_with("layers.1")) {
      continue;
    }
    if (op.op == "scaled_dot_product_attention") {
      ++attention_calls;
      continue;
    }
    matmul += op.matmul_flops;
    if (op.op == "linear") {
      linear_forward += op.matmul_flops;
      linear_backward += op.backward_matmul_flops;
    }
  }
  EXPECT_EQ(attention_calls, 2);  // the attention and the indexer's scoring
  EXPECT_DOUBLE_EQ(matmul, 968'704.0 - 65'536.0 - 18'432.0 + 1'392'640.0);
  EXPECT_DOUBLE_EQ(matmul, 2'277'376.0);
  EXPECT_GT(linear_forward, 0);
  EXPECT_DOUBLE_EQ(linear_backward, 2 * linear_forward);
}

// The family's flags and Megatron-style plan: each pattern names a module the model builds (the
// dense MLP's on layer 0, the MoE block's on layer 1); tests/planner/cost/
// minimax_m3_vl_text_tensor_parallel_test.cpp applies it.
TEST(MinimaxM3VlTextModels, TensorParallelPlanNamesTheModelsModules) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_TRUE(f.block_sparse_attention);
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("shared_expert_intermediate_size"), "shared_intermediate_size");
  using Rule = std::tuple<std::string, std::string, int64_t>;
  std::vector<Rule> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  EXPECT_EQ(rules,
            (std::vector<Rule>{{"model.embed_tokens", "rowwise", 1},
                               {"model.layers.*.self_attn.q_proj", "colwise", 1},
                               {"model.layers.*.self_attn.k_proj", "colwise", 1},
                               {"model.layers.*.self_attn.v_proj", "colwise", 1},
                               {"model.layers.*.self_attn.o_proj", "rowwise", 1},
                               {"model.layers.*.mlp.gate_up_proj", "colwise", 2},
                               {"model.layers.*.mlp.down_proj", "rowwise", 1},
                               {"model.layers.*.mlp.experts", "experts", 1},
                               {"model.layers.*.mlp.shared_experts.gate_up_proj", "colwise", 2},
                               {"model.layers.*.mlp.shared_experts.down_proj", "rowwise", 1},
                               {"lm_head", "colwise", 1}}));
  const ModulePtr m = build_model(c);
  for (const auto& [pattern, style, parts] : rules) {
    std::string fqn = pattern;
    const bool moe_rule = fqn.find("experts") != std::string::npos;
    if (const size_t star = fqn.find('*'); star != std::string::npos) {
      fqn.replace(star, 1, moe_rule ? "1" : "0");
    }
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding" || type == "MiniMaxM3VLExperts")
        << fqn << " is a " << type;
  }
  // The indexer and the router are in no rule: replicated.
  for (const TensorParallelRule& r : f.tp_plan) {
    EXPECT_EQ(std::string(r.pattern).find("indexer"), std::string::npos) << r.pattern;
    EXPECT_NE(r.pattern, "model.layers.*.mlp.gate") << r.pattern;
  }
}

}  // namespace
}  // namespace shardplan::tensor
