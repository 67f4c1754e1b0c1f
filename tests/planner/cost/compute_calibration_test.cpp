// `calibrate --compute` (Note [Compute calibration]): each figure by hand on synthetic
// measurements, the real H100 measurement's fit, and bad measurements as one named line.
#include "planner/cost/compute_calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

collectives::Cluster h100() {
  return collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
}

// 8192^3 on the H100's 132 SMs: 64 x 64 = 4096 tiles of 128 x 128 in ceil(4096 / 132) = 32
// waves, 4096 / (32 x 132) = 0.96970; K / (K + 64) = 8192 / 8256 = 0.99225.
constexpr double kShape8192 = (4096.0 / (32 * 132)) * (8192.0 / 8256);

nlohmann::json synthetic() {
  const double peak = 989.4e12;
  nlohmann::json gemms = nlohmann::json::array();
  for (const double ceiling : {0.6, 0.8, 0.7}) {
    gemms.push_back(
        {{"m", 8192}, {"n", 8192}, {"k", 8192}, {"flops_per_s", ceiling * peak * kShape8192}});
  }
  // 1024^3: 64 tiles on 132 SMs, a shape factor of 0.46, not ceiling-bound: left out of the
  // median however slow it ran.
  gemms.push_back({{"m", 1024}, {"n", 1024}, {"k", 1024}, {"flops_per_s", 0.1 * peak}});
  return {{"device", "NVIDIA H100 80GB HBM3"},
          {"streaming_multiprocessors", 132},
          {"memory_bytes", 85000000000},
          {"torch", "2.11"},
          {"cuda", "13.0"},
          {"hbm", {{"copy_bytes_per_s", 3.0e12}}},
          {"bf16_gemm", gemms}};
}

const ComputeFit& fit(const ComputeCalibration& r, const std::string& what) {
  for (const ComputeFit& f : r.fits) {
    if (f.what == what) return f;
  }
  throw std::runtime_error("no fit " + what);
}

TEST(ComputeCalibration, EachFigureByHand) {
  const ComputeCalibration r = calibrate_compute(h100(), default_stack(), synthetic(), "m.json");
  // 85e9 bytes are 85 GB; a 3.0 TB/s copy over the datasheet 3.35 TB/s.
  EXPECT_DOUBLE_EQ(r.cluster.accelerator.memory_gb.value, 85.0);
  EXPECT_NEAR(r.cluster.accelerator.memory_efficiency->value, 3.0 / 3.35, 1e-12);
  // The median of the three ceiling-bound GEMMs, 0.6, 0.7 and 0.8; the small one left out.
  const ComputeFit& g = fit(r, "matmul_efficiency.bf16");
  EXPECT_NEAR(g.fitted, 0.7, 1e-9);
  EXPECT_EQ(g.points, 3);
  EXPECT_NEAR(g.low, 0.6, 1e-9);
  EXPECT_NEAR(g.high, 0.8, 1e-9);
  EXPECT_DOUBLE_EQ(g.previous, 0.801);
  EXPECT_NEAR(r.cluster.accelerator.matmul_efficiency.at("bf16").value, 0.7, 1e-9);
  EXPECT_NEAR(r.cluster.accelerator.matmul_efficiency.at("fp16").value, 0.7, 1e-9);
  EXPECT_THAT(r.cluster.accelerator.matmul_efficiency.at("bf16").source, HasSubstr("m.json"));
  // fp8 was not measured: it keeps the file's figure. No layers: no stack fit.
  EXPECT_DOUBLE_EQ(r.cluster.accelerator.matmul_efficiency.at("fp8").value, 0.801);
  EXPECT_FALSE(r.stack_fitted);
}

