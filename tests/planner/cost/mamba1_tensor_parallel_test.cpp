// The Mamba-1 models' tensor-parallel plan (tensor/models/mamba_lm.h, kMamba1LmTpPlan: mamba and
// falcon_mamba) applied: what a TP rank holds against counts written out by hand, the mixer's
// placements, the splits of the traced block (Note [Mamba-1 trace] in
// tensor/models/mamba_mixer.h) and the tp rule for its channels (planner/candidate/
// parallel_dims.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// mamba-2.8b on 4 ranks (h 2,560, V 50,280 tied, 64 layers, D 5,120, N 16, R 160, K 4):
//   embeddings = lm_head (one tied weight) by vocabulary rows: 50,280 / 4 x 2,560 = 32,179,200
//   a layer: in_proj 2 D h / 4 = 6,553,600, x_proj (R + 2 N) D / 4 = 245,760, dt_proj (R D + D) /
//     4 = 206,080, out_proj h D / 4 = 3,276,800; replicated: the norm 2,560, A_log D N = 81,920,
//     D 5,120, conv1d D K + D = 25,600: 10,397,440
//   32,179,200 + 64 x 10,397,440 + norm_f 2,560 = 697,617,920
// falcon-mamba-7b on 8 (h 4,096, V 65,024 untied, 64 layers, D 8,192, N 16, R 256, K 4):
//   embeddings and lm_head 65,024 / 8 x 4,096 = 33,292,288 each
//   a layer: in_proj 8,388,608, x_proj 294,912, dt_proj 263,168, out_proj 4,194,304; replicated
//     4,096 + 131,072 + 8,192 + 40,960: 13,325,312
//   2 x 33,292,288 + 64 x 13,325,312 + 4,096 = 919,408,640
TEST(Mamba1TensorParallel, RankParametersByHand) {
  const tensor::ModelConfig mamba = tensor::find_model_config("mamba-2.8b");
  EXPECT_EQ(tp_rank_parameters(mamba, 4), 697'617'920);
  EXPECT_EQ(tp_rank_parameters(mamba, 4, 3), 697'617'920);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(mamba, 1), 2'768'345'600);   // the whole model
  const tensor::ModelConfig falcon = tensor::find_model_config("falcon-mamba-7b");
  EXPECT_EQ(tp_rank_parameters(falcon, 8), 919'408'640);
  EXPECT_EQ(tp_rank_parameters(falcon, 1), 7'272'665'088);
}

// tp divides the channels (5,120 = 2^10 x 5): 8 and 5 do, 3 does not. The channels stand for the
// heads (num_attention_heads), whose rule refuses first.
TEST(Mamba1TensorParallel, TpDividesTheChannels) {
  const tensor::ModelConfig c = tensor::find_model_config("mamba-2.8b");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 5), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3),
              ::testing::HasSubstr("does not divide the model's 5120"));
}

// in_proj's rows are [x; z] (fused_parts 2: each rank the same channels of x and of the gate),
// x_proj split by its input channels, dt_proj by its output channels and bias, out_proj by its
// input channels; A_log, D, the convolution and the norms whole.
TEST(Mamba1TensorParallel, MixerPlacements) {
  const tensor::ModelConfig c = tensor::first_layers(tensor::find_model_config("mamba-2.8b"), 1);
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const std::string mixer = "backbone.layers.0.mixer.";
  const auto placement = [&](const std::string& name) {
    return ps.at(mixer + name).spec.placements[0];
  };
  EXPECT_EQ(placement("in_proj.weight"), mesh::Placement(mesh::StridedShard{0, 2}));
  EXPECT_EQ(mesh::local_shape(ps.at(mixer + "in_proj.weight").spec, std::vector<int64_t>{1}),
            (DimVector{2 * 5120 / 4, 2560}));
  EXPECT_EQ(placement("x_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("dt_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("dt_proj.bias"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("A_log"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("D"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("conv1d.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(ps.at("backbone.layers.0.norm.weight").spec.placements[0],
            mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(ps.at("backbone.embeddings.weight").spec.placements[0],
            mesh::Placement(mesh::Shard{0}));
}

// The traced block: in_proj and dt_proj's product column-parallel, x_proj and out_proj
// row-parallel (two reductions a block), the convolution and the scan on the rank's channels;
// FalconMamba's dt/B/C norms run on x_proj's reduced output, whole on every rank.
TEST(Mamba1TensorParallel, TracedBlockSplits) {
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  for (const char* name : {"mamba-2.8b", "falcon-mamba-7b"}) {
    SCOPED_TRACE(name);
    const tensor::ModelConfig c = tensor::find_model_config(name);
    const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
    EXPECT_EQ(t.kv_bytes, 0);              // no keys: nothing passes around a context-parallel ring
    std::map<std::string, OpSplit> split;  // by the op's module (under the block) and name
    for (size_t i = 0; i < t.step.ops.size(); ++i) {
      const tensor::TrainingOp& op = t.step.ops[i];
      if (op.call < 0 || op.is_view) continue;
      const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
      if (!fqn.starts_with("backbone.layers.0.mixer")) continue;
      split[fqn.substr(18) + " " + op.op] = t.split[i];
    }
    EXPECT_EQ(split.at("mixer.in_proj linear"), OpSplit::kColumn);
    EXPECT_EQ(split.at("mixer causal_conv1d"), OpSplit::kSharded);
    EXPECT_EQ(split.at("mixer.x_proj linear"), OpSplit::kRow);
    EXPECT_EQ(split.at("mixer.dt_proj matmul"), OpSplit::kColumn);
    EXPECT_EQ(split.at("mixer selective_scan_fn"), OpSplit::kSharded);
    EXPECT_EQ(split.at("mixer.out_proj linear"), OpSplit::kRow);
    if (c.model_type == "falcon_mamba") {
      EXPECT_EQ(split.at("mixer.b_layernorm rms_norm"), OpSplit::kReplicated);
    }
    EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 2u);
  }
}

}  // namespace
}  // namespace shardplan::planner
