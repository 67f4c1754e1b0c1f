// The planner end to end on small jobs: GEMM efficiency written out by hand, the step model's
// pieces against hand-computed values, pins, bad input, and compare's guarantee that auto is
// never slower than a named strategy.
#include "planner/search/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/cost/compute_cost.h"
#include "planner/plan/plan_file.h"
#include "planner/search/strategies.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

collectives::Cluster cluster(const char* name) {
  return collectives::load_cluster(collectives::resolve_cluster(name));
}

TEST(GemmEfficiency, TileWaveAndReductionByHand) {
  ComputeModel a;
  a.peak_flops = 312e12;
  a.matmul_efficiency = 0.859;
  a.streaming_multiprocessors = 108;
  // 2048 x 6912 x 2304: 16 x 54 = 864 tiles of 128 x 128 = 8 full waves on 108 SMs, no tile
  // padding; K / (K + 64) = 2304 / 2368.
  EXPECT_NEAR(gemm_efficiency(a, {.batch = 1, .m = 2048, .n = 6912, .k = 2304}),
              0.859 * 2304.0 / 2368.0, 1e-12);
  // 200 x 200 x 1000: 2 x 2 tiles (256 x 256 padded: 40000 / 65536), 4 tiles on 108 SMs,
  // 1000 / 1064.
  EXPECT_NEAR(gemm_efficiency(a, {.batch = 1, .m = 200, .n = 200, .k = 1000}),
              0.859 * (40000.0 / 65536.0) * (4.0 / 108.0) * (1000.0 / 1064.0), 1e-12);
  // 12 batches of 2 x 2 tiles = 48 tiles; without an SM count, no wave term.
  a.streaming_multiprocessors = 0;
  EXPECT_NEAR(gemm_efficiency(a, {.batch = 12, .m = 256, .n = 256, .k = 64}), 0.859 * 0.5, 1e-12);
}

