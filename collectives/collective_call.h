// A collective call as a plain value: what runs (kind), over how many ranks, how many bytes, and
// the links its group crosses (collectives::GroupLinks, from the Topology). cost_model.h prices it.
//   CollectiveCall c{CollectiveKind::kAllReduce, 8, 1 << 30, topo.group_links(devices)};
//   std::cout << c;  // all_reduce(n=8, 1073741824 B, nvlink)
// `bytes` follows nccl-tests (docs/cost-model.md §5.1): the whole buffer S, which for all_gather,
// reduce_scatter and all_to_all is the gathered (count * nranks) size; algbw = S / time.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string_view>

#include "collectives/topology.h"

namespace shardplan::collectives {

enum class CollectiveKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kSendRecv,
};
inline constexpr int kNumCollectiveKinds = 7;

std::string_view to_string(CollectiveKind k);
// "all_reduce", "allreduce" and nccl-tests' binary names ("all_reduce_perf", "alltoall_perf")
// are accepted; throws shardplan::Error listing the names otherwise.
CollectiveKind parse_collective_kind(std::string_view s);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md; docs/cost-model.md §5.1): busbw = algbw *
// factor. all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; the rest 1.
double busbw_factor(CollectiveKind k, int64_t n);

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t group_size = 1;
  int64_t bytes = 0;  // nccl-tests' S (see above)
  collectives::GroupLinks links;
  friend bool operator==(const CollectiveCall&, const CollectiveCall&) = default;
};

std::ostream& operator<<(std::ostream& os, const CollectiveCall& c);
nlohmann::ordered_json to_json(const CollectiveCall& c);
// Reads what to_json writes; unknown keys are refused. `j` is the value at `path` ("" for the
// document) of `origin`; bad input is a shardplan::Error naming the field ("collective call: field
// 'links.nodes': expected an integer >= 1, got 0").
CollectiveCall collective_call_from_json(const nlohmann::json& j,
                                         std::string_view origin = "collective call",
                                         std::string_view path = "");

}  // namespace shardplan::collectives

template <>
struct std::hash<shardplan::collectives::CollectiveCall> {
  size_t operator()(const shardplan::collectives::CollectiveCall& c) const noexcept;
};
