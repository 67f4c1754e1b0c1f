// The one table of parallel dimensions (Note [Parallel dimensions]): the mesh, names, flags,
// per-dimension rules and the strings derived from it, against values written out by hand.
#include "planner/candidate/parallel_dims.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParallelDims, RowsCoverEveryMeshDimOnceWithDistinctFieldsAndFlags) {
  std::set<int64_t> mesh_dims;
  std::set<std::string_view> names, flags;
  std::set<int> ranks;
  for (const ParallelDim& d : parallel_dims()) {
    mesh_dims.insert(d.mesh_dim);
    names.insert(d.name);
    flags.insert(d.flag);
    ranks.insert(d.family_rank);
    EXPECT_EQ(d.flag, "--" + std::string(d.name));
  }
  EXPECT_EQ(mesh_dims.size(), kMeshDims);
  EXPECT_EQ(names.size(), kMeshDims);
  EXPECT_EQ(flags.size(), kMeshDims);
  EXPECT_EQ(ranks.size(), kMeshDims);
  // Users read them as tp, pp, dp, cp, ep; the mesh is [pp, dp / ep, ep, cp, tp].
  std::vector<std::string_view> order;
  for (const ParallelDim& d : parallel_dims()) order.push_back(d.name);
  EXPECT_THAT(order, ElementsAre("tp", "pp", "dp", "cp", "ep"));
  EXPECT_THAT(mesh_names(), ElementsAre("pp", "dp", "ep", "cp", "tp"));
}

TEST(ParallelDims, MeshShapeCarvesExpertsOutOfDataParallelism) {
  // 128 GPUs: tp 4, pp 2, dp 8, cp 2, ep 4: the ep group takes the 2 cp ranks, then 4 / 2 = 2 of
  // the dp ranks (Note [Expert fold]) -> [2, 8 / 2, 2, 2, 4], 2*4*2*2*4 = 128.
  const ParallelConfig c{.tp = 4, .pp = 2, .dp = 8, .cp = 2, .ep = 4};
  EXPECT_EQ(ep_from_dp(c), 2);
  EXPECT_THAT(mesh_shape(c), ElementsAre(2, 4, 2, 2, 4));
  EXPECT_EQ(mesh_shape_vector(c), std::vector<int64_t>({2, 4, 2, 2, 4}));
  // Dense weights replicate over dp x cp = 16 ranks; an expert shard over dp / e = 4.
  EXPECT_EQ(data_parallel_ranks(c), 16);
  EXPECT_EQ(world_product_text(c), "--tp 4 x --pp 2 x --dp 8 x --cp 2");
  EXPECT_EQ(dim_name(kCpDim), "cp");
  EXPECT_EQ(c.*dim(kEpDim).degree, 4);
}

// Note [Expert fold]: whole experts (etp 1) on tp 4 x dp 4 with ep 8 take the 4 tp ranks and 2 of
// the 4 dp ranks: [1, 4 / 2, 8 / 4, 1, 4]; an expert shard's replicas are the remaining 2.
TEST(ParallelDims, WholeExpertsTakeTensorParallelRanksBeforeDataParallelOnes) {
  const ParallelConfig c{.tp = 4, .dp = 4, .ep = 8, .etp = 1};
  EXPECT_EQ(expert_tp(c), 1);
  EXPECT_EQ(ep_from_dp(c), 2);
  EXPECT_THAT(mesh_shape(c), ElementsAre(1, 2, 2, 1, 4));
  const tensor::ModelConfig moe = tensor::find_model_config("mixtral-8x7b");
  EXPECT_EQ(expert_fold_refuses(moe, c), "");
  // etp 0 follows tp: the fold of before, ep inside dp.
  const ParallelConfig split{.tp = 4, .dp = 4, .ep = 4};
  EXPECT_EQ(expert_tp(split), 4);
  EXPECT_THAT(mesh_shape(split), ElementsAre(1, 1, 4, 1, 4));
  EXPECT_EQ(expert_fold_refuses(moe, split), "");
  // What five mesh dims cannot hold, each refused naming the flags.
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 4, .dp = 4, .ep = 8}),
            "--ep 8 does not divide --dp 4, expected expert parallelism within data parallelism "
            "(or --etp 1: ep groups of whole tensor-parallel groups)");
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 4, .dp = 4, .ep = 8, .etp = 2}),
            "--etp 2 with --tp 4, expected 1 (whole experts) or 4 (experts split like the dense "
            "layers)");
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 4, .dp = 4, .ep = 2, .etp = 1}),
            "--ep 2 with --etp 1 and --tp 4, expected a multiple of --tp 4 dividing --tp x --dp = "
            "16 (each expert group holds whole tensor-parallel groups)");
  // Whole experts with cp 2: ep 8 = tp 4 x cp 2 x 1 of the dp ranks; ep 4 is not whole tp x cp
  // groups, and ep 2 under experts split over tp is fewer than the cp ranks it takes first.
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 4, .dp = 2, .cp = 2, .ep = 8, .etp = 1}), "");
  EXPECT_THAT(mesh_shape({.tp = 4, .dp = 2, .cp = 2, .ep = 8, .etp = 1}),
              ElementsAre(1, 2, 1, 2, 4));
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 4, .dp = 2, .cp = 2, .ep = 4, .etp = 1}),
            "--ep 4 with --etp 1, --tp 4 and --cp 2, expected a multiple of --tp x --cp = 8 "
            "dividing --tp x --cp x --dp = 16 (an expert group of whole experts holds whole "
            "tensor- and context-parallel groups)");
  EXPECT_EQ(expert_fold_refuses(moe, {.tp = 2, .dp = 2, .cp = 4, .ep = 2}),
            "--ep 2 with --cp 4 and --dp 2, expected a multiple of --cp dividing --cp x --dp = 8 "
            "(an expert group takes the context-parallel ranks, then data-parallel ones); or "
            "--etp 1 (groups of whole tensor-parallel groups)");
  EXPECT_EQ(expert_fold_refuses(tensor::find_model_config("llama3-8b"), {.tp = 4, .etp = 1}),
            "--etp 1 on a dense model (llama), expected no --etp (it splits the experts of a MoE "
            "model)");
}

