#include "collectives/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/enum_names.h"
#include "base/error.h"
#include "collectives/dtensor_compat.h"

// Note [Cost model]
// Notation: S = bytes (nccl-tests' buffer size), n ranks on N nodes, p = ranks per node; B_in =
// per-rank fabric bus bandwidth, B_net = the network bandwidth one node gives this group (its
// NICs / groups sharing them), l_in and l_net = per-step latencies (Ring/Simple figures from the
// cluster file; other algorithms and protocols scaled by NCCL's ratios, nccl_tuning.h).
// Times in microseconds; transfer_us() turns bytes and GB/s into time.
//
// Ring (NCCL tuning.cc, docs/cost-model.md §5.3): steps = 2(n-1) for all_reduce, n-1 for
//   all_gather, reduce_scatter, broadcast, reduce (a pipelined chain); of those 2(N-1) (resp. N-1)
//   cross nodes.
//   lat = base + (steps - inter) l_in + inter l_net; each rank sends S * busbw_factor bytes over
//   its bottleneck link B = min(B_in, B_net): that is what busbw measures (docs/cost-model.md
//   §5.1), and why a ring spanning nodes is bounded by the node's NICs (8 x 24 GB/s = 192 GB/s on
//   DGX A100, nccl#812). Protocols: LL min(llMax, 0.5 B), LL128 0.92 B, Simple B.
// Tree (all_reduce only): lat = base + 2((p-1) l_in + log2(N) l_net); busBw = B x protocol factor
//   x treeCorrectionFactor(S); algbw = 0.5 busBw (every byte goes up and down the tree).
// NVLS (one node, fabric with NVLink SHARP, Simple): lat = hwLat[NVLink][NVLS] (no base). The
//   switch reduces and multicasts: in all_reduce each GPU's link carries S (its data, pulled by the
//   multimem reductions of the n slices) + S/n (its reduced slice, multicast) per direction, i.e.
//   S(n+1)/n, at B_in x nvlsEff (0.85 Hopper, 0.74 Blackwell; tuning.cc). For 8 H100s this gives
//   algbw 370.8 x 0.85 x 8/9 = 280 GB/s, busbw 490 GB/s: NVIDIA quotes ~275 and ~480 (nccl-tests
//   #212). NCCL's own NVLS formula needs its channel count and NVLS graph bandwidth, which a
//   cluster file does not have. all_gather/reduce_scatter move S(n-1)/n like the ring, at x
//   nvlsEff.
// Hierarchical (N > 1, p > 1, every node holding p ranks): all_reduce = reduce_scatter inside
//   nodes (S) + all_reduce across nodes on S/p by the p node-crossing sub-groups at once (each gets
//   B_net / p) + all_gather inside nodes; all_gather and reduce_scatter keep their two phases.
//   Each phase is priced by the best flat algorithm, so NVLS can serve the intra-node phases.
// Direct (all_to_all, send_recv; Simple): one base latency plus one step over the slowest link
//   class used; all_to_all sends S(p-1)/n over the fabric and S(n-p)/n over at most one NIC per
//   rank at the same time (NCCL cannot aggregate NICs for alltoall, nccl-tests#267).
// Not modeled: NCCL's channel counts (the per-channel caps of LL128 and Tree), CollNet, PAT, the
//   x1.4 multi-node Ring/Simple latency and the CPU-dependent netOverhead; calibration absorbs
//   what they add to a measured cluster.
// MPI (cpu-local): Ring, Hierarchical and Direct with Simple only and no base latency (the
//   per-step latency of the file is all of it). dtensor_compat: Ring/Simple with DTensor's base
//   latency, and all_to_all = all_gather + DTensor's penalty (dtensor_compat.h).

