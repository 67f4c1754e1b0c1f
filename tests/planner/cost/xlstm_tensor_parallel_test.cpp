// xLSTM's tensor-parallel plan (tensor/models/family_xlstm.cpp) applied: what a TP rank holds of
// xLSTM-7B against counts written out by hand, the mLSTM layer's placements (q, k, v, the output
// gate and both gates by output rows, whole heads per rank; out_proj by input columns; the
// multi-head norm whole), the splits of the traced block (Note [mLSTM layer trace]) with the
// chunkwise kernel's tiles on the rank's heads, and the tp rule for its heads
// (planner/candidate/parallel_dims.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// xLSTM-7B on 8 ranks (h 4,096, vocabulary 50,304 untied, 8 heads, q and k 2,048 rows, v and the
// output gate 4,096, F 10,944, no biases):
//   embeddings by vocabulary rows and lm_head by vocabulary: 50,304 x 4,096 / 8 = 25,755,648 each
//   a block: q, k 2,048 x 4,096 / 8 = 1,048,576 each; v, ogate_preact 2,097,152 each; igate and
//     fgate 8 x 4,096 / 8 + 8 / 8 = 4,097 each; out_proj 2,097,152; whole: multihead_norm 4,096,
//     norm_mlstm and norm_ffn 8,192; proj_up_gate, proj_up, proj_down 10,944 x 4,096 / 8 =
//     5,603,328 each: 25,219,074
//   2 x 25,755,648 + 32 x 25,219,074 + out_norm 4,096 = 858,525,760
TEST(XlstmTensorParallel, SevenBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("xlstm-7b");
  const int64_t embed = 25'755'648, block = 25'219'074;
  EXPECT_EQ(2 * 1'048'576 + 2 * 2'097'152 + 2 * 4'097 + 2'097'152 + 4'096 + 8'192 + 3 * 5'603'328,
            block);
  EXPECT_EQ(2 * embed + 32 * block + 4'096, 858'525'760);
  EXPECT_EQ(tp_rank_parameters(c, 8), 858'525'760);
  EXPECT_EQ(tp_rank_parameters(c, 8, 5), 858'525'760);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 6'865'424'896);   // the whole model
  // The per-rank share shrinks as 1 / tp but for the replicated norms (4,096 + 8,192 a block and
  // out_norm): at tp 2 a block holds 201,666,576 / 2 + 12,288 / 2 = 100,839,432.
  EXPECT_EQ(tp_rank_parameters(c, 2), 2 * int64_t{103'022'592} + 32 * int64_t{100'839'432} + 4'096);
  // tp must divide the 8 heads (of both the mLSTM and, as ModelConfig keeps them, its linear
  // key heads).
  const TrainingSetup s{.gpus = 64, .seq = 8192, .global_batch = 128};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 4), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 16), ::testing::HasSubstr("8 attention heads"));
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), ::testing::HasSubstr("8 attention heads"));
}

