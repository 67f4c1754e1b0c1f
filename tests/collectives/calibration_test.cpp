// Calibration from nccl-tests logs: logs synthesized by scripts/gen_nccl_tests_logs.py from a known
// per-step latency and bandwidth give those numbers back (exactly, or within the noise), the
// calibrated cluster prices the logged runs at the logged times, and logs that cannot calibrate a
// link are refused with the reason.
#include "collectives/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "base/error.h"
#include "collectives/cost_model.h"
#include "collectives/topology.h"

namespace shardplan::collectives {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

NcclTestsLog data(const char* name) {
  return load_nccl_tests_log(std::string(SHARDPLAN_TEST_DATA_DIR) + "/nccl_tests/" + name);
}
collectives::Cluster cluster(const char* name) {
  return collectives::load_cluster(collectives::resolve_cluster(name));
}

// A current-format log of `kind` on `hosts` x `per_host` ranks with t(S) = a + S * f / (b * 1e3),
// times printed with 2 decimals.
std::string synth(const std::string& kind, int hosts, int per_host, double a, double f, double b) {
  std::ostringstream os;
  os << "# Collective test starting: " << kind << "_perf\n";
  for (int r = 0; r < hosts * per_host; ++r) {
    os << "#  Rank " << r << " Group 0 Pid " << r << " on host" << r / per_host << " device "
       << r % per_host << " [0] GPU\n";
  }
  os << "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n";
  for (int64_t s = 1 << 20; s <= (int64_t{1} << 30); s *= 4) {
    char t[32];
    std::snprintf(t, sizeof t, "%.2f", a + static_cast<double>(s) * f / (b * 1e3));
    os << s << " " << s / 4 << " float sum -1 " << t << " 1 1 0 " << t << " 1 1 0\n";
  }
  return os.str();
}

TEST(Calibration, ExactIntraNodeLogGivesItsLatencyAndBandwidthBack) {
  // Generated with t = 15.4 + S / 200000 us: nccl-tests' line a = 15.4 us, busbw = S x 1.75 / t
  // -> 350 GB/s; per step (15.4 - 8.4 base) / 14 steps = 0.5 us.
  const NcclTestsLog log = data("all_reduce_perf_h100_8gpu.log");
  const LogFit line = fit_log(log);
  EXPECT_NEAR(line.latency_us, 15.4, 1e-9);
  EXPECT_NEAR(line.busbw_gbps, 350, 1e-9);
  EXPECT_EQ(line.points, 32);  // 16 rows, out-of-place and in-place
  EXPECT_LT(line.rms_relative_residual, 1e-12);

  const std::vector<CalibrationInput> in = {{log, CalibratedLink::kIntra}};
  const CalibrationResult r = calibrate(cluster("dgx-h100"), in);
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_NEAR(r.links[0].latency_us, 0.5, 1e-9);
  EXPECT_NEAR(r.links[0].bandwidth_gbps, 350, 1e-9);
  EXPECT_DOUBLE_EQ(r.links[0].previous_bandwidth_gbps, 370.8);
  EXPECT_NEAR(r.cluster.intra.latency_us.value, 0.5, 1e-9);
  EXPECT_NEAR(r.cluster.intra.bus_bandwidth_gbps.value, 350, 1e-9);
  EXPECT_THAT(r.cluster.intra.bus_bandwidth_gbps.source,
              HasSubstr("all_reduce_perf_h100_8gpu.log (all_reduce, 8 ranks on 1 node, 16 rows)"));
  EXPECT_EQ(r.cluster.network, cluster("dgx-h100").network);  // only the fabric changed
  // The file round-trips through the strict loader.
  EXPECT_EQ(collectives::cluster_from_json(collectives::cluster_to_json(r.cluster), "calibrated"),
            r.cluster);

  // The calibrated cluster prices the logged run (Ring; Simple wins at 32 MB) at the logged time.
  const collectives::Topology t(collectives::with_nodes(r.cluster, 1));
  const std::vector<int64_t> devices = {0, 1, 2, 3, 4, 5, 6, 7};
  const CollectiveCall call{CollectiveKind::kAllReduce, 8, 32000000, t.group_links(devices)};
  const CollectiveCost c = *collective_cost_with(call, Algorithm::kRing);
  EXPECT_EQ(c.protocol, nccl::Proto::kSimple);
  EXPECT_NEAR(c.time_s * 1e6, 175.4, 1e-9);
}

TEST(Calibration, ExactTwoNodeLogGivesNicBandwidthAndNetworkLatency) {
  // Generated with t = 8.4 + 28 x 3.4 + 2 x 10 + S x 1.875 / (8 x 22.5e3): 8 NICs of 22.5 GB/s,
  // 10 us per inter-node step; the 28 NVLink steps keep dgx-a100-80g's 3.4 us.
  const std::vector<CalibrationInput> in = {
      {data("all_reduce_perf_a100_2node.log"), CalibratedLink::kInter}};
  const CalibrationResult r = calibrate(cluster("dgx-a100-80g"), in);
  EXPECT_NEAR(r.logs[0].latency_us, 123.6, 1e-9);
  EXPECT_NEAR(r.logs[0].busbw_gbps, 180, 1e-9);
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_EQ(r.links[0].link, CalibratedLink::kInter);
  EXPECT_NEAR(r.cluster.network->nic_bandwidth_gbps.value, 22.5, 1e-9);
  EXPECT_NEAR(r.cluster.network->latency_us.value, 10, 1e-9);
  EXPECT_DOUBLE_EQ(r.cluster.intra.latency_us.value, 3.4);
  // Priced back: 16 ranks on 2 nodes, Ring/Simple at the largest logged size.
  const collectives::Topology t(collectives::with_nodes(r.cluster, 2));
  std::vector<int64_t> devices(16);
  for (int i = 0; i < 16; ++i) devices[static_cast<size_t>(i)] = i;
  const CollectiveCall call{CollectiveKind::kAllReduce, 16, 15360000, t.group_links(devices)};
  // Ring/Simple would take the logged 283.6 us; LL128's lower per-step latency (NCCL's ratios
  // 1.9/3.4 on NVLink and 4.0/14 on the network applied to the calibrated steps) at 0.92 of the
  // bandwidth wins at this size: base 14 + 28 x 1.9 + 2 x 10 x 4/14 + S x 1.875 / (0.92 x 180e3).
  const CollectiveCost c = *collective_cost_with(call, Algorithm::kRing);
  EXPECT_EQ(c.protocol, nccl::Proto::kLL128);
  EXPECT_NEAR(c.time_s * 1e6, 14 + 28 * 1.9 + 2 * 10 * 4.0 / 14 + 15360000 * 1.875 / (0.92 * 180e3),
              1e-9);
  EXPECT_LT(c.time_s * 1e6, 283.6);
}

TEST(Calibration, NoisyLogFitsWithinItsNoise) {
  // Times of t = 11.9 + S x 7/8 / 350e3 scaled by up to +-3%, 1 KiB .. 8 GiB: the bandwidth is
  // pinned by the many large rows, the latency by the small ones (relative residuals).
  const NcclTestsLog log = data("all_gather_perf_h100_noisy.log");
  const LogFit line = fit_log(log);
  EXPECT_NEAR(line.busbw_gbps, 350, 350 * 0.01);
  EXPECT_NEAR(line.latency_us, 11.9, 11.9 * 0.03);
  EXPECT_GT(line.rms_relative_residual, 0.005);  // there is noise
  EXPECT_LT(line.rms_relative_residual, 0.03);
  const std::vector<CalibrationInput> in = {{log, CalibratedLink::kIntra}};
  const CalibrationResult r = calibrate(cluster("dgx-h100"), in);
  // (11.9 +- 3%) - 8.4 over 7 steps: 0.5 +- 0.05 us.
  EXPECT_NEAR(r.cluster.intra.latency_us.value, 0.5, 0.06);
}

TEST(Calibration, LogsThatCannotCalibrateTheLinkAreRefused) {
  auto refused = [](const char* cl, const std::string& text, CalibratedLink link,
                    const std::string& what) {
    const std::vector<CalibrationInput> in = {{parse_nccl_tests_log(text, "x.log"), link}};
    EXPECT_THAT([&] { calibrate(cluster(cl), in); }, ThrowsMessage<Error>(HasSubstr(what)));
  };
  const std::string one_node = synth("all_reduce", 1, 8, 15.4, 1.75, 350);
  const std::string two_nodes = synth("all_reduce", 2, 8, 123.6, 1.875, 180);
  refused("dgx-h100", one_node, CalibratedLink::kInter,
          "x.log: 8 ranks on one node, expected at "
          "least 2 nodes for link ib");
  refused("dgx-a100-80g", two_nodes, CalibratedLink::kIntra,
          "x.log: 16 ranks on 2 nodes, expected one node for link nvlink");
  refused("cpu-local", two_nodes, CalibratedLink::kInter, "cluster cpu-local has no network");
  refused("dgx-a100-80g", synth("all_reduce", 1, 16, 15.4, 1.875, 200), CalibratedLink::kIntra,
          "16 ranks on one node, expected 2 to 8");
  // NVLS-like busbw 480 GB/s on H100's 18 x 25 = 450 GB/s NVLink: not a ring.
  refused("dgx-h100", synth("all_reduce", 1, 8, 20, 1.75, 480), CalibratedLink::kIntra,
          "above the fabric's line rate 450 GB/s");
  // A 2-node H100 ring at 380 GB/s busbw: 8 NICs of 47.5 GB/s (below NDR's 50) would carry it,
  // but NVLink's 370.8 bounds that ring first: the log says nothing about the NICs.
  refused("dgx-h100", synth("all_reduce", 2, 8, 150, 1.875, 380), CalibratedLink::kInter,
          "fabric bounds this run");
  // Tree-like 2-node busbw above 8 x 25 GB/s HDR line rate on A100.
  refused("dgx-a100-80g", synth("all_reduce", 2, 1, 20, 1.0, 220), CalibratedLink::kInter,
          "above the NIC line rate 200 Gb/s");
  refused("dgx-h100", synth("all_reduce", 1, 1, 5, 0, 300), CalibratedLink::kIntra,
          "x.log: 1 rank, expected at least 2");
  // Latency below the base latency: the small sizes run faster than the model's floor.
  refused("dgx-h100", synth("all_reduce", 1, 8, 5, 1.75, 300), CalibratedLink::kIntra,
          "per-step latency");
}

TEST(Calibration, LinkNames) {
  EXPECT_EQ(parse_calibrated_link("nvlink"), CalibratedLink::kIntra);
  EXPECT_EQ(parse_calibrated_link("shared_memory"), CalibratedLink::kIntra);
  EXPECT_EQ(parse_calibrated_link("ib"), CalibratedLink::kInter);
  EXPECT_THAT([] { parse_calibrated_link("pcie"); },
              ThrowsMessage<Error>(HasSubstr("unknown link class 'pcie'")));
}

}  // namespace
}  // namespace shardplan::collectives