// A layer measured at (rest / 0.8 + attention) seconds, its attention and the rest priced on the
// fitted cluster, gives back 0.8; the median of three such layers at 0.7, 0.8 and 0.9 is 0.8.
TEST(ComputeCalibration, StackEfficiencyInvertsTheLayerPrice) {
  nlohmann::json m = synthetic();
  const ComputeCalibration cluster_only = calibrate_compute(h100(), default_stack(), m, "m.json");
  const ComputeModel a = compute_model(cluster_only.cluster, Precision::kBf16);
  const RankWork w = rank_work(
      trace_one_block(tensor::find_model_config("llama3-8b"), {.micro_batch = 1, .seq = 4096}), a,
      {.tp = 1});
  const double attention = w.block().attention_s;
  const double rest = w.block().forward_s + w.block().backward_s - attention;
  m["llama_layers"] = nlohmann::json::array();
  for (const double e : {0.9, 0.7, 0.8}) {
    m["llama_layers"].push_back({{"model", "llama3-8b"},
                                 {"tp", 1},
                                 {"seq", 4096},
                                 {"micro_batch", 1},
                                 {"forward_s", (rest / e + attention) / 3},
                                 {"backward_s", (rest / e + attention) * 2 / 3}});
  }
  const ComputeCalibration r = calibrate_compute(h100(), default_stack(), m, "m.json");
  ASSERT_TRUE(r.stack_fitted);
  EXPECT_NEAR(r.stack.compute_efficiency, 0.8, 1e-9);
  EXPECT_NEAR(fit(r, "compute_efficiency").low, 0.7, 1e-9);
}

// The project's own H100 measurement (tests/data/gpu_measured_h100.json, §8.6): sustained GEMMs
// sit below the file's boost-clock ceiling of 0.801, and PyTorch eager layers run within 10 %
// of the price on that sustained ceiling.
TEST(ComputeCalibration, TheMeasuredH100) {
  std::ifstream in(std::string(SHARDPLAN_TEST_DATA_DIR) + "/gpu_measured_h100.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  const ComputeCalibration r =
      calibrate_compute(h100(), load_stack(resolve_stack("pytorch")), m, "gpu_measured_h100.json");
  const ComputeFit& g = fit(r, "matmul_efficiency.bf16");
  EXPECT_LT(g.fitted, 0.801);
  EXPECT_GT(g.fitted, 0.6);
  EXPECT_NEAR(fit(r, "memory_efficiency").fitted, 3005700010191.521 / 3.35e12, 1e-12);
  ASSERT_TRUE(r.stack_fitted);
  EXPECT_GT(r.stack.compute_efficiency, 0.9);
  EXPECT_LE(r.stack.compute_efficiency, 1.0);
  EXPECT_EQ(r.attention_ratio.size(), m["attention"].size());
}

// Attention rows with rehearse's optional fields (keys, value_dim, causal; Note [Rehearsed
// attention]), priced by hand. 132 batch x heads on the H100's 132 SMs fill whole waves:
//   Q K^T 1024 x 1024 reducing 128: 64 tiles each, 64 waves; reduction 128 / (128 + 64) = 2/3;
//   P V 1024 x 128 reducing 1024: 8 tiles each, 8 waves; reduction 1024 / 1088;
//   with values of 64: P V's tile is half full (1024 x 64 of 1024 x 128), and against 2048 keys
//   Q K^T has 128 tiles each (128 waves) and P V reduces 2048 / 2112.
// The pair's rate is the FLOP-weighted harmonic mean (E + Ev) / (E / qk + Ev / pv), doubled by a
// causal mask; the forward does 2 L S (E + Ev) per batch x head; a row measures forward +
// backward, 1 + 2 / 0.8 + 0.5 = 4 forwards.
TEST(ComputeCalibration, AttentionRowsOfRehearsedCalls) {
  nlohmann::json m = synthetic();
  const ComputeCalibration base = calibrate_compute(h100(), default_stack(), m, "m.json");
  const ComputeModel a = attention_compute(compute_model(base.cluster, Precision::kBf16));
  auto forward = [&](double keys, double value_dim, double qk, double pv) {
    const double pair = (128 + value_dim) / (128 / qk + value_dim / pv);
    return 2 * 132 * 1024 * keys * (128 + value_dim) / (a.peak_flops * a.matmul_efficiency * pair);
  };
  const double plain = forward(1024, 128, 2.0 / 3, 1024.0 / 1088);
  const double narrow = forward(2048, 64, 2.0 / 3, 0.5 * 2048 / 2112);
  auto row = [](int64_t keys, int64_t value_dim, bool causal, double fwd) {
    return nlohmann::json{{"batch", 2},       {"heads", 66},      {"seq", 1024},
                          {"keys", keys},     {"head_dim", 128},  {"value_dim", value_dim},
                          {"causal", causal}, {"forward_s", fwd}, {"backward_s", 3 * fwd}};
  };
  m["attention"] = {row(1024, 128, false, plain), row(1024, 128, true, plain),
                    row(2048, 64, false, narrow)};
  const ComputeCalibration r = calibrate_compute(h100(), default_stack(), m, "m.json");
  ASSERT_EQ(r.attention_ratio.size(), 3u);
  EXPECT_NEAR(r.attention_ratio[0], 1.0, 1e-12);
  EXPECT_NEAR(r.attention_ratio[1], 0.5, 1e-12);  // a causal call skips half: priced at half
  EXPECT_NEAR(r.attention_ratio[2], 1.0, 1e-12);
}

TEST(ComputeCalibration, BadMeasurementsNameTheField) {
  nlohmann::json m = synthetic();
  m["streaming_multiprocessors"] = 114;
  EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("measured on a GPU with 114 SMs")));
  m = synthetic();
  m["bf16_gemm"][0]["flops_per_s"] = 0;
  EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("bf16_gemm[0].flops_per_s")));
  m = synthetic();
  m["hbm"]["copy_bytes_per_s"] = 4e12;  // faster than the datasheet
  EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("expected a fraction in (0, 1]")));
  m = synthetic();
  m.erase("hbm");
  EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("hbm")));
  m = synthetic();
  m["llama_layers"] = {{{"model", "no-such-model"},
                        {"tp", 1},
                        {"seq", 8},
                        {"micro_batch", 1},
                        {"forward_s", 1.0},
                        {"backward_s", 1.0}}};
  EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
              ThrowsMessage<Error>(HasSubstr("llama_layers[0].model")));
}

