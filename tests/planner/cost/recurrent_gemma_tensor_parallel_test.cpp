// RecurrentGemma's tensor-parallel plan (tensor/models/family_recurrent_gemma.cpp) applied: what a
// TP rank holds of RecurrentGemma-9B against counts written out by hand, the recurrent block's
// placements (linear_x and linear_y by output channels, whole heads per rank; linear_out by input
// channels; the convolution and the RG-LRU held whole), the splits of the traced recurrent and
// attention blocks (Note [RG-LRU trace] in tensor/models/rg_lru.h), and the tp rule for its heads
// (planner/candidate/parallel_dims.cpp).
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

// RecurrentGemma-9B on 8 ranks (h 4,096, vocabulary 256,000 tied, F 12,288, W 4,096 in 16 heads
// of 256, K 4; attention 16 heads of 256, one key-value head):
//   embed_tokens (and the tied lm_head, once) by vocabulary: 256,000 x 4,096 / 8 = 131,072,000
//   MLP (38): gate_proj, up_proj (F h + F) / 8 each, down_proj h F / 8 and its bias whole:
//     18,881,536
//   recurrent block (26): linear_y, linear_x (W h + W) / 8 each, linear_out h W / 8 + h; whole:
//     conv_1d W K + W = 20,480, rg_lru W + 2 x 16 x 256^2 + 2 x 16 x 256 = 2,109,440: 8,426,496
//   attention (12): q_proj 16 x 256 x 4,096 / 8 = 2,097,152, k_proj and v_proj 256 x 4,096 / 8
//     = 131,072 each, o_proj 2,097,152 + its bias 4,096: 4,460,544
//   norms 38 x 2 x 4,096 = 311,296 and final_norm 4,096
//   131,072,000 + 38 x 18,881,536 + 26 x 8,426,496 + 12 x 4,460,544 + 311,296 + 4,096
//   = 1,121,501,184
TEST(RecurrentGemmaTensorParallel, NineBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("recurrentgemma-9b");
  const int64_t embed = 131'072'000, mlp = 18'881'536, recurrent = 8'426'496, attention = 4'460'544;
  EXPECT_EQ(embed + 38 * mlp + 26 * recurrent + 12 * attention + 311'296 + 4'096, 1'121'501'184);
  EXPECT_EQ(tp_rank_parameters(c, 8), 1'121'501'184);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 1'121'501'184);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 4'317'990'912);
  EXPECT_EQ(tp_rank_parameters(c, 1), 8'579'977'216);  // the whole model
  // tp divides the 16 heads of both the attention and the RG-LRU; the one key-value head is split
  // as multi-query attention's is (a multiple of it).
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16), "");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), ::testing::HasSubstr("16 attention heads"));
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 32), ::testing::HasSubstr("16 attention heads"));
}

// linear_x's and linear_y's rows are the W channels in head order: Shard(0) hands rank r of 4 the
// channels [r W / 4, (r + 1) W / 4), four whole heads of 256; linear_out splits its input channels
// (Shard(1)) and keeps its bias whole; the convolution and the RG-LRU's gates stay whole.
TEST(RecurrentGemmaTensorParallel, RecurrentBlockSplitsByHeads) {
  const tensor::ModelConfig c =
      tensor::first_layers(tensor::find_model_config("recurrentgemma-9b"), 1);
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const std::string block = "model.layers.0.temporal_block.";
  const auto placement = [&](const std::string& name) {
    return ps.at(block + name).spec.placements[0];
  };
  EXPECT_EQ(placement("linear_x.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(mesh::local_shape(ps.at(block + "linear_x.weight").spec, std::vector<int64_t>{1}),
            (DimVector{4096 / 4, 4096}));
  EXPECT_EQ(placement("linear_y.bias"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("linear_out.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("linear_out.bias"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("conv_1d.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("rg_lru.input_gate_weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("rg_lru.recurrent_param"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(ps.at("model.layers.0.mlp_block.down_proj.weight").spec.placements[0],
            mesh::Placement(mesh::Shard{1}));
}

// The op splits of one traced block of each kind, by the op's module (the layer prefix cut) and
// name.
std::map<std::string, OpSplit> splits_of(const TracedModel& t) {
  std::map<std::string, OpSplit> split;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.is_view) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (!fqn.starts_with("model.layers.0.")) continue;
    split[fqn.substr(15) + " " + op.op] = t.split[i];
  }
  return split;
}

// The recurrent block: linear_x and linear_y column-parallel, the convolution, the gates' batched
// products and the scan on the rank's channels, linear_out and the MLP's down_proj row-parallel
// (two reductions a block); no keys pass around a context-parallel ring.
TEST(RecurrentGemmaTensorParallel, TracedRecurrentBlockSplits) {
  const tensor::ModelConfig c = tensor::find_model_config("recurrentgemma-9b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);
  const std::map<std::string, OpSplit> split = splits_of(t);
  EXPECT_EQ(split.at("temporal_block.linear_y linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("temporal_block.linear_x linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("temporal_block causal_conv1d"), OpSplit::kSharded);
  EXPECT_EQ(split.at("temporal_block.rg_lru baddbmm"), OpSplit::kSharded);
  EXPECT_EQ(split.at("temporal_block.rg_lru linear_scan"), OpSplit::kSharded);
  EXPECT_EQ(split.at("temporal_block.linear_out linear"), OpSplit::kRow);
  EXPECT_EQ(split.at("mlp_block.down_proj linear"), OpSplit::kRow);
  EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 2u);
}

// The local attention: q, k, v column-parallel, o_proj row-parallel, the fused attention on the
// rank's heads over a window of 2,048 keys; its keys and values (one head of 256 each) are what a
// context-parallel ring passes.
TEST(RecurrentGemmaTensorParallel, TracedAttentionBlockSplits) {
  const tensor::ModelConfig c = tensor::find_model_config("recurrentgemma-9b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 2), key);
  EXPECT_EQ(t.kv_bytes, 4096 * 1 * (256 + 256) * 2);
  EXPECT_EQ(t.attention_window, 2048);
  EXPECT_TRUE(t.sliding);
  const std::map<std::string, OpSplit> split = splits_of(t);
  EXPECT_EQ(split.at("temporal_block.q_proj linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("temporal_block.k_proj linear"), OpSplit::kColumn);
  EXPECT_EQ(split.at("temporal_block scaled_dot_product_attention"), OpSplit::kSharded);
  EXPECT_EQ(split.at("temporal_block.o_proj linear"), OpSplit::kRow);
  EXPECT_EQ(t.row_outputs[static_cast<int>(Part::kBlock)].size(), 2u);
}

}  // namespace
}  // namespace shardplan::planner
