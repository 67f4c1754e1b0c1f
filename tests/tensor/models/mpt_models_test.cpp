// mpt (MosaicML's MPT) against hand formulas written here from transformers 5's modeling_mpt.py
// and configuration_mpt.py. h = d_model, V vocabulary, L layers; no bias anywhere, the MLP 4 h
// wide whatever expansion_ratio says, ALiBi (no position parameters), wte tied to lm_head:
//   attn   Wqkv [3h, h] ([q; k; v]), out_proj [h, h]             4 h^2
//   ffn    up_proj [4h, h], down_proj [h, 4h]                     8 h^2
//   norms  norm_1, norm_2 (a weight, the bias set to None)        2 h
//   model  wte [V, h] + L (12 h^2 + 2 h) + norm_f [h] (+ lm_head [V, h] untied)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
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
using test::Shapes;
using test::shapes_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// The hand formula of the head comment.
int64_t mpt_total(int64_t V, int64_t h, int64_t L, bool tied = true) {
  const int64_t layer = 4 * h * h + 8 * h * h + 2 * h;
  return V * h + L * layer + h + (tied ? 0 : V * h);
}

TEST(MptModels, MptThirtyBIsThePublishedSize) {
  // MPT-30B: V 50,432, h 7,168, 48 layers of 64 heads of 112, tied.
  //   layer 12 x 7,168^2 + 2 x 7,168 = 616,577,024; 48 layers 29,595,697,152
  //   + wte 50,432 x 7,168 = 361,496,576 + norm_f 7,168 = 29,957,200,896
  // MosaicML's model card: "29.95B" (its figure cut, not rounded, at two decimals).
  EXPECT_EQ(mpt_total(50432, 7168, 48), 29'957'200'896);
  const ModelConfig c = find_model_config("mpt-30b");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.intermediate_size, 4 * 7168);
  EXPECT_EQ(c.head_dim, 112);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "MptForCausalLM");
  EXPECT_EQ(m->parameters_numel(), 29'957'200'896);
  EXPECT_EQ(layers_path(c), "transformer.blocks");
  EXPECT_EQ(m->get_submodule("transformer").type_name(), "MptModel");
  EXPECT_EQ(m->get_submodule("transformer.blocks.47").type_name(), "MptBlock");
  EXPECT_EQ(m->get_submodule("transformer.blocks.0.attn").type_name(), "MptAttention");
  EXPECT_EQ(m->get_submodule("transformer.blocks.0.ffn").type_name(), "MptMLP");
  EXPECT_EQ(shapes_under(*m, "transformer.blocks.0."),
            (Shapes{{"norm_1.weight", {7168}},
                    {"attn.Wqkv.weight", {3 * 7168, 7168}},
                    {"attn.out_proj.weight", {7168, 7168}},
                    {"norm_2.weight", {7168}},
                    {"ffn.up_proj.weight", {4 * 7168, 7168}},
                    {"ffn.down_proj.weight", {7168, 4 * 7168}}}));
  // Top level, in named_parameters order: lm_head is wte (tied), listed once.
  Names top;
  for (const NamedTensor& p : m->named_parameters()) {
    if (!p.name.starts_with("transformer.blocks.")) top.push_back(p.name);
  }
  EXPECT_EQ(top, (Names{"transformer.wte.weight", "transformer.norm_f.weight"}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(MptModels, MptSevenBIsThePublishedSize) {
  // MPT-7B: V 50,432, h 4,096, 32 layers of 32 heads of 128, tied.
  //   layer 12 x 4,096^2 + 2 x 4,096 = 201,334,784; 32 layers 6,442,713,088
  //   + wte 50,432 x 4,096 = 206,569,472 + norm_f 4,096 = 6,649,286,656 (the card's "6.7B")
  EXPECT_EQ(mpt_total(50432, 4096, 32), 6'649'286'656);
  const ModelConfig c = find_model_config("mpt-7b");
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(build_model(c)->parameters_numel(), 6'649'286'656);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "mpt"},
          {"vocab_size", 1000},
          {"d_model", 64},
          {"n_heads", 4},
          {"n_layers", 2},
          {"max_seq_len", 128},
          {"torch_dtype", "bfloat16"}};
}

TEST(MptModels, TinyConfigMatchesTheHandTotal) {
  // h 64, V 1,000, 2 layers: layer 12 x 64^2 + 2 x 64 = 49,280;
  // tied 64,000 + 98,560 + 64 = 162,624; untied + 64,000 = 226,624.
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_FALSE(c.clip_qkv.has_value());
  EXPECT_EQ(c.attention_multiplier, 0);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(mpt_total(1000, 64, 2), 162'624);
  EXPECT_EQ(m->parameters_numel(), 162'624);
  nlohmann::json untied = tiny();
  untied["tie_word_embeddings"] = false;
  const ModulePtr u = build_model(parse_model_config(untied, "untied.json"));
  EXPECT_EQ(mpt_total(1000, 64, 2, false), 226'624);
  EXPECT_EQ(u->parameters_numel(), 226'624);
  EXPECT_EQ(names_under(*u, "lm_head."), (Names{"weight"}));
  EXPECT_EQ(u->named_parameters().back().name, "lm_head.weight");
  // One layer kind: full attention, no rotary work.
  const LayerStack stack = layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 1u);
  EXPECT_EQ(stack.kinds[0].attention, AttentionType::kFull);
}

TEST(MptModels, AttnConfigDefaultsAndRoundTrip) {
  const ModelConfig plain = parse_model_config(tiny(), "tiny.json");
  // attn_config absent, null or spelled out with MptAttentionConfig's defaults: one model.
  nlohmann::json j = tiny();
  j["attn_config"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null.json"), plain);
  j["attn_config"] = {{"attn_type", "multihead_attention"},
                      {"attn_pdrop", 0},
                      {"attn_impl", "triton"},  // a kernel choice, the same model
                      {"clip_qkv", nullptr},
                      {"softmax_scale", nullptr},
                      {"prefix_lm", false},
                      {"qk_ln", false},
                      {"attn_uses_sequence_id", false},
                      {"alibi", true},
                      {"alibi_bias_max", 8},
                      {"sliding_window_size", -1},
                      {"fused_qkv", true}};
  j["learned_pos_emb"] = true;  // MPT-7B's file: no table either way
  j["norm_type"] = "LayerNorm";
  j["ffn_config"] = {{"ffn_type", "mptmlp"}, {"ffn_act_fn", {{"name", "gelu"}}}};
  j["expansion_ratio"] = 4.0;
  j["init_config"] = {{"name", "kaiming_normal_"}};  // MosaicML's init: transformers ignores it
  EXPECT_EQ(parse_model_config(j, "spelled.json"), plain);
  // clip_qkv 0 is no clip: MptAttention clamps only when it is truthy.
  j["attn_config"]["clip_qkv"] = 0;
  EXPECT_EQ(parse_model_config(j, "zero.json"), plain);
  // What transformers reads: dropout (every one of the three from attn_pdrop), the clip, the scale.
  j = tiny();
  j["attn_config"] = {{"attn_pdrop", 0.1}, {"clip_qkv", 6.0}, {"softmax_scale", 0.125}};
  j["layer_norm_epsilon"] = 1e-6;
  const ModelConfig c = parse_model_config(j, "set.json");
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  ASSERT_TRUE(c.clip_qkv.has_value());
  EXPECT_DOUBLE_EQ(*c.clip_qkv, 6.0);
  EXPECT_DOUBLE_EQ(c.attention_multiplier, 0.125);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
}

TEST(MptModels, Refusals) {
  auto refused = [](const nlohmann::json& bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "f.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  // What transformers' MptConfig holds but MptModel does not build (Note [MPT keys transformers
  // does not read] in family_mpt.cpp): the keys merged into the tiny file, the error.
  const std::vector<std::pair<const char*, std::string>> top = {
      {R"({"no_bias": false})",
       "f.json: field 'no_bias': false: transformers' MPT builds no bias on any Linear or "
       "LayerNorm"},
      {R"({"expansion_ratio": 2})",
       "f.json: field 'expansion_ratio': 2: transformers' MptMLP is 4 x d_model wide"},
      {R"({"logit_scale": "inv_sqrt_d_model"})",
       "field 'logit_scale': \"inv_sqrt_d_model\": transformers' MptForCausalLM does not scale"},
      {R"({"embedding_fraction": 0.5})", "field 'embedding_fraction': 0.5"},
      {R"({"norm_type": "rmsnorm"})",
       "field 'norm_type': \"rmsnorm\": transformers' MPT builds nn.LayerNorm"},
      {R"({"block_overrides": {"order": [{"name": "default"}]}})", "field 'block_overrides'"},
      {R"({"ffn_config": {"ffn_type": "mptglu"}})",
       "f.json: ffn_config: field 'ffn_type': \"mptglu\": transformers' MptMLP is the plain"},
      {R"({"ffn_config": {"ffn_hidden_size": 100}})",
       "ffn_config: field 'ffn_hidden_size': 100: transformers' MptMLP is 4 x d_model = 256 wide"},
      {R"({"ffn_config": {"ffn_act_fn": {"name": "silu"}}})", "ffn_config: field 'ffn_act_fn'"},
      {R"({"ffn_config": 3})", "field 'ffn_config': expected an object or null, got 3"},
      {R"({"attn_config": "torch"})", "field 'attn_config': expected an object or null"},
      {R"({"n_heads": 5})", "field 'n_heads': 5 does not divide d_model 64"},
      // Checked by validate, named by the file's keys.
      {R"({"n_layers": 0})", "field 'n_layers' (num_hidden_layers): must be a positive integer"},
      // OLMo's top-level key is not MPT's: transformers reads attn_config.clip_qkv only.
      {R"({"clip_qkv": 8.0})", "field 'clip_qkv': 8.0 changes the architecture"},
  };
  for (const auto& [patch, what] : top) {
    nlohmann::json j = tiny();
    j.update(nlohmann::json::parse(patch));
    refused(j, what);
  }
  const std::vector<std::pair<const char*, std::string>> attn = {
      {R"({"alibi": false})",
       "f.json: attn_config: field 'alibi': false: transformers' MptModel always adds the ALiBi "
       "bias"},
      {R"({"attn_type": "multiquery_attention"})",
       "attn_config: field 'attn_type': \"multiquery_attention\": transformers' MptAttention is "
       "multi-head"},
      {R"({"qk_ln": true})", "attn_config: field 'qk_ln': true"},
      {R"({"prefix_lm": true})", "attn_config: field 'prefix_lm': true: transformers' MPT masks"},
      {R"({"attn_uses_sequence_id": true})", "attn_config: field 'attn_uses_sequence_id': true"},
      {R"({"alibi_bias_max": 16})", "attn_config: field 'alibi_bias_max': 16"},
      {R"({"clip_qkv": -1.0})", "attn_config: field 'clip_qkv': -1.0: expected a bound >= 0"},
      {R"({"softmax_scale": 0})", "attn_config: field 'softmax_scale': 0: expected a positive"},
      {R"({"rope": true})", "attn_config: field 'rope': true"},
      {R"({"qk_gn": true})", "attn_config: field 'qk_gn': true"},
      {R"({"fused_qkv": false})", "attn_config: field 'fused_qkv': false"},
      {R"({"sliding_window_size": 512})", "attn_config: field 'sliding_window_size': 512"},
      {R"({"attn_logit_softcapping": 30.0})", "attn_config: field 'attn_logit_softcapping'"},
      {R"({"alibi": "yes"})", "attn_config: field 'alibi': expected true or false, got \"yes\""},
      {R"({"attn_pdrop": 1.5})",
       "field 'attn_config.attn_pdrop' (attention_dropout): a dropout probability must be in "
       "[0, 1)"},
  };
  for (const auto& [patch, what] : attn) {
    nlohmann::json j = tiny();
    j["attn_config"] = nlohmann::json::parse(patch);
    refused(j, what);
  }
  // A config built in code with another MLP width writes its ratio, which parse then refuses.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.intermediate_size = 3 * 64;
  refused(to_hf_json(c), "field 'expansion_ratio': 3:");
}

// The trace of the tiny config, B 2 x S 16 (T = 32 tokens), h 64, 4 heads of 16.
TEST(MptModels, TrainingTraceOfOneBlock) {
  nlohmann::json j = tiny();
  j["attn_config"] = {{"attn_pdrop", 0.1}, {"clip_qkv", 6.0}};
  const ModelConfig c = parse_model_config(j, "tiny.json");
  const ModulePtr m = build_model(c, {.dtype = std::nullopt, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].fqn, "transformer.blocks.0");
  EXPECT_EQ(st.blocks[0].type, "MptBlock");
  // Forward matrix products of block 0:
  //   Wqkv 2 T h 3h + out_proj 2 T h h + up 2 T h 4h + down 2 T 4h h = 2 x 32 x 12 x 64^2
  //     = 3,145,728
  //   attention (fused, ALiBi inside): QK^T and PV over the full square, 2 x 2 B H S^2 d
  //     = 4 x 2 x 4 x 16^2 x 16 = 131,072
  double linear = 0, attention = 0;
  int64_t sdpa = 0, gelus = 0, norms = 0, dropouts = 0, clamps = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    if (op.op == "linear") linear += op.matmul_flops;
    if (op.op == "scaled_dot_product_attention") {
      attention += op.matmul_flops;
      ++sdpa;
    }
    gelus += op.op == "gelu";
    norms += op.op == "layer_norm";
    dropouts += op.op == "dropout";
    clamps += op.op == "maximum" || op.op == "minimum";
  }
  EXPECT_DOUBLE_EQ(linear, 2.0 * 32 * 12 * 64 * 64);
  EXPECT_DOUBLE_EQ(attention, 4.0 * 2 * 4 * 16 * 16 * 16);
  EXPECT_EQ(sdpa, 1);
  EXPECT_EQ(gelus, 1);
  EXPECT_EQ(norms, 2);
  // attn_pdrop drops the attention output (resid_attn_dropout) and the MLP's output; the
  // attention weights' dropout is inside the fused kernel.
  EXPECT_EQ(dropouts, 2);
  // clip_qkv clamps the whole Wqkv output once: a maximum and a minimum.
  EXPECT_EQ(clamps, 2);
  // No rotary embedding, no position table: nothing runs outside the blocks but wte, norm_f and
  // lm_head (and the loss).
  const OpGraph g = trace_model_forward(*m, 2, 16);
  EXPECT_EQ(ops_in(g, "embedding", "transformer.wte"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer"), 0);  // no emb_pdrop
  EXPECT_EQ(ops_in(g, "dropout", "transformer.blocks.1"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "transformer.blocks.1.ffn"), 1);
  EXPECT_EQ(ops_in(g, "maximum", "transformer.blocks.1.attn"), 1);
}

TEST(MptModels, NoSequenceBeyondTheAlibiTable) {
  // MptModel adds an ALiBi table max_seq_len (128) keys wide: 129 tokens fail in transformers.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  EXPECT_NO_THROW((void)trace_model_forward(*m, 1, 128));
  EXPECT_THAT([&] { (void)trace_model_forward(*m, 1, 129); },
              ThrowsMessage<Error>(HasSubstr("exceeds max_seq_len 128")));
}

// The family's tensor-parallel plan names modules the model builds, Wqkv split as three parts
// (tests/planner/cost/mpt_tensor_parallel_test.cpp applies it).
TEST(MptModels, TensorParallelPlan) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.learned_positions);
  EXPECT_TRUE(f.fused_qkv);
  EXPECT_EQ(f.file_key("hidden_size"), "d_model");
  EXPECT_EQ(f.file_key("max_position_embeddings"), "max_seq_len");
  std::vector<std::tuple<std::string, std::string, int64_t>> rules;
  for (const TensorParallelRule& r : f.tp_plan) {
    rules.emplace_back(std::string(r.pattern), std::string(r.style), r.fused_parts);
  }
  using Rule = std::tuple<std::string, std::string, int64_t>;
  EXPECT_EQ(rules, (std::vector<Rule>{{"transformer.wte", "rowwise", 1},
                                      {"transformer.blocks.*.attn.Wqkv", "colwise", 3},
                                      {"transformer.blocks.*.attn.out_proj", "rowwise", 1},
                                      {"transformer.blocks.*.ffn.up_proj", "colwise", 1},
                                      {"transformer.blocks.*.ffn.down_proj", "rowwise", 1},
                                      {"lm_head", "colwise", 1}}));
  // Each pattern's module exists in layer 1 (the '*' as a layer index) and is a Linear or the
  // Embedding.
  const ModulePtr m = build_model(c);
  for (const auto& [pattern, style, parts] : rules) {
    std::string fqn = pattern;
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "1");
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
