// The communication cost model: how long a collective takes on its group's links, NCCL's way
// (docs/cost-model.md §5.3): every applicable (algorithm, protocol) is priced as latency + bytes /
// bandwidth and the cheapest wins. Reports time, algbw and busbw with nccl-tests' definitions
// (docs/cost-model.md §5.1).
//   CollectiveCost c = collective_cost({CollectiveKind::kAllReduce, 8, 1 << 30, links});
//   c.algorithm == Algorithm::kRing; c.busbw_gbps ~ 240 on a DGX A100
// Note [Cost model] in cost_model.cpp derives each algorithm's formula.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string_view>

#include "collectives/collective_call.h"
#include "collectives/nccl_tuning.h"

namespace shardplan::collectives {

enum class Algorithm {
  kNone,          // a group of one rank: nothing to send
  kRing,          // NCCL ring (also broadcast/reduce as a pipelined chain)
  kTree,          // NCCL double binary tree across nodes, chain inside (all_reduce)
  kNvls,          // NVLink SHARP inside one node (all_reduce, all_gather, reduce_scatter)
  kHierarchical,  // intra-node, then inter-node, then intra-node phases, each its best algorithm
  kDirect,        // one message per peer at once (all_to_all, send_recv)
};
std::string_view to_string(Algorithm a);
// Case-insensitive, as NCCL_ALGO is (Ring, ring); NCCL's nvlstree, collnet_direct,
// collnet_chain and pat are refused as not priced. Throws shardplan::Error.
Algorithm parse_algorithm(std::string_view s);
std::string_view to_string(nccl::Proto p);

struct CollectiveCost {
  Algorithm algorithm = Algorithm::kNone;
  nccl::Proto protocol = nccl::Proto::kSimple;  // hierarchical: the inter-node phase's
  double time_s = 0;
  double latency_s = 0;   // the part of time_s that does not depend on the bytes
  double algbw_gbps = 0;  // bytes / time_s / 1e9
  double busbw_gbps = 0;  // algbw * busbw_factor(kind, n)
  friend bool operator==(const CollectiveCost&, const CollectiveCost&) = default;
};
std::ostream& operator<<(std::ostream& os, const CollectiveCost& c);
// {"algorithm", "protocol", "time_s", "latency_s", "algbw_gbps", "busbw_gbps"}
nlohmann::ordered_json to_json(const CollectiveCost& c);

// The cheapest algorithm and protocol. Throws shardplan::Error when the call is malformed
// (group_size < 1 or different from links.group_size, bytes < 0, send_recv not over 2 ranks).
CollectiveCost collective_cost(const CollectiveCall& call);
// The best protocol of one algorithm; std::nullopt when the algorithm does not apply (NVLS on a
// fabric without it, tree for all_gather, hierarchical within one node, ...).
std::optional<CollectiveCost> collective_cost_with(const CollectiveCall& call, Algorithm a);

// The one place bytes meet bandwidth: microseconds to move `bytes` at `gbps` GB/s (1e9 B/s).
constexpr double transfer_us(double bytes, double gbps) { return bytes / (gbps * 1e3); }

}  // namespace shardplan::collectives
