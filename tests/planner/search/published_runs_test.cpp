// The planner against published end-to-end training runs: Megatron-LM SC21 Table 1, the table the
// A100 file is calibrated on (docs/cost-model.md §8.5); Korthikanti et al. 2022, the same machine
// with the Megatron-LM of a year later; Llama 3 405B and Megatron-Bridge FP8 on H100. Each run's
// published parallelism pinned, the rest searched (the authors tuned it). The bar is the issue's:
// 10 % on every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/cluster.h"
#include "collectives/topology.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/step_model.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

collectives::Cluster a100() {
  return collectives::load_cluster(collectives::resolve_cluster("dgx-a100-80g"));
}

// The A100 file states the hardware's GEMM ceiling, the best-shape maximum measured with CUDA
// 12.1 (267.9 of 312 TFLOP/s = 0.859; S. Bekman, ml-engineering, MAMF table). SC21 Table 1 ran
// the software of early 2021, which reached 0.78 of it: the megatron-2021 stack's
// gemm_efficiency, calibrated on that table (docs/cost-model.md §8.5). Korthikanti et al. ran the
// Megatron-LM of 2022, about 10 % faster, which the default stack prices.
PlannerOptions megatron_2021() {
  PlannerOptions o;
  o.stack = load_stack(resolve_stack("megatron-2021"));
  o.attention = tensor::AttentionImpl::kMath;  // the configs say "eager", as the CLI reads
  return o;
}

// Megatron-LM SC21 Table 1 (Narayanan et al. 2021, arXiv 2104.04473): each row's tp, pp, dp and
// full recomputation pinned on DGX A100 80 GB, the rest searched; TFLOP/s per GPU from the
// paper's Eq. 3, F = 96 B s l h^2 (1 + s / 6h + V / 16lh), over GPUs x step time.
TEST(PublishedRuns, MegatronSc21Table1WithinTenPercent) {
  struct Row {
    const char* model;
    int64_t layers, hidden, tp, pp, gpus, batch;
    double tflops;
  };
  const collectives::Cluster c = a100();
  double worst = 0;
  for (const Row& r : {Row{"megatron-gpt-1.7", 24, 2304, 1, 1, 32, 512, 137},
                       Row{"megatron-gpt-3.6", 30, 3072, 2, 1, 64, 512, 138},
                       Row{"megatron-gpt-7.5", 36, 4096, 4, 1, 128, 512, 142},
                       Row{"megatron-gpt-18.4", 40, 6144, 8, 1, 256, 1024, 135},
                       Row{"megatron-gpt-39.1", 48, 8192, 8, 2, 512, 1536, 138},
                       Row{"megatron-gpt-76.1", 60, 10240, 8, 4, 1024, 1792, 140},
                       Row{"megatron-gpt-145.6", 80, 12288, 8, 8, 1536, 2304, 148},
                       Row{"megatron-gpt-310.1", 96, 16384, 8, 16, 1920, 2160, 155},
                       Row{"megatron-gpt-529.6", 105, 20480, 8, 35, 2520, 2520, 163},
                       Row{"megatron-gpt-1t", 128, 25600, 8, 64, 3072, 3072, 163}}) {
    SCOPED_TRACE(r.model);
    constexpr double s = 2048, v = 51200;
    const double l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden);
    const double flops =
        96 * static_cast<double>(r.batch) * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
    Planner p(tensor::find_model_config(r.model), c,
              {.gpus = r.gpus, .seq = 2048, .global_batch = r.batch}, megatron_2021());
    Pins pins;
    pins.tp = r.tp;
    pins.pp = r.pp;
    pins.dp = r.gpus / (r.tp * r.pp);
    pins.recompute = tensor::RecomputePolicy::kFull;
    const SearchResult res = p.search(pins, 1);
    ASSERT_FALSE(res.top.empty());
    const double tflops =
        flops / (static_cast<double>(r.gpus) * res.top.front().step_time_s) / 1e12;
    const double error = tflops / r.tflops - 1;
    EXPECT_LT(std::abs(error), 0.10) << tflops << " TFLOP/s per GPU";
    worst = std::max(worst, std::abs(error));
  }
  // The calibration is the value that makes the worst row least (docs/cost-model.md §8.5): 7.3 %.
  EXPECT_LT(worst, 0.08);
}

// Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (arXiv
// 2205.05198) Tables 3 and 5: end-to-end iteration times, tensor parallelism with full
// recomputation.
struct PublishedRun {
  const char* model;
  int64_t pp;
  int64_t gpus;
  int64_t batch;
  double full_recompute_s;  // tensor parallelism, full recomputation (Table 5 "Full recompute")
};

