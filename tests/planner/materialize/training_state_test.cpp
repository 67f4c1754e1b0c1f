// The training state materialize allocates beside the parameters (planner/materialize/
// training_state.h): the ZeRO partition of each part, by hand on a tiny Llama, and the sum over
// a rank's parts against the planner's analytic per-stage prediction for GPT-2 (two independent
// counts: the layout's real shards and the planner's parameter arithmetic).
#include "planner/materialize/training_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/materialize/layout.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"
#include "tests/planner/materialize/tiny_llama.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

PlanFile pinned_plan(const tensor::ModelConfig& model, int64_t tp, int64_t dp, int zero) {
  Planner p(model, collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = tp * dp, .seq = 64, .global_batch = 12}, {});
  Pins pins;
  pins.tp = tp;
  pins.pp = 1;
  pins.dp = dp;
  pins.zero = zero;
  const SearchResult r = p.search(pins, 1);
  EXPECT_FALSE(r.top.empty());
  return plan_file(p, r.top.at(0), "model", 0);
}

const LocalParameter& part_named(const MaterialLayout& l, const std::vector<LocalParameter>& parts,
                                 const std::string& name) {
  for (const LocalParameter& p : parts) {
    if (l.parameters()[p.index].plan->name == name) return p;
  }
  throw std::runtime_error("no part " + name);
}

// cpu-local trains in fp32 Adam (training_recipe(cpu)): gradients 4 bytes, optimizer 8 (two
// moments, no master copy). q_proj [64, 64] is column-parallel over tp 2: 32 x 64 = 2048
// elements per rank, replicated over dp 2 until ZeRO-3 shards it there too. The final norm [64]
// is replicated over tp and dp.
TEST(TrainingState, ZeroPartitionsOverTheDataReplicasOfEachPart) {
  const MixedPrecision fp32 = training_recipe(true);
  ASSERT_EQ(fp32.grad_bytes, 4);
  ASSERT_EQ(fp32.optimizer_bytes(), 8);
  struct Want {
    int zero;
    int64_t q_numel, q_grads, q_optimizer, norm_grads, norm_optimizer;
  };
  for (const Want& w : {Want{0, 2048, 2048 * 4, 2048 * 8, 64 * 4, 64 * 8},
                        Want{1, 2048, 2048 * 4, 1024 * 8, 64 * 4, 32 * 8},
                        Want{2, 2048, 1024 * 4, 1024 * 8, 32 * 4, 32 * 8},
                        Want{3, 1024, 1024 * 4, 1024 * 8, 32 * 4, 32 * 8}}) {
    const MaterialLayout l(pinned_plan(testing::tiny_llama(), 2, 2, w.zero));
    const std::vector<LocalParameter> parts = l.rank_parameters(0);
    const LocalParameter& q = part_named(l, parts, "model.layers.0.self_attn.q_proj.weight");
    const LocalParameter& norm = part_named(l, parts, "model.norm.weight");
    EXPECT_EQ(q.numel, w.q_numel) << "zero " << w.zero;
    EXPECT_EQ(zero_replicas(l, l.parameters()[q.index]), w.zero == 3 ? 1 : 2);
    const StateBytes qs = state_bytes_of(l, q, fp32, w.zero);
    EXPECT_EQ(qs.gradients, w.q_grads) << "zero " << w.zero;
    EXPECT_EQ(qs.optimizer, w.q_optimizer) << "zero " << w.zero;
    const StateBytes ns = state_bytes_of(l, norm, fp32, w.zero);
    EXPECT_EQ(ns.gradients, w.norm_grads) << "zero " << w.zero;
    EXPECT_EQ(ns.optimizer, w.norm_optimizer) << "zero " << w.zero;
  }
}

