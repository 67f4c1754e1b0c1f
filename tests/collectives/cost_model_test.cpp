// The cost model against published NCCL figures (docs/cost-model.md §5.2) and against hand
// computations of the formulas in Note [Cost model] (cost_model.cpp), with NCCL's constants
// (docs/cost-model.md §5.3) written out.
#include "collectives/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan::collectives {
namespace {

using collectives::GroupLinks;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

collectives::Topology topo(const char* cluster, int64_t nodes) {
  return collectives::Topology(collectives::with_nodes(
      collectives::load_cluster(collectives::resolve_cluster(cluster)), nodes));
}
// A group of `n` consecutive devices, alone on the cluster.
GroupLinks first_devices(const collectives::Topology& t, int64_t n) {
  std::vector<int64_t> devices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) devices[static_cast<size_t>(i)] = i;
  return t.group_links(devices);
}
CollectiveCall call(CollectiveKind k, const GroupLinks& g, int64_t bytes) {
  return {k, g.group_size, bytes, g};
}
double within(double value, double reference) { return std::abs(value / reference - 1); }

// ---- accuracy against published measurements --------------------------------------------------

TEST(CostAccuracy, DgxA100AllReduceBusbwNearNcclsTwoHundredThirty) {
  // ~230 GB/s (sjeaugey, nccl-tests#149), 232.54 measured (nccl-tests#175); sizes >= 8 GB.
  const collectives::Topology t = topo("dgx-a100-80g", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(t, 8), 8 * kGiB));
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_LT(within(c.busbw_gbps, 230), 0.10) << c;
  EXPECT_LT(within(c.busbw_gbps, 232.54), 0.10) << c;
}

TEST(CostAccuracy, DgxA100FortyGigabyteHasTheSameFabricAndNetwork) {
  // Selene's DGX A100 (40 GB parts): same NVLink3 fabric, 8x HDR. ~230 GB/s inside a node
  // (nccl-tests#149), 192 GB/s across nodes with NCCL_ALGO=RING (nccl#812).
  const collectives::Topology one = topo("dgx-a100-40g", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(one, 8), 8 * kGiB));
  EXPECT_LT(within(c.busbw_gbps, 230), 0.10) << c;
  const collectives::Topology two = topo("dgx-a100-40g", 2);
  const CollectiveCost r = *collective_cost_with(
      call(CollectiveKind::kAllReduce, first_devices(two, 16), 8 * kGiB), Algorithm::kRing);
  EXPECT_LT(within(r.busbw_gbps, 192), 0.10) << r;
}

TEST(CostAccuracy, DgxH100AllReduceWithAndWithoutNvls) {
  const collectives::Topology t = topo("dgx-h100", 1);
  const CollectiveCall ar = call(CollectiveKind::kAllReduce, first_devices(t, 8), 8 * kGiB);
  // NCCL_ALGO=RING: ~370 GB/s (sjeaugey, nccl-tests#212).
  const CollectiveCost ring = *collective_cost_with(ar, Algorithm::kRing);
  EXPECT_LT(within(ring.busbw_gbps, 370), 0.10) << ring;
  // NVLS: ~480 GB/s busbw, algbw ~275 (nccl-tests#212); 476 "in the expected range" (#290).
  const CollectiveCost best = collective_cost(ar);
  EXPECT_EQ(best.algorithm, Algorithm::kNvls);
  EXPECT_LT(within(best.busbw_gbps, 480), 0.10) << best;
  EXPECT_LT(within(best.algbw_gbps, 275), 0.10) << best;
  // Hand (Note [Cost model], NVLS): t = 25 us + S (9/8) / (370.8 x 0.85 GB/s).
  const double s = 8.0 * kGiB;
  EXPECT_NEAR(best.time_s * 1e6, 25 + s * 9 / 8 / (370.8 * 0.85 * 1e3), 1e-6);
  // No NVLS on A100: the algorithm is not even a candidate.
  const collectives::Topology a = topo("dgx-a100-80g", 1);
  EXPECT_FALSE(collective_cost_with(call(CollectiveKind::kAllReduce, first_devices(a, 8), kGiB),
                                    Algorithm::kNvls));
}

TEST(CostAccuracy, HgxH200AllReduceNearTheUserReport) {
  // 475 GB/s peak all_reduce on 8 H200 (nccl-tests#272, NCCL 2.20.3).
  const collectives::Topology t = topo("hgx-h200", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(t, 8), 8 * kGiB));
  EXPECT_LT(within(c.busbw_gbps, 475), 0.10) << c;
}

