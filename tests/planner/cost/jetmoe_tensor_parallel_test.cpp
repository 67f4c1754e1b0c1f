// JetMoE (tensor/models/family_jetmoe.cpp) under the planner: its tensor-parallel plan (Note
// [JetMoE tensor parallelism]), in which the four JetMoeParallelExperts of every layer (the
// attention experts' queries and outputs, the MLP experts' input and output) are grouped-experts
// projections split by features and, under expert parallelism, by expert; and the traced layer's
// dataflow through them. Counts written out by hand.
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

// tests/tensor/models/jetmoe_models_test.cpp's tiny model: h 64, V 128 tied, 2 layers, 2
// key-value heads of 16 (D = 32, 4 query heads), 4 experts of 48, top 2.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json{{"model_type", "jetmoe"},
                                                   {"vocab_size", 128},
                                                   {"hidden_size", 64},
                                                   {"num_hidden_layers", 2},
                                                   {"num_key_value_heads", 2},
                                                   {"kv_channels", 16},
                                                   {"intermediate_size", 48},
                                                   {"max_position_embeddings", 256},
                                                   {"num_local_experts", 4},
                                                   {"num_experts_per_tok", 2},
                                                   {"torch_dtype", "bfloat16"}},
                                    "tiny.json");
}

// TP rank 0 of 2, a layer:
//   mlp             bias 64; input_linear 4 x 96 x 64 / 2 = 12,288; output_linear 4 x 64 x 48 / 2
//                   = 6,144; router 256
//   norms           128
//   self_attention  bias 64; input_linear, output_linear 4 x 32 x 64 / 2 = 4,096 each; router
//                   256; kv_proj 64 x 64 / 2 = 2,048
//   = 29,440; two layers, embed_tokens (and the tied lm_head) 8,192 / 2, norm 64: 63,040.
TEST(JetMoeTensorParallel, TinyOnTwoRanks) {
  const int64_t layer = 64 + 12288 + 6144 + 256 + 128 + 64 + 4096 + 4096 + 256 + 2048;
  EXPECT_EQ(layer, 29'440);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 2 * layer + 4096 + 64);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 63'040);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 63'040);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 124'480);    // the whole model
  // A layer's routed experts, both sparse blocks': 24,576 + 12,288 + 8,192 + 8,192, halved.
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 1), 53'248);
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 26'624);
}