// ceil(n / replicas) per part: the final norm's 64 elements over 3 data replicas keep 22 each
// (ZeRO pads the last partition), the embedding's 64,064 over 4 keep 16,016 exactly.
TEST(TrainingState, PartitionRoundsUp) {
  const MaterialLayout l(pinned_plan(testing::tiny_llama(), 1, 4, 1));
  const std::vector<LocalParameter> parts = l.rank_parameters(0);
  const LocalParameter& embed = part_named(l, parts, "model.embed_tokens.weight");
  ASSERT_EQ(embed.numel, 1001 * 64);
  EXPECT_EQ(state_bytes_of(l, embed, training_recipe(true), 1).optimizer, 16016 * 8);
  const MaterialLayout l3(pinned_plan(testing::tiny_llama(), 1, 3, 1));
  const std::vector<LocalParameter> p3 = l3.rank_parameters(0);
  const LocalParameter& norm = part_named(l3, p3, "model.norm.weight");
  EXPECT_EQ(state_bytes_of(l3, norm, training_recipe(true), 1).optimizer, 22 * 8);
}

// The model state materialize allocates on each rank (the layout's real shards plus
// state_bytes_of) against the plan's per-stage prediction (the planner's parameter counts), for
// GPT-2 in fp32 on cpu-local at every ZeRO stage: within 1 % (the planner counts per-TP-rank
// parameters, the layout rounds uneven vocabulary shards).
TEST(TrainingState, AllocationMatchesThePlansPredictionForGpt2) {
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  for (int zero = 0; zero <= 3; ++zero) {
    const PlanFile f = pinned_plan(gpt2, 2, 2, zero);
    ASSERT_EQ(f.stage_states.size(), 1u);
    const MaterialLayout l{PlanFile(f)};
    for (int64_t rank = 0; rank < 4; ++rank) {
      int64_t params = 0, grads = 0, optimizer = 0;
      for (const LocalParameter& p : l.rank_parameters(rank)) {
        const StateBytes b = state_bytes_of(l, p, training_recipe(true), zero);
        params += p.bytes;
        grads += b.gradients;
        optimizer += b.optimizer;
      }
      const StageStateBytes& want = f.stage_states[0];
      EXPECT_NEAR(static_cast<double>(params) / static_cast<double>(want.parameters), 1, 0.01)
          << "zero " << zero << " rank " << rank;
      EXPECT_NEAR(static_cast<double>(grads) / static_cast<double>(want.gradients), 1, 0.01)
          << "zero " << zero << " rank " << rank;
      EXPECT_NEAR(static_cast<double>(optimizer) / static_cast<double>(want.optimizer), 1, 0.01)
          << "zero " << zero << " rank " << rank;
    }
  }
}

TEST(TrainingState, AllocatesAndZeroesEveryBuffer) {
  const MaterialLayout l(pinned_plan(testing::tiny_llama(), 2, 2, 1));
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  const std::vector<LocalParameter> parts = l.rank_parameters(1);
  const TrainingState s = allocate_training_state(l, parts, *host);
  int64_t grads = 0, optimizer = 0;
  for (const LocalParameter& p : parts) {
    grads += state_bytes_of(l, p, training_recipe(true), 1).gradients;
    optimizer += state_bytes_of(l, p, training_recipe(true), 1).optimizer;
  }
  EXPECT_EQ(s.bytes.gradients, grads);
  EXPECT_EQ(s.bytes.optimizer, optimizer);
  EXPECT_EQ(s.buffers.size(), 2 * parts.size());
  EXPECT_EQ(static_cast<int>(s.buffers[0][0]), 0);
}

TEST(TrainingState, StateLevelsParseAndRefuseTheRest) {
  EXPECT_EQ(parse_state_level("params"), StateLevel::kParams);
  EXPECT_EQ(parse_state_level("model"), StateLevel::kModel);
  EXPECT_EQ(parse_state_level("peak"), StateLevel::kPeak);
  EXPECT_THAT(
      [] { (void)parse_state_level("optimizer"); },
      ThrowsMessage<Error>(HasSubstr("--state 'optimizer', expected params, model or peak")));
}

}  // namespace
}  // namespace shardplan::planner
