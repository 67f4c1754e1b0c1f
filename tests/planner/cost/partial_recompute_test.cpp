// Partial recomputation (Note [Partial recomputation] in planner/cost/step_model.h): the first N
// layers of each model chunk recomputed in full, the rest keeping their activations. With one stage
// and one chunk the step is exactly N / L of the way from no recomputation to full recomputation,
// in compute time and in activation bytes; the search takes the fewest layers that fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/search/planner.h"
#include "planner/search/strategies.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

collectives::Cluster h100() {
  return collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
}

TEST(PartialRecompute, InterpolatesBetweenNoneAndFull) {
  // Llama-3-8B (32 layers) on one H100 node, tp 8, one stage: every layer in one chunk.
  Planner p(tensor::find_model_config("llama3-8b"), h100(),
            {.gpus = 8, .seq = 4096, .global_batch = 8}, {});
  ParallelConfig c{.tp = 8, .pp = 1, .dp = 1, .micro_batch = 1};
  auto bill_of = [&](tensor::RecomputePolicy rc, int64_t layers) {
    c.recompute = rc;
    c.recompute_layers = layers;
    Bill b;
    (void)p.estimate(c, DimOrder::kTpInner, &b);
    return b;
  };
  const Bill none = bill_of(tensor::RecomputePolicy::kNone, 0);
  const Bill full = bill_of(tensor::RecomputePolicy::kFull, 0);
  ASSERT_GT(full.compute_s, none.compute_s);
  ASSERT_LT(full.activation_bytes, none.activation_bytes);
  for (int64_t n : {1, 5, 16, 31}) {
    SCOPED_TRACE(n);
    const Bill part = bill_of(tensor::RecomputePolicy::kFull, n);
    const double f = static_cast<double>(n) / 32;
    EXPECT_NEAR(part.compute_s, none.compute_s + f * (full.compute_s - none.compute_s),
                1e-9 * full.compute_s);
    EXPECT_NEAR(static_cast<double>(part.activation_bytes),
                static_cast<double>(none.activation_bytes) +
                    f * static_cast<double>(full.activation_bytes - none.activation_bytes),
                2.0);
  }
  // N at or above the chunk's layers recomputes all of them.
  const Bill all = bill_of(tensor::RecomputePolicy::kFull, 32);
  EXPECT_DOUBLE_EQ(all.compute_s, full.compute_s);
  EXPECT_EQ(all.activation_bytes, full.activation_bytes);
}

TEST(PartialRecompute, SearchTakesTheFewestLayersThatFit) {
  // Llama-3-70B on 64 H100s without context parallelism (which would shard the activations and
  // the states further): no recomputation does not fit the fastest layouts, full does.
  Planner p(tensor::find_model_config("llama3-70b"), h100(),
            {.gpus = 64, .seq = 8192, .global_batch = 128}, {});
  Pins no_cp;
  no_cp.cp = 1;
  const SearchResult r = p.search(no_cp, 1);
  ASSERT_FALSE(r.top.empty());
  const PlanResult& best = r.top.front();
  ASSERT_EQ(best.config.recompute, tensor::RecomputePolicy::kFull);
  ASSERT_GT(best.config.recompute_layers, 0);
  ParallelConfig fewer = best.config;
  --fewer.recompute_layers;
  ParallelConfig none = best.config;
  none.recompute = tensor::RecomputePolicy::kNone;
  none.recompute_layers = 0;
  ParallelConfig all = best.config;
  all.recompute_layers = 0;
  const double capacity = p.context().memory_capacity_bytes;
  EXPECT_LE(static_cast<double>(best.memory_bytes), capacity);
  if (fewer.recompute_layers > 0) {
    EXPECT_GT(static_cast<double>(p.estimate(fewer, best.order, nullptr).memory_bytes), capacity);
  }
  EXPECT_GT(static_cast<double>(p.estimate(none, best.order, nullptr).memory_bytes), capacity);
  EXPECT_LT(best.step_time_s, p.estimate(all, best.order, nullptr).step_time_s);
  // Pinned, it is searched no further.
  Pins pins;
  pins.recompute_layers = 3;
  for (const PlanResult& x : p.search(pins, 5).top) EXPECT_EQ(x.config.recompute_layers, 3);
}