// JetMoE-8B on 8 ranks (h 2,048, V 32,000 tied, 24 layers, 8 experts of 5,632, D 2,048):
//   mlp             2,048 + 184,549,376 / 8 + 92,274,688 / 8 + 16,384 = 34,621,440
//   norms           4,096
//   self_attention  2,048 + 2 x 33,554,432 / 8 + 16,384 + 8,388,608 / 8 = 9,455,616
//   = 44,081,152 a layer; 24 of them, embed_tokens 65,536,000 / 8, norm 2,048
TEST(JetMoeTensorParallel, FlagshipOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("jetmoe-8b");
  const int64_t mlp = 2048 + 184'549'376 / 8 + 92'274'688 / 8 + 16384;
  const int64_t attention = 2048 + 2 * 33'554'432 / 8 + 16384 + 8'388'608 / 8;
  EXPECT_EQ(mlp, 34'621'440);
  EXPECT_EQ(attention, 9'455'616);
  const int64_t total = 24 * (mlp + 4096 + attention) + 65'536'000 / 8 + 2048;
  EXPECT_EQ(total, 1'066'141'696);
  EXPECT_EQ(tp_rank_parameters(c, 8), total);
  EXPECT_EQ(expert_parameters_per_layer(c, 8), 343'932'928 / 8);
}

std::map<std::string, mesh::ParameterSharding> placed(const tensor::Module& m,
                                                      const mesh::DeviceMesh& dm,
                                                      const std::vector<mesh::StyleRule>& rules,
                                                      const mesh::ParallelizeConfig& pc) {
  std::map<std::string, mesh::ParameterSharding> by;
  for (const auto& p : mesh::parallelize_module(m, dm, rules, pc)) by.emplace(p.fqn, p);
  return by;
}

// The experts style on one projection: the MLP's input_linear [E, 2F, h] by halves
// (_StridedShard(1, 2): gate and up each over the ranks), the queries' input_linear [E, D, h] on
// D (whole heads), both output_linear [E, h, *] on their input features; kv_proj [k; v] by halves.
// Expert parallelism then splits dim 0 of all four, the attention experts with the MLP ones.
TEST(JetMoeTensorParallel, ProjectionsSplitByFeaturesAndByExpert) {
  const tensor::ModulePtr m = tensor::build_model(tiny());
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(tiny()), *m);
  const mesh::Placement R = mesh::Replicate{};
  const std::string b = "model.layers.1.";
  {
    const mesh::DeviceMesh dm({2}, {"tp"});
    mesh::ParallelizeConfig pc;
    pc.tp_dim = "tp";
    const auto by = placed(*m, dm, rules, pc);
    auto at = [&](const std::string& name) { return by.at(b + name).spec.placements; };
    using P = std::vector<mesh::Placement>;
    EXPECT_EQ(at("mlp.input_linear.weight"), (P{mesh::StridedShard{1, 2}}));
    EXPECT_EQ(at("mlp.output_linear.weight"), (P{mesh::Shard{2}}));
    EXPECT_EQ(at("self_attention.experts.input_linear.weight"), (P{mesh::Shard{1}}));
    EXPECT_EQ(at("self_attention.experts.output_linear.weight"), (P{mesh::Shard{2}}));
    EXPECT_EQ(at("self_attention.kv_proj.weight"), (P{mesh::StridedShard{0, 2}}));
    for (const char* replicated :
         {"mlp.bias", "mlp.router.layer.weight", "self_attention.experts.bias",
          "self_attention.experts.router.layer.weight", "input_layernorm.weight"}) {
      EXPECT_EQ(at(replicated), (P{R})) << replicated;
    }
    EXPECT_EQ(by.at(b + "mlp.input_linear.weight").style, "experts");
    EXPECT_EQ(by.at("model.embed_tokens.weight").spec.placements, (P{mesh::Shard{0}}));
  }
  const mesh::DeviceMesh dm({2, 2}, {"dp", "ep"});
  mesh::ParallelizeConfig pc;
  pc.ep_dims = {"ep"};
  const auto by = placed(*m, dm, {}, pc);
  for (const char* expert : {"mlp.input_linear.weight", "mlp.output_linear.weight",
                             "self_attention.experts.input_linear.weight",
                             "self_attention.experts.output_linear.weight"}) {
    EXPECT_EQ(by.at(b + expert).spec.placements, (std::vector<mesh::Placement>{R, mesh::Shard{0}}))
        << expert;
  }
  for (const char* dense : {"self_attention.kv_proj.weight", "mlp.router.layer.weight"}) {
    EXPECT_EQ(by.at(b + dense).spec.placements, (std::vector<mesh::Placement>{R, R})) << dense;
  }
}

// A projection's activations: the first as colwise (R in, its features out), the second as
// rowwise (features in, a partial sum reduced to R).
TEST(JetMoeTensorParallel, ProjectionActivationLayouts) {
  const tensor::ModulePtr m = tensor::build_model(tiny());
  const mesh::StyleRule rule{.pattern = "x", .style = mesh::ParallelStyle::kExperts};
  const mesh::Placement R = mesh::Replicate{}, last = mesh::Shard{-1};
  const std::string b = "model.layers.0.";
  for (const char* first : {"mlp.input_linear", "self_attention.experts.input_linear"}) {
    const mesh::ActivationLayouts a =
        mesh::activation_layouts(rule, m->get_submodule(b + first), b + first);
    EXPECT_EQ(a.input, R) << first;
    EXPECT_EQ(a.desired_input, R) << first;
    EXPECT_EQ(a.computed_output, last) << first;
    EXPECT_EQ(a.output, last) << first;
  }
  for (const char* second : {"mlp.output_linear", "self_attention.experts.output_linear"}) {
    const mesh::ActivationLayouts a =
        mesh::activation_layouts(rule, m->get_submodule(b + second), b + second);
    EXPECT_EQ(a.input, last) << second;
    EXPECT_EQ(a.desired_input, last) << second;
    EXPECT_EQ(a.computed_output, mesh::Placement(mesh::Partial{mesh::ReduceOp::kSum})) << second;
    EXPECT_EQ(a.output, R) << second;
  }
}

