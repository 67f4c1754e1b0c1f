// longcat_flash (Meituan's LongCat-Flash) against hand formulas written here from transformers'
// modeling_longcat_flash.py and the LongCat-Flash technical report (arXiv:2509.01322).
// Notation: h hidden, n heads, rq q_lora_rank, rkv kv_lora_rank, d qk_nope_head_dim, r
// qk_rope_head_dim, v v_head_dim, F ffn_hidden_size (the two dense MLPs), Fe
// expert_ffn_hidden_size, E n_routed_experts, Z zero_expert_num, k moe_topk. Per layer:
//   mlp        experts.gate_up_proj [E + Z, 2 Fe, h] (transformers 5 sizes it by every expert the
//              router scores; the Z zero experts' slices never compute), experts.down_proj
//              [E, h, Fe], router.classifier [E + Z, h]
//   self_attn  two latent attentions: q_a_proj [rq, h], q_a_layernorm [rq], q_b_proj
//              [n (d + r), rq], kv_a_proj_with_mqa [rkv + r, h], kv_a_layernorm [rkv],
//              kv_b_proj [n (d + v), rkv], o_proj [h, n v]
//   mlps       two gated MLPs: gate_proj, up_proj [F, h], down_proj [h, F]
//   norms      input_layernorm and post_attention_layernorm, two [h] each
// then model.norm [h] and an untied lm_head [V, h].
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
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
using test::StEntry;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Two layers; 4 routed and 2 zero experts, top 3: a token reaches 3 x 4 / 6 = 2 computing experts
// on average (Note [Zero-computation experts] in tensor/models/models.h).
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "model_type": "longcat_flash", "vocab_size": 1000, "hidden_size": 64,
    "ffn_hidden_size": 96, "expert_ffn_hidden_size": 32, "num_layers": 2,
    "num_attention_heads": 4, "kv_lora_rank": 32, "q_lora_rank": 16, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16, "v_head_dim": 16, "head_dim": 8, "n_routed_experts": 4,
    "zero_expert_num": 2, "moe_topk": 3, "max_position_embeddings": 128,
    "torch_dtype": "bfloat16"
  })");
}