namespace shardplan::collectives {
namespace {

using nccl::Algo;
using nccl::LinkType;
using nccl::Proto;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Proto kProtos[] = {Proto::kLL, Proto::kLL128, Proto::kSimple};

// A priced candidate, in microseconds.
struct Priced {
  double time_us = kInf;
  double latency_us = 0;
  Proto proto = Proto::kSimple;
  Algorithm algorithm = Algorithm::kNone;
};

void keep_best(Priced& best, const Priced& c) {
  if (c.time_us < best.time_us) best = c;
}

bool is_nccl(const GroupLinks& g) { return g.library == Library::kNccl; }
// MPI and DTensor's estimator have no protocols: Simple only.
bool proto_allowed(const GroupLinks& g, Proto p) { return is_nccl(g) || p == Proto::kSimple; }

double base_us(const GroupLinks& g, Algo a, Proto p) {
  switch (g.library) {
    case Library::kNccl:
      return nccl::base_latency_us(a, p);
    case Library::kMpi:
      return 0;
    case Library::kDTensorCompat:
      return dtensor::kBaseLatencyUs;
  }
  return 0;
}
double step_us(const GroupLinks& g, LinkType l, Algo a, Proto p) {
  const double file = l == LinkType::kNvlink ? g.intra_latency_us : g.inter_latency_us;
  return is_nccl(g) ? file * nccl::latency_ratio(l, a, p) : file;
}

// The ring's bottleneck: the fabric if ranks share a node, the node's network share if it spans.
double ring_bandwidth_gbps(const GroupLinks& g) {
  double bw = kInf;
  if (g.ranks_per_node > 1) bw = std::min(bw, g.intra_bandwidth_gbps);
  if (g.nodes > 1) bw = std::min(bw, g.inter_bandwidth_gbps);
  return bw;
}

Priced ring(CollectiveKind kind, int64_t n, double bytes, const GroupLinks& g) {
  const int64_t crossings = g.nodes - 1;
  int64_t steps = n - 1, inter = crossings;
  if (kind == CollectiveKind::kAllReduce) steps *= 2, inter *= 2;
  const double bus_bytes = bytes * busbw_factor(kind, n);
  const double bw = ring_bandwidth_gbps(g);
  Priced best;
  for (Proto p : kProtos) {
    if (!proto_allowed(g, p)) continue;
    double pbw = bw;
    if (p == Proto::kLL) {
      pbw =
          std::min(nccl::ll_max_bandwidth_gbps(g.arch, g.nodes), bw * nccl::kRingLLBandwidthFactor);
    } else if (p == Proto::kLL128) {
      pbw = bw * nccl::kRingLL128BandwidthFactor;
    }
    if (!(pbw > 0)) continue;
    const double lat =
        base_us(g, Algo::kRing, p) +
        static_cast<double>(steps - inter) * step_us(g, LinkType::kNvlink, Algo::kRing, p) +
        static_cast<double>(inter) * step_us(g, LinkType::kNet, Algo::kRing, p);
    keep_best(best, {lat + transfer_us(bus_bytes, pbw), lat, p, Algorithm::kRing});
  }
  return best;
}

// treeCorrectionFactor's column: floor(log2(bytes / 64)), or -1 where NCCL applies no correction.
// std::ilogb is that floor exactly (the binary exponent) and cheaper than floor(log2()).
int tree_correction_index(double bytes) {
  if (bytes < 64) return -1;
  const int index = std::ilogb(bytes / 64);
  return index < nccl::kTreeCorrectionMaxIndex ? index : -1;
}

Priced tree(CollectiveKind kind, int64_t, double bytes, const GroupLinks& g) {
  if (kind != CollectiveKind::kAllReduce || !is_nccl(g)) return {};
  const double bw = ring_bandwidth_gbps(g);
  // Computed once per call, not per protocol: a cost query is on the planner's hot path.
  const int correction = tree_correction_index(bytes);
  const double log2_nodes = std::log2(static_cast<double>(g.nodes));
  Priced best;
  for (Proto p : kProtos) {
    double bus = bw * nccl::kTreeSimpleBandwidthFactor;
    if (p == Proto::kLL) {
      bus = std::min(bw / nccl::kTreeLLBandwidthDivisor,
                     nccl::ll_max_bandwidth_gbps(g.arch, g.nodes));
    } else if (p == Proto::kLL128) {
      bus = bw * (g.nodes == 1 ? nccl::kTreeLL128BandwidthFactorOneNode
                               : nccl::kTreeLL128BandwidthFactorMultiNode);
    }
    if (correction >= 0) bus *= nccl::kTreeCorrectionFactor[static_cast<int>(p)][correction];
    if (!(bus > 0)) continue;
    const double lat =
        base_us(g, Algo::kTree, p) + 2 * (static_cast<double>(g.ranks_per_node - 1) *
                                              step_us(g, LinkType::kNvlink, Algo::kTree, p) +
                                          log2_nodes * step_us(g, LinkType::kNet, Algo::kTree, p));
    const double algbw = bus * nccl::kTreeAllReduceAlgbwFactor;
    keep_best(best, {lat + transfer_us(bytes, algbw), lat, p, Algorithm::kTree});
  }
  return best;
}

Priced nvls(CollectiveKind kind, int64_t n, double bytes, const GroupLinks& g) {
  const bool kind_ok = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
                       kind == CollectiveKind::kReduceScatter;
  if (!kind_ok || !is_nccl(g) || !g.nvls || g.nodes != 1 || n < 2) return {};
  const double nd = static_cast<double>(n);
  const double link_bytes =
      kind == CollectiveKind::kAllReduce ? bytes * (nd + 1) / nd : bytes * (nd - 1) / nd;
  const double lat = base_us(g, Algo::kNvls, Proto::kSimple) +
                     step_us(g, LinkType::kNvlink, Algo::kNvls, Proto::kSimple);
  const double bw = g.intra_bandwidth_gbps * g.nvls_efficiency;
  if (!(bw > 0)) return {};
  return {lat + transfer_us(link_bytes, bw), lat, Proto::kSimple, Algorithm::kNvls};
}

Priced best_flat(CollectiveKind kind, int64_t n, double bytes, const GroupLinks& g) {
  Priced best = ring(kind, n, bytes, g);
  keep_best(best, tree(kind, n, bytes, g));
  keep_best(best, nvls(kind, n, bytes, g));
  return best;
}

// Sub-groups of a group spanning nodes with p ranks on each (Note [Cost model], Hierarchical).
GroupLinks intra_part(const GroupLinks& g) {
  GroupLinks s = g;
  s.link_class = collectives::LinkClass::kNvlink;
  s.group_size = g.ranks_per_node;
  s.nodes = 1;
  s.inter_bandwidth_gbps = s.nic_bandwidth_gbps = s.inter_latency_us = 0;
  return s;
}
GroupLinks inter_part(const GroupLinks& g) {
  GroupLinks s = g;
  s.link_class = collectives::LinkClass::kNetwork;
  s.group_size = g.nodes;
  s.ranks_per_node = 1;
  s.intra_bandwidth_gbps = s.intra_latency_us = 0;
  s.nvls = false;
  // The p sub-groups run at once and split the node's share of the NICs.
  s.inter_bandwidth_gbps = g.inter_bandwidth_gbps / static_cast<double>(g.ranks_per_node);
  s.groups_sharing_nics = g.groups_sharing_nics * g.ranks_per_node;
  return s;
}

Priced hierarchical(CollectiveKind kind, int64_t n, double bytes, const GroupLinks& g) {
  const int64_t p = g.ranks_per_node;
  if (g.nodes < 2 || p < 2 || g.nodes * p != n) return {};
  const GroupLinks in = intra_part(g), out = inter_part(g);
  const double per_node_bytes = bytes / static_cast<double>(p);
  Priced a, b, c;  // phases in order
  switch (kind) {
    case CollectiveKind::kAllReduce:
      a = best_flat(CollectiveKind::kReduceScatter, p, bytes, in);
      b = best_flat(CollectiveKind::kAllReduce, g.nodes, per_node_bytes, out);
      c = best_flat(CollectiveKind::kAllGather, p, bytes, in);
      break;
    case CollectiveKind::kAllGather:
      b = best_flat(CollectiveKind::kAllGather, g.nodes, per_node_bytes, out);
      c = best_flat(CollectiveKind::kAllGather, p, bytes, in);
      a.time_us = 0;
      break;
    case CollectiveKind::kReduceScatter:
      a = best_flat(CollectiveKind::kReduceScatter, p, bytes, in);
      b = best_flat(CollectiveKind::kReduceScatter, g.nodes, per_node_bytes, out);
      c.time_us = 0;
      break;
    default:
      return {};
  }
  return {a.time_us + b.time_us + c.time_us, a.latency_us + b.latency_us + c.latency_us, b.proto,
          Algorithm::kHierarchical};
}

Priced direct(CollectiveKind kind, int64_t n, double bytes, const GroupLinks& g) {
  const double base = base_us(g, Algo::kRing, Proto::kSimple);
  const bool spans = g.nodes > 1, shares = g.ranks_per_node > 1;
  double step = 0;
  if (shares) step = std::max(step, step_us(g, LinkType::kNvlink, Algo::kRing, Proto::kSimple));
  if (spans) step = std::max(step, step_us(g, LinkType::kNet, Algo::kRing, Proto::kSimple));
  const double lat = base + step;
  if (kind == CollectiveKind::kSendRecv) {
    // Two ranks: the same node (fabric) or two nodes (one NIC each way).
    const double bw = spans ? g.nic_bandwidth_gbps : g.intra_bandwidth_gbps;
    if (!(bw > 0)) return {};
    return {lat + transfer_us(bytes, bw), lat, Proto::kSimple, Algorithm::kDirect};
  }
  if (kind != CollectiveKind::kAllToAll) return {};
  const double nd = static_cast<double>(n), p = static_cast<double>(g.ranks_per_node);
  double t = 0;
  if (shares) t = std::max(t, transfer_us(bytes * (p - 1) / nd, g.intra_bandwidth_gbps));
  if (spans) t = std::max(t, transfer_us(bytes * (nd - p) / nd, g.nic_bandwidth_gbps));
  return {lat + t, lat, Proto::kSimple, Algorithm::kDirect};
}

Priced price(const CollectiveCall& call, std::optional<Algorithm> only) {
  const GroupLinks& g = call.links;
  const int64_t n = call.group_size;
  SP_CHECK(n >= 1 && n == g.group_size, "collective ", to_string(call.kind), ": group size ", n,
           " does not match its links' group of ", g.group_size, " (expected equal and >= 1)");
  SP_CHECK(call.bytes >= 0, "collective ", to_string(call.kind), ": bytes ", call.bytes,
           ", expected >= 0");
  SP_CHECK(call.kind != CollectiveKind::kSendRecv || n == 2, "collective send_recv: group size ", n,
           ", expected 2 (one sender, one receiver)");
  if (n == 1) {
    Priced none;
    none.time_us = 0;
    return (!only || *only == Algorithm::kNone) ? none : Priced{};
  }
  const double bytes = static_cast<double>(call.bytes);
  auto wants = [&](Algorithm a) { return !only || *only == a; };
  Priced best;
  if (g.library == Library::kDTensorCompat) {
    // DTensor prices all_to_all as an all_gather of the same bytes plus a penalty
    // (docs/semantics.md §4.2).
    if (call.kind == CollectiveKind::kAllToAll) {
      if (!wants(Algorithm::kRing)) return {};
      Priced r = ring(CollectiveKind::kAllGather, n, bytes, g);
      r.time_us += dtensor::kAllToAllPenaltyUs;
      r.latency_us += dtensor::kAllToAllPenaltyUs;
      return r;
    }
    return wants(Algorithm::kRing) && call.kind != CollectiveKind::kSendRecv
               ? ring(call.kind, n, bytes, g)
               : Priced{};
  }
  switch (call.kind) {
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      if (wants(Algorithm::kDirect)) best = direct(call.kind, n, bytes, g);
      return best;
    default:
      break;
  }
  if (wants(Algorithm::kRing)) keep_best(best, ring(call.kind, n, bytes, g));
  if (wants(Algorithm::kTree)) keep_best(best, tree(call.kind, n, bytes, g));
  if (wants(Algorithm::kNvls)) keep_best(best, nvls(call.kind, n, bytes, g));
  if (wants(Algorithm::kHierarchical)) keep_best(best, hierarchical(call.kind, n, bytes, g));
  return best;
}

CollectiveCost finish(const CollectiveCall& call, const Priced& p) {
  CollectiveCost c;
  c.algorithm = p.algorithm;
  c.protocol = p.proto;
  c.time_s = p.time_us * 1e-6;
  c.latency_s = p.latency_us * 1e-6;
  if (p.time_us > 0) {
    c.algbw_gbps = static_cast<double>(call.bytes) / c.time_s / 1e9;
    c.busbw_gbps = c.algbw_gbps * busbw_factor(call.kind, call.group_size);
  }
  return c;
}

constexpr EnumName<Algorithm> kAlgorithmNames[] = {{"none", Algorithm::kNone},
                                                   {"ring", Algorithm::kRing},
                                                   {"tree", Algorithm::kTree},
                                                   {"nvls", Algorithm::kNvls},
                                                   {"hierarchical", Algorithm::kHierarchical},
                                                   {"direct", Algorithm::kDirect}};
constexpr EnumName<nccl::Proto> kProtoNames[] = {
    {"ll", Proto::kLL}, {"ll128", Proto::kLL128}, {"simple", Proto::kSimple}};

}  // namespace

std::string_view to_string(Algorithm a) { return enum_name(a, kAlgorithmNames); }

Algorithm parse_algorithm(std::string_view s) {
  // NCCL_ALGO's other values: real NCCL algorithms this model does not price (docs/cost-model.md
  // §5.4), refused by name rather than as unknown.
  constexpr std::string_view kUnpriced[] = {"nvlstree", "collnet_direct", "collnet_chain", "pat"};
  for (std::string_view n : kUnpriced) {
    SP_CHECK(!detail::names_equal(n, s, NameCase::kInsensitive), "algorithm '", s,
             "' is NCCL's but shardplan's cost model does not price it, expected one of: ring, "
             "tree, nvls, hierarchical (shardplan's intra/inter/intra phases), direct");
  }
  return parse_enum_name(s, kAlgorithmNames, "algorithm", NameCase::kInsensitive);
}

std::string_view to_string(nccl::Proto p) { return enum_name(p, kProtoNames); }

std::ostream& operator<<(std::ostream& os, const CollectiveCost& c) {
  return os << to_string(c.algorithm) << "/" << to_string(c.protocol) << ": " << c.time_s * 1e6
            << " us, algbw " << c.algbw_gbps << " GB/s, busbw " << c.busbw_gbps << " GB/s";
}

nlohmann::ordered_json to_json(const CollectiveCost& c) {
  nlohmann::ordered_json j;
  j["algorithm"] = to_string(c.algorithm);
  j["protocol"] = to_string(c.protocol);
  j["time_s"] = c.time_s;
  j["latency_s"] = c.latency_s;
  j["algbw_gbps"] = c.algbw_gbps;
  j["busbw_gbps"] = c.busbw_gbps;
  return j;
}

CollectiveCost collective_cost(const CollectiveCall& call) {
  const Priced p = price(call, std::nullopt);
  // Only links with a zero bandwidth (hand-written JSON) leave nothing to choose from: name it.
  if (!(p.time_us < kInf)) {
    const GroupLinks& g = call.links;
    std::string zero;
    if (g.ranks_per_node > 1 && !(g.intra_bandwidth_gbps > 0)) zero = "links.intra_bandwidth_gbps";
    if (g.nodes > 1 && !(g.inter_bandwidth_gbps > 0)) zero = "links.inter_bandwidth_gbps";
    if (g.nodes > 1 && !(g.nic_bandwidth_gbps > 0) && zero.empty())
      zero = "links.nic_bandwidth_gbps";
    SP_FAIL("collective ", call, ": no algorithm can run on these links (", g, "): ",
            zero.empty() ? std::string("a bandwidth the group needs") : "field '" + zero + "'",
            " is 0, expected a positive bandwidth in GB/s");
  }
  return finish(call, p);
}

std::optional<CollectiveCost> collective_cost_with(const CollectiveCall& call, Algorithm a) {
  const Priced p = price(call, a);
  if (!(p.time_us < kInf)) return std::nullopt;
  return finish(call, p);
}

}  // namespace shardplan::collectives