// q's rows are the 8 heads of 256 in order: Shard(0) hands rank r of 4 the rows [512 r, 512 (r +
// 1)), two whole heads; the gates' 8 rows and biases split alike, one pair of heads a rank;
// out_proj splits its input columns (Shard(1)); the multi-head norm's [4,096] weight stays whole.
TEST(XlstmTensorParallel, MlstmLayerSplitsByHeads) {
  const tensor::ModelConfig c = tensor::first_layers(tensor::find_model_config("xlstm-7b"), 1);
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  // The weight_mode "fused" rules name no module of this model: dropped.
  EXPECT_EQ(rules.size(), 12u);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const std::string layer = "backbone.blocks.0.mlstm_layer.";
  const auto placement = [&](const std::string& name) {
    return ps.at(layer + name).spec.placements[0];
  };
  const auto local = [&](const std::string& name) {
    return mesh::local_shape(ps.at(layer + name).spec, std::vector<int64_t>{1});
  };
  EXPECT_EQ(placement("q.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(local("q.weight"), (DimVector{2048 / 4, 4096}));
  EXPECT_EQ(local("v.weight"), (DimVector{4096 / 4, 4096}));
  EXPECT_EQ(placement("ogate_preact.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(local("igate_preact.weight"), (DimVector{2, 4096}));
  EXPECT_EQ(placement("fgate_preact.bias"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(local("fgate_preact.bias"), (DimVector{2}));
  EXPECT_EQ(placement("out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("multihead_norm.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(ps.at("backbone.blocks.0.ffn.proj_down.weight").spec.placements[0],
            mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(ps.at("backbone.blocks.0.norm_mlstm.weight").spec.placements[0],
            mesh::Placement(mesh::Replicate{}));
}

// The op splits of the traced block, by the op's module (the block prefix cut) and name.
std::map<std::string, OpSplit> splits_of(const TracedModel& t) {
  std::map<std::string, OpSplit> split;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with("backbone.blocks.0.")) continue;
    split[fqn.substr(18) + " " + op.op] = t.split[i];
  }
  return split;
}

// The block: the six projections column-parallel, the gates' soft cap, the chunkwise kernel, the
// multi-head norm and the output gate on the rank's heads, out_proj and proj_down row-parallel
// (two reductions a block); no keys pass around a context-parallel ring, and the kernel is
// priced as [64 x 512] tiles per (batch, head, chunk) on the rank's heads.
TEST(XlstmTensorParallel, TracedBlockSplitsByHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("xlstm-7b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);
  const std::map<std::string, OpSplit> split = splits_of(t);
  for (const char* proj : {"q", "k", "v", "ogate_preact", "igate_preact", "fgate_preact"}) {
    EXPECT_EQ(split.at(std::string("mlstm_layer.") + proj + " linear"), OpSplit::kColumn) << proj;
  }
  EXPECT_EQ(split.at("mlstm_layer tanh"), OpSplit::kSharded);  // the gates' soft cap
  EXPECT_EQ(split.at("mlstm_layer.mlstm_backend mlstm_chunkwise"), OpSplit::kSharded);
  EXPECT_EQ(split.at("mlstm_layer.multihead_norm layer_norm"), OpSplit::kSharded);
  EXPECT_EQ(split.at("mlstm_layer sigmoid"), OpSplit::kSharded);
  EXPECT_EQ(split.at("mlstm_layer.out_proj linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("ffn.proj_up_gate linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("ffn.proj_down linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("norm_mlstm rms_norm"), OpSplit::kReplicated);
  EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 2u);
  int kernels = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    if (t.step.ops[i].op != "mlstm_chunkwise") continue;
    ++kernels;
    EXPECT_FALSE(t.score_op[i]);
    // 8 heads x 4,096 / 64 chunks, half of the heads a rank at tp 2; the depth is the rest of the
    // 720,896 FLOPs per token and head: 720,896 / (2 x 512) = 704.
    const GemmShape g = local_gemm_shape(t, i, {.tp = 2});
    EXPECT_EQ(g.batch, 4 * 64);
    EXPECT_EQ(g.m, 64);
    EXPECT_EQ(g.n, 512);
    EXPECT_EQ(g.k, 704);
  }
  EXPECT_EQ(kernels, 1);
}

// weight_mode "fused" holds the same share on a rank: ifgate_preact and proj_up_gate_z split each
// of their two halves, qkv_opreact its rows evenly (its four parts are unequal, 1,024 + 1,024 +
// 2,048 + 2,048 of 6,144 rows at tp 2 in xLSTM-7B's proportions).
TEST(XlstmTensorParallel, FusedWeightModeHoldsTheSameShare) {
  nlohmann::json j = tensor::to_hf_json(tensor::find_model_config("xlstm-7b"));
  j["weight_mode"] = "fused";
  const tensor::ModelConfig fused = tensor::parse_model_config(j, "fused.json");
  EXPECT_TRUE(fused.fused_projections);
  for (const int64_t tp : {2, 4, 8}) {
    EXPECT_EQ(tp_rank_parameters(fused, tp),
              tp_rank_parameters(tensor::find_model_config("xlstm-7b"), tp))
        << tp;
  }
  const tensor::ModulePtr m = tensor::build_model(tensor::first_layers(fused, 1));
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(fused), *m);
  EXPECT_EQ(rules.size(), 7u);  // embeddings, qkv, if, out_proj, gate_z, proj_down, lm_head
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({2}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const std::string layer = "backbone.blocks.0.mlstm_layer.";
  EXPECT_EQ(ps.at(layer + "qkv_opreact.weight").spec.placements[0],
            mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(ps.at(layer + "ifgate_preact.weight").spec.placements[0],
            mesh::Placement(mesh::StridedShard{0, 2}));
  EXPECT_EQ(ps.at("backbone.blocks.0.ffn.proj_up_gate_z.weight").spec.placements[0],
            mesh::Placement(mesh::StridedShard{0, 2}));
}

}  // namespace
}  // namespace shardplan::planner