TEST(LongcatFlashModels, TinyMatchesTheHandTotal) {
  // V 1000, h 64, n 4, rq 16, rkv 32, d 16, r 8, v 16, F 96, Fe 32, E 4, Z 2:
  //   attention  q_a_proj 64*16 = 1,024; q_a_layernorm 16; q_b_proj 16 * 4*24 = 1,536;
  //              kv_a_proj_with_mqa 64*40 = 2,560; kv_a_layernorm 32; kv_b_proj 32 * 4*32 =
  //              4,096; o_proj 4*16 * 64 = 4,096                                      = 13,360
  //   MLP        3 * 64*96                                                            = 18,432
  //   experts    gate_up_proj 6 * 64 * 64 = 24,576; down_proj 4 * 64*32 = 8,192       = 32,768
  //   router     64 * 6                                                               =    384
  //   layer      2 * 13,360 + 2 * 18,432 + 4 norms * 64 + 384 + 32,768               = 96,992
  //   total      embed 64,000 + 2 * 96,992 + norm 64 + lm_head 64,000                = 322,048
  const int64_t h = 64, V = 1000;
  const int64_t attention =
      h * 16 + 16 + 16 * 4 * 24 + h * 40 + 32 + 32 * 4 * (16 + 16) + 4 * 16 * h;
  EXPECT_EQ(attention, 13'360);
  const int64_t layer = 2 * attention + 2 * 3 * h * 96 + 4 * h + h * 6 + 6 * 64 * h + 4 * h * 32;
  EXPECT_EQ(layer, 96'992);
  const int64_t total = V * h + 2 * layer + h + V * h;
  EXPECT_EQ(total, 322'048);

  const ModelConfig c = parse_model_config(tiny(), "tiny longcat_flash");
  EXPECT_EQ(c.num_hidden_layers, 2);  // num_layers: decoder layers, two attentions each
  EXPECT_EQ(c.num_local_experts, 4);
  EXPECT_EQ(c.zero_experts, 2);
  EXPECT_EQ(c.num_experts_per_tok, 3);
  EXPECT_EQ(c.intermediate_size, 32);
  EXPECT_EQ(c.dense_intermediate_size, 96);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_theta, 1e7);  // LongcatFlashConfig.default_theta
  EXPECT_FALSE(c.tie_word_embeddings);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(m->type_name(), "LongcatFlashForCausalLM");
  EXPECT_EQ(m->get_submodule("model").type_name(), "LongcatFlashModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "LongcatFlashDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "LongcatFlashMoE");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.experts").type_name(), "LongcatFlashExperts");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp.router").type_name(), "LongcatFlashTopkRouter");
  EXPECT_EQ(m->get_submodule("model.layers.0.mlps.1").type_name(), "LongcatFlashMLP");
  // Every parameter outside the layers, in LongcatFlashForCausalLM's order.
  std::vector<std::string> top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("model.layers.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight",
                                           "lm_head.weight"}));
  // One layer, in LongcatFlashDecoderLayer's registration order: mlp (experts, then router),
  // self_attn, mlps, input_layernorm, post_attention_layernorm.
  std::vector<std::string> want = {"mlp.experts.gate_up_proj", "mlp.experts.down_proj",
                                   "mlp.router.classifier.weight"};
  for (const char* i : {"0", "1"}) {
    for (const char* p :
         {"q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
          "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"}) {
      want.push_back(std::string("self_attn.") + i + "." + p);
    }
  }
  for (const char* i : {"0", "1"}) {
    for (const char* p : {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}) {
      want.push_back(std::string("mlps.") + i + "." + p);
    }
  }
  for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
    for (const char* i : {"0", "1"}) want.push_back(std::string(norm) + "." + i + ".weight");
  }
  EXPECT_EQ(names_under(*m, "model.layers.1."), want);
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.experts.gate_up_proj").sizes(),
            DimVector({6, 64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.experts.down_proj").sizes(),
            DimVector({4, 64, 32}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.router.classifier.weight").sizes(),
            DimVector({6, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.1.q_b_proj.weight").sizes(),
            DimVector({96, 16}));
  EXPECT_EQ(m->get_parameter("model.layers.0.self_attn.1.kv_a_proj_with_mqa.weight").sizes(),
            DimVector({40, 64}));
  // One kind of layer: the planner traces one and multiplies it.
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 1u);
  EXPECT_EQ(describe(s.kinds[0]), "moe");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// Note [Zero-computation experts]: a token's 3 picks among 6 experts reach 2 of the 4 computing
// ones on average; the zero experts' gate_up_proj slices are never active.
//   experts of a layer: 32,768, of which the 2 idle slices 2 * 64 * 64 = 8,192
//   active: 322,048 - 2 * 32,768 + 2 layers * 2 experts * 3 * 32 * 64 (6,144)        = 281,088
TEST(LongcatFlashModels, ActiveParametersCountTopKAmongEveryExpert) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const int64_t active = 322'048 - 2 * 32'768 + 2 * 2 * 3 * 32 * 64;
  EXPECT_EQ(active, 281'088);
  EXPECT_EQ(active_parameters(*build_model(c), c), active);
  EXPECT_DOUBLE_EQ(routed_experts_per_token(c), 2.0);
  // The router's bias buffer scores the zero experts too: 6 values a layer.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 2 * 6);
  EXPECT_EQ(parameters_beyond_model(c).mtp, 0);
}

// LongCat-Flash-Chat (configs/models/longcat-flash-chat.json): V 131,072, h 6,144, 28 layers,
// n 64, rq 1,536, rkv 512, d 128, r 64, v 128, F 12,288, Fe 2,048, E 512, Z 256, k 12.
//   attention  9,437,184 + 1,536 + 18,874,368 + 3,538,944 + 512 + 8,388,608
//              + 50,331,648                                                    =     90,572,800
//   MLP        3 * 6,144 * 12,288                                              =    226,492,416
//   experts    gate_up 768 * 4,096 * 6,144 = 19,327,352,832; down 512 * 6,144 * 2,048
//              = 6,442,450,944                                                 = 25,769,803,776
//   router     6,144 * 768                                                     =      4,718,592
//   layer      2 * 90,572,800 + 2 * 226,492,416 + 4 * 6,144 + 4,718,592
//              + 25,769,803,776                                                = 26,408,677,376
//   total      28 layers + 2 * 131,072 * 6,144 + 6,144                         = 741,053,585,408
// The published "560B" is the checkpoint's count, whose experts hold gate and up for the 512
// computing experts only: 741,053,585,408 - 28 * 256 * 4,096 * 6,144 = 560,664,958,976.
// Active, 8 computing experts a layer (12 x 512 / 768): 19,499,079,680 outside the experts +
// 28 * 8 * 37,748,736 = 27,954,796,544; without the input embedding 27.15 B, the report's
// "~27B on average" (18.69 B with no computing expert, 31.38 B with 12: its 18.6B-31.3B).
TEST(LongcatFlashModels, ChatConfigMatchesTheHandTotal) {
  const int64_t V = 131072, h = 6144, L = 28, n = 64;
  const int64_t attention =
      h * 1536 + 1536 + 1536 * n * 192 + h * 576 + 512 + 512 * n * 256 + n * 128 * h;
  EXPECT_EQ(attention, 90'572'800);
  const int64_t mlp = 3 * h * 12288;
  const int64_t experts = int64_t{768} * 4096 * h + int64_t{512} * h * 2048;
  EXPECT_EQ(experts, 25'769'803'776);
  const int64_t layer = 2 * attention + 2 * mlp + 4 * h + h * 768 + experts;
  EXPECT_EQ(layer, 26'408'677'376);
  const int64_t total = L * layer + 2 * V * h + h;
  EXPECT_EQ(total, 741'053'585'408);
  EXPECT_EQ(total - L * 256 * 4096 * h, 560'664'958'976);  // the checkpoint's "560B"
  const int64_t outside = total - L * experts;
  EXPECT_EQ(outside, 19'499'079'680);
  const int64_t active = outside + L * 8 * (3 * 2048 * h);
  EXPECT_EQ(active, 27'954'796'544);

  const ModelConfig c = find_model_config("longcat-flash-chat");
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_local_experts, 512);
  EXPECT_EQ(c.zero_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 12);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  EXPECT_EQ(parameters_beyond_model(c).router_bias, L * 768);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// transformers' own test config (tests/models/longcat_flash/test_modeling_longcat_flash.py,
// LongcatFlashModelTester): V 99, h 144, F 288, Fe 48, one layer, n 8, rkv 16, rq 48, r 4, v 8,
// d 8, E 4, Z 2, k 2.
//   attention  6,912 + 48 + 48 * 8*12 (4,608) + 144 * 20 (2,880) + 16 + 16 * 8*16 (2,048)
//              + 8*8 * 144 (9,216)                                                 = 25,728
//   layer      2 * 25,728 + 2 * 3 * 144 * 288 + 4 * 144 + 144 * 6 + 6 * 96 * 144
//              + 4 * 144 * 48                                                      = 412,320
//   total      412,320 + 2 * 99 * 144 + 144                                        = 440,976
// Active: k E / (E + Z) = 4/3 experts of 3 * 48 * 144 = 20,736: 27,648 of the experts' 110,592.
TEST(LongcatFlashModels, TransformersTesterConfigMatchesTheHandTotal) {
  const nlohmann::json j = {{"model_type", "longcat_flash"},
                            {"vocab_size", 99},
                            {"hidden_size", 144},
                            {"ffn_hidden_size", 288},
                            {"expert_ffn_hidden_size", 48},
                            {"num_layers", 1},
                            {"num_attention_heads", 8},
                            {"num_key_value_heads", 8},
                            {"kv_lora_rank", 16},
                            {"q_lora_rank", 48},
                            {"qk_rope_head_dim", 4},
                            {"v_head_dim", 8},
                            {"qk_nope_head_dim", 8},
                            {"head_dim", 4},
                            {"n_routed_experts", 4},
                            {"zero_expert_num", 2},
                            {"moe_topk", 2},
                            {"routed_scaling_factor", 1.0},
                            {"max_position_embeddings", 128},
                            {"rms_norm_eps", 1e-6},
                            {"pad_token_id", 3}};
  const int64_t attention = 144 * 48 + 48 + 48 * 8 * 12 + 144 * 20 + 16 + 16 * 8 * 16 + 8 * 8 * 144;
  EXPECT_EQ(attention, 25'728);
  const int64_t layer =
      2 * attention + 2 * 3 * 144 * 288 + 4 * 144 + 144 * 6 + 6 * 96 * 144 + 4 * 144 * 48;
  EXPECT_EQ(layer, 412'320);
  const ModelConfig c = parse_model_config(j, "tester");
  EXPECT_EQ(c.pad_token_id, 3);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), layer + 2 * 99 * 144 + 144);
  EXPECT_EQ(active_parameters(*m, c), 440'976 - (6 * 96 * 144 + 4 * 144 * 48) + 27'648);
}

// LongcatFlashConfig's attribute_map: intermediate_size is ffn_hidden_size, num_local_experts
// n_routed_experts, num_experts_per_tok moe_topk; num_hidden_layers is overwritten with
// 2 x num_layers, so a file's value is ignored.
TEST(LongcatFlashModels, AliasesOfTheConfigClassAreRead) {
  const ModelConfig base = parse_model_config(tiny(), "tiny");
  nlohmann::json j = tiny();
  j.erase("ffn_hidden_size");
  j.erase("n_routed_experts");
  j.erase("moe_topk");
  j["intermediate_size"] = 96;
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 3;
  j["num_hidden_layers"] = 4;
  j["moe_intermediate_size"] = 32;  // the original release's name of the experts' width
  EXPECT_EQ(parse_model_config(j, "aliases"), base);
  j["ffn_hidden_size"] = 128;
  EXPECT_THAT([&] { parse_model_config(j, "both"); },
              ThrowsMessage<Error>(HasSubstr("field 'intermediate_size': 96 differs from "
                                             "ffn_hidden_size 128")));
  // The class's defaults are LongCat-Flash-Chat's, and a file of nothing but its type builds it.
  EXPECT_EQ(
      parse_model_config(
          nlohmann::json{{"model_type", "longcat_flash"}, {"torch_dtype", "bfloat16"}}, "defaults"),
      find_model_config("longcat-flash-chat"));
  // zero_expert_num null is none (`config.zero_expert_num or 0`): a plain MoE router.
  j = tiny();
  j["zero_expert_num"] = nullptr;
  j["moe_topk"] = 2;
  const ModelConfig plain = parse_model_config(j, "no zero experts");
  EXPECT_EQ(plain.zero_experts, 0);
  EXPECT_EQ(build_model(plain)->get_parameter("model.layers.0.mlp.experts.gate_up_proj").sizes(),
            DimVector({4, 64, 64}));
}

TEST(LongcatFlashModels, RefusesWhatTransformersCannotBuildOrBuildsOtherwise) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad"); }, ThrowsMessage<Error>(HasSubstr(what)));
  };
  nlohmann::json j = tiny();
  j["q_lora_rank"] = nullptr;  // LongcatFlashMLA divides by it
  refused(j, "field 'q_lora_rank': is null");
  j = tiny();
  j["head_dim"] = 16;  // the rotary tables' width must be the rotated slice's
  refused(j, "field 'head_dim': 16, expected qk_rope_head_dim 8");
  j = tiny();
  j.erase("head_dim");  // LongcatFlashConfig's 64
  refused(j, "field 'head_dim': 64, expected qk_rope_head_dim 8");
  j = tiny();
  j["qk_head_dim"] = 32;
  refused(j, "field 'qk_head_dim': 32, expected qk_nope_head_dim + qk_rope_head_dim = 24");
  j = tiny();
  j["num_key_value_heads"] = 2;
  refused(j, "field 'num_key_value_heads': 2, expected num_attention_heads 4");
  j = tiny();
  j["zero_expert_type"] = "zero";
  refused(j, "field 'zero_expert_type': \"zero\": transformers' longcat_flash builds identity");
  j = tiny();
  j["router_bias"] = true;
  refused(j, "field 'router_bias': true");
  j = tiny();
  j["mla_scale_kv_lora"] = false;
  refused(j, "field 'mla_scale_kv_lora': false");
  j = tiny();
  j["moe_intermediate_size"] = 64;
  refused(j, "field 'moe_intermediate_size': 64");
  j = tiny();
  j["n_routed_experts"] = 0;
  refused(j, "field 'n_routed_experts': must be positive, got 0");
  j = tiny();
  j["zero_expert_num"] = -1;
  refused(j, "field 'zero_expert_num': must be >= 0");
  j = tiny();
  j["moe_topk"] = 7;  // more than the 6 experts the router scores
  refused(j,
          "field 'moe_topk' (num_experts_per_tok): must be in [1, num_local_experts + "
          "zero_experts = 6], got 7");
  j = tiny();
  j["partial_rotary_factor"] = 0.5;
  refused(j, "field 'partial_rotary_factor'");
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}};
  refused(j, "field 'partial_rotary_factor'");
  j = tiny();
  j["hidden_act"] = "xielu";
  refused(j, "field 'hidden_act': 'xielu'");
  j = tiny();
  j["num_layers"] = 0;
  refused(j, "field 'num_layers': 0 layers");
  // Another family's config built in code with zero experts: refused, it has none.
  ModelConfig mixtral = find_model_config("mixtral-8x7b");
  mixtral.zero_experts = 2;
  EXPECT_THAT([&] { validate(mixtral); },
              ThrowsMessage<Error>(HasSubstr("field 'zero_experts': 2 zero-computation experts")));
}

// The traced layer (Note [Expected-load MoE], Note [Zero-computation experts]): 2 x 16 = 32
// tokens. Matrix products of one layer's forward, the attention cores apart:
//   each attention  q_a 2*32*64*16 = 65,536; q_b 2*32*16*96 = 98,304; kv_a 2*32*64*40 = 163,840;
//                   kv_b 2*32*32*128 = 262,144; o 2*32*64*64 = 262,144            =   851,968
//   each MLP        3 * 2*32*64*96                                                 = 1,179,648
//   router          2*32*64*6 (float32)                                            =    24,576
//   experts         4 experts on ceil(32 * 3 / 6) = 16 tokens: gate_up 2*4*16*64*64 = 524,288,
//                   down 2*4*16*32*64 = 262,144 (2 computing experts a token)      =   786,432
//   layer           2 * 851,968 + 2 * 1,179,648 + 24,576 + 786,432                 = 4,874,240
TEST(LongcatFlashModels, TrainingTraceRunsBothBlocksAndTheComputingExpertsOnly) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  double matmul = 0;
  int attention_cores = 0, blocks_seen = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    ++blocks_seen;
    if (op.op == "scaled_dot_product_attention") {
      ++attention_cores;
      continue;
    }
    matmul += op.matmul_flops;
  }
  EXPECT_GT(blocks_seen, 0);
  EXPECT_EQ(attention_cores, 2);  // both attention blocks of the layer
  EXPECT_DOUBLE_EQ(matmul, 2 * 851'968.0 + 2 * 1'179'648.0 + 24'576.0 + 786'432.0);
  EXPECT_EQ(matmul, 4'874'240.0);
}

// LongcatFlashMLA is DeepSeek-V3's attention plus its latent scales: the query's two parts times
// sqrt(h / rq) and the normed key-value latent times sqrt(h / rkv), three products more.
TEST(LongcatFlashModels, LatentScalesAreThreeProductsMoreThanDeepSeekV3) {
  const OpGraph g = trace_model_forward(*build_model(parse_model_config(tiny(), "tiny")), 2, 16);
  const nlohmann::json v3 = {{"model_type", "deepseek_v3"}, {"vocab_size", 1000},
                             {"hidden_size", 64},           {"intermediate_size", 96},
                             {"moe_intermediate_size", 32}, {"num_hidden_layers", 1},
                             {"num_attention_heads", 4},    {"n_routed_experts", 4},
                             {"num_experts_per_tok", 2},    {"n_shared_experts", 1},
                             {"first_k_dense_replace", 0},  {"q_lora_rank", 16},
                             {"kv_lora_rank", 32},          {"qk_nope_head_dim", 16},
                             {"qk_rope_head_dim", 8},       {"v_head_dim", 16},
                             {"torch_dtype", "bfloat16"}};
  const OpGraph base = trace_model_forward(*build_model(parse_model_config(v3, "v3")), 2, 16);
  const std::string attn = "model.layers.0.self_attn";
  for (const char* i : {".0", ".1"}) {
    EXPECT_EQ(ops_in(g, "mul", attn + i), ops_in(base, "mul", attn) + 3);
    EXPECT_EQ(ops_under(g, "linear", attn + i + "."), ops_under(base, "linear", attn + "."));
  }
  // The zero experts' picks: the token times its weight, summed over the picks, beside the
  // computing experts' weighted sum; two batched GEMMs in the experts.
  EXPECT_EQ(ops_in(g, "bmm", "model.layers.0.mlp.experts"), 2);
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.mlp"), 2);
  EXPECT_EQ(ops_in(g, "sum", "model.layers.0.mlp"), 2);
  EXPECT_EQ(ops_under(g, "scaled_dot_product_attention", "model.layers.0."), 2);
}

// The checkpoint check: transformers 5's layout (fused experts under the model's names) fits,
// with the router's e_score_correction_bias [E + Z] a buffer beside the model and the multi-token
// prediction module (model.mtp.*), which transformers skips, listed as not loaded.
TEST(LongcatFlashModels, FusedCheckpointFitsWithTheRouterBiasAndMtpBeside) {
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  std::vector<StEntry> extra;
  for (const char* layer : {"0", "1"}) {
    extra.push_back(
        {std::string("model.layers.") + layer + ".mlp.router.e_score_correction_bias", "F32", {6}});
  }
  extra.push_back({"model.mtp.layers.0.eh_proj.weight", "BF16", {64, 128}});
  extra.push_back({"model.mtp.norm.weight", "BF16", {64}});
  const ModelSource src = test::check_stored_as(
      cfg, *model, [](const std::string& n) { return n; }, extra);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_EQ(src.check.buffers.size(), 2u);
  EXPECT_EQ(src.check.beyond_model.size(), 2u);
}

// Meituan's files store the experts one by one, gate and up for the E computing experts only:
// transformers 5's gate_up_proj has E + Z slices, so the zero experts' slices are missing (the
// model transformers builds does not fit the published checkpoint: docs/models.md).
TEST(LongcatFlashModels, HubFilesLackTheZeroExpertsGateUpSlices) {
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  std::vector<StEntry> extra;
  for (const char* layer : {"0", "1"}) {
    const std::string block = std::string("model.layers.") + layer + ".mlp";
    test::append_experts_one_by_one(extra, block, block + ".experts.gate_up_proj", {4, 64, 64},
                                    {"gate_proj", "up_proj", "down_proj"});
    test::append_experts_one_by_one(extra, block, block + ".experts.down_proj", {4, 64, 32},
                                    {"gate_proj", "up_proj", "down_proj"});
  }
  EXPECT_THAT(
      [&] {
        test::check_stored_as(
            cfg, *model,
            [](const std::string& n) {
              return n.find(".mlp.experts.") == std::string::npos ? n : std::string();
            },
            extra);
      },
      ThrowsMessage<Error>(HasSubstr("model.layers.0.mlp.experts.4.gate_proj.weight' (one "
                                     "expert's slice of a fused tensor of the model) is missing")));
  // check_stored_as leaves its folder behind when the check throws.
  std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                              ("shardplan_stored_as_" + std::to_string(::getpid())));
}

}  // namespace
}  // namespace shardplan::tensor