TEST(PartialRecompute, BadCountsAreOneLine) {
  Planner p(tensor::find_model_config("llama3-8b"), h100(),
            {.gpus = 8, .seq = 4096, .global_batch = 8}, {});
  ParallelConfig c{.tp = 8,
                   .micro_batch = 1,
                   .recompute = tensor::RecomputePolicy::kSelective,
                   .recompute_layers = 4};
  EXPECT_THAT([&] { (void)p.estimate(c, DimOrder::kTpInner, nullptr); },
              ThrowsMessage<Error>(HasSubstr(
                  "--recompute-layers 4 with --recompute selective, expected --recompute full")));
  c.recompute = tensor::RecomputePolicy::kFull;
  c.recompute_layers = 33;
  EXPECT_THAT([&] { (void)p.estimate(c, DimOrder::kTpInner, nullptr); },
              ThrowsMessage<Error>(HasSubstr("--recompute-layers 33, expected between 1 and")));
  Pins pins;
  pins.recompute_layers = 2;
  pins.recompute = tensor::RecomputePolicy::kNone;
  EXPECT_THAT([&] { (void)p.search(pins, 1); },
              ThrowsMessage<Error>(HasSubstr("expected --recompute full")));
}

TEST(PartialRecompute, PinnedSearchPricesWhatEstimateDoes) {
  // A pinned count goes through the search's own evaluation: it must price the stored layers as
  // stored, exactly as estimate does.
  Planner p(tensor::find_model_config("llama3-70b"), h100(),
            {.gpus = 64, .seq = 4096, .global_batch = 64}, {});
  const Pins pins{.tp = 8,
                  .pp = 4,
                  .dp = 2,
                  .cp = {},
                  .ep = {},
                  .etp = {},
                  .micro_batch = 1,
                  .virtual_stages = 5,
                  .recompute_layers = 2,
                  .zero = 1,
                  .recompute = {},
                  .sequence_parallel = true};
  const SearchResult r = p.search(pins, 1);
  ASSERT_FALSE(r.top.empty());
  const PlanResult& x = r.top.front();
  const PlanResult e = p.estimate(x.config, x.order, nullptr);
  EXPECT_DOUBLE_EQ(x.step_time_s, e.step_time_s);
  EXPECT_EQ(x.memory_bytes, e.memory_bytes);
  ParallelConfig all = x.config;
  all.recompute_layers = 0;
  EXPECT_LT(x.step_time_s, p.estimate(all, x.order, nullptr).step_time_s);
}

TEST(StageMemory, PeakMayBeOnAMiddleStage) {
  // GPT-2 (12 layers, a 50,257-word output layer worth about 5 layers) on 4 CPU ranks, pp 4,
  // 8 micro-batches under 1F1B: stage s holds min(8, 4 - s) micro-batches of its layers. The
  // balanced split gives the ends few layers, so a middle stage holds the most activations.
  Planner p(tensor::find_model_config("gpt2"),
            collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 4, .seq = 128, .global_batch = 8}, {});
  const ParallelConfig c{.pp = 4, .dp = 1, .micro_batch = 1};
  Bill bill;
  const PlanResult r = p.estimate(c, DimOrder::kTpInner, &bill);
  const std::vector<int64_t> split = partition_from_ends(12, 4, r.stages).counts();
  int64_t most = 0, at = 0;
  for (int64_t s = 0; s < 4; ++s) {
    if (std::min<int64_t>(8, 4 - s) * split[static_cast<size_t>(s)] > most) {
      most = std::min<int64_t>(8, 4 - s) * split[static_cast<size_t>(s)];
      at = s;
    }
  }
  ASSERT_GT(at, 0) << "split " << split[0] << " " << split[1] << " " << split[2] << " " << split[3];
  ASSERT_LT(at, 3);
  EXPECT_EQ(bill.peak_stage, at);
  // A middle stage holds only its blocks' activations: `most` layers of one traced block's.
  const TracedModel t = trace_one_block(tensor::find_model_config("gpt2"),
                                        {.micro_batch = 1,
                                         .seq = 128,
                                         .recompute = tensor::RecomputePolicy::kNone,
                                         .attention = tensor::AttentionImpl::kFlash,
                                         .dtype = tensor::DType::kFloat32});
  const int64_t per_layer = rank_work(t, p.context().compute, {}).block().retained_bytes;
  EXPECT_EQ(bill.activation_bytes, most * per_layer);
}

}  // namespace
}  // namespace shardplan::planner
