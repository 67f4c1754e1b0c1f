// RWKV-4's tensor-parallel plan (tensor/models/family_rwkv.cpp) applied: what a TP rank holds of
// RWKV-4 14B against counts written out by hand, the placements of the time and channel mixing,
// the splits of the traced block (the WKV recurrence on the rank's channels, the channel mix's
// receptance replicated), and the tp rule for the channels (planner/candidate/parallel_dims.cpp).
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

// RWKV-4 14B on 8 ranks (h = A 5,120, F 20,480, 40 blocks, vocabulary 50,277 untied):
//   embeddings and head by vocabulary, torch.chunk's rows: ceil(50,277 / 8) = 6,285 on ranks 0-6,
//     6,282 on rank 7; x 5,120 each
//   a block: ln1, ln2 4 h = 20,480; the time mix's own time_decay, time_first and three mixes
//     2 A + 3 h = 25,600 and the channel mix's two 2 h = 10,240, whole; attention key, value,
//     receptance A h / 8 = 3,276,800 each, output h A / 8 = 3,276,800; feed_forward key F h / 8 =
//     13,107,200, value h F / 8 = 13,107,200, receptance h^2 = 26,214,400 whole: 65,592,320
//   pre_ln and ln_out 4 h = 20,480
TEST(RwkvTensorParallel, FourteenBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("rwkv-4-14b-pile");
  const int64_t h = 5120, F = 20480;
  const int64_t block = 4 * h + (2 * h + 3 * h) + 2 * h + 4 * (h * h / 8) + 2 * (F * h / 8) + h * h;
  EXPECT_EQ(block, 65'592'320);
  EXPECT_EQ(tp_rank_parameters(c, 8), 40 * block + 4 * h + 2 * 6285 * h);
  EXPECT_EQ(tp_rank_parameters(c, 8), 2'688'071'680);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 40 * block + 4 * h + 2 * 6282 * h);
  EXPECT_EQ(tp_rank_parameters(c, 1), 14'148'597'760);  // the whole model
  // tp must divide the 5,120 channels (the attention sizes stand for them).
  const TrainingSetup s{.gpus = 64, .seq = 1024, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), ::testing::HasSubstr("5120 attention heads"));
}

// key, value and receptance of the time mix by output channels (Shard(0)), output by input
// channels (Shard(1)); the channel mix's key Shard(0), value Shard(1), receptance whole; the
// per-channel time_decay and time_first, and the [1, 1, h] mixes, whole.
TEST(RwkvTensorParallel, ChannelsSplitTheProjections) {
  const tensor::ModelConfig c =
      tensor::first_layers(tensor::find_model_config("rwkv-4-14b-pile"), 1);
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const auto placement = [&](const std::string& name) {
    return ps.at("rwkv.blocks.0." + name).spec.placements[0];
  };
  EXPECT_EQ(placement("attention.key.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(
      mesh::local_shape(ps.at("rwkv.blocks.0.attention.key.weight").spec, std::vector<int64_t>{1}),
      (DimVector{5120 / 4, 5120}));
  EXPECT_EQ(placement("attention.value.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("attention.receptance.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("attention.output.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("attention.time_decay"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("attention.time_mix_key"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("feed_forward.key.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("feed_forward.value.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("feed_forward.receptance.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(ps.at("rwkv.embeddings.weight").spec.placements[0], mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(ps.at("head.weight").spec.placements[0], mesh::Placement(mesh::Shard{0}));
}

// The traced block: the time mix's three projections column-parallel, the WKV kernel, the
// receptance gate and their product on the rank's channels, output row-parallel; the channel
// mix's key column-parallel, its squared ReLU sharded, value row-parallel, its receptance and gate
// replicated (1 / tp of the tokens under sequence parallelism). Two reductions a block; no keys
// pass around a context-parallel ring.
TEST(RwkvTensorParallel, TracedBlockSplits) {
  const tensor::ModelConfig c = tensor::find_model_config("rwkv-4-14b-pile");
  const TraceKey key{.micro_batch = 1, .seq = 1024, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);
  std::map<std::string, OpSplit> split;
  std::map<std::string, int> count;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with("rwkv.blocks.0.")) continue;
    const std::string name = fqn.substr(14) + " " + op.op;
    split[name] = t.split[i];
    ++count[name];
  }
  EXPECT_EQ(count.at("attention wkv"), 1);
  EXPECT_EQ(split.at("attention.key linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("attention.value linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("attention.receptance linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("attention wkv"), OpSplit::kSharded);
  EXPECT_EQ(split.at("attention sigmoid"), OpSplit::kSharded);
  EXPECT_EQ(split.at("attention exp"), OpSplit::kReplicated);  // -exp(time_decay): [A], tiny
  EXPECT_EQ(split.at("attention.output linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("feed_forward.key linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("feed_forward relu"), OpSplit::kSharded);
  EXPECT_EQ(split.at("feed_forward square"), OpSplit::kSharded);
  EXPECT_EQ(split.at("feed_forward.value linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("feed_forward.receptance linear"), OpSplit::kReplicated);
  EXPECT_EQ(split.at("feed_forward sigmoid"), OpSplit::kReplicated);
  EXPECT_EQ(split.at("attention.time_shift cat"), OpSplit::kReplicated);
  EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 2u);
  // Each column-parallel projection reads its own mix of the normed input: four region inputs
  // (the time mix's key, value and receptance mixes, the channel mix's key mix), each with its
  // backward all-reduce (docs/models.md, rwkv's leave-outs: one gather of the normed input per
  // half would do).
  EXPECT_EQ(t.region_inputs[static_cast<int>(Part::kBlock)].size(), 4u);
}

}  // namespace
}  // namespace shardplan::planner