TEST(ParallelDims, EachRuleRefusesWithTheFlagAndWhatWasExpected) {
  // Llama-3-8B: 32 heads, 8 KV heads, 32 layers; a dense model.
  const tensor::ModelConfig m = tensor::find_model_config("llama3-8b");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(m, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(m, s, 16), "");  // a multiple of the 8 KV heads, divides 32
  EXPECT_EQ(dim(kTpDim).refuses(m, s, 3),
            "--tp 3 does not divide the model's 32 attention heads, expected a divisor of 32");
  // A hybrid model's Gated DeltaNet splits by key-head groups: whole groups per rank. A config of
  // 16 heads whose linear attention has 6 key heads takes tp 2, not tp 4 (nor 8, nor 16).
  tensor::ModelConfig hybrid = tensor::find_model_config("qwen3-next-80b-a3b");
  hybrid.linear_num_key_heads = 6;
  hybrid.linear_num_value_heads = 12;
  EXPECT_EQ(dim(kTpDim).refuses(hybrid, s, 2), "");
  EXPECT_EQ(dim(kTpDim).refuses(hybrid, s, 4),
            "--tp 4 does not divide the model's 6 linear-attention key heads (Mamba-2: groups), "
            "expected a divisor of 6");
  // Mamba-2 splits by its B/C groups as Megatron-LM's MambaMixer does: Granite 4.0's one group
  // keeps it at tp 1; Nemotron 3 Nano's 8 groups take tp 2, 4 or 8.
  const tensor::ModelConfig granite = tensor::find_model_config("granite-4.0-h-small");
  EXPECT_EQ(dim(kTpDim).refuses(granite, s, 1), "");
  EXPECT_EQ(dim(kTpDim).refuses(granite, s, 2),
            "--tp 2 does not divide the model's 1 linear-attention key heads (Mamba-2: groups), "
            "expected a divisor of 1");
  // Falcon-H1's Mamba-2 mixer beside every layer's attention splits the same way: the 7B's one
  // group keeps it at tp 1.
  const tensor::ModelConfig falcon = tensor::find_model_config("falcon-h1-7b");
  EXPECT_EQ(dim(kTpDim).refuses(falcon, s, 1), "");
  EXPECT_EQ(dim(kTpDim).refuses(falcon, s, 2),
            "--tp 2 does not divide the model's 1 linear-attention key heads (Mamba-2: groups), "
            "expected a divisor of 1");
  // A fused qkv laid out by key-value group splits into whole groups only: Falcon-40B's 8 groups
  // take tp 2, 4 or 8 (not 16, which Llama-3-8B's separate projections take above). A single
  // key-value head is the multi-query exception (k and v priced as split, Megatron-LM replicates
  // them): Falcon-7B's 71 heads alone decide, 71 but not 2.
  const tensor::ModelConfig falcon40 = tensor::find_model_config("falcon-40b");
  EXPECT_EQ(dim(kTpDim).refuses(falcon40, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(falcon40, s, 16),
            "--tp 16 does not divide the model's 8 key/value heads, expected a divisor of 8 (its "
            "fused qkv projection splits by whole key-value groups)");
  const tensor::ModelConfig falcon7 = tensor::find_model_config("falcon-7b");
  EXPECT_EQ(dim(kTpDim).refuses(falcon7, s, 1), "");
  EXPECT_EQ(dim(kTpDim).refuses(falcon7, s, 71), "");
  EXPECT_THAT(dim(kTpDim).refuses(falcon7, s, 2), HasSubstr("71 attention heads"));
  const tensor::ModelConfig nano = tensor::find_model_config("nemotron-3-nano-30b-a3b");
  EXPECT_EQ(dim(kTpDim).refuses(nano, s, 8), "");
  EXPECT_THAT(dim(kTpDim).refuses(nano, s, 16), HasSubstr("8 linear-attention key heads"));
  // The same config with every layer attending in full has no group to keep whole.
  hybrid.layer_types.assign(hybrid.layer_types.size(), tensor::AttentionType::kFull);
  EXPECT_EQ(dim(kTpDim).refuses(hybrid, s, 4), "");
  EXPECT_EQ(dim(kPpDim).refuses(m, s, 32), "");
  EXPECT_THAT(dim(kPpDim).refuses(m, s, 33), HasSubstr("expected at most 32"));
  EXPECT_EQ(dim(kDpDim).refuses(m, s, 32), "");  // 96 / 32 = 3
  EXPECT_THAT(dim(kDpDim).refuses(m, s, 64), HasSubstr("--global-batch 96 is not divisible"));
  EXPECT_EQ(dim(kCpDim).refuses(m, s, 1), "");
  EXPECT_EQ(dim(kCpDim).refuses(m, s, 2048), "");  // 4096 / 2048 = 2 tokens, two chunks of one
  EXPECT_THAT(dim(kCpDim).refuses(m, s, 4096), HasSubstr("not divisible by 2 x 4096"));
  EXPECT_EQ(dim(kEpDim).refuses(m, s, 1), "");
  EXPECT_THAT(dim(kEpDim).refuses(m, s, 2), HasSubstr("on a dense model"));
  const tensor::ModelConfig moe = tensor::find_model_config("mixtral-8x7b");  // 8 experts
  EXPECT_EQ(dim(kEpDim).refuses(moe, s, 4), "");
  EXPECT_THAT(dim(kEpDim).refuses(moe, s, 3), HasSubstr("does not divide the model's 8 experts"));
}

TEST(ParallelDims, ConfigCheckReadsTheTable) {
  const tensor::ModelConfig moe = tensor::find_model_config("mixtral-8x7b");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 256};
  // ep 4 does not divide dp 2: the carved dimension's rule, with its reason.
  const ParallelConfig c{.tp = 8, .pp = 4, .dp = 2, .ep = 4};
  try {
    check_parallel_config(moe, s, c);
    FAIL() << "ep 4 within dp 2 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--ep 4 does not divide --dp 2, expected expert parallelism within data "
                 "parallelism (or --etp 1: ep groups of whole tensor-parallel groups)");
  }
  // The world's product names the four factors.
  try {
    check_parallel_config(moe, s, {.tp = 8, .pp = 4, .dp = 4});
    FAIL() << "128 ranks for 64 GPUs was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--tp 8 x --pp 4 x --dp 4 x --cp 1 = 128, expected --gpus 64");
  }
}

TEST(ParallelDims, PinsAreCheckedByTheirDimensionsRule) {
  // A pinned --tp 3 on 32 heads was searched before the table (only families without a TP plan
  // were refused); every pin now meets its dimension's rule up front.
  Planner p(tensor::find_model_config("llama3-8b"),
            collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 24, .seq = 4096, .global_batch = 24}, {});
  Pins pins;
  pins.tp = 3;
  try {
    (void)p.search(pins, 1);
    FAIL() << "--tp 3 was searched";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--tp 3 does not divide the model's 32 attention heads, expected a divisor of 32");
  }
}

TEST(ParallelDims, FamilyNamesFollowTheirRank) {
  EXPECT_EQ(family_of({.tp = 2, .pp = 2, .dp = 2, .cp = 2, .ep = 2, .zero = 1}),
            "tp+cp+pp+dp+ep zero-1");
  EXPECT_EQ(family_of({.pp = 4, .dp = 2}), "pp+dp");
  EXPECT_EQ(family_of({}), "single");
}

}  // namespace
}  // namespace shardplan::planner
