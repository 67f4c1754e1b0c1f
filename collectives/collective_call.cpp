#include "collectives/collective_call.h"

#include <bit>
#include <optional>
#include <string>

#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"

namespace shardplan::collectives {
namespace {

// Our names first (printed), then nccl-tests' spellings (its binary names without "_perf").
constexpr EnumName<CollectiveKind> kKindNames[] = {
    {"all_reduce", CollectiveKind::kAllReduce},
    {"all_gather", CollectiveKind::kAllGather},
    {"reduce_scatter", CollectiveKind::kReduceScatter},
    {"all_to_all", CollectiveKind::kAllToAll},
    {"broadcast", CollectiveKind::kBroadcast},
    {"reduce", CollectiveKind::kReduce},
    {"send_recv", CollectiveKind::kSendRecv},
    {"allreduce", CollectiveKind::kAllReduce},
    {"allgather", CollectiveKind::kAllGather},
    {"reducescatter", CollectiveKind::kReduceScatter},
    {"alltoall", CollectiveKind::kAllToAll},
    {"bcast", CollectiveKind::kBroadcast},
    {"sendrecv", CollectiveKind::kSendRecv},
};

}  // namespace

std::string_view to_string(CollectiveKind k) { return enum_name(k, kKindNames); }

CollectiveKind parse_collective_kind(std::string_view s) {
  std::string_view bare = s;
  if (bare.ends_with("_perf")) bare.remove_suffix(5);
  if (std::optional<CollectiveKind> k = find_enum_name(bare, kKindNames)) return *k;
  // The name as given (with any _perf) in the message.
  SP_FAIL("unknown collective kind '", s, "', expected one of: ", enum_names_list(kKindNames));
}

double busbw_factor(CollectiveKind k, int64_t n) {
  SP_ASSERT(n >= 1);
  const double nd = static_cast<double>(n);
  switch (k) {
    case CollectiveKind::kAllReduce:
      return 2 * (nd - 1) / nd;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (nd - 1) / nd;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kSendRecv:
      return 1;
  }
  return 1;
}

std::ostream& operator<<(std::ostream& os, const CollectiveCall& c) {
  return os << to_string(c.kind) << "(n=" << c.group_size << ", " << c.bytes << " B, "
            << collectives::to_string(c.links.link_class) << ")";
}

nlohmann::ordered_json to_json(const CollectiveCall& c) {
  nlohmann::ordered_json j;
  j["kind"] = to_string(c.kind);
  j["group_size"] = c.group_size;
  j["bytes"] = c.bytes;
  j["links"] = collectives::to_json(c.links);
  return j;
}

CollectiveCall collective_call_from_json(const nlohmann::json& j, std::string_view origin,
                                         std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  CollectiveCall c;
  c.kind = f.parsed("kind", parse_collective_kind);
  c.group_size = f.integer("group_size", 1);
  c.bytes = f.integer("bytes", 0);
  c.links = group_links_from_json(f.get("links"), origin, f.join("links"));
  f.done();
  if (c.links.group_size != c.group_size) {
    f.fail("links", "for a group of " + std::to_string(c.links.group_size) + " ranks, expected " +
                        std::to_string(c.group_size) + " (group_size)");
  }
  return c;
}

}  // namespace shardplan::collectives

size_t std::hash<shardplan::collectives::CollectiveCall>::operator()(
    const shardplan::collectives::CollectiveCall& c) const noexcept {
  // boost::hash_combine's mixing; the links are summarized by their class and sizes, which is
  // enough to spread calls that differ (equal calls hash equal, as required).
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<size_t>(c.kind));
  mix(std::hash<int64_t>{}(c.group_size));
  mix(std::hash<int64_t>{}(c.bytes));
  mix(static_cast<size_t>(c.links.link_class));
  mix(std::hash<int64_t>{}(c.links.nodes));
  mix(std::hash<int64_t>{}(c.links.ranks_per_node));
  // The bits of the doubles, not std::hash<double> (libstdc++ runs a byte hash over them, which
  // dominated the planner's memoized pricing).
  mix(std::bit_cast<uint64_t>(c.links.intra_bandwidth_gbps));
  mix(std::bit_cast<uint64_t>(c.links.inter_bandwidth_gbps));
  return h;
}