TEST(CostAccuracy, InterNodeRingIsBoundedByTheNics) {
  const collectives::Topology t = topo("dgx-h100", 2);
  // dp over 2 nodes with tp = 8 inside: each dp ring has one ConnectX-7 (46-48 GB/s, nccl-tests
  // #290/#267).
  const GroupLinks dp = collectives::mesh_dim_links(t, std::vector<int64_t>{2, 8})[0];
  const CollectiveCost r =
      *collective_cost_with(call(CollectiveKind::kAllReduce, dp, 8 * kGiB), Algorithm::kRing);
  EXPECT_LE(r.busbw_gbps, 48.0);
  EXPECT_GE(r.busbw_gbps, 46.0);
  // One 16-GPU ring over both nodes: at most the 8 NICs, 8 x 48 = 384 (docs/cost-model.md §5.2,
  // derived ceiling).
  const CollectiveCost full = *collective_cost_with(
      call(CollectiveKind::kAllReduce, first_devices(t, 16), 8 * kGiB), Algorithm::kRing);
  EXPECT_LE(full.busbw_gbps, 8 * 48.0);
  // DGX A100 with 8x HDR: 192 GB/s multi-node all_reduce busbw (AddyLaddy, nccl#812).
  const collectives::Topology a = topo("dgx-a100-80g", 2);
  const CollectiveCost a16 = *collective_cost_with(
      call(CollectiveKind::kAllReduce, first_devices(a, 16), 8 * kGiB), Algorithm::kRing);
  EXPECT_LT(within(a16.busbw_gbps, 192), 0.10) << a16;
  EXPECT_LE(a16.busbw_gbps, 8 * 25.0);  // never above the line rate: 8 x 200 Gb/s
}

// ---- hand computations of the formulas ---------------------------------------------------------

TEST(CostFormulas, SmallAllReduceOnOneA100NodeIsRingLL) {
  // Ring LL: base 6.6 + 2(n-1) x 0.6 us (tuning.cc, docs/cost-model.md §5.3) + 8 B x 2(7)/8 /
  // min(87.7, 240/2) GB/s.
  const collectives::Topology t = topo("dgx-a100-80g", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(t, 8), 8));
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_EQ(c.protocol, nccl::Proto::kLL);
  const double expected_us = 6.6 + 14 * 0.6 + 8 * 1.75 / (87.7 * 1e3);
  EXPECT_NEAR(c.time_s * 1e6, expected_us, 1e-9);
  EXPECT_NEAR(c.latency_s * 1e6, 6.6 + 14 * 0.6, 1e-9);
}

TEST(CostFormulas, LargeAllGatherOnOneA100NodeIsRingSimple) {
  // base 8.4 + 7 x 3.4 us + S (n-1)/n / 240 GB/s.
  const collectives::Topology t = topo("dgx-a100-80g", 1);
  const double s = static_cast<double>(kGiB);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllGather, first_devices(t, 8), kGiB));
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_EQ(c.protocol, nccl::Proto::kSimple);
  EXPECT_NEAR(c.time_s * 1e6, 8.4 + 7 * 3.4 + s * 7 / 8 / 240e3, 1e-6);
  // nccl-tests: algbw = S / t, busbw = algbw (n-1)/n.
  EXPECT_NEAR(c.algbw_gbps, s / c.time_s / 1e9, 1e-9);
  EXPECT_NEAR(c.busbw_gbps, c.algbw_gbps * 7 / 8, 1e-9);
}

TEST(CostFormulas, TreeAllReduceAcrossFourNodes) {
  // Tree: B = min(240, 8 x 24) = 192 GB/s; at 1 GiB log2(2^30/64) = 24 >= 23: no correction.
  // LL128 multi-node keeps 120/128 of B (> Simple's 0.92), so it wins: base 14.0 +
  // 2((8-1) x 1.25 + log2(4) x 8.5) us; algbw = 0.5 x 120/128 x 192.
  const collectives::Topology t = topo("dgx-a100-80g", 4);
  const CollectiveCall ar = call(CollectiveKind::kAllReduce, first_devices(t, 32), kGiB);
  const CollectiveCost c = *collective_cost_with(ar, Algorithm::kTree);
  EXPECT_EQ(c.protocol, nccl::Proto::kLL128);
  const double lat = 14.0 + 2 * (7 * 1.25 + 2 * 8.5);
  EXPECT_NEAR(c.time_s * 1e6, lat + static_cast<double>(kGiB) / (0.5 * 120 / 128 * 192 * 1e3),
              1e-6);
  // At 1 MiB, log2(2^20/64) = 14: treeCorrectionFactor LL128[14] = 0.6 scales the bandwidth.
  const CollectiveCall small = call(CollectiveKind::kAllReduce, first_devices(t, 32), 1 << 20);
  const CollectiveCost cs = *collective_cost_with(small, Algorithm::kTree);
  EXPECT_EQ(cs.protocol, nccl::Proto::kLL128);
  EXPECT_NEAR(cs.time_s * 1e6, lat + (1 << 20) / (0.5 * 120 / 128 * 192 * 0.6 * 1e3), 1e-6);
}

