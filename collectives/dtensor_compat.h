// PyTorch DTensor's communication estimator (torch/distributed/tensor/_collective_utils.py,
// docs/semantics.md §4), as a configuration of our cost model: its constants, and its
// per-mesh-dim topology rule as collectives::GroupLinks with library dtensor_compat. Pricing those
// with collective_cost() reproduces DTensor's numbers, which checks that the formulas are wired
// right.
//   auto dims = dtensor_mesh_links({2, 8}, /*devices_per_host=*/8);  // dim 0 inter-host
//   collective_cost({CollectiveKind::kAllGather, 8, 4 << 20, dims[1]}).time_s;  // 49.773 us
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/topology.h"

namespace shardplan::collectives::dtensor {

// MeshTopoInfo.build_from_mesh defaults (docs/semantics.md §4.1). DTensor divides bytes by 2^30 and
// then by the bandwidth in "GB/s", so its bandwidth is effectively GiB/s: kBandwidthGiBps.
inline constexpr double kBandwidthGiBps = 87.7;
inline constexpr double kIntraLatencyUs = 0.6;         // per hop, inside a host
inline constexpr double kInterLatencyUs = 2.7;         // per hop, once a dim spans hosts
inline constexpr double kInterBandwidthFactor = 0.22;  // inter-host bandwidth = 0.22 * 87.7
// Fixed cost of every collective (docs/semantics.md §4.2) and all_to_all's penalty over all_gather
// (docs/semantics.md §4.2: the 2025 code prices all_to_all as all_gather + 1.0; newer PRs drop the
// penalty).
inline constexpr double kBaseLatencyUs = 6.6;
inline constexpr double kAllToAllPenaltyUs = 1.0;
// DTensor's GiB/s as our GB/s (1e9 B/s): 87.7 * 2^30 / 1e9.
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double gibps_to_gbps(double gibps) { return gibps * kGiB / 1e9; }

// Per mesh dim, DTensor's view of its links (docs/semantics.md §4.1): walking dims from last to
// first with a running product of sizes, a dim whose product exceeds `devices_per_host` and every
// dim before it are inter-host. Throws shardplan::Error for sizes < 1 or devices_per_host < 1.
std::vector<collectives::GroupLinks> dtensor_mesh_links(std::span<const int64_t> mesh_shape,
                                                        int64_t devices_per_host);

}  // namespace shardplan::collectives::dtensor