// Table 3: tensor parallelism 8 and sequence 2048 on every row, one pipeline (dp 1).
constexpr PublishedRun kTable5[] = {
    {"megatron-gpt-22b", 1, 8, 4, 1.42},
    {"gpt3-175b", 8, 64, 64, 18.13},
    {"megatron-gpt-529.6", 35, 280, 280, 49.05},  // MT-NLG 530B: 128 heads, 20480, 105 layers
    {"megatron-gpt-1t", 64, 512, 512, 94.42},
};

double full_recompute_seconds(const PublishedRun& run, const collectives::Cluster& cluster,
                              PlannerOptions options) {
  options.attention = tensor::AttentionImpl::kMath;  // the configs say "eager"
  Planner p(tensor::find_model_config(run.model), cluster,
            {.gpus = run.gpus, .seq = 2048, .global_batch = run.batch}, options);
  Pins pins;
  pins.tp = 8;
  pins.pp = run.pp;
  pins.dp = 1;
  pins.zero = 0;
  pins.recompute = tensor::RecomputePolicy::kFull;
  pins.sequence_parallel = false;
  const SearchResult r = p.search(pins, 1);
  return r.top.empty() ? 0 : r.top.front().step_time_s;
}

TEST(PublishedRuns, KorthikantiTable5FullRecomputeWithinTenPercent) {
  for (const PublishedRun& run : kTable5) {
    SCOPED_TRACE(run.model);
    const double predicted = full_recompute_seconds(run, a100(), {});
    EXPECT_LT(std::abs(predicted / run.full_recompute_s - 1), 0.10)
        << "predicted " << predicted << " s against " << run.full_recompute_s << " s published";
    // The 2021 software of SC21 is slower by the software's gain: 11-15 % on these rows
    // (docs/cost-model.md §8.5).
    const double calibrated = full_recompute_seconds(run, a100(), megatron_2021());
    EXPECT_GT(calibrated / run.full_recompute_s - 1, 0.05) << calibrated << " s";
    EXPECT_LT(calibrated / run.full_recompute_s - 1, 0.20) << calibrated << " s";
  }
}

// Korthikanti et al. 2022 Table 4: one transformer layer of their 22B model (h 6144, 48 heads,
// tensor parallelism 8 on one DGX A100, micro-batch 4, sequence 2048), forward and backward
// milliseconds as measured; the backward includes the recomputed forward. The planner prices
// the same layer, at the CUDA 12.1 ceiling as Table 5 above, from its trace: compute plus the
// tensor-parallel collectives (full recomputation runs the forward's again).
struct LayerRun {
  tensor::RecomputePolicy recompute;
  bool sequence_parallel;
  double forward_ms;
  double backward_ms;
};
constexpr LayerRun kTable4[] = {
    {tensor::RecomputePolicy::kNone, false, 7.7, 11.9},       // baseline, no recompute
    {tensor::RecomputePolicy::kNone, true, 7.2, 11.8},        // sequence parallelism
    {tensor::RecomputePolicy::kFull, false, 7.7, 19.5},       // baseline with recompute
    {tensor::RecomputePolicy::kSelective, false, 7.7, 13.2},  // selective recompute
    {tensor::RecomputePolicy::kSelective, true, 7.2, 13.1},   // selective + sequence
};

TEST(PublishedRuns, KorthikantiTable4LayerTimes) {
  const collectives::Cluster node_of_8 = collectives::with_gpus(a100(), 8);
  const tensor::ModelConfig cfg = tensor::find_model_config("megatron-gpt-22b");
  const ComputeModel compute = compute_model(node_of_8, Precision::kBf16);
  std::vector<int64_t> node(8);
  std::iota(node.begin(), node.end(), 0);
  const collectives::GroupLinks tp_links = collectives::Topology(node_of_8).group_links(node);
  double baseline_ms = 0;
  for (const LayerRun& run : kTable4) {
    SCOPED_TRACE(testing::Message()
                 << tensor::to_string(run.recompute) << " sp " << run.sequence_parallel);
    const TracedModel t = trace_one_block(cfg, {.micro_batch = 4,
                                                .seq = 2048,
                                                .recompute = run.recompute,
                                                .attention = tensor::AttentionImpl::kMath,
                                                .dtype = tensor::DType::kBFloat16});
    const RankWork w = rank_work(t, compute, {.tp = 8, .sequence_parallel = run.sequence_parallel});
    const TpSeconds tp = tp_seconds(w.block(), tp_links);
    const bool full = run.recompute == tensor::RecomputePolicy::kFull;
    const double fwd = 1e3 * (w.block().forward_s + tp.forward);
    const double bwd = 1e3 * (w.block().backward_s + w.block().recompute_s + tp.backward +
                              (full ? tp.forward : 0));
    if (baseline_ms == 0) baseline_ms = fwd + bwd;
    const double published = run.forward_ms + run.backward_ms;
    EXPECT_LT(std::abs(fwd / run.forward_ms - 1), 0.10) << "forward " << fwd << " ms";
    EXPECT_LT(std::abs(bwd / run.backward_ms - 1), 0.10) << "backward " << bwd << " ms";
    EXPECT_LT(std::abs((fwd + bwd) / published - 1), 0.05) << "layer " << fwd + bwd << " ms";
    // The table's overhead column (against the baseline's 19.6 ms): -3 %, +39 %, +7 %, +4 %.
    EXPECT_NEAR((fwd + bwd) / baseline_ms, published / 19.6, 0.03);
  }
}

