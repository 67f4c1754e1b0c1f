// Aria's language model (tensor/models/family_aria_text.cpp) under the planner: its
// tensor-parallel plan (Note [Aria tensor parallelism]), in which the two AriaGroupedExpertsGemm
// of every layer (fc1 [E, h, 2F], fc2 [E, F, h], each expert's slice [in, out]) are
// grouped-experts projections split by features and, under expert parallelism, by expert, and the
// shared experts split as a dense MLP; and the traced layer's dataflow through them. Counts
// written out by hand.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/layers.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/aria_text_models_test.cpp's tiny model: V 128 untied, h 64, 2 layers, 4
// heads and 2 key-value heads of 16, 4 experts of 32 (top 2), 2 shared experts (one MLP of 64).
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json{{"model_type", "aria_text"},
                                                   {"vocab_size", 128},
                                                   {"hidden_size", 64},
                                                   {"intermediate_size", 32},
                                                   {"num_hidden_layers", 2},
                                                   {"num_attention_heads", 4},
                                                   {"num_key_value_heads", 2},
                                                   {"max_position_embeddings", 256},
                                                   {"moe_num_experts", 4},
                                                   {"moe_topk", 2},
                                                   {"torch_dtype", "bfloat16"}},
                                    "tiny.json");
}

// TP rank 0 of 2, a layer: q, k, v, o 12,288 / 2 = 6,144; router 256 replicated; fc1 16,384 / 2
// = 8,192 and fc2 8,192 / 2 = 4,096; shared experts 12,288 / 2 = 6,144; norms 128: 24,960. Two
// layers, embed_tokens and lm_head 8,192 / 2 each, norm 64: 58,176.
TEST(AriaTextTensorParallel, TinyOnTwoRanks) {
  const int64_t layer = 6144 + 256 + 8192 + 4096 + 6144 + 128;
  EXPECT_EQ(layer, 24'960);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * layer + 2 * 4096 + 64);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 58'176);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 58'176);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 115'520);    // the whole model
  // A layer's routed experts (fc1 and fc2), halved; the shared experts are not among them.
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 1), 24'576);
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 12'288);
}

