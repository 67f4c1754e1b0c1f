// codegen (Salesforce's CodeGen) against hand formulas written here from transformers 5's
// configuration_codegen.py and modeling_codegen.py. h n_embd, V vocabulary, F n_inner (4 h when
// null), d = h / heads, r rotary_dim:
//   attn     qkv_proj [3h, h] and out_proj [h, h], no biases (registered in that order); the
//            non-persistent float32 buffer embed_positions [n_positions, r]
//   mlp      fc_in [F, h] + [F], fc_out [h, F] + [h]
//   norms    ln_1 (the layer's only one) and transformer.ln_f: [h] + [h]
//   model    wte [V, h], lm_head [V, h] (unless tied) + bias [V] (never tied)
// qkv_proj's rows are 4 blocks of [q; v; k] (Note [CodeGen's qkv layout] in family_codegen.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
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

// The parameter names outside the repeated blocks, in named_parameters order.
Names top_level_names(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("transformer.h.")) out.push_back(p.name);
  }
  return out;
}

// The header's formula: a layer of width h and MLP width F, and the model around L of them.
int64_t codegen_layer(int64_t h, int64_t F) {
  return 2 * h + 3 * h * h + h * h + (h * F + F) + (F * h + h);
}
int64_t codegen_total(int64_t V, int64_t h, int64_t L, int64_t F, bool tied) {
  return V * h + L * codegen_layer(h, F) + 2 * h + (tied ? 0 : V * h) + V;
}

const Names kLayerNames = {"ln_1.weight",          "ln_1.bias",        "attn.qkv_proj.weight",
                           "attn.out_proj.weight", "mlp.fc_in.weight", "mlp.fc_in.bias",
                           "mlp.fc_out.weight",    "mlp.fc_out.bias"};

TEST(CodegenModels, Codegen16BMonoMatchesTheHandTotal) {
  // Salesforce/codegen-16B-mono: V 51,200, h 6,144, 34 layers of 24 heads of 256, F 24,576
  // (n_inner null), r 64. A layer 2h + 4h^2 + 2hF + F + h = 453,027,840; the embedding and the
  // output layer 314,572,800 each, its bias 51,200; ln_f 12,288. The model's name says "16B":
  // 16,032,155,648 is 16.0 B (the CodeGen paper, Nijkamp et al. 2022, lists it as "16.1B").
  const int64_t V = 51200, h = 6144, F = 24576;
  EXPECT_EQ(codegen_layer(h, F), 453'027'840);
  const int64_t total = codegen_total(V, h, 34, F, false);
  EXPECT_EQ(total, 34 * int64_t{453'027'840} + 314'572'800 + 12'288 + 314'572'800 + 51'200);
  EXPECT_EQ(total, 16'032'155'648);

  const ModelConfig c = find_model_config("codegen-16b-mono");
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.num_hidden_layers, 34);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 24);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.intermediate_size, F);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);  // 64 of 256
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_EQ(c.torch_dtype, DType::kFloat16);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.lm_head_bias);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "CodeGenForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "transformer.h.0."), kLayerNames);
  EXPECT_EQ(top_level_names(*m),
            (Names{"transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias",
                   "lm_head.weight", "lm_head.bias"}));
  EXPECT_EQ(m->get_parameter("transformer.h.33.attn.qkv_proj.weight").sizes(),
            DimVector({3 * h, h}));
  EXPECT_EQ(m->get_submodule("transformer").type_name(), "CodeGenModel");
  EXPECT_EQ(m->get_submodule("transformer.h.33").type_name(), "CodeGenBlock");
  EXPECT_EQ(m->get_submodule("transformer.h.0.attn").type_name(), "CodeGenAttention");
  EXPECT_EQ(m->get_submodule("transformer.h.0.mlp").type_name(), "CodeGenMLP");
  // Each attention's sinusoid table: float32 rows of n_positions, not in a state_dict.
  const Tensor table = m->get_buffer("transformer.h.0.attn.embed_positions");
  EXPECT_EQ(table.sizes(), DimVector({2048, 64}));
  EXPECT_EQ(table.dtype(), DType::kFloat32);
  EXPECT_EQ(m->named_buffers().size(), 34u);
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(layer_stack(c).kinds.size(), 1u);  // one kind: dense, full attention, rotated
}

