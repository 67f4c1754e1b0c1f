#include "collectives/calibration.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/enum_names.h"
#include "base/error.h"
#include "collectives/dtensor_compat.h"
#include "collectives/nccl_tuning.h"
#include "collectives/topology.h"

// Note [Calibration]
// A cluster file holds, per link class, the two numbers the ring formula of Note [Cost model]
// (cost_model.cpp) needs: a per-step latency l (Ring, Simple) and a bandwidth. nccl-tests times a
// collective of S bytes; busbw = S * f / t with nccl-tests' factor f (docs/cost-model.md §5.1).
// Each time t is therefore modelled exactly as the cost model prices that run with Ring/Simple:
//   intra (one node, n ranks):  t = base + steps * l_in + S f / B_in
//   inter (N nodes, p per node): t = base + (steps - inter) l_in + inter * l_net + S f / (K b)
// with base NCCL's Ring/Simple base latency (8.4 us; 0 for MPI), steps = 2(n-1) for all_reduce and
// n-1 for all_gather, reduce_scatter, broadcast and reduce, inter = 2(N-1) resp. N-1 ring steps
// crossing nodes, K = NICs per node (divided by the oversubscription when the ring crosses spines)
// and b the bandwidth of one NIC. all_to_all and send_recv are one step of the slowest link
// (base + l); all_to_all's network part sends S(n-p)/n per rank through at most one NIC.
// Both are linear in (l, 1/B), so all rows of all logs of one link are fitted at once by least
// squares. Residuals are relative (weights 1/t^2): sizes span 8 B to GBs, and an absolute fit
// would let the largest rows decide the latency too. l_in comes from the intra fit (or the file)
// when the inter fit runs.
// What the fit refuses: a bandwidth above the line rate (NVLS and Tree reach busbw above the
// links' rate, e.g. ~480 GB/s on H100 NVLink at 450 GB/s line rate, and a 2-node Tree exceeds the
// NICs: record logs with NCCL_ALGO=Ring, nccl-tests#196), an inter-node ring whose fitted network
// share is at least the fabric's bus bandwidth (the ring would then be bounded by the fabric and
// the log says nothing about the NICs), and latencies or bandwidths <= 0.