// Aria on 4 ranks (h 2,560, 20 heads of 128, 64 experts of 1,664, shared 3,328, V 100,352, 28
// layers): attention 26,214,400 / 4 = 6,553,600; router 163,840; experts 817,889,280 / 4 =
// 204,472,320; shared 25,559,040 / 4 = 6,389,760; norms 5,120: 217,584,640 a layer; 28 of them,
// embed_tokens and lm_head 256,901,120 / 4 each, norm 2,560.
TEST(AriaTextTensorParallel, FlagshipOnFourRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("aria");
  const int64_t layer = 6'553'600 + 163'840 + 204'472'320 + 6'389'760 + 5'120;
  EXPECT_EQ(layer, 217'584'640);
  const int64_t total = 28 * layer + 2 * int64_t{256'901'120} / 4 + 2'560;
  EXPECT_EQ(total, 6'220'823'040);
  EXPECT_EQ(tp_rank_parameters(c, 4), total);
  EXPECT_EQ(expert_parameters_per_layer(c, 4), 817'889'280 / 4);
}

std::map<std::string, mesh::ParameterSharding> placed(const tensor::Module& m,
                                                      const mesh::DeviceMesh& dm,
                                                      const std::vector<mesh::StyleRule>& rules,
                                                      const mesh::ParallelizeConfig& pc) {
  std::map<std::string, mesh::ParameterSharding> by;
  for (const auto& p : mesh::parallelize_module(m, dm, rules, pc)) by.emplace(p.fqn, p);
  return by;
}

// The experts style on the [E, in, out] projections: fc1 [E, h, 2F] on dim 2 by halves
// (_StridedShard(2, 2): the projection half and the gate half each over the ranks), fc2 [E, F, h]
// on dim 1; the shared experts as a dense MLP (gate and up on their rows, down on its columns);
// the router and the norms replicated. Expert parallelism then splits dim 0 of fc1 and fc2 only.
TEST(AriaTextTensorParallel, ExpertsSplitByFeaturesAndByExpert) {
  const tensor::ModulePtr m = tensor::build_model(tiny());
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(tiny()), *m);
  const mesh::Placement R = mesh::Replicate{};
  const std::string b = "model.layers.1.";
  using P = std::vector<mesh::Placement>;
  {
    const mesh::DeviceMesh dm({2}, {"tp"});
    mesh::ParallelizeConfig pc;
    pc.tp_dim = "tp";
    const auto by = placed(*m, dm, rules, pc);
    auto at = [&](const std::string& name) { return by.at(b + name).spec.placements; };
    EXPECT_EQ(at("mlp.experts.fc1.weight"), (P{mesh::StridedShard{2, 2}}));
    EXPECT_EQ(at("mlp.experts.fc2.weight"), (P{mesh::Shard{1}}));
    EXPECT_EQ(at("mlp.shared_experts.gate_proj.weight"), (P{mesh::Shard{0}}));
    EXPECT_EQ(at("mlp.shared_experts.up_proj.weight"), (P{mesh::Shard{0}}));
    EXPECT_EQ(at("mlp.shared_experts.down_proj.weight"), (P{mesh::Shard{1}}));
    EXPECT_EQ(at("self_attn.q_proj.weight"), (P{mesh::Shard{0}}));
    EXPECT_EQ(at("self_attn.o_proj.weight"), (P{mesh::Shard{1}}));
    for (const char* replicated :
         {"mlp.router.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}) {
      EXPECT_EQ(at(replicated), (P{R})) << replicated;
    }
    EXPECT_EQ(by.at(b + "mlp.experts.fc1.weight").style, "experts");
    EXPECT_EQ(by.at("model.embed_tokens.weight").spec.placements, (P{mesh::Shard{0}}));
    EXPECT_EQ(by.at("lm_head.weight").spec.placements, (P{mesh::Shard{0}}));
  }
  const mesh::DeviceMesh dm({2, 2}, {"dp", "ep"});
  mesh::ParallelizeConfig pc;
  pc.ep_dims = {"ep"};
  const auto by = placed(*m, dm, {}, pc);
  for (const char* expert : {"mlp.experts.fc1.weight", "mlp.experts.fc2.weight"}) {
    EXPECT_EQ(by.at(b + expert).spec.placements, (P{R, mesh::Shard{0}})) << expert;
  }
  for (const char* dense :
       {"mlp.router.weight", "mlp.shared_experts.gate_proj.weight", "self_attn.q_proj.weight"}) {
    EXPECT_EQ(by.at(b + dense).spec.placements, (P{R, R})) << dense;
  }
}

// fc1's activations as colwise (R in, its features out), fc2's as rowwise (features in, a partial
// sum reduced to R).
TEST(AriaTextTensorParallel, ProjectionActivationLayouts) {
  const tensor::ModulePtr m = tensor::build_model(tiny());
  const mesh::StyleRule rule{.pattern = "x", .style = mesh::ParallelStyle::kExperts};
  const mesh::Placement R = mesh::Replicate{}, last = mesh::Shard{-1};
  const std::string fc1 = "model.layers.0.mlp.experts.fc1", fc2 = "model.layers.0.mlp.experts.fc2";
  const mesh::ActivationLayouts first = mesh::activation_layouts(rule, m->get_submodule(fc1), fc1);
  EXPECT_EQ(first.input, R);
  EXPECT_EQ(first.desired_input, R);
  EXPECT_EQ(first.computed_output, last);
  EXPECT_EQ(first.output, last);
  const mesh::ActivationLayouts second = mesh::activation_layouts(rule, m->get_submodule(fc2), fc2);
  EXPECT_EQ(second.input, last);
  EXPECT_EQ(second.desired_input, last);
  EXPECT_EQ(second.computed_output, mesh::Placement(mesh::Partial{mesh::ReduceOp::kSum}));
  EXPECT_EQ(second.output, R);
}

// The traced layer at tp 2 (16 tokens, 8 picks an expert): fc1 column-parallel and fc2
// row-parallel and reduced (a routed-experts boundary), both routed work; q, k, v and the shared
// gate and up column-parallel, o and the shared down row-parallel; the router replicated; the
// attention on the rank's 2 of 4 heads. With ep 2 a rank runs 2 of the 4 experts on twice the
// rows.
TEST(AriaTextTensorParallel, TracedLayerSplitsTheExpertsAndTheSharedMlp) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  const std::string b = "model.layers.0.";
  const std::map<std::string, OpSplit> linear_splits = {
      {b + "self_attn.q_proj", OpSplit::kColumn},
      {b + "self_attn.k_proj", OpSplit::kColumn},
      {b + "self_attn.v_proj", OpSplit::kColumn},
      {b + "self_attn.o_proj", OpSplit::kRow},
      {b + "mlp.router", OpSplit::kReplicated},
      {b + "mlp.shared_experts.gate_proj", OpSplit::kColumn},
      {b + "mlp.shared_experts.up_proj", OpSplit::kColumn},
      {b + "mlp.shared_experts.down_proj", OpSplit::kRow}};
  std::map<std::string, int> seen;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with(b)) continue;  // the embedding and lm_head around the layer
    const std::string key = op.op + " " + fqn;
    if (op.op == "bmm") {
      ++seen[key];
      EXPECT_TRUE(t.expert_op[i]) << key;
      const bool first = fqn.ends_with("fc1");
      EXPECT_EQ(t.split[i], first ? OpSplit::kColumn : OpSplit::kRow) << key;
      if (!first) {
        EXPECT_TRUE(t.expert_boundary[static_cast<size_t>(op.outputs.front())]) << key;
      }
      const GemmShape g = local_gemm_shape(t, i, {.tp = 2});
      const GemmShape ep = local_gemm_shape(t, i, {.tp = 2, .ep = 2});
      EXPECT_EQ(g.batch, 4) << key;
      EXPECT_EQ(g.m, 8) << key;
      // fc1's N (2F = 64) split, fc2's K (F = 32) split.
      EXPECT_EQ(g.n, first ? 32 : 64) << key;
      EXPECT_EQ(g.k, first ? 64 : 16) << key;
      EXPECT_EQ(ep.batch, 2) << key;  // 2 of the 4 experts
      EXPECT_EQ(ep.m, 16) << key;     // on the picks of both ep ranks
    } else if (op.op == "linear") {
      ++seen[key];
      EXPECT_FALSE(t.expert_op[i]) << key;
      EXPECT_EQ(t.split[i], linear_splits.at(fqn)) << key;
    } else if (op.op == "scaled_dot_product_attention") {
      ++seen[key];
      EXPECT_TRUE(t.score_op[i]);
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(local_gemm_shape(t, i, {.tp = 2}).batch, 2);  // 4 heads, 2 a rank
    }
  }
  std::map<std::string, int> want = {{"bmm " + b + "mlp.experts.fc1", 1},
                                     {"bmm " + b + "mlp.experts.fc2", 1},
                                     {"scaled_dot_product_attention " + b + "self_attn", 1}};
  for (const auto& [fqn, split] : linear_splits) want["linear " + fqn] = 1;
  EXPECT_EQ(seen, want);
  // The keys and values a context-parallel ring passes: 2 heads of 16 + 16, 16 tokens, bf16; the
  // token all-to-all of expert parallelism: each token's 2 picks of 64, bf16.
  EXPECT_EQ(t.kv_bytes, 16 * 2 * (16 + 16) * 2);
  EXPECT_EQ(t.moe_dispatch_bytes, 16 * 2 * 64 * 2);
}

}  // namespace
}  // namespace shardplan::planner
