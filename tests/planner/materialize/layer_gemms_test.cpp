// layer_gemms: the GEMMs rehearse times, at one rank's local shapes (Note [Layer GEMMs]), checked
// against Llama 3 8B's and Mixtral 8x7B's dimensions worked out by hand from their config.json.
#include "planner/materialize/layer_gemms.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "collectives/cluster.h"
#include "planner/candidate/stack_profile.h"
#include "planner/cost/compute_calibration.h"
#include "planner/plan/plan_file.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"
#include "tests/planner/materialize/pinned_plan.h"

namespace shardplan::planner {
namespace {

const LayerGemm* find(const std::vector<LayerGemm>& gs, const std::string& module,
                      const std::string& pass) {
  for (const LayerGemm& g : gs) {
    if (g.pass == pass && g.name.find(module) != std::string::npos) return &g;
  }
  return nullptr;
}

void expect_shape(const LayerGemm* g, int64_t batch, int64_t m, int64_t n, int64_t k, int64_t count,
                  const std::string& what) {
  ASSERT_NE(g, nullptr) << what;
  EXPECT_EQ(g->shape.batch, batch) << what;
  EXPECT_EQ(g->shape.m, m) << what;
  EXPECT_EQ(g->shape.n, n) << what;
  EXPECT_EQ(g->shape.k, k) << what;
  EXPECT_EQ(g->count, count) << what;
  EXPECT_DOUBLE_EQ(g->flops, 2.0 * batch * m * n * k) << what;
  // Never faster than the H100's dense bf16 peak (989.4 TFLOP/s, the cluster file's).
  EXPECT_GE(g->predicted_s, g->flops / 989.4e12) << what;
}

TEST(LayerGemms, LlamaThreeEightBOnTensorParallelEight) {
  // hidden 4096, 32 query heads and 8 key/value heads of 128, MLP 14336 (config.json); tp 8:
  // column-parallel q 4096 / 8 = 512, k and v 1024 / 8 = 128, gate and up 14336 / 8 = 1792;
  // row-parallel o and down reduce over 512 and 1792. Rows: micro-batch x 4096 tokens.
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, /*tp=*/8, /*pp=*/2, /*cp=*/1, 1, /*dp=*/4);
  const int64_t m = plan.config.micro_batch * 4096;
  const std::vector<LayerGemm> gs = layer_gemms(plan);
  expect_shape(find(gs, "q_proj", "fwd"), 1, m, 512, 4096, 1, "q fwd");
  expect_shape(find(gs, "k_proj", "fwd"), 1, m, 128, 4096, 2, "k and v fwd");
  expect_shape(find(gs, "o_proj", "fwd"), 1, m, 4096, 512, 1, "o fwd");
  expect_shape(find(gs, "gate_proj", "fwd"), 1, m, 1792, 4096, 2, "gate and up fwd");
  expect_shape(find(gs, "down_proj", "fwd"), 1, m, 4096, 1792, 1, "down fwd");
  // Backward: the input gradient reduces over N, the weight gradient over the M rows.
  expect_shape(find(gs, "q_proj", "dgrad"), 1, m, 4096, 512, 1, "q dgrad");
  expect_shape(find(gs, "q_proj", "wgrad"), 1, 512, 4096, m, 1, "q wgrad");
  expect_shape(find(gs, "down_proj", "wgrad"), 1, 4096, 1792, m, 1, "down wgrad");
  // 7 linear modules, 3 passes each, 2 pairs of equal shapes: 15 entries, 21 GEMMs.
  int64_t gemms = 0;
  for (const LayerGemm& g : gs) gemms += g.count;
  EXPECT_EQ(gs.size(), 15u);
  EXPECT_EQ(gemms, 21);
  for (const LayerGemm& g : gs) EXPECT_EQ(g.name.find("attention"), std::string::npos) << g.name;
}

TEST(LayerGemms, ContextParallelShortensTheRows) {
  const PlanFile plan = plan_of("llama3.1-8b", 8, 16384, /*tp=*/1, /*pp=*/1, /*cp=*/4, 1, /*dp=*/2);
  const std::vector<LayerGemm> gs = layer_gemms(plan);
  // 16384 tokens over cp 4: 4096 per rank, at full width (tp 1), where q and o are one shape.
  const LayerGemm* q = find(gs, "q_proj", "fwd");
  expect_shape(q, 1, plan.config.micro_batch * 4096, 4096, 4096, 2, "q and o fwd at cp 4");
  EXPECT_NE(q->name.find("o_proj"), std::string::npos) << q->name;
}

TEST(LayerGemms, ExpertsAreABatchOfTheRanksExperts) {
  // Mixtral 8x7B: 8 experts of 14336, top 2; ep 8 holds one expert per rank, fed by the tokens of
  // 8 ranks: a batch of 1 GEMM. At tp 1 its gate and up projections (one grouped weight of
  // 2 x 14336 = 28672 rows) map 4096 -> 28672 and its down projection 14336 -> 4096.
  const PlanFile plan = plan_of("mixtral-8x7b", 64, 4096, /*tp=*/1, /*pp=*/1, /*cp=*/1, /*ep=*/8);
  const std::vector<LayerGemm> gs = layer_gemms(plan);
  bool expert = false;
  for (const LayerGemm& g : gs) {
    if (g.name.find("experts") == std::string::npos || g.pass != "fwd") continue;
    expert = true;
    EXPECT_EQ(g.shape.batch, 1) << g.name;
    EXPECT_TRUE((g.shape.n == 28672 && g.shape.k == 4096) ||
                (g.shape.n == 4096 && g.shape.k == 14336))
        << g.name << " " << g.shape.n << " x " << g.shape.k;
  }
  EXPECT_TRUE(expert);
}

TEST(LayerGemms, TheRehearsalsComputeObjectIsWhatCalibrateFits) {
  // A GPU rehearsal's "compute" (as rehearse --device cuda writes it, timings made up here) is a
  // measurement document calibrate_compute reads: the copy at 0.9 of the H100's 3350 GB/s fits
  // memory_efficiency 0.9 by hand, and every GEMM row counts.
  const PlanFile plan = plan_of("llama3-8b", 64, 4096, /*tp=*/8, /*pp=*/2, /*cp=*/1, 1, /*dp=*/4);
  const std::vector<LayerGemm> gs = layer_gemms(plan);
  LayerTimings t;
  t.device = "NVIDIA H100 80GB HBM3";
  t.multiprocessors = 132;
  t.memory_bytes = 85'520'809'984;
  t.cuda = "13.0";
  t.copy_bytes_per_s = 0.9 * 3350e9;
  for (const LayerGemm& g : gs) t.measured_s.push_back(g.flops / 600e12);  // 600 TFLOP/s each
  const nlohmann::ordered_json doc = compute_measurement_json(gs, t);
  ASSERT_EQ(doc["bf16_gemm"].size(), gs.size());
  EXPECT_DOUBLE_EQ(doc["bf16_gemm"][0]["flops_per_s"].get<double>(), 600e12);
  // One layer kind; its sums are count x each.
  ASSERT_EQ(doc["layers"].size(), 1u);
  double predicted = 0, measured = 0;
  for (size_t i = 0; i < gs.size(); ++i) {
    predicted += static_cast<double>(gs[i].count) * gs[i].predicted_s;
    measured += static_cast<double>(gs[i].count) * t.measured_s[i];
  }
  EXPECT_DOUBLE_EQ(doc["layers"][0]["predicted_s"].get<double>(), predicted);
  EXPECT_DOUBLE_EQ(doc["layers"][0]["measured_s"].get<double>(), measured);

  const ComputeCalibration r =
      calibrate_compute(collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
                        default_stack(), nlohmann::json::parse(doc.dump()), "r.json: compute");
  bool memory = false, gemm = false;
  for (const ComputeFit& f : r.fits) {
    if (f.what == "memory_efficiency") {
      memory = true;
      EXPECT_NEAR(f.fitted, 0.9, 1e-12);
    }
    if (f.what == "matmul_efficiency.bf16") {
      gemm = true;
      EXPECT_GT(f.points, 0);
      EXPECT_LE(f.points, static_cast<int64_t>(gs.size()));
      // 600 of the 989.4 TFLOP/s peak, over shape factors of at most 1: at least 0.606.
      EXPECT_GE(f.fitted, 600.0 / 989.4 - 1e-9);
      EXPECT_LE(f.fitted, 1.0);
    }
  }
  EXPECT_TRUE(memory);
  EXPECT_TRUE(gemm);
}

}  // namespace
}  // namespace shardplan::planner