// Llama 3 405B pre-training on H100 (Llama Team 2024, arXiv 2407.21783, Table 4): tp 8, pp 16,
// sequence 8192, 2048 sequences per step, BF16 MFU 43 % on 8,192 GPUs (dp 64) and 41 % on 16,384
// (dp 128). Each row's tp, pp and dp pinned on the dgx-h100 file, the rest searched; the planner's
// MFU (6 N + 12 L H Q s per token, docs/cost-model.md §2.4) within 10 % of the published.
TEST(PublishedRuns, Llama3On8kAnd16kH100sWithinTenPercent) {
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  const tensor::ModelConfig cfg = tensor::find_model_config("llama3.1-405b");
  for (const auto& [gpus, dp, mfu] : {std::tuple{8192, 64, 0.43}, std::tuple{16384, 128, 0.41}}) {
    SCOPED_TRACE(gpus);
    Planner p(cfg, h100, {.gpus = gpus, .seq = 8192, .global_batch = 2048}, {});
    Pins pins;
    pins.tp = 8;
    pins.pp = 16;
    pins.dp = dp;
    const SearchResult r = p.search(pins, 1);
    ASSERT_FALSE(r.top.empty());
    EXPECT_LT(std::abs(r.top.front().mfu / mfu - 1), 0.10) << "MFU " << r.top.front().mfu;
    // The authors' split: one layer fewer on the first and the last stage (§3.3.2).
    const std::vector<int64_t> split = partition_from_ends(126, 16, r.top.front().stages).counts();
    EXPECT_EQ(split.front(), 7);
    EXPECT_EQ(split.back(), 7);
  }
}

// NVIDIA Megatron-Bridge's published pre-training throughput on DGX H100 with FP8 (current
// scaling), docs/performance-summary.md of NVIDIA-NeMo/Megatron-Bridge (25.11 and 26.02 NeMo
// containers): each row's tp, pp, cp, virtual stages and micro-batch 1 pinned with --precision
// fp8, the rest searched; the step time within 10 %. docs/cost-model.md §8.5 has the
// Llama 3 8B row too, which this model prices 25 % fast.
TEST(PublishedRuns, MegatronBridgeFp8OnH100WithinTenPercent) {
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  struct Row {
    const char* model;
    int64_t gpus, batch, tp, pp, cp, v;
    double tokens_per_gpu;
  };
  for (const Row& r :
       {Row{"llama3-70b", 64, 128, 4, 8, 1, 5, 1602}, Row{"llama3-70b", 64, 256, 4, 8, 1, 5, 1621},
        Row{"llama3.1-405b", 1024, 512, 8, 8, 2, 8, 292},
        Row{"llama3.1-405b", 1024, 1536, 8, 8, 2, 8, 311}}) {
    SCOPED_TRACE(std::string(r.model) + " batch " + std::to_string(r.batch));
    Planner p(tensor::find_model_config(r.model), h100,
              {.gpus = r.gpus, .seq = 8192, .global_batch = r.batch},
              {.precision = Precision::kFp8,
               .stack = {},
               .attention = tensor::AttentionImpl::kFlash,
               .progress = {}});
    Pins pins;
    pins.tp = r.tp;
    pins.pp = r.pp;
    pins.cp = r.cp;
    pins.dp = r.gpus / (r.tp * r.pp * r.cp);
    pins.virtual_stages = r.v;
    pins.micro_batch = 1;
    const SearchResult s = p.search(pins, 1);
    ASSERT_FALSE(s.top.empty());
    // The step time's error, as docs/cost-model.md §8.5 reports every row: published seconds
    // per step are the tokens per step over the published tokens/s.
    const double per_gpu = s.top.front().tokens_per_s / static_cast<double>(r.gpus);
    EXPECT_LT(std::abs(r.tokens_per_gpu / per_gpu - 1), 0.10) << per_gpu << " tokens/s/GPU";
  }
}

}  // namespace
}  // namespace shardplan::planner