// What a GPU cannot have measured: a pass that took no time, a layer at a tensor-parallel degree
// that does not divide its heads, a GEMM whose operands exceed the device, a device of one byte,
// a rate of zero, a key nobody reads.
TEST(ComputeCalibration, ImpossibleMeasurementsAreRefused) {
  const auto refused = [](const nlohmann::json& m, const std::string& what) {
    EXPECT_THAT([&] { (void)calibrate_compute(h100(), default_stack(), m, "m.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << m.dump();
  };
  const nlohmann::json layer = {{"model", "llama3-8b"}, {"tp", 1},           {"seq", 4096},
                                {"micro_batch", 1},     {"forward_s", 0.01}, {"backward_s", 0.02}};
  nlohmann::json m = synthetic();
  m["llama_layers"] = {layer};
  m["llama_layers"][0]["backward_s"] = 0.0;
  refused(m, "field 'llama_layers[0].backward_s': expected a positive time");
  m["llama_layers"] = {layer};
  m["llama_layers"][0]["tp"] = 3;  // llama3-8b has 32 heads
  refused(m, "field 'llama_layers[0].tp': 3 does not divide the model's 32 attention heads");
  m["llama_layers"][0]["tp"] = int64_t{1} << 40;
  refused(m, "field 'llama_layers[0].tp': expected an integer in [1, 32]");
  m = synthetic();
  m["attention"] = {{{"batch", 1},
                     {"heads", 32},
                     {"seq", 4096},
                     {"head_dim", 128},
                     {"forward_s", -1.0},
                     {"backward_s", 0.01}}};
  refused(m, "field 'attention[0].forward_s': expected a positive time");
  m = synthetic();
  // 2^20 x 2^20 x 2^20 in bf16: 3 x 2^40 elements x 2 bytes = 6.6 TB on an 85 GB device.
  m["bf16_gemm"][0]["m"] = m["bf16_gemm"][0]["n"] = m["bf16_gemm"][0]["k"] = int64_t{1} << 20;
  refused(m, "field 'bf16_gemm[0].m': a GEMM of batch 1 x 1048576 x 1048576 x 1048576 needs more");
  m = synthetic();
  m["memory_bytes"] = 1;
  refused(m, "field 'memory_bytes': expected an integer in [1000000, 100000000000000], got 1");
  m = synthetic();
  m["hbm"]["copy_bytes_per_s"] = 0.0;
  refused(m, "field 'hbm.copy_bytes_per_s': expected a positive rate");
  m = synthetic();
  m["hbm"]["triad_bytes_per_s"] = -5.0;
  refused(m, "field 'hbm.triad_bytes_per_s': expected a positive rate");
  m = synthetic();
  m["hbm_copy"] = 3e12;
  refused(m, "field 'hbm_copy': unknown key");
  // The measuring scripts' informational keys pass.
  m = synthetic();
  m["idle"] = {{"sm_clock_mhz", 1980}};
  m["source"] = "test";
  EXPECT_NO_THROW((void)calibrate_compute(h100(), default_stack(), m, "m.json"));
}

}  // namespace
}  // namespace shardplan::planner