TEST(CostFormulas, RingAcrossNodesCountsInterNodeSteps) {
  // 16 ranks on 2 H100 nodes, Simple: 2(n-1) = 30 steps of which 2(N-1) = 2 cross nodes.
  const collectives::Topology t = topo("dgx-h100", 2);
  const CollectiveCost c = *collective_cost_with(
      call(CollectiveKind::kAllReduce, first_devices(t, 16), 4 * kGiB), Algorithm::kRing);
  const double lat = 8.4 + 28 * 3.4 + 2 * 14.0;
  EXPECT_NEAR(c.latency_s * 1e6, lat, 1e-9);
  EXPECT_NEAR(c.time_s * 1e6, lat + 4.0 * kGiB * 30 / 16 / (370.8 * 1e3), 1e-6);
}

TEST(CostFormulas, HierarchicalIsTheSumOfItsPhases) {
  // 64 nodes x 8: many ring steps; hierarchical = RS(8, S) + AR(64, S/8) + AG(8, S) inside.
  const collectives::Topology t = topo("dgx-h100", 64);
  const GroupLinks g = first_devices(t, 512);
  const int64_t s = 64 << 20;
  const CollectiveCost h =
      *collective_cost_with(call(CollectiveKind::kAllReduce, g, s), Algorithm::kHierarchical);
  const collectives::Topology one = topo("dgx-h100", 1);
  const GroupLinks node = first_devices(one, 8);
  // The inter-node phase: 8 node-crossing groups of 64 ranks, one per rail: 1 NIC each.
  const collectives::Topology t64 = topo("dgx-h100", 64);
  std::vector<int64_t> rail0;
  for (int64_t n = 0; n < 64; ++n) rail0.push_back(n * 8);
  const GroupLinks across = t64.group_links(rail0, 8);
  const double expected = collective_cost(call(CollectiveKind::kReduceScatter, node, s)).time_s +
                          collective_cost(call(CollectiveKind::kAllReduce, across, s / 8)).time_s +
                          collective_cost(call(CollectiveKind::kAllGather, node, s)).time_s;
  EXPECT_NEAR(h.time_s, expected, 1e-12);
  // And it beats a flat ring's 1022 steps at this size.
  const CollectiveCost best = collective_cost(call(CollectiveKind::kAllReduce, g, s));
  EXPECT_LT(best.time_s,
            collective_cost_with(call(CollectiveKind::kAllReduce, g, s), Algorithm::kRing)->time_s);
}

TEST(CostFormulas, AllToAllAcrossNodesUsesOneNicPerRank) {
  // 16 ranks on 2 H100 nodes: each sends S 7/16 over NVLink and S 8/16 over its own NIC (48 GB/s)
  // at once; base 8.4 + max(3.4, 14) us.
  const collectives::Topology t = topo("dgx-h100", 2);
  const double s = static_cast<double>(kGiB);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllToAll, first_devices(t, 16), kGiB));
  EXPECT_EQ(c.algorithm, Algorithm::kDirect);
  EXPECT_NEAR(c.time_s * 1e6, 8.4 + 14.0 + s * 8 / 16 / 48e3, 1e-6);
  EXPECT_NEAR(c.busbw_gbps, c.algbw_gbps * 15 / 16, 1e-9);
}

TEST(CostFormulas, SendRecvOneNicAcrossNodesNvlinkInside) {
  const collectives::Topology t = topo("dgx-h100", 2);
  const std::vector<int64_t> across = {0, 8}, inside = {0, 1};
  const double s = static_cast<double>(kGiB);
  const CollectiveCost x =
      collective_cost(call(CollectiveKind::kSendRecv, t.group_links(across), kGiB));
  EXPECT_NEAR(x.time_s * 1e6, 8.4 + 14.0 + s / 48e3, 1e-6);
  const CollectiveCost y =
      collective_cost(call(CollectiveKind::kSendRecv, t.group_links(inside), kGiB));
  EXPECT_NEAR(y.time_s * 1e6, 8.4 + 3.4 + s / 370.8e3, 1e-6);
}

TEST(CostFormulas, BroadcastIsAPipelinedChainAtLinkSpeed) {
  // busbw factor 1: t = 8.4 + 7 x 3.4 + S / 370.8 GB/s for a large S.
  const collectives::Topology t = topo("dgx-h100", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kBroadcast, first_devices(t, 8), kGiB));
  EXPECT_NEAR(c.time_s * 1e6, 8.4 + 7 * 3.4 + static_cast<double>(kGiB) / 370.8e3, 1e-6);
  EXPECT_DOUBLE_EQ(c.busbw_gbps, c.algbw_gbps);
}

