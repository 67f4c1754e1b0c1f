// dbrx (Databricks DBRX) against hand formulas written here from transformers 5's modeling_dbrx.py
// and configuration_dbrx.py, and the published size ("132B total parameters of which 36B are
// active": Databricks' model card). h d_model, V vocabulary, H heads and kv key-value heads of
// d = h / H, E experts of width F (ffn_hidden_size), top k; no bias anywhere:
//   attention  Wqkv [h + 2 kv d, h] (rows q, then k, then v), out_proj [h, h]
//   norms      norm_1, norm_2 per block and norm_f: nn.LayerNorm(bias=False), [h] each
//   moe        router.layer [E, h]; experts.mlp.w1, v1, w2 [E F, h] each (gate, up, down)
//   model      wte [V, h], lm_head [V, h] (untied)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
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
using test::Shapes;
using test::shapes_under;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// One block's parameters by the formulas above.
int64_t block(int64_t h, int64_t kv, int64_t d, int64_t E, int64_t F) {
  const int64_t attention = (h + 2 * kv * d) * h + h * h;
  return attention + 2 * h + E * h + 3 * E * F * h;
}

TEST(DbrxModels, DbrxBaseMatchesThePublishedSize) {
  // DBRX Base: V 100,352, h 6,144, 40 blocks of 48 heads (8 kv) of 128, 16 experts of 10,752,
  // top 4.
  const int64_t V = 100352, h = 6144, E = 16, F = 10752, L = 40;
  const int64_t experts = 3 * E * F * h;
  EXPECT_EQ(experts, 3'170'893'824);
  const int64_t layer = block(h, 8, 128, E, F);
  EXPECT_EQ(layer, 3'259'084'800);
  const int64_t total = L * layer + 2 * V * h + h;
  EXPECT_EQ(total, 131'596'523'520);  // "132B total"
  const int64_t active = total - L * experts + L * 3 * 4 * F * h;
  EXPECT_EQ(active, 36'469'708'800);  // "36B active"
  const ModelConfig c = find_model_config("dbrx-base");
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_EQ(c.num_local_experts, E);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  ASSERT_TRUE(c.clip_qkv.has_value());
  EXPECT_EQ(*c.clip_qkv, 8.0);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "DbrxForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), active);
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("experts"), L * experts);
  EXPECT_EQ(kinds.at("router"), L * E * h);
  EXPECT_EQ(kinds.at("attention"), L * ((h + 2 * 8 * 128) * h + h * h));
  EXPECT_EQ(kinds.count("other"), 0u);  // every parameter has a kind
  EXPECT_EQ(layers_path(c), "transformer.blocks");
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(DbrxModels, NamesShapesAndOrderOfOneBlockAndTheTop) {
  const ModelConfig c = find_model_config("dbrx-base");
  const ModulePtr m = build_model(c);
  const int64_t h = 6144, EF = 16 * 10752;
  EXPECT_EQ(shapes_under(*m, "transformer.blocks.0."),
            (Shapes{{"norm_attn_norm.norm_1.weight", {h}},
                    {"norm_attn_norm.attn.Wqkv.weight", {h + 2 * 8 * 128, h}},
                    {"norm_attn_norm.attn.out_proj.weight", {h, h}},
                    {"norm_attn_norm.norm_2.weight", {h}},
                    {"ffn.router.layer.weight", {16, h}},
                    {"ffn.experts.mlp.w1", {EF, h}},
                    {"ffn.experts.mlp.v1", {EF, h}},
                    {"ffn.experts.mlp.w2", {EF, h}}}));
  // Top level: wte before the blocks, norm_f after them, lm_head last (untied).
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("transformer.blocks.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"transformer.wte.weight", "transformer.norm_f.weight", "lm_head.weight"}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").sizes(), DimVector({100352, h}));
  // rotary_emb is DbrxModel's first child: its non-persistent inv_freq alone.
  EXPECT_EQ(m->get_submodule("transformer").named_children().front().first, "rotary_emb");
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  // HF's class names, the experts a grouped-experts module of stacked rows.
  EXPECT_EQ(m->get_submodule("transformer.blocks.0").type_name(), "DbrxBlock");
  EXPECT_EQ(m->get_submodule("transformer.blocks.0.norm_attn_norm").type_name(),
            "DbrxNormAttentionNorm");
  EXPECT_EQ(m->get_submodule("transformer.blocks.0.ffn.router").type_name(), "DbrxRouter");
  const Module& mlp = m->get_submodule("transformer.blocks.0.ffn.experts.mlp");
  EXPECT_EQ(mlp.type_name(), "DbrxExpertGLU");
  const auto* grouped = dynamic_cast<const GroupedExperts*>(&mlp);
  ASSERT_NE(grouped, nullptr);
  EXPECT_EQ(grouped->layout(), GroupedExperts::Layout::kStackedRows);
  EXPECT_EQ(m->get_submodule("transformer.norm_f").type_name(), "LayerNorm");
}

nlohmann::json tiny() {
  return {{"model_type", "dbrx"},
          {"vocab_size", 128},
          {"d_model", 64},
          {"n_layers", 2},
          {"n_heads", 4},
          {"max_seq_len", 256},
          {"attn_config", {{"clip_qkv", 8}, {"kv_n_heads", 2}, {"rope_theta", 500000}}},
          {"ffn_config",
           {{"ffn_act_fn", {{"name", "silu"}}},
            {"ffn_hidden_size", 96},
            {"moe_num_experts", 4},
            {"moe_top_k", 2}}},
          {"torch_dtype", "bfloat16"}};
}

TEST(DbrxModels, TinyConfigByHandAndItsInits) {
  // Wqkv (64 + 2 x 2 x 16) x 64 = 8,192, out_proj 4,096, norms 128, router 256, experts
  // 3 x 4 x 96 x 64 = 73,728: 86,400 a block. wte and lm_head 8,192 each, norm_f 64.
  EXPECT_EQ(block(64, 2, 16, 4, 96), 86'400);
  const int64_t total = 2 * 86400 + 2 * 8192 + 64;
  EXPECT_EQ(total, 189'248);
  nlohmann::json j = tiny();
  j["pad_token_id"] = 3;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.head_dim, 16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(active_parameters(*m, c), total - 2 * 73728 + 2 * 3 * 2 * 96 * 64);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // DbrxPreTrainedModel._init_weights: the experts and Linears normal(0, 0.02), the padding row
  // of wte zero, the LayerNorms' weights one.
  std::map<std::string, ParameterInit> inits;
  for (const NamedInit& i : parameter_inits(*m, c)) inits[i.name] = i.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.02};
  for (const char* w : {"w1", "v1", "w2"}) {
    EXPECT_EQ(inits.at(std::string("transformer.blocks.1.ffn.experts.mlp.") + w), normal) << w;
  }
  EXPECT_EQ(inits.at("transformer.blocks.0.norm_attn_norm.attn.Wqkv.weight"), normal);
  EXPECT_EQ(inits.at("transformer.blocks.0.ffn.router.layer.weight"), normal);
  EXPECT_EQ(inits.at("transformer.wte.weight").zero_row, 3);
  EXPECT_EQ(inits.at("transformer.norm_f.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
}

TEST(DbrxModels, NestedKeysTheirDefaultsAndTheRopeBase) {
  // No sub-configs: DbrxAttentionConfig() and DbrxFFNConfig() (one key-value head, no clip,
  // silu), except the experts' sizes, which are required.
  nlohmann::json j = tiny();
  j.erase("attn_config");
  j["ffn_config"] = {{"ffn_hidden_size", 96}, {"moe_num_experts", 4}, {"moe_top_k", 2}};
  const ModelConfig plain = parse_model_config(j, "defaults.json");
  EXPECT_EQ(plain.num_key_value_heads, 1);
  EXPECT_FALSE(plain.clip_qkv.has_value());
  EXPECT_EQ(plain.attention_dropout, 0.0);
  EXPECT_EQ(plain.rope_theta, 10000.0);
  EXPECT_EQ(plain.hidden_act, "silu");
  EXPECT_EQ(plain.max_position_embeddings, 256);
  EXPECT_EQ(build_model(plain)
                ->get_parameter("transformer.blocks.0.norm_attn_norm.attn.Wqkv.weight")
                .sizes(),
            DimVector({64 + 2 * 16, 64}));  // MQA: one key and one value head
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
  j["attn_config"] = nullptr;  // null: the same defaults
  EXPECT_EQ(parse_model_config(j, "null.json"), plain);
  // The activation's name inside ffn_act_fn; attn_pdrop and resid_pdrop are the dropouts.
  j = tiny();
  j["ffn_config"]["ffn_act_fn"] = {{"name", "gelu"}};
  j["attn_config"]["attn_pdrop"] = 0.1;
  j["resid_pdrop"] = 0.2;
  const ModelConfig gelu = parse_model_config(j, "gelu.json");
  EXPECT_EQ(gelu.hidden_act, "gelu");
  EXPECT_EQ(gelu.attention_dropout, 0.1);
  EXPECT_EQ(gelu.resid_dropout, 0.2);
  EXPECT_EQ(parse_model_config(to_hf_json(gelu), "round trip"), gelu);
  // transformers 5's top-level RoPE keys win over attn_config's rope_theta.
  j = tiny();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  EXPECT_EQ(parse_model_config(j, "rope.json").rope_theta, 250000.0);
  j = tiny();
  j["rope_theta"] = 123.0;
  EXPECT_EQ(parse_model_config(j, "top.json").rope_theta, 123.0);
}

TEST(DbrxModels, RefusedOptionsNameTheirKeys) {
  auto refused = [](const nlohmann::json& j, const std::string& what) {
    EXPECT_THAT([&] { parse_model_config(j, "bad.json"); }, ThrowsMessage<Error>(HasSubstr(what)))
        << what;
  };
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;  // DbrxConfig.validate_architecture
  refused(j, "field 'tie_word_embeddings': true, but DbrxConfig refuses tied embeddings");
  j = tiny();
  j["n_heads"] = 5;
  refused(j, "field 'n_heads': 5 does not divide d_model 64");
  j = tiny();
  j["attn_config"]["clip_qkv"] = -1;
  refused(j, "field 'attn_config.clip_qkv': -1, expected a positive bound");
  j = tiny();
  j["attn_config"]["kv_n_heads"] = 3;
  refused(j, "field 'attn_config.kv_n_heads' (num_key_value_heads): 3 does not divide");
  j = tiny();
  j["attn_config"]["kv_n_heads"] = "2";
  refused(j, "field 'attn_config.kv_n_heads': expected an integer");
  j = tiny();
  j["attn_config"] = 8;
  refused(j, "field 'attn_config': expected an object");
  j = tiny();
  j["ffn_config"].erase("moe_top_k");
  refused(j, "field 'ffn_config.moe_top_k': missing");
  j = tiny();
  j.erase("ffn_config");
  refused(j, "field 'ffn_config.ffn_hidden_size': missing");
  j = tiny();
  j["ffn_config"]["moe_top_k"] = 5;
  refused(j, "field 'ffn_config.moe_top_k' (num_experts_per_tok): must be in [1, ");
  j = tiny();
  j["ffn_config"]["ffn_act_fn"] = "silu";
  refused(j, "field 'ffn_config.ffn_act_fn': expected an object");
  j = tiny();
  j["ffn_config"]["ffn_act_fn"] = {{"name", "swishy"}};
  refused(j, "field 'ffn_config.ffn_act_fn': 'swishy' is not supported");
  j = tiny();
  j["ffn_config"]["moe_normalize_expert_weights"] = 0;
  refused(j, "field 'ffn_config.moe_normalize_expert_weights'");
  j = tiny();
  j["ffn_config"]["moe_jitter_eps"] = 1.5;
  refused(j, "field 'ffn_config.moe_jitter_eps'");
  j = tiny();
  j.erase("d_model");
  refused(j, "field 'd_model': missing");
  // Routing-only keys that are null pass: no jitter, no renormalization (traced as p = 1).
  j = tiny();
  j["ffn_config"]["moe_jitter_eps"] = nullptr;
  j["ffn_config"]["moe_normalize_expert_weights"] = nullptr;
  EXPECT_NO_THROW(parse_model_config(j, "null routing.json"));
}

TEST(DbrxModels, ForwardMatmulsByHandAndTheOps) {
  // Batch 2 of 8 tokens (T = 16), h 64, 4 heads (2 kv) of 16, 4 experts of 96, top 2: each
  // expert runs on its expected ceil(16 x 2 / 4) = 8 tokens, three GEMMs of 2 x 8 x 96 x 64.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  auto matmul = [&](const std::string& module) {
    return g.module_totals().at(module).matmul_flops;
  };
  const std::string b = "transformer.blocks.1.";
  EXPECT_DOUBLE_EQ(matmul(b + "norm_attn_norm.attn.Wqkv"), 2.0 * 16 * 64 * 128);
  EXPECT_DOUBLE_EQ(matmul(b + "norm_attn_norm.attn.out_proj"), 2.0 * 16 * 64 * 64);
  EXPECT_DOUBLE_EQ(matmul(b + "ffn.router"), 2.0 * 16 * 64 * 4);
  EXPECT_DOUBLE_EQ(matmul(b + "ffn.experts.mlp"), 3 * 2.0 * 4 * 8 * 96 * 64);
  EXPECT_EQ(ops_in(g, "bmm", b + "ffn.experts.mlp"), 3);  // w1, v1, w2: no fused gate_up
  // QK^T and PV over 2 x 4 heads of 8 x 8 scores, 16 wide: 2 x 8 x 8 x 8 x 32.
  EXPECT_DOUBLE_EQ(matmul(b + "norm_attn_norm.attn"),
                   2.0 * 16 * 64 * 128 + 2.0 * 8 * 8 * 8 * 32 + 2.0 * 16 * 64 * 64);
  // clip_qkv clamps the fused projection once; the router's softmax stays in bfloat16 (no cast).
  EXPECT_EQ(ops_in(g, "maximum", b + "norm_attn_norm.attn"), 1);
  EXPECT_EQ(ops_in(g, "minimum", b + "norm_attn_norm.attn"), 1);
  EXPECT_EQ(ops_in(g, "softmax", b + "ffn"), 1);
  EXPECT_EQ(ops_in(g, "to", b + "ffn"), 0);
  EXPECT_EQ(ops_in(g, "layer_norm", b + "norm_attn_norm.norm_1"), 1);
  nlohmann::json j = tiny();
  j["attn_config"]["clip_qkv"] = nullptr;
  const OpGraph plain = trace_model_forward(*build_model(parse_model_config(j, "plain")), 2, 8);
  EXPECT_EQ(ops_in(plain, "maximum", b + "norm_attn_norm.attn"), 0);
}

TEST(DbrxModels, TrainingStepOfTheTinyModel) {
  // A training build drops out each half's output (resid_pdrop) but never the embeddings: DbrxModel
  // keeps emb_pdrop and applies it nowhere.
  nlohmann::json j = tiny();
  j["resid_pdrop"] = 0.1;
  j["emb_pdrop"] = 0.1;
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  // Block 0's forward matmuls: Wqkv 262,144, attention 32,768, out_proj 131,072, router 8,192,
  // experts 1,179,648.
  double block0 = 0;
  int64_t dropouts_in_blocks = 0, dropouts = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block == 0) block0 += op.matmul_flops;
    if (op.op == "dropout") {
      ++dropouts;
      dropouts_in_blocks += op.block >= 0;
    }
  }
  EXPECT_DOUBLE_EQ(block0, 262144.0 + 32768 + 131072 + 8192 + 1179648);
  EXPECT_EQ(dropouts, 4);  // two per block, none after wte
  EXPECT_EQ(dropouts_in_blocks, 4);
}

TEST(DbrxModels, ACheckpointUnderTheModelsOwnNamesLoads) {
  // DBRX's safetensors name the tensors as transformers 5 builds them (the 2-D experts w1, v1, w2
  // included): nothing to rename, nothing missing or unexpected.
  const nlohmann::json cfg = tiny();
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny.json"));
  const ModelSource src =
      test::check_stored_as(cfg, *model, [](const std::string& n) { return n; });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

TEST(DbrxModels, NoTensorParallelPlanForTheFusedGqaProjection) {
  // Note [DBRX has no tensor-parallel plan] in family_dbrx.cpp: Wqkv's parts are unequal
  // (6,144 query rows, 1,024 key and 1,024 value rows), so no _StridedShard splits it by heads.
  const ModelFamily& f = family_of(find_model_config("dbrx-base"));
  EXPECT_TRUE(f.tp_plan.empty());
  EXPECT_TRUE(f.fused_qkv);
  EXPECT_TRUE(f.moe);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_EQ(f.experts_class, "DbrxExpertGLU");
  EXPECT_EQ(f.file_key("num_key_value_heads"), "attn_config.kv_n_heads");
  EXPECT_EQ(f.file_key("intermediate_size"), "ffn_config.ffn_hidden_size");
  // Every layer is one kind: full attention with RoPE and routed experts.
  const LayerStack stack = layer_stack(find_model_config("dbrx-base"));
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].ffn, FfnKind::kMoe);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kFull);
}

}  // namespace
}  // namespace shardplan::tensor