namespace shardplan::collectives {
namespace {

struct Row {
  double t;   // measured time, us
  double k0;  // known part, us
  double u1;  // coefficient of the per-step latency
  double u2;  // coefficient of 1 / bandwidth (bytes)
};

struct Fit {
  double latency_us = 0;  // theta 1
  double bandwidth_gbps = 0;
  double rms = 0;
};

// Weighted least squares of t = k0 + u1 x + u2 y on relative residuals; columns scaled to unit
// RMS so the 2x2 system is well conditioned whatever the units.
Fit least_squares(const std::vector<Row>& rows, std::string_view what) {
  double s1 = 0, s2 = 0;
  for (const Row& r : rows) {
    const double w = 1 / (r.t * r.t);
    s1 += w * r.u1 * r.u1;
    s2 += w * r.u2 * r.u2;
  }
  SP_CHECK(s1 > 0 && s2 > 0, what,
           ": the rows do not determine a latency and a bandwidth, expected ",
           "rows with bytes > 0");
  s1 = std::sqrt(s1), s2 = std::sqrt(s2);
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (const Row& r : rows) {
    const double w = 1 / (r.t * r.t);
    const double x1 = r.u1 / s1, x2 = r.u2 / s2, y = r.t - r.k0;
    a11 += w * x1 * x1, a12 += w * x1 * x2, a22 += w * x2 * x2;
    b1 += w * x1 * y, b2 += w * x2 * y;
  }
  const double det = a11 * a22 - a12 * a12;
  SP_CHECK(det > 1e-12 * a11 * a22, what,
           ": every row has the same size, expected at least two different sizes to separate "
           "latency from bandwidth");
  const double x = (b1 * a22 - b2 * a12) / det / s1;
  const double inv_bw = (a11 * b2 - a12 * b1) / det / s2;  // us per byte
  double sq = 0;
  for (const Row& r : rows) {
    const double e = (r.k0 + r.u1 * x + r.u2 * inv_bw - r.t) / r.t;
    sq += e * e;
  }
  Fit f;
  f.latency_us = x;
  f.bandwidth_gbps = inv_bw > 0 ? 1 / (inv_bw * 1e3) : -1;  // transfer_us's inverse
  f.rms = std::sqrt(sq / static_cast<double>(rows.size()));
  return f;
}

bool is_ring_kind(CollectiveKind k) {
  return k != CollectiveKind::kAllToAll && k != CollectiveKind::kSendRecv;
}
int64_t ring_steps(CollectiveKind k, int64_t n) {
  return k == CollectiveKind::kAllReduce ? 2 * (n - 1) : n - 1;
}

double base_latency_us(collectives::Library lib) {
  switch (lib) {
    case collectives::Library::kNccl:
      return nccl::base_latency_us(nccl::Algo::kRing, nccl::Proto::kSimple);
    case collectives::Library::kMpi:
      return 0;
    case collectives::Library::kDTensorCompat:
      return dtensor::kBaseLatencyUs;
  }
  return 0;
}

// Every time of a row: out-of-place and, when printed, in-place.
template <typename F>
void for_each_time(const NcclTestsLog& log, F&& f) {
  for (const NcclTestsRow& r : log.rows) {
    f(r, r.out_of_place_us);
    if (r.in_place_us) f(r, *r.in_place_us);
  }
}

std::string describe(const NcclTestsLog& log) {
  std::ostringstream os;
  os << log.origin << " (" << to_string(log.kind) << ", " << log.ranks << " ranks on " << log.nodes
     << (log.nodes == 1 ? " node, " : " nodes, ") << log.rows.size() << " rows)";
  return os.str();
}

std::vector<Row> intra_rows(const collectives::Cluster& c, const NcclTestsLog& log) {
  const int64_t n = log.ranks;
  SP_CHECK(log.nodes == 1, log.origin, ": ", log.ranks, " ranks on ", log.nodes,
           " nodes, expected one node for link ", to_string(c.intra.fabric),
           " (use --link ib for a log across nodes)");
  SP_CHECK(n >= 2 && n <= collectives::gpus_per_node(c), log.origin, ": ", n,
           " ranks on one node, ", "expected 2 to ", collectives::gpus_per_node(c), " (", c.name,
           "'s devices per node)");
  const double base = base_latency_us(c.library);
  const double f = busbw_factor(log.kind, n);
  const double steps = is_ring_kind(log.kind) ? static_cast<double>(ring_steps(log.kind, n)) : 1;
  std::vector<Row> rows;
  for_each_time(log, [&](const NcclTestsRow& r, double t) {
    rows.push_back({t, base, steps, static_cast<double>(r.bytes) * f});
  });
  return rows;
}

struct InterRows {
  std::vector<Row> rows;
  // For the check that the network, not the fabric, bounds what was measured.
  double fabric_gbps = 0;        // per-rank bus bandwidth inside a node (0: one rank per node)
  double nic_share_per_nic = 0;  // network bandwidth of this run per unit of NIC bandwidth
  double intra_latency_us = 0;
};

InterRows inter_rows(const collectives::Cluster& c, const NcclTestsLog& log) {
  SP_CHECK(c.network.has_value(), log.origin, ": cluster ", c.name,
           " has no network, expected a cluster with one for link ib");
  SP_CHECK(log.nodes >= 2, log.origin, ": ", log.ranks, " ranks on one node, expected at least 2 ",
           "nodes for link ib (use --link ", to_string(c.intra.fabric), " for one node)");
  SP_CHECK(log.same_ranks_per_node, log.origin, ": different rank counts on its ", log.nodes,
           " hosts, expected the same number on each");
  const int64_t p = log.ranks_per_node, n = log.ranks, nodes = log.nodes;
  SP_CHECK(p <= collectives::gpus_per_node(c), log.origin, ": ", p,
           " ranks per node, expected at most ", collectives::gpus_per_node(c), " (", c.name,
           "'s devices per node)");
  const collectives::Topology topo(collectives::with_nodes(c, nodes));
  std::vector<int64_t> devices;
  for (int64_t node = 0; node < nodes; ++node) {
    for (int64_t i = 0; i < p; ++i) devices.push_back(node * collectives::gpus_per_node(c) + i);
  }
  const collectives::GroupLinks g = topo.group_links(devices);
  const collectives::NetworkSpec& net = *c.network;
  const double spine = g.crosses_spine ? 1 / net.oversubscription.value : 1;
  const double nics = net.nics_per_node.value;
  const double base = base_latency_us(c.library);
  InterRows out;
  out.fabric_gbps = p > 1 ? g.intra_bandwidth_gbps : 0;
  out.intra_latency_us = p > 1 ? g.intra_latency_us : 0;
  const double nd = static_cast<double>(n), pd = static_cast<double>(p);
  if (is_ring_kind(log.kind)) {
    const int64_t steps = ring_steps(log.kind, n);
    const int64_t inter = log.kind == CollectiveKind::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
    const double known = base + static_cast<double>(steps - inter) * g.intra_latency_us;
    const double f = busbw_factor(log.kind, n);
    out.nic_share_per_nic = nics * spine;
    for_each_time(log, [&](const NcclTestsRow& r, double t) {
      out.rows.push_back({t, known, static_cast<double>(inter),
                          static_cast<double>(r.bytes) * f / (nics * spine)});
    });
  } else if (log.kind == CollectiveKind::kAllToAll) {
    // Per rank at most one NIC, shared when a node has more ranks than NICs (topology.cpp).
    out.nic_share_per_nic = spine * std::min(1.0, nics / pd) * nd / (nd - pd);
    for_each_time(log, [&](const NcclTestsRow& r, double t) {
      out.rows.push_back(
          {t, base, 1,
           static_cast<double>(r.bytes) * (nd - pd) / nd / (spine * std::min(1.0, nics / pd))});
    });
  } else {
    SP_CHECK(n == 2 && p == 1, log.origin, ": send_recv over ", n, " ranks, ", p,
             " per node, expected 2 ranks on 2 nodes for link ib");
    out.nic_share_per_nic = spine;
    for_each_time(log, [&](const NcclTestsRow& r, double t) {
      out.rows.push_back({t, base, 1, static_cast<double>(r.bytes) / spine});
    });
  }
  return out;
}

// "link shared_memory (fitted to r.json: intra sweep on tp)": a fit's refusal names its logs.
std::string link_fitted_to(std::string_view link, const std::vector<const NcclTestsLog*>& logs) {
  std::string s = "link " + std::string(link) + " (fitted to ";
  for (size_t i = 0; i < logs.size(); ++i) s += (i ? ", " : "") + logs[i]->origin;
  return s + ")";
}

std::string source_of(std::string_view what, const std::vector<const NcclTestsLog*>& logs) {
  std::string s = "shardplan calibrate: " + std::string(what) + " fitted to nccl-tests logs ";
  for (size_t i = 0; i < logs.size(); ++i) s += (i ? ", " : "") + describe(*logs[i]);
  return s +
         "; least squares of time = base + steps x latency + bytes x busbw factor / "
         "bandwidth on relative residuals (Note [Calibration], collectives/calibration.cpp)";
}

// The printed names first ("intra", "ib"), then the aliases --link accepts: the cluster file's
// fabric names, the link classes, "inter".
constexpr EnumName<CalibratedLink> kCalibratedLinkNames[] = {
    {"intra", CalibratedLink::kIntra},   {"ib", CalibratedLink::kInter},
    {"nvlink", CalibratedLink::kIntra},  {"shared_memory", CalibratedLink::kIntra},
    {"network", CalibratedLink::kInter}, {"inter", CalibratedLink::kInter}};

// "intra, nvlink, shared_memory": every name of `l`, in table order.
std::string names_of(CalibratedLink l) {
  std::string out;
  for (const EnumName<CalibratedLink>& n : kCalibratedLinkNames) {
    if (n.value == l) out += (out.empty() ? "" : ", ") + std::string(n.name);
  }
  return out;
}
}  // namespace

std::string_view to_string(CalibratedLink l) { return enum_name(l, kCalibratedLinkNames); }

CalibratedLink parse_calibrated_link(std::string_view s) {
  if (std::optional<CalibratedLink> l = find_enum_name(s, kCalibratedLinkNames)) return *l;
  // Every alias is listed: users type the cluster file's names (nvlink, ib), not ours.
  SP_FAIL("unknown link class '", s, "', expected one of: ", names_of(CalibratedLink::kIntra),
          " (inside a node), ", names_of(CalibratedLink::kInter), " (between nodes)");
}

LogFit fit_log(const NcclTestsLog& log) {
  SP_CHECK(log.ranks >= 2, log.origin, ": ", log.ranks,
           " rank, expected at least 2 (a collective over one rank moves nothing)");
  std::vector<Row> rows;
  const double f = busbw_factor(log.kind, std::max<int64_t>(log.ranks, 1));
  for_each_time(log, [&](const NcclTestsRow& r, double t) {
    rows.push_back({t, 0, 1, static_cast<double>(r.bytes) * f});
  });
  const Fit fit = least_squares(rows, log.origin);
  LogFit out;
  out.origin = log.origin;
  out.kind = log.kind;
  out.ranks = log.ranks;
  out.nodes = log.nodes;
  out.points = static_cast<int64_t>(rows.size());
  out.latency_us = fit.latency_us;
  out.busbw_gbps = fit.bandwidth_gbps;
  out.rms_relative_residual = fit.rms;
  return out;
}

CalibrationResult calibrate(const collectives::Cluster& cluster,
                            std::span<const CalibrationInput> inputs) {
  SP_CHECK(!inputs.empty(), "calibrate: no nccl-tests logs, expected at least one");
  CalibrationResult result;
  result.cluster = cluster;
  collectives::Cluster& c = result.cluster;
  for (const CalibrationInput& in : inputs) result.logs.push_back(fit_log(in.log));

  std::vector<const NcclTestsLog*> intra_logs, inter_logs;
  for (const CalibrationInput& in : inputs) {
    (in.link == CalibratedLink::kIntra ? intra_logs : inter_logs).push_back(&in.log);
  }
  if (!intra_logs.empty()) {
    std::vector<Row> rows;
    for (const NcclTestsLog* log : intra_logs) {
      const std::vector<Row> r = intra_rows(c, *log);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const std::string what = link_fitted_to(collectives::to_string(c.intra.fabric), intra_logs);
    const Fit fit = least_squares(rows, what);
    const double line = c.intra.links_per_gpu.value * c.intra.link_bandwidth_gbps.value;
    SP_CHECK(fit.bandwidth_gbps > 0, what,
             ": fitted bandwidth is not positive, expected larger "
             "sizes to take longer");
    SP_CHECK(fit.latency_us > 0, what, ": fitted per-step latency ", fit.latency_us,
             " us is not positive (the small sizes run faster than the base latency ",
             base_latency_us(c.library), " us plus the ring's steps), expected > 0");
    SP_CHECK(fit.bandwidth_gbps <= line, what, ": fitted bus bandwidth ", fit.bandwidth_gbps,
             " GB/s is above the fabric's line rate ", line,
             " GB/s, expected a ring measurement (NVLS and trees exceed it: NCCL_ALGO=Ring)");
    result.links.push_back({CalibratedLink::kIntra, fit.latency_us, fit.bandwidth_gbps,
                            c.intra.latency_us.value, c.intra.bus_bandwidth_gbps.value,
                            static_cast<int64_t>(rows.size()), fit.rms});
    c.intra.latency_us = {fit.latency_us, source_of("per-step latency", intra_logs)};
    c.intra.bus_bandwidth_gbps = {fit.bandwidth_gbps, source_of("bus bandwidth", intra_logs)};
  }
  if (!inter_logs.empty()) {
    std::vector<Row> rows;
    std::vector<InterRows> parts;
    for (const NcclTestsLog* log : inter_logs) {
      parts.push_back(inter_rows(c, *log));
      rows.insert(rows.end(), parts.back().rows.begin(), parts.back().rows.end());
    }
    const std::string what = link_fitted_to("ib", inter_logs);
    const Fit fit = least_squares(rows, what);
    collectives::NetworkSpec& net = *c.network;
    const double line = net.nic_line_rate_gbit_per_s.value / 8;
    SP_CHECK(fit.bandwidth_gbps > 0, what,
             ": fitted NIC bandwidth is not positive, expected larger sizes to take longer");
    SP_CHECK(fit.latency_us > 0, what, ": fitted per-step latency ", fit.latency_us,
             " us is not positive, expected > 0");
    SP_CHECK(fit.bandwidth_gbps <= line, what, ": fitted NIC bandwidth ", fit.bandwidth_gbps,
             " GB/s is above the NIC line rate ", net.nic_line_rate_gbit_per_s.value,
             " Gb/s = ", line,
             " GB/s, expected a ring measurement (a 2-node tree exceeds the NICs: "
             "NCCL_ALGO=Ring, nccl-tests#196)");
    for (size_t i = 0; i < parts.size(); ++i) {
      const double share = fit.bandwidth_gbps * parts[i].nic_share_per_nic;
      SP_CHECK(parts[i].fabric_gbps == 0 || share < parts[i].fabric_gbps, inter_logs[i]->origin,
               ": the fitted network share ", share, " GB/s is not below the fabric's ",
               parts[i].fabric_gbps,
               " GB/s, so the fabric bounds this run and it says nothing about the NICs; expected "
               "a run the network bounds (fewer ranks per node)");
    }
    result.links.push_back({CalibratedLink::kInter, fit.latency_us, fit.bandwidth_gbps,
                            net.latency_us.value, net.nic_bandwidth_gbps.value,
                            static_cast<int64_t>(rows.size()), fit.rms});
    net.latency_us = {fit.latency_us, source_of("per-step latency", inter_logs)};
    net.nic_bandwidth_gbps = {fit.bandwidth_gbps, source_of("per-NIC bandwidth", inter_logs)};
  }
  if (c.description.find("calibrated") == std::string::npos) {
    c.description += " (calibrated from nccl-tests logs by shardplan calibrate)";
  }
  return result;
}

}  // namespace shardplan::collectives