TEST(CostFormulas, CpuLocalIsRingSimpleWithoutBaseLatency) {
  // MPI over shared memory: 2(n-1) steps of the file's 1.0 us, S x 2(n-1)/n / 9.69 GB/s.
  const collectives::Topology t = topo("cpu-local", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(t, 2), 1 << 20));
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_NEAR(c.time_s * 1e6, 2 * 1.0 + (1 << 20) * 1.0 / 9.69e3, 1e-9);
}

TEST(CostFormulas, MoreBytesNeverCostLessAndBusbwApproachesTheLink) {
  const collectives::Topology t = topo("dgx-h100", 4);
  const GroupLinks g = first_devices(t, 32);
  for (CollectiveKind k :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    double previous = 0;
    for (int64_t bytes = 8; bytes <= 16 * kGiB; bytes *= 4) {
      const double time = collective_cost(call(k, g, bytes)).time_s;
      EXPECT_GE(time, previous) << to_string(k) << " " << bytes;
      previous = time;
    }
  }
}

TEST(CostFormulas, OneRankCostsNothing) {
  const collectives::Topology t = topo("dgx-h100", 1);
  const CollectiveCost c =
      collective_cost(call(CollectiveKind::kAllReduce, first_devices(t, 1), kGiB));
  EXPECT_EQ(c.algorithm, Algorithm::kNone);
  EXPECT_EQ(c.time_s, 0);
}

// ---- values and bad input
// ------------------------------------------------------------------------

TEST(CollectiveCallValue, JsonRoundTripEqualityHashAndPrinting) {
  const collectives::Topology t = topo("dgx-h100", 2);
  const CollectiveCall c = call(CollectiveKind::kReduceScatter, first_devices(t, 16), 12345);
  EXPECT_EQ(collective_call_from_json(to_json(c)), c);
  EXPECT_EQ(std::hash<CollectiveCall>{}(collective_call_from_json(to_json(c))),
            std::hash<CollectiveCall>{}(c));
  CollectiveCall d = c;
  d.bytes += 1;
  EXPECT_NE(c, d);
  std::ostringstream os;
  os << c;
  EXPECT_EQ(os.str(), "reduce_scatter(n=16, 12345 B, mixed)");
  EXPECT_EQ(parse_collective_kind("alltoall_perf"), CollectiveKind::kAllToAll);
  EXPECT_THAT([] { parse_collective_kind("all_scatter"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown collective kind 'all_scatter'")));
  nlohmann::json bad = to_json(c);
  bad["bytes"] = -1;
  EXPECT_THAT([&] { collective_call_from_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("field 'bytes'")));
}

TEST(CollectiveCallValue, MalformedCallsAreErrors) {
  const collectives::Topology t = topo("dgx-h100", 1);
  const GroupLinks g = first_devices(t, 4);
  EXPECT_THAT(
      [&] {
        collective_cost({CollectiveKind::kAllReduce, 8, 1024, g});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("group size 8 does not match")));
  EXPECT_THAT(
      [&] {
        collective_cost({CollectiveKind::kSendRecv, 4, 1024, g});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("expected 2")));
  EXPECT_THROW(collective_cost({CollectiveKind::kAllReduce, 4, -1, g}), Error);
  GroupLinks zero = g;
  zero.intra_bandwidth_gbps = 0;
  EXPECT_THAT(
      [&] {
        collective_cost({CollectiveKind::kAllReduce, 4, 1024, zero});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("no algorithm can run")));
}

TEST(NcclTuning, ConstantsAsPublishedAndTheirRatios) {
  // docs/cost-model.md §5.3: base Ring LL 6.6, Tree Simple 8.4; hwLat NVLink Ring LL 0.6, NET Tree
  // Simple 14.
  EXPECT_DOUBLE_EQ(nccl::base_latency_us(nccl::Algo::kRing, nccl::Proto::kLL), 6.6);
  EXPECT_DOUBLE_EQ(nccl::base_latency_us(nccl::Algo::kTree, nccl::Proto::kSimple), 8.4);
  EXPECT_DOUBLE_EQ(
      nccl::hw_latency_us(nccl::LinkType::kNvlink, nccl::Algo::kRing, nccl::Proto::kLL), 0.6);
  EXPECT_DOUBLE_EQ(
      nccl::hw_latency_us(nccl::LinkType::kNet, nccl::Algo::kTree, nccl::Proto::kSimple), 14.0);
  EXPECT_DOUBLE_EQ(
      nccl::latency_ratio(nccl::LinkType::kNvlink, nccl::Algo::kRing, nccl::Proto::kSimple), 1.0);
  EXPECT_DOUBLE_EQ(nccl::ll_max_bandwidth_gbps(collectives::Arch::kAmpere, 1), 87.7);
  EXPECT_DOUBLE_EQ(nccl::kTreeCorrectionFactor[2][11], 0.5);  // Simple at 128 KiB
}

}  // namespace
}  // namespace shardplan::collectives
