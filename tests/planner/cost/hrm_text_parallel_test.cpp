// hrm_text (tensor/models/family_hrm_text.cpp) as the planner sees it (Note [Layers run in
// cycles] in tensor/models/layer_kinds.h): layer i of the stack holds layer i of both stacks
// (their parameters with that layer, the traced layer running every pass of both), the
// tensor-parallel plan applied, the no-grad passes' collectives forward only, model FLOPs with
// each weight counted per pass, and pipeline and context parallelism refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/cluster.h"
#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "planner/cost/training_metrics.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;

// tests/tensor/models/hrm_text_models_test.cpp's tiny config: h 32, 4 heads of 16 (n d 64), I 48,
// V 128 untied, 2 layers a stack; H_cycles 2, L_cycles 3, L_bp_cycles [2] (padded [1, 2]).
tensor::ModelConfig tiny() {
  const nlohmann::json j = {{"model_type", "hrm_text"}, {"vocab_size", 128},
                            {"hidden_size", 32},        {"intermediate_size", 48},
                            {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                            {"head_dim", 16},           {"torch_dtype", "bfloat16"}};
  return tensor::parse_model_config(j, "tiny.json");
}

// Rank 0 of 2: embed_tokens and lm_head 64 x 32 each = 4,096; z_L_init 32 replicated; each of the
// 4 layers q, k, v, gate [64, 32] by rows 4 x 32 x 32 = 4,096, o_proj [32, 64] by columns 1,024,
// the MLP's gate and up [48, 32] by rows 2 x 24 x 32 = 1,536, down [32, 48] by columns 768:
// 7,424, four of them 29,696; 4,096 + 32 + 29,696 = 33,824. The whole model 67,616.
TEST(HrmTextParallel, TinyOnTwoRanks) {
  const tensor::ModelConfig c = tiny();
  EXPECT_EQ(tp_rank_parameters(c, 2), 33'824);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 33'824);
  EXPECT_EQ(tp_rank_parameters(c, 1), 67'616);
  // Each rank the same heads of q, k, v and the gate, and o_proj's columns of them.
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p :
       mesh::parallelize_module(*m, mesh::DeviceMesh({2}, {"tp"}), rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const auto placement = [&](const std::string& fqn) { return ps.at(fqn).spec.placements[0]; };
  const std::string a = "model.H_module.layers.1.self_attn.";
  EXPECT_EQ(placement(a + "gate_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(a + "q_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(a + "o_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("model.L_module.layers.0.mlp.down_proj.weight"),
            mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("model.z_L_init"), mesh::Placement(mesh::Replicate{}));
}

// Layer i's parameters are both stacks' layer i (ModelFamily::paired_layers_path): at pp 2
// (stage_parameters' own split; the planner keeps this family at pp 1) stage 0 holds z_L_init 32,
// embed_tokens 4,096 and layer 0 of each stack 2 x 14,848, stage 1 layer 1 of each and lm_head.
TEST(HrmTextParallel, LayerIHoldsBothStacks) {
  EXPECT_EQ(stage_parameters(tiny(), 1, 2),
            (std::vector<int64_t>{32 + 4'096 + 2 * 14'848, 2 * 14'848 + 4'096}));
  EXPECT_EQ(stage_parameters(tiny(), 1, 1), (std::vector<int64_t>{67'616}));
}

// The one-layer model the planner traces runs layer 0 of both stacks in every pass: 6 low-level
// calls (3 under no_grad) and 2 high-level ones. At tp 2 every call's o_proj and down_proj are
// reduced in forward, 16 all-reduces; in backward only the 5 graph-keeping calls reduce the
// gradients of their two column-parallel regions' inputs (the normed input q, k, v and the gate
// share, the MLP's), 10; each [64 tokens, 32] in bf16, 4,096 bytes. Under sequence parallelism the
// 16 row outputs are reduce-scattered and the 16 region inputs all-gathered in forward; in
// backward the 5 calls' 10 row outputs all-gathered, 10 region inputs reduce-scattered and
// gathered again: 30.
TEST(HrmTextParallel, NoGradPassesReduceInForwardOnly) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, {.micro_batch = 1, .seq = 64, .attention = tensor::AttentionImpl::kFlash});
  std::map<std::string, int> calls;  // linear ops per module
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
    }
    if (op.op != "linear" || op.call < 0) continue;
    const std::string fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    ++calls[fqn];
    if (fqn == "lm_head") continue;
    EXPECT_EQ(t.part[i], Part::kBlock) << fqn;
    const bool row = fqn.ends_with("o_proj") || fqn.ends_with("down_proj");
    EXPECT_EQ(t.split[i], row ? OpSplit::kRow : OpSplit::kColumn) << fqn;
  }
  EXPECT_EQ(calls.at("model.L_module.layers.0.self_attn.gate_proj"), 6);
  EXPECT_EQ(calls.at("model.H_module.layers.0.mlp.down_proj"), 2);
  const ComputeModel a = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), Precision::kBf16);
  const PartWork block = rank_work(t, a, {.tp = 2}).block();
  ASSERT_EQ(block.tp_forward.size(), 16u);
  ASSERT_EQ(block.tp_backward.size(), 10u);
  for (const CommItem& x : block.tp_forward) {
    EXPECT_EQ(x.kind, collectives::CollectiveKind::kAllReduce);
    EXPECT_EQ(x.bytes, 64 * 32 * 2);
  }
  const PartWork sp = rank_work(t, a, {.tp = 2, .sequence_parallel = true}).block();
  EXPECT_EQ(sp.tp_forward.size(), 32u);
  EXPECT_EQ(sp.tp_backward.size(), 30u);
  // The 3 no-grad calls add forward time and no backward: the same traced layer with every pass
  // keeping a graph (L_bp_cycles [3, 3]) runs as long forward and longer backward.
  tensor::ModelConfig all = c;
  all.l_bp_cycles = {3, 3};
  const TracedModel u = trace_one_block(
      all, {.micro_batch = 1, .seq = 64, .attention = tensor::AttentionImpl::kFlash});
  const PartWork every = rank_work(u, a, {.tp = 2}).block();
  EXPECT_DOUBLE_EQ(every.forward_s, block.forward_s);
  EXPECT_GT(every.backward_s, block.backward_s);
  EXPECT_GT(every.retained_bytes, block.retained_bytes);
  EXPECT_EQ(every.tp_backward.size(), 16u);
}

// Note [Layers run in cycles]: per step each weight of layer i's low-level layer runs 6 times
// forward and 3 backward, of its high-level layer 2 and 2: 8 calls, 5 with a backward, over 2
// layers. Per token, a layer's 14,848 weights do 2 x 14,848 FLOPs a forward call and twice that a
// backward one:
//   low-level  14,848 x (2 x 6 + 4 x 3) = 356,352 a layer;  high-level 14,848 x (2 x 2 + 4 x 2)
//   = 178,176 a layer; 2 of each: 1,069,056; the embedding, lm_head and z_L_init 6 x 8,224 =
//   49,344 (the 6 N convention); 1,118,400 in all.
// Attention at s = 16: a call scores 16 keys with 4 heads of 16 + 16 channels, u = 16 x 4 x 32
// = 2,048; a forward call 2 u, a backward one 4 u: 2 layers x (8 x 2 + 5 x 4) u = 72 u = 147,456.
TEST(HrmTextParallel, ModelFlopsCountEveryPass) {
  const tensor::ModelConfig c = tiny();
  EXPECT_EQ(tensor::layer_passes(c),
            (tensor::LayerPasses{.forward = 8, .backward = 5, .layers = 2}));
  EXPECT_EQ(parameter_count(c), 67'616);
  EXPECT_DOUBLE_EQ(attention_flops_per_token(c, 16), 147'456.0);
  EXPECT_DOUBLE_EQ(model_flops_per_token(c, 16), 1'118'400.0 + 147'456.0);
}

// A micro-batch would pass each pipeline stage, and the context-parallel ring, once per pass.
TEST(HrmTextParallel, PipelineAndContextParallelismAreRefused) {
  const tensor::ModelConfig c = tiny();
  const TrainingSetup setup{.gpus = 8, .seq = 64, .global_batch = 8};
  EXPECT_THAT(dim(kPpDim).refuses(c, setup, 2), HasSubstr("--pp 2 for hrm_text"));
  EXPECT_THAT(dim(kCpDim).refuses(c, setup, 2), HasSubstr("--cp 2 for hrm_text"));
  EXPECT_EQ(dim(kPpDim).refuses(c, setup, 1), "");
  EXPECT_EQ(dim(kCpDim).refuses(c, setup, 1), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, setup, 2), "");
  // Other families keep both.
  const tensor::ModelConfig llama = tensor::find_model_config("llama3-8b");
  EXPECT_EQ(dim(kPpDim).refuses(llama, setup, 2), "");
  EXPECT_EQ(dim(kCpDim).refuses(llama, setup, 2), "");
}

}  // namespace
}  // namespace shardplan::planner