TEST(ComputeModel, ReadsTheClusterFile) {
  const ComputeModel a = compute_model(cluster("dgx-a100-80g"), Precision::kBf16);
  EXPECT_DOUBLE_EQ(a.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(a.matmul_efficiency, 0.859);  // the CUDA 12.1 best-shape maximum
  EXPECT_EQ(a.streaming_multiprocessors, 108);
  // Note [HBM efficiency]: the datasheet 2,039 GB/s times the measured fraction 0.88.
  EXPECT_DOUBLE_EQ(a.memory_bytes_per_s, 2039e9 * 0.88);
  // The H100's measured fraction (docs/cost-model.md §8.6): 0.90 of the datasheet 3.35 TB/s.
  EXPECT_DOUBLE_EQ(compute_model(cluster("dgx-h100"), Precision::kBf16).memory_bytes_per_s,
                   3350e9 * 0.90);
  // A file without the fraction (dgx-b200) streams at the datasheet 8 TB/s.
  EXPECT_DOUBLE_EQ(compute_model(cluster("dgx-b200"), Precision::kBf16).memory_bytes_per_s, 8000e9);
  const ComputeModel h = compute_model(cluster("dgx-h100"), Precision::kFp8);
  EXPECT_DOUBLE_EQ(h.peak_flops, 1978.9e12);
  EXPECT_DOUBLE_EQ(h.mfu_peak_flops, 989.4e12);  // MFU stays against the bf16 peak
  EXPECT_THAT([] { (void)compute_model(cluster("dgx-a100-80g"), Precision::kFp8); },
              ThrowsMessage<Error>(HasSubstr("states no fp8 peak")));
}

// Note [Attention kernels]: a stack on FlashAttention-2 prices the fused attention at 0.62 of the
// cluster file's rate on an H100, and its GEMMs at its compute_efficiency, not the other way.
TEST(Planner, TheStackChoosesTheAttentionKernel) {
  const TrainingSetup job{.gpus = 8, .seq = 8192, .global_batch = 16};
  StackProfile flash2 = default_stack();
  flash2.attention_kernel = AttentionKernel::kFlash2;
  flash2.compute_efficiency = 0.7;
  Planner fused(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"), job, {});
  PlannerOptions o;
  o.stack = flash2;
  Planner slow(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"), job, o);
  const ComputeModel& a = fused.context().compute;
  const ComputeModel& b = slow.context().compute;
  EXPECT_DOUBLE_EQ(a.attention_matmul_efficiency, 0.801);  // dgx-h100's bf16 ceiling
  EXPECT_DOUBLE_EQ(b.attention_matmul_efficiency, 0.801 * 0.62);
  EXPECT_DOUBLE_EQ(b.matmul_efficiency, a.matmul_efficiency * 0.7);
}

// Note [FP8 GEMMs]: ZeRO-3 frees each gathered weight after its use, so even a stack that caches
// fp8 weights across micro-batches (Megatron's) casts them once per micro-batch: its ZeRO-3 plan
// costs what a stack that always casts pays, and more than without the casts.
TEST(Planner, ZeroThreeCastsFp8WeightsEveryMicroBatch) {
  const TrainingSetup job{.gpus = 8, .seq = 8192, .global_batch = 64};
  StackProfile caster = default_stack();
  ASSERT_FALSE(caster.fp8_weight_casts);
  caster.fp8_weight_casts = true;
  PlannerOptions o;
  o.precision = Precision::kFp8;
  Planner cached(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"), job, o);
  o.stack = caster;
  Planner casting(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"), job, o);
  Pins pins;
  pins.dp = 8;
  pins.micro_batch = 1;
  ParallelConfig z3 = default_config(job, pins, Precision::kFp8);
  z3.zero = 3;
  ParallelConfig z1 = z3;
  z1.zero = 1;
  const double cached3 = cached.estimate(z3, DimOrder::kTpInner, nullptr).step_time_s;
  EXPECT_DOUBLE_EQ(cached3, casting.estimate(z3, DimOrder::kTpInner, nullptr).step_time_s);
  // ZeRO-1 keeps the weights: the caching stack pays no casts there, the casting one does.
  const double cached1 = cached.estimate(z1, DimOrder::kTpInner, nullptr).step_time_s;
  const double casting1 = casting.estimate(z1, DimOrder::kTpInner, nullptr).step_time_s;
  EXPECT_LT(cached1, casting1);
  // Each of the 8 micro-batches casts 8B weights' worth: read 2 + amax 2, write 1 + 1 bytes per
  // element of the 32 blocks' linear layers (218M elements each) at 0.9 x 3.35 TB/s.
  const double cast_s = 8 * 32 * 218103808.0 * 6 / (3350e9 * 0.9);
  EXPECT_NEAR(casting1 - cached1, cast_s, 0.02 * cast_s);
}

// Pinned degrees are user input: a product beyond int64 is one error naming the pins, not a
// wrapped product that happens to divide the GPUs (a fuzzed `estimate --tp ... --pp ...`).
TEST(Planner, PinnedDegreesWhoseProductOverflowsAreRefused) {
  const TrainingSetup job{.gpus = 8, .seq = 512, .global_batch = 8};
  Pins pins;
  pins.tp = 3602879701896396912;
  pins.pp = 360287018963969;
  EXPECT_THAT([&] { default_config(job, pins, Precision::kBf16); },
              ThrowsMessage<Error>(HasSubstr("--tp 3602879701896396912 x --pp 360287018963969 "
                                             "x --cp 1 overflows int64")));
  pins.tp = 2;
  pins.pp = 2;
  EXPECT_EQ(default_config(job, pins, Precision::kBf16).dp, 2);  // 8 / (2 x 2 x 1)
}

// docs/cost-model.md §2.4: GPT-2 small at s = 1024 is 6 x 124,439,808 + 12 x 12 x 768 x 1024 =
// 859,885,056 model FLOPs per token counting attention's full square; the causal half computes
// 6 x 12 x 768 x 1024 fewer, 803,261,952. Both MFUs divide the same step by the same peak.
TEST(Planner, MfuBothWaysOfCountingAttention) {
  Planner p(tensor::find_model_config("gpt2"), cluster("dgx-h100"),
            {.gpus = 8, .seq = 1024, .global_batch = 64}, {});
  const PlanResult r =
      p.estimate(default_config(p.setup(), {}, Precision::kBf16), DimOrder::kTpInner, nullptr);
  ASSERT_GT(r.mfu, 0);
  EXPECT_NEAR(r.mfu_causal / r.mfu, 803261952.0 / 859885056.0, 1e-12);
  EXPECT_NEAR(r.mfu, 859885056.0 * 64 * 1024 / (8 * 989.4e12 * r.step_time_s), 1e-12);
}

// The bill's model state per pipeline stage (what materialize --state model allocates): Llama 3
// 8B's 8,030,261,248 parameters over 4 stages, tp 1, ZeRO-1 over dp 2. The stages' bf16 weights
// and gradients add up to the model's, 2 bytes each per parameter; each stage's 12 bytes of
// optimizer state are split over the 2 data-parallel ranks; the stage with the most is the one
// the bill's memory prices.
TEST(Planner, ModelStatePerStage) {
  Planner p(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 8, .seq = 4096, .global_batch = 64}, {});
  Pins pins;
  pins.pp = 4;
  pins.dp = 2;
  pins.zero = 1;
  Bill bill;
  (void)p.estimate(default_config(p.setup(), pins, Precision::kBf16), DimOrder::kTpInner, &bill);
  ASSERT_EQ(bill.stage_states.size(), 4U);
  int64_t weights = 0, gradients = 0;
  for (const StageStateBytes& st : bill.stage_states) {
    weights += st.parameters;
    gradients += st.gradients;
    EXPECT_EQ(st.optimizer, (st.parameters / 2 + 1) / 2 * 12);
  }
  EXPECT_EQ(weights, 2 * 8030261248);
  EXPECT_EQ(gradients, 2 * 8030261248);
  // The bill's model-state memory is the stage with the most parameters.
  const auto most = std::max_element(bill.stage_states.begin(), bill.stage_states.end(),
                                     [](const StageStateBytes& a, const StageStateBytes& b) {
                                       return a.parameters < b.parameters;
                                     });
  EXPECT_EQ(most->parameters, bill.parameter_bytes);
  EXPECT_EQ(most->optimizer, bill.optimizer_bytes);
}

// Note [Weights shared across layers]: Zamba2-7B's 13 hybrid layers take turns at 2 shared
// blocks. On one stage at tp 1 the bill's weights are the model's 7,356,749,648 parameters, 2
// bytes each (each block once, not once per hybrid layer); over 2 stages each stage charges its
// hybrid layers their share, and the stages add up to the model and one more copy of its tied
// embedding (32,000 x 3,584), which the last stage keeps for its output layer.
TEST(Planner, SharedBlocksAreHeldOncePerModel) {
  Planner p(tensor::find_model_config("zamba2-7b"), cluster("dgx-h100"),
            {.gpus = 8, .seq = 4096, .global_batch = 64}, {});
  Pins pins;
  pins.tp = 1;
  pins.pp = 1;
  pins.zero = 1;
  Bill bill;
  (void)p.estimate(default_config(p.setup(), pins, Precision::kBf16), DimOrder::kTpInner, &bill);
  ASSERT_EQ(bill.stage_states.size(), 1U);
  EXPECT_EQ(bill.stage_states[0].parameters, 2 * int64_t{7356749648});
  pins.pp = 2;
  pins.dp = 4;
  (void)p.estimate(default_config(p.setup(), pins, Precision::kBf16), DimOrder::kTpInner, &bill);
  ASSERT_EQ(bill.stage_states.size(), 2U);
  EXPECT_EQ(bill.stage_states[0].parameters + bill.stage_states[1].parameters,
            2 * (int64_t{7356749648} + 32000 * 3584));
}

// --memory-headroom: a plan fits when its memory leaves the headroom free. Llama 2 7B on one H200
// (139.8 GiB usable): the fastest plan without headroom needs 134.3 GiB; with 8 GiB kept free it no
// longer fits, and every plan the search keeps leaves at least 8 GiB.
TEST(Planner, MemoryHeadroomIsKeptFree) {
  const TrainingSetup setup{.gpus = 1, .seq = 4096, .global_batch = 8};
  Planner free_all(tensor::find_model_config("llama2-7b"), cluster("hgx-h200"), setup, {});
  const SearchResult a = free_all.search({}, 20);
  ASSERT_FALSE(a.top.empty());
  const double capacity = free_all.context().memory_capacity_bytes;
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_LT(capacity - static_cast<double>(a.top[0].memory_bytes), 8 * gib);
  PlannerOptions o;
  o.memory_headroom_bytes = int64_t{8} << 30;
  Planner kept(tensor::find_model_config("llama2-7b"), cluster("hgx-h200"), setup, o);
  const SearchResult b = kept.search({}, 20);
  ASSERT_FALSE(b.top.empty());
  for (const PlanResult& r : b.top) {
    EXPECT_GE(capacity - static_cast<double>(r.memory_bytes), 8 * gib);
  }
  EXPECT_GT(b.top[0].step_time_s, a.top[0].step_time_s);
  o.memory_headroom_bytes = int64_t{200} << 30;
  EXPECT_THAT(
      [&] { Planner(tensor::find_model_config("llama2-7b"), cluster("hgx-h200"), setup, o); },
      ThrowsMessage<Error>(HasSubstr("--memory-headroom 214748364800 bytes")));
}

TEST(Planner, PinsFixTheirDimensions) {
  Planner p(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
  Pins pins;
  pins.tp = 8;
  pins.pp = 2;
  const SearchResult r = p.search(pins, 5);
  ASSERT_FALSE(r.top.empty());
  for (const PlanResult& x : r.top) {
    EXPECT_EQ(x.config.tp, 8);
    EXPECT_EQ(x.config.pp, 2);
    EXPECT_EQ(x.config.dp * x.config.cp, 4);
    EXPECT_GT(x.mfu, 0);
    EXPECT_LE(x.mfu, 1);
    // tokens per second is the global batch's tokens over the step.
    EXPECT_NEAR(x.tokens_per_s * x.step_time_s, 256.0 * 4096, 1e-6);
  }
  EXPECT_GT(r.evaluated, 0);
  EXPECT_LE(r.feasible, r.evaluated);
  // The top list is sorted, and the Pareto front starts at the fastest plan.
  for (size_t i = 1; i < r.top.size(); ++i) {
    EXPECT_LE(r.top[i - 1].step_time_s, r.top[i].step_time_s);
  }
  ASSERT_FALSE(r.pareto.empty());
  EXPECT_EQ(r.pareto.front().step_time_s, r.top.front().step_time_s);
}

// The search keeps the k fastest plans and the Pareto front as it streams (it does not store
// every feasible plan): both must equal what ranking all feasible plans gives.
TEST(Planner, TopKAndParetoFrontEqualRankingEveryPlan) {
  Planner p(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
  const SearchResult every = p.search({}, 1'000'000);
  ASSERT_EQ(static_cast<int64_t>(every.top.size()), every.feasible);
  ASSERT_GT(every.feasible, 100);
  const SearchResult five = p.search({}, 5);
  ASSERT_EQ(five.top.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(five.top[i].config, every.top[i].config);
    EXPECT_EQ(five.top[i].order, every.top[i].order);
  }
  // The front by its definition, swept over the full ranking: each plan that uses less memory
  // than every faster one.
  std::vector<const PlanResult*> front;
  int64_t least = INT64_MAX;
  for (const PlanResult& x : every.top) {
    if (x.memory_bytes < least) {
      front.push_back(&x);
      least = x.memory_bytes;
    }
  }
  ASSERT_EQ(five.pareto.size(), front.size());
  for (size_t i = 0; i < front.size(); ++i) {
    EXPECT_EQ(five.pareto[i].config, front[i]->config);
    EXPECT_EQ(five.pareto[i].memory_bytes, front[i]->memory_bytes);
  }
  EXPECT_GT(front.size(), 1u);
}

TEST(Planner, ContradictoryPinsAreOneLine) {
  Planner p(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
  Pins pins;
  pins.tp = 8;
  pins.pp = 4;
  pins.dp = 4;
  EXPECT_THAT([&] { (void)p.search(pins, 1); },
              ThrowsMessage<Error>(HasSubstr("--tp 8 x --pp 4 x --dp 4 = 128")));
  Pins odd;
  odd.dp = 3;
  EXPECT_THAT([&] { (void)p.search(odd, 1); }, ThrowsMessage<Error>(HasSubstr("does not divide")));
  Planner q(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 64, .seq = 4096, .global_batch = 100}, {});
  Pins eight;
  eight.dp = 8;
  EXPECT_THAT([&] { (void)q.search(eight, 1); },
              ThrowsMessage<Error>(HasSubstr("--global-batch 100 is not divisible by --dp 8")));
  EXPECT_THAT(
      [] {
        Planner q(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
                  {.gpus = 64, .seq = 1 << 20, .global_batch = 256}, {});
      },
      ThrowsMessage<Error>(HasSubstr("max_position_embeddings")));
  EXPECT_THROW(Planner(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
                       {.gpus = 0, .seq = 4096, .global_batch = 256}, {}),
               Error);
}

TEST(Planner, AutoIsNeverSlowerThanANamedStrategy) {
  Planner p(tensor::find_model_config("llama3-8b"), cluster("dgx-h100"),
            {.gpus = 16, .seq = 2048, .global_batch = 64}, {});
  const std::vector<Strategy> s = parse_strategies("ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,auto");
  std::vector<std::function<bool(const ParallelConfig&)>> keep;
  for (const Strategy& x : s) keep.push_back(x.keep);
  const std::vector<Planner::Best> best = p.best_of_each({}, keep, nullptr);
  ASSERT_TRUE(best.back().best.has_value());
  for (size_t i = 0; i + 1 < best.size(); ++i) {
    if (best[i].best) {
      EXPECT_LE(best.back().best->step_time_s, best[i].best->step_time_s);
    }
  }
  EXPECT_THAT([] { (void)parse_strategies("ddp,fsdpp"); },
              ThrowsMessage<Error>(HasSubstr("did you mean 'fsdp'")));
}

TEST(Planner, CompareHasAnExpertParallelRowForMoeModels) {
  EXPECT_EQ(default_strategies(tensor::find_model_config("llama3-8b")),
            "ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,auto");
  EXPECT_EQ(default_strategies(tensor::find_model_config("mixtral-8x7b")),
            "ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,ep,auto");
  Planner p(tensor::find_model_config("mixtral-8x7b"), cluster("dgx-h100"),
            {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
  const std::vector<Strategy> s = parse_strategies("ep,auto");
  const std::vector<Planner::Best> best = p.best_of_each({}, {s[0].keep, s[1].keep}, nullptr);
  ASSERT_TRUE(best[0].best.has_value());
  EXPECT_GT(best[0].best->config.ep, 1);
  EXPECT_EQ(best[0].best->config.cp, 1);
  EXPECT_LE(best[1].best->step_time_s, best[0].best->step_time_s);
}

TEST(Planner, CpuLocalRunsFourRanksOnOneHost) {
  Planner p(tensor::find_model_config("gpt2"), cluster("cpu-local"),
            {.gpus = 4, .seq = 128, .global_batch = 8}, {});
  Bill bill;
  const PlanResult r =
      p.estimate(default_config(p.setup(), {}, Precision::kBf16), DimOrder::kTpInner, &bill);
  EXPECT_EQ(r.config.dp, 4);
  EXPECT_GT(r.step_time_s, 0);
  // fp32 Adam without a master copy: 16 bytes per parameter (ZeRO 0): 4 + 4 + 8.
  EXPECT_EQ(bill.parameter_bytes + bill.gradient_bytes + bill.optimizer_bytes, 124'439'808 * 16);
  const nlohmann::ordered_json doc = plan_to_json(plan_file(p, r, "gpt2"));
  EXPECT_EQ(doc["mesh"]["shape"], nlohmann::ordered_json({1, 4, 1, 1, 1}));
  EXPECT_EQ(doc["parameters"].size(), 148u);  // GPT-2's tensors, the tied output layer once
}

}  // namespace
}  // namespace shardplan::planner