nlohmann::json tiny() {
  return {{"model_type", "codegen"},
          {"vocab_size", 128},
          {"n_embd", 64},
          {"n_layer", 2},
          {"n_head", 8},
          {"n_positions", 32},
          {"n_inner", 96},
          {"rotary_dim", 4},
          {"embd_pdrop", 0.1},
          {"attn_pdrop", 0.1},
          {"resid_pdrop", 0.1},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}};
}

TEST(CodegenModels, TinyConfigByHand) {
  // 8 heads of d = 8 (2 in each of the 4 blocks), r = 4. Attention: qkv 3 x 64 x 64 = 12,288,
  // out_proj 4,096. MLP: fc_in 64 x 96 + 96 = 6,240, fc_out 96 x 64 + 64 = 6,208. ln_1 128.
  // A layer: 28,960; two: 57,920. Model: wte 8,192, ln_f 128, lm_head 8,192 + 128: 74,560.
  const int64_t layer = 12'288 + 4'096 + 6'240 + 6'208 + 128;
  EXPECT_EQ(layer, 28'960);
  EXPECT_EQ(codegen_layer(64, 96), layer);
  const int64_t total = 2 * layer + 8'192 + 128 + 8'192 + 128;
  EXPECT_EQ(total, 74'560);

  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_TRUE(c.lm_head_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "transformer.h.1."), kLayerNames);
  EXPECT_EQ(m->get_parameter("transformer.h.1.attn.qkv_proj.weight").sizes(), DimVector({192, 64}));
  EXPECT_EQ(m->get_parameter("transformer.h.1.mlp.fc_in.weight").sizes(), DimVector({96, 64}));
  EXPECT_EQ(m->get_parameter("lm_head.bias").sizes(), DimVector({128}));
  EXPECT_EQ(m->get_buffer("transformer.h.1.attn.embed_positions").sizes(), DimVector({32, 4}));
  EXPECT_EQ(m->get_parameter("transformer.wte.weight").dtype(), DType::kBFloat16);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Tied (CodeGenForCausalLM's _tied_weights_keys): lm_head's weight is wte's, its bias stays.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = true;
  const ModelConfig tied = parse_model_config(j, "tied");
  const ModulePtr t = build_model(tied);
  EXPECT_EQ(t->parameters_numel(), total - 8'192);
  EXPECT_EQ(t->parameters_numel(), codegen_total(128, 64, 2, 96, true));
  EXPECT_EQ(top_level_names(*t), (Names{"transformer.wte.weight", "transformer.ln_f.weight",
                                        "transformer.ln_f.bias", "lm_head.bias"}));
  EXPECT_EQ(parse_model_config(to_hf_json(tied), "round trip"), tied);
  // n_inner null: 4 h = 256. fc_in 64 x 256 + 256 = 16,640, fc_out 256 x 64 + 64 = 16,448:
  // a layer 49,600, the model 2 x 49,600 + 16,640 = 115,840.
  j = tiny();
  j["n_inner"] = nullptr;
  const ModelConfig wide = parse_model_config(j, "n_inner null");
  EXPECT_EQ(wide.intermediate_size, 256);
  EXPECT_EQ(build_model(wide)->parameters_numel(), 115'840);
  EXPECT_EQ(codegen_total(128, 64, 2, 256, false), 115'840);
  EXPECT_EQ(parse_model_config(to_hf_json(wide), "round trip"), wide);
}

TEST(CodegenModels, ClassDefaults) {
  // CodeGenConfig's defaults fill every key: V 50,400, h 4,096, 28 layers of 16 heads, 2,048
  // positions, rotary_dim 64, n_inner 4 h, gelu_new, eps 1e-5, untied, no dropout; float32
  // without a dtype. Those are GPT-J-6B's sizes: 6,050,882,784 parameters.
  const nlohmann::json bare = {{"model_type", "codegen"}};
  const ModelConfig c = parse_model_config(bare, "defaults.json");
  EXPECT_EQ(c.vocab_size, 50400);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);  // 64 of 256
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // the table's fixed base
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(codegen_total(50400, 4096, 28, 16384, false), 6'050'882'784);
  EXPECT_EQ(build_model(c)->parameters_numel(), 6'050'882'784);
}

TEST(CodegenModels, RotaryDimAndTheKeysTransformersIgnores) {
  // The whole head (rotary_dim = head_dim) is a valid width.
  nlohmann::json j = tiny();
  j["rotary_dim"] = 8;
  const ModelConfig whole = parse_model_config(j, "whole");
  EXPECT_DOUBLE_EQ(whole.partial_rotary_factor, 1.0);
  EXPECT_EQ(to_hf_json(whole)["rotary_dim"], 8);
  EXPECT_EQ(parse_model_config(to_hf_json(whole), "round trip"), whole);
  // n_ctx (an attribute CodeGenModel never uses) and scale_attn_weights (never read) change
  // nothing; neither does rope_parameters, which CodeGenConfig does not have.
  j = tiny();
  j["n_ctx"] = 7;
  j["scale_attn_weights"] = false;
  j["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 500000.0}, {"partial_rotary_factor", 1.0}};
  EXPECT_EQ(parse_model_config(j, "ignored"), parse_model_config(tiny(), "tiny"));
  // rope_scaling is kept (a plan's --rope-scaling) and written back.
  j = tiny();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const ModelConfig scaled = parse_model_config(j, "rope_scaling");
  ASSERT_TRUE(scaled.rope_scaling.has_value());
  EXPECT_EQ(scaled.rope_scaling->rope_type, "linear");
  EXPECT_EQ(parse_model_config(to_hf_json(scaled), "round trip"), scaled);
}

TEST(CodegenModels, WhatIsRefused) {
  const auto error = [](const nlohmann::json& j) {
    try {
      (void)parse_model_config(j, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Heads that divide n_embd but do not fill CodeGen's 4 blocks: 2 heads of 32; at n_embd 192, 6
  // heads of 32 (12 of 16 fill them, 3 a block).
  nlohmann::json j = tiny();
  j["n_head"] = 2;
  EXPECT_THAT(error(j),
              HasSubstr("field 'n_head': 2 is not a multiple of 4: CodeGenAttention splits "
                        "qkv_proj's output into mp_num = 4 blocks of n_head / 4 whole heads"));
  j = tiny();
  j["n_embd"] = 192;
  j["n_head"] = 12;
  EXPECT_EQ(error(j), "");  // 12 = 4 x 3
  j["n_head"] = 6;
  EXPECT_THAT(error(j), HasSubstr("field 'n_head': 6 is not a multiple of 4"));
  j = tiny();
  j["n_head"] = 5;
  EXPECT_THAT(error(j), HasSubstr("field 'n_head': 5 does not divide n_embd 64"));
  for (const int heads : {0, -4}) {  // validate's, named by the file's key
    j["n_head"] = heads;
    EXPECT_THAT(error(j), HasSubstr("field 'n_head'"));
  }
  j = tiny();
  for (const int r : {3, 0, -2, 10}) {  // odd, none, negative, wider than a head of 8
    j["rotary_dim"] = r;
    EXPECT_THAT(error(j), HasSubstr("field 'rotary_dim': must be even and in (0, head_dim = 8], "
                                    "got " +
                                    std::to_string(r)));
  }
  // GPT-J takes a null rotary_dim on one head; CodeGen's model cannot be built with one.
  j = tiny();
  j["rotary_dim"] = nullptr;
  EXPECT_THAT(error(j), HasSubstr("field 'rotary_dim': null cannot build CodeGenModel"));
  j = tiny();
  j["n_positions"] = int64_t{1} << 60;
  EXPECT_THAT(error(j), HasSubstr("field 'n_positions'"));
  // The output bias is the family's: a file naming lm_head_bias is refused as unread.
  j = tiny();
  j["lm_head_bias"] = true;
  EXPECT_THAT(error(j), HasSubstr("lm_head_bias"));
  // A config built in code with heads that are not 4 blocks' worth is refused when built.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.num_attention_heads = c.num_key_value_heads = 2;
  c.head_dim = 32;
  EXPECT_THAT([&] { (void)build_model(c); },
              ThrowsMessage<Error>(HasSubstr("codegen: 2 heads and 2 key/value heads; expected a "
                                             "multiple of 4 heads")));
  // The tables have n_positions rows: a longer sequence is one clear error, as transformers'
  // indexing fails.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 33); },
              ThrowsMessage<Error>(HasSubstr("sequence length 33 exceeds n_positions 32")));
}

// The nodes of `op` run by `module` itself that are views (is_view) or not.
std::vector<const OpNode*> nodes_of(const OpGraph& g, const std::string& op,
                                    const std::string& module, bool is_view) {
  std::vector<const OpNode*> out;
  for (const OpNode& n : g.nodes()) {
    if (n.op == op && n.module == module && n.is_view == is_view) out.push_back(&n);
  }
  return out;
}

TEST(CodegenModels, TheBlockedQkvIsCopiedApartAndRotatedInFloat32) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const OpGraph g = trace_model_forward(*build_model(c), 2, 8);
  const std::string attn = "transformer.h.0.attn";
  // Reshapes that view: [B, S, 3h] -> [B, S, 4, 3 x 16], and each of q, v, k's [B, S, 4, 16] ->
  // [B, S, 4, 2, 8]. Reshapes that copy: each part folded into [B, S, 8, 8] (its blocks lie 48
  // channels apart), sin and cos repeated for k and for q, and merge_heads.
  EXPECT_EQ(nodes_of(g, "reshape", attn, true).size(), 4u);
  EXPECT_EQ(nodes_of(g, "reshape", attn, false).size(), 3u + 4u + 1u);
  // One gather of the float32 table, a neg, two products, a sum and two cats (rotate_every_two's
  // and the rotated channels with the rest) for each of k and q.
  EXPECT_EQ(ops_in(g, "embedding", attn), 1);
  EXPECT_EQ(ops_in(g, "neg", attn), 2);
  EXPECT_EQ(ops_in(g, "mul", attn), 4);
  EXPECT_EQ(ops_in(g, "add", attn), 2);
  EXPECT_EQ(ops_in(g, "cat", attn), 4);
  // q and k come out of the rotation float32 and are cast to bfloat16 for the fused kernel,
  // which then reads three bfloat16 tensors [2, 8, 8, 8].
  const std::vector<const OpNode*> casts = nodes_of(g, "to", attn, false);
  ASSERT_EQ(casts.size(), 2u);
  for (const OpNode* n : casts) {
    EXPECT_EQ(g.tensor(n->inputs[0]).dtype, DType::kFloat32);
    EXPECT_EQ(g.tensor(n->outputs[0]).dtype, DType::kBFloat16);
  }
  const std::vector<const OpNode*> sdpa = nodes_of(g, "scaled_dot_product_attention", attn, false);
  ASSERT_EQ(sdpa.size(), 1u);
  ASSERT_EQ(sdpa[0]->inputs.size(), 3u);
  for (const int64_t in : sdpa[0]->inputs) {
    EXPECT_EQ(g.tensor(in).dtype, DType::kBFloat16);
    EXPECT_EQ(g.tensor(in).sizes, DimVector({2, 8, 8, 8}));
  }
  // x + attn(n) + mlp(n): two adds in the block, one ln_1 read by both halves.
  EXPECT_EQ(ops_in(g, "add", "transformer.h.0"), 2);
  EXPECT_EQ(ops_in(g, "layer_norm", "transformer.h.0.ln_1"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "transformer.h.0.mlp"), 1);
  // The projections of one layer, T = 2 x 8 tokens: 2 T h (3h + h + 2F) = 2 x 16 x 64 x (256 +
  // 192) = 917,504 FLOPs; the output layer 2 T h V = 262,144.
  double layer0 = 0, head = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "linear") continue;
    if (n.module.starts_with("transformer.h.0.")) layer0 += n.matmul_flops;
    if (n.module == "lm_head") head += n.matmul_flops;
  }
  EXPECT_DOUBLE_EQ(layer0, 917'504.0);
  EXPECT_DOUBLE_EQ(head, 262'144.0);
  // A float32 model has nothing to cast.
  nlohmann::json j = tiny();
  j["torch_dtype"] = "float32";
  const OpGraph g32 = trace_model_forward(*build_model(parse_model_config(j, "fp32")), 2, 8);
  EXPECT_EQ(ops_in(g32, "to", attn), 0);
  EXPECT_EQ(ops_in(g32, "scaled_dot_product_attention", attn), 1);
}

TEST(CodegenModels, TrainingStepDropsOutAndDoublesTheProjectionsBackward) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.input = empty({2, 8}, {.dtype = DType::kInt64});
  const TrainingStep st = trace_training_step(*m, o);
  // The tables are buffers: the trainable elements are the 74,560 parameters.
  EXPECT_EQ(st.totals.parameters, 74'560);
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].type, "CodeGenBlock");
  double forward = 0, backward = 0;
  int64_t dropouts = 0;
  for (const TrainingOp& op : st.ops) {
    const std::string& fqn = op.call >= 0 ? st.calls[static_cast<size_t>(op.call)].fqn : "";
    if (op.op == "dropout") ++dropouts;
    if (op.op != "linear" || !fqn.starts_with("transformer.h.0.")) continue;
    forward += op.matmul_flops;
    backward += op.backward_matmul_flops;
  }
  // As by hand above; backward multiplies each by its input's and its weight's gradient.
  EXPECT_DOUBLE_EQ(forward, 917'504.0);
  EXPECT_DOUBLE_EQ(backward, 2 * 917'504.0);
  // embd_pdrop once, resid_pdrop on each half's output in both layers (attn_pdrop is inside the
  // fused attention).
  EXPECT_EQ(dropouts, 1 + 2 * 2);
}

TEST(CodegenModels, TensorParallelPlanIsMegatronsOverWholeBlocks) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_TRUE(f.fused_qkv);
  EXPECT_EQ(f.fused_qkv_blocks, 4);  // transformers' mp_num
  EXPECT_EQ(f.layers_path, "transformer.h");
  EXPECT_EQ(f.hf_class_prefix, "CodeGen");
  ASSERT_EQ(f.tp_plan.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"transformer.wte", "rowwise"},
      {"transformer.h.*.attn.qkv_proj", "colwise"},
      {"transformer.h.*.attn.out_proj", "rowwise"},
      {"transformer.h.*.mlp.fc_in", "colwise"},
      {"transformer.h.*.mlp.fc_out", "rowwise"},
      {"lm_head", "colwise"}};
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    // qkv_proj's rows are whole blocks of [q; v; k] heads: a contiguous split (tp dividing 4)
    // hands a rank whole blocks, so no rule splits parts apart (fused_parts 1).
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);
    std::string path = want[i].first;
    if (const size_t star = path.find('*'); star != std::string::npos) path.replace(star, 1, "1");
    EXPECT_NO_THROW((void)m->get_submodule(path)) << path;
  }
}

}  // namespace
}  // namespace shardplan::tensor