// The traced layer at tp 2 (16 tokens, 8 picks an expert): each block's first projection
// column-parallel, its second row-parallel and reduced (a routed-experts boundary), kv_proj
// column-parallel, the attention on the rank's heads; the routers replicated. Every expert GEMM is
// routed work; with ep 2 a rank runs 2 of the 4 experts on twice the rows.
TEST(JetMoeTensorParallel, TracedLayerSplitsBothSparseBlocks) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 0),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  const std::string b = "model.layers.0.";
  const std::string moa = b + "self_attention.experts.";
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
      const bool first = fqn.ends_with("input_linear");
      EXPECT_EQ(t.split[i], first ? OpSplit::kColumn : OpSplit::kRow) << key;
      if (!first) {
        EXPECT_TRUE(t.expert_boundary[static_cast<size_t>(op.outputs.front())]) << key;
      }
      const GemmShape g = local_gemm_shape(t, i, {.tp = 2});
      const GemmShape ep = local_gemm_shape(t, i, {.tp = 2, .ep = 2});
      EXPECT_EQ(g.batch, 4) << key;
      EXPECT_EQ(g.m, 8) << key;
      // N of the first projections split, K of the second (D 32, 2F 96, F 48; halved).
      const std::map<std::string, std::pair<int64_t, int64_t>> nk = {
          {moa + "input_linear", {16, 64}},
          {moa + "output_linear", {64, 16}},
          {b + "mlp.input_linear", {48, 64}},
          {b + "mlp.output_linear", {64, 24}}};
      EXPECT_EQ(g.n, nk.at(fqn).first) << key;
      EXPECT_EQ(g.k, nk.at(fqn).second) << key;
      EXPECT_EQ(ep.batch, 2) << key;  // 2 of the 4 experts
      EXPECT_EQ(ep.m, 16) << key;     // on the picks of both ep ranks
    } else if (op.op == "linear") {
      ++seen[key];
      EXPECT_FALSE(t.expert_op[i]) << key;
      const bool kv = fqn == b + "self_attention.kv_proj";
      EXPECT_EQ(t.split[i], kv ? OpSplit::kColumn : OpSplit::kReplicated) << key;
    } else if (op.op == "scaled_dot_product_attention") {
      ++seen[key];
      EXPECT_TRUE(t.score_op[i]);
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(local_gemm_shape(t, i, {.tp = 2}).batch, 2);  // 4 heads, 2 a rank
    }
  }
  EXPECT_EQ(seen, (std::map<std::string, int>{
                      {"bmm " + moa + "input_linear", 1},
                      {"bmm " + moa + "output_linear", 1},
                      {"bmm " + b + "mlp.input_linear", 1},
                      {"bmm " + b + "mlp.output_linear", 1},
                      {"linear " + moa + "router.layer", 1},
                      {"linear " + b + "mlp.router.layer", 1},
                      {"linear " + b + "self_attention.kv_proj", 1},
                      {"scaled_dot_product_attention " + b + "self_attention", 1}}));
  // The keys and values a context-parallel ring passes: 2 heads of 16 + 16, 16 tokens, bf16. The
  // token all-to-all of expert parallelism: 16 tokens' k = 2 picks of h = 64 in bf16 per exchange,
  // three exchanges a layer (the attention experts' query inputs and queries, their outputs, and
  // the MLP's; ModelFamily::routed_exchanges_per_layer).
  EXPECT_EQ(t.kv_bytes, 16 * 2 * (16 + 16) * 2);
  EXPECT_EQ(t.moe_dispatch_bytes, 3 * (16 * 2 * 64 * 2));
}

}  // namespace
}  // namespace shardplan::planner
