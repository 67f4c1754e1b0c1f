// NCCL's tuning constants (src/graph/tuning.cc, NCCL v2.30.7 @ 5067397c, as written out in
// docs/cost-model.md §5.3): the software side of the cost model, per algorithm and protocol.
// The hardware side (bandwidths, per-step latencies) lives in configs/clusters/*.json.
//   double ll_hop = hw_latency_us(LinkType::kNvlink, Algo::kRing, Proto::kLL);   // 0.6
// Constants drift between NCCL versions (docs/cost-model.md §5.3, "Version drift"); cluster files
// pin one.
#pragma once

#include <array>
#include <cstdint>

#include "collectives/cluster.h"

namespace shardplan::collectives::nccl {

enum class Proto { kLL, kLL128, kSimple };
inline constexpr int kNumProtos = 3;
// The NCCL algorithms whose constants we use (CollNet and PAT need hardware/layouts not modeled).
enum class Algo { kTree, kRing, kNvls };
enum class LinkType { kNvlink, kNet };

// baseLat[algo][proto], microseconds: fixed software cost of one collective.
inline constexpr double kBaseLatencyUs[3][kNumProtos] = {
    {6.8, 14.0, 8.4},  // Tree
    {6.6, 14.0, 8.4},  // Ring
    {0.0, 0.0, 0.0},   // NVLS
};
// hwLat[link][algo][proto], microseconds per step. NVLS has only Simple; its LL/LL128 entries are
// unused (NVLS runs Simple only), written as 0 as in NCCL.
inline constexpr double kHwLatencyUs[2][3][kNumProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25.0}},   // NVLink: Tree, Ring, NVLS
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}, {0, 0, 18.0}},  // NET
};

constexpr double base_latency_us(Algo a, Proto p) {
  return kBaseLatencyUs[static_cast<int>(a)][static_cast<int>(p)];
}
constexpr double hw_latency_us(LinkType l, Algo a, Proto p) {
  return kHwLatencyUs[static_cast<int>(l)][static_cast<int>(a)][static_cast<int>(p)];
}
// A cluster file's per-step latency is NCCL's Ring/Simple figure for its link (3.4 us NVLink,
// 14 us NET) or a calibrated one; other (algo, proto) pairs keep NCCL's ratio to it, so a
// calibration that finds the fabric 2x slower makes every protocol 2x slower.
constexpr double latency_ratio(LinkType l, Algo a, Proto p) {
  return hw_latency_us(l, a, p) / hw_latency_us(l, Algo::kRing, Proto::kSimple);
}

// Protocol bandwidth factors (tuning.cc): LL sends 8 bytes of which 4 are data (flag + data),
// LL128 sends 128-byte lines of which 120 are data (~0.92 after other overheads).
inline constexpr double kRingLLBandwidthFactor = 0.5;
inline constexpr double kRingLL128BandwidthFactor = 0.92;
inline constexpr double kTreeSimpleBandwidthFactor = 0.92;
inline constexpr double kTreeLLBandwidthDivisor = 3.8;
inline constexpr double kTreeLL128BandwidthFactorOneNode = 7.0 / 9.0;
inline constexpr double kTreeLL128BandwidthFactorMultiNode = 120.0 / 128.0;
// Tree all-reduce sends every byte up and down the tree: algBw = busBw * 0.5.
inline constexpr double kTreeAllReduceAlgbwFactor = 0.5;

// llMaxBws (GB/s), the LL protocol's bandwidth cap: by GPU generation on one node; by node count
// on several (row 0, Intel/other CPUs: 2 nodes, >= 3 nodes).
constexpr double ll_max_bandwidth_gbps(collectives::Arch arch, int64_t nodes) {
  if (nodes >= 3) return 20.4;
  if (nodes == 2) return 39.0;
  switch (arch) {
    case collectives::Arch::kVolta:
      return 39.0;
    case collectives::Arch::kAmpere:
      return 87.7;
    case collectives::Arch::kHopper:
      return 141.0;
    case collectives::Arch::kBlackwell:
      return 282.0;
    case collectives::Arch::kCpu:
      return 0;
  }
  return 0;
}

// treeCorrectionFactor[proto][log2(bytes / 64)] for Tree all-reduce, applied for 64 B <= bytes
// and index < 23 (64 B ... 256 MB).
inline constexpr int kTreeCorrectionEntries = 24;
inline constexpr double kTreeCorrectionFactor[kNumProtos][kTreeCorrectionEntries] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
};
inline constexpr int kTreeCorrectionMaxIndex = 23;  // exclusive: NCCL applies index < 23

}  // namespace shardplan::collectives::nccl
