// Jamba's tensor-parallel plan (tensor/models/family_jamba.cpp) applied: what a TP rank holds of
// Jamba 1.5 Large against counts written out by hand, the Mamba-1 mixer's placements (in_proj
// split in its two halves, x_proj by its input channels), the splits of the traced Mamba block
// (Note [Mamba-1 trace] in tensor/models/mamba_mixer.h), and the tp rule for its channels
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
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// AI21-Jamba-1.5-Large on 8 ranks (h 8,192, vocabulary 65,536 untied, 72 layers):
//   embed_tokens and lm_head by vocabulary: 65,536 x 8,192 / 8 = 67,108,864 each
//   attention layer (9): q, k, v, o (2 x 64 x 128 + 2 x 8 x 128) x 8,192 / 8 = 18,874,368
//   Mamba layer (63), D 16,384, N 16, R 512, K 4: in_proj 2 D h / 8 = 33,554,432, x_proj
//     (R + 2 N) D / 8 = 1,114,112, dt_proj R D / 8 + D / 8 = 1,050,624, out_proj h D / 8 =
//     16,777,216; replicated A_log D N = 262,144, D 16,384, conv1d D K + D = 81,920, the three
//     norms 544: 52,857,376
//   MLP (36): 3 x 8,192 x 24,576 / 8 = 75,497,472
//   MoE (36): router 16 x 8,192 = 131,072 (replicated), experts 16 x 3 x 8,192 x 24,576 / 8 =
//     1,207,959,552: 1,208,090,624
//   norms 72 x 2 x 8,192 = 1,179,648 and final 8,192
//   2 x 67,108,864 + 9 x 18,874,368 + 63 x 52,857,376 + 36 x 75,497,472 + 36 x 1,208,090,624
//   + 1,179,648 + 8,192 = 49,844,461,024
TEST(JambaTensorParallel, OneFiveLargeOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("jamba-1.5-large");
  EXPECT_EQ(tp_rank_parameters(c, 8), 49'844'461'024);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 49'844'461'024);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 199'291'897'312);
  EXPECT_EQ(tp_rank_parameters(c, 1), 398'555'145'696);  // the whole model
  EXPECT_EQ(expert_parameters_per_layer(c, 8), 1'207'959'552);
  // tp divides the 64 heads and the 8 kv heads, and the 16,384 Mamba channels: the one group of B
  // and C does not hold it at tp 1, as a Mamba-2 model's one group does.
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 64), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), ::testing::HasSubstr("64 attention heads"));
}

// A head width of its own leaves d_inner = 1 x 36 channels beside 8 heads of 8: tp 8 divides the
// heads but not the channels.
TEST(JambaTensorParallel, TpDividesTheMambaChannels) {
  const nlohmann::json j = {{"model_type", "jamba"},    {"vocab_size", 1000},
                            {"hidden_size", 36},        {"head_dim", 8},
                            {"intermediate_size", 64},  {"num_hidden_layers", 8},
                            {"num_attention_heads", 8}, {"num_key_value_heads", 8},
                            {"num_experts", 1},         {"mamba_expand", 1}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny.json");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 4), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8),
            "--tp 8 does not divide the model's 36 Mamba channels (d_inner), expected a divisor "
            "of 36");
}

// in_proj's rows are [x; z], each D channels: with fused_parts 2 rank r of 4 holds rows [r D/4,
// (r+1) D/4) of each half (_StridedShard(0, 2)), so the gate of its own channels; x_proj splits
// its input channels (Shard(1)) and dt_proj its output channels and bias; A_log, D and the
// convolution stay whole.
TEST(JambaTensorParallel, MambaMixerSplitsItsChannels) {
  tensor::ModelConfig c = tensor::find_model_config("jamba-v0.1");
  c = tensor::first_layers(c, 1);  // layer 0: a Mamba layer with a dense MLP
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const std::string mamba = "model.layers.0.mamba.";
  const auto placement = [&](const std::string& name) {
    return ps.at(mamba + name).spec.placements[0];
  };
  EXPECT_EQ(placement("in_proj.weight"), mesh::Placement(mesh::StridedShard{0, 2}));
  EXPECT_EQ(mesh::local_shape(ps.at(mamba + "in_proj.weight").spec, std::vector<int64_t>{1}),
            (DimVector{2 * 8192 / 4, 4096}));
  EXPECT_EQ(placement("x_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("dt_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("dt_proj.bias"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("A_log"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("conv1d.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("dt_layernorm.weight"), mesh::Placement(mesh::Replicate{}));
}

// The traced Mamba block: in_proj and dt_proj's product column-parallel, x_proj, out_proj and the
// MLP's down_proj row-parallel (three reductions a block), the convolution and the scan on the
// rank's channels.
TEST(JambaTensorParallel, TracedMambaBlockSplits) {
  const tensor::ModelConfig c = tensor::find_model_config("jamba-1.5-large");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);              // no keys: nothing passes around a context-parallel ring
  std::map<std::string, OpSplit> split;  // by the op's module and name
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with("model.layers.0.mamba")) continue;
    split[fqn.substr(15) + " " + op.op] = t.split[i];
  }
  EXPECT_EQ(split.at("mamba.in_proj linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("mamba causal_conv1d"), OpSplit::kSharded);
  EXPECT_EQ(split.at("mamba.x_proj linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("mamba.dt_proj matmul"), OpSplit::kColumn);
  EXPECT_EQ(split.at("mamba selective_scan_fn"), OpSplit::kSharded);
  EXPECT_EQ(split.at("mamba.out_proj linear"), OpSplit::kRow);
  EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 3u);
}

}  // namespace
}  // namespace shardplan::planner
