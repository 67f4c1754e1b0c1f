#include "collectives/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "base/checked.h"
#include "base/config_paths.h"
#include "base/enum_names.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/limits.h"
#include "base/strict_json.h"

// Note [Cluster file format]
// {"format": "shardplan.cluster", "version": 1, "name": "dgx-h100", "description": "...",
//  "collective_library": {"name": "nccl" | "mpi" | "dtensor_compat", "version": "2.30.7"},
//  "accelerator": {"model": "...", "arch": "cpu|volta|ampere|hopper|blackwell",
//                  "dense_tflops": {"<dtype>": Q, ...}, "memory_gb": Q, "memory_bandwidth_gbps":
//                  Q, "matmul_efficiency": {"<dtype>": Q fraction, ...} (optional),
//                  "streaming_multiprocessors": Q count (optional),
//                  "memory_efficiency": Q fraction (optional)},
//  "accelerators_per_node": Q,
//  "accelerators_per_host": Q                  (optional: when a node, an NVLink domain, spans
//                                               hosts; must divide accelerators_per_node)
//  "intra_node": {"fabric": "nvlink|shared_memory", "links_per_gpu": Q, "link_bandwidth_gbps": Q,
//                 "bus_bandwidth_gbps": Q, "latency_us": Q, "nvls": bool,
//                 "nvls_efficiency": Q (only and always when nvls is true)},
//  "network": {"nics_per_node": Q, "nic_line_rate_gbit_per_s": Q, "nic_bandwidth_gbps": Q,
//              "latency_us": Q, "topology": "rail_optimized_fat_tree", "nodes_per_leaf": Q,
//              "oversubscription": Q}        (optional: absent for a single-node machine)
//  "price_per_gpu_hour_usd": Q                 (optional: what one accelerator-hour costs, its
//                                               source naming the offer and its date)
// }
// where Q = {"value": <number>, "source": "<where the number comes from>"}. Every key is
// required unless marked optional; unknown keys are errors (a typo must not silently fall back to
// a default). Counts (links, NICs, accelerators, nodes per leaf) must be positive integers;
// bandwidths, latencies and peaks positive; efficiencies in (0, 1]; oversubscription >= 1; and
// each within its plausible range (Note [Plausible ranges]).

namespace shardplan::collectives {
namespace {

constexpr std::string_view kFormat = "shardplan.cluster";
constexpr int64_t kVersion = 1;
constexpr std::string_view kRailFatTree = "rail_optimized_fat_tree";

// Note [Plausible ranges]
// Every number of a cluster file has a range beyond which it is a typo, not hardware: a GPU of
// 9.3e9 GB gave a negative capacity (its bytes overflow) and plans that "fit", a latency of 1e308
// us printed 300-digit times. Each bound sits one to two orders of magnitude beyond the largest
// and fastest hardware of 2026 (docs/cost-model.md §6.4: B200 at 2,250 dense bf16
// TFLOP/s with 180 GB at 8 TB/s, NVLink 5 at 900 GB/s per direction, 800 Gb/s NICs, 72 GPUs in
// one NVLink domain), so no real machine is refused and every product of them stays finite.
enum class Kind { kNumber, kCount, kFraction };
struct Range {
  Kind kind;
  double min, max;        // inclusive; a fraction is in (0, 1]
  std::string_view unit;  // as the message says it ("GB"), "" for a plain number
};
constexpr Range kPeakTflops{Kind::kNumber, 1e-6, 1e5, "TFLOP/s"};
constexpr Range kMemoryGb{Kind::kNumber, 1e-3, 1e5, "GB"};  // a CPU rank's share of a host too
constexpr Range kBandwidthGbps{Kind::kNumber, 1e-3, 1e5, "GB/s"};
constexpr Range kLineRateGbit{Kind::kNumber, 1e-3, 1e6, "Gbit/s"};
constexpr Range kLatencyUs{Kind::kNumber, 1e-3, 1e6, "us"};  // a nanosecond to a second per step
constexpr Range kFraction{Kind::kFraction, 0, 1, ""};
constexpr Range kPerNode{Kind::kCount, 1, 1024, ""};  // accelerators, links and NICs of a node
constexpr Range kMultiprocessors{Kind::kCount, 1, 1e4, ""};
constexpr Range kNodesPerLeaf{Kind::kCount, 1, 65536, ""};
constexpr Range kOversubscription{Kind::kNumber, 1, 1000, ""};
constexpr Range kPriceUsd{Kind::kNumber, 1e-6, 1e4, "USD"};

// Q = {"value": number, "source": non-empty string}, the value checked against `range`.
Quantity quantity(JsonFields& r, std::string_view key, const Range& range) {
  JsonFields q = r.object(key);
  Quantity out{q.number("value"), q.str("source")};
  if (out.source.empty()) q.fail("source", "expected a non-empty source for the number");
  const double x = out.value;
  const bool ok =
      range.kind == Kind::kFraction
          ? x > 0 && x <= 1
          : x >= range.min && x <= range.max && (range.kind != Kind::kCount || x == std::floor(x));
  if (!ok) {
    const auto num = [](double v) {
      if (v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));  // bounds < 2^53
      std::ostringstream os;
      os << v;
      return os.str();
    };
    const std::string unit = range.unit.empty() ? "" : " " + std::string(range.unit);
    const std::string expected =
        range.kind == Kind::kFraction ? "a number in (0, 1]"
        : range.kind == Kind::kCount
            ? "an integer from " + num(range.min) + " to " + num(range.max)
            : "a number from " + num(range.min) + " to " + num(range.max) + unit;
    q.fail("value", "expected " + expected + ", got " + json_excerpt(q.json()["value"]) +
                        " (the plausible range: docs/cost-model.md §6.4)");
  }
  q.done();
  return out;
}

constexpr EnumName<Arch> kArchNames[] = {{"cpu", Arch::kCpu},
                                         {"volta", Arch::kVolta},
                                         {"ampere", Arch::kAmpere},
                                         {"hopper", Arch::kHopper},
                                         {"blackwell", Arch::kBlackwell}};
constexpr EnumName<Fabric> kFabricNames[] = {{"nvlink", Fabric::kNvlink},
                                             {"shared_memory", Fabric::kSharedMemory}};
constexpr EnumName<Library> kLibraryNames[] = {
    {"nccl", Library::kNccl}, {"mpi", Library::kMpi}, {"dtensor_compat", Library::kDTensorCompat}};

nlohmann::ordered_json q_json(const Quantity& q) {
  nlohmann::ordered_json j;
  j["value"] = q.value;
  j["source"] = q.source;
  return j;
}

}  // namespace

std::string_view to_string(Arch a) { return enum_name(a, kArchNames); }
std::string_view to_string(Fabric f) { return enum_name(f, kFabricNames); }
std::string_view to_string(Library l) { return enum_name(l, kLibraryNames); }
Arch parse_arch(std::string_view s) { return parse_enum_name(s, kArchNames, "arch"); }
Fabric parse_fabric(std::string_view s) { return parse_enum_name(s, kFabricNames, "fabric"); }
Library parse_library(std::string_view s) { return parse_enum_name(s, kLibraryNames, "library"); }

int64_t gpus_per_node(const Cluster& c) {
  return static_cast<int64_t>(c.accelerators_per_node.value);
}

int64_t gpus_per_host(const Cluster& c) {
  return c.accelerators_per_host ? static_cast<int64_t>(c.accelerators_per_host->value)
                                 : gpus_per_node(c);
}

Cluster with_nodes(Cluster c, int64_t nodes) {
  SP_CHECK(nodes >= 1, "cluster ", c.name, ": --nodes ", nodes, ", expected at least 1");
  SP_CHECK(nodes == 1 || c.network.has_value(), "cluster ", c.name,
           " has no network section (a single machine): --nodes ", nodes, ", expected 1");
  int64_t gpus = 0;
  SP_CHECK(mul_into(nodes, gpus_per_node(c), gpus) && gpus <= kMaxRanks, "cluster ", c.name,
           ": --nodes ", nodes, " x ", gpus_per_node(c), " accelerators per node is more than the ",
           kMaxRanks, " ranks shardplan plans for (2^20; docs/user-guide.md \"Limits\")");
  c.nodes = nodes;
  c.gpus = gpus;
  return c;
}

Cluster with_gpus(Cluster c, int64_t gpus) {
  const int64_t per_node = gpus_per_node(c);
  SP_CHECK(gpus >= 1, "cluster ", c.name, ": --gpus ", gpus, ", expected at least 1");
  if (gpus <= per_node) {
    c.nodes = 1;
    c.gpus = gpus;
    return c;
  }
  SP_CHECK(gpus % per_node == 0, "cluster ", c.name, ": --gpus ", gpus, " is not a multiple of ",
           per_node, " accelerators per node (or at most one node)");
  c = with_nodes(std::move(c), gpus / per_node);
  return c;
}

Cluster cluster_from_json(const nlohmann::json& j, std::string_view origin_view,
                          std::string_view path) {
  const std::string origin(origin_view);
  JsonFields doc(j, origin, std::string(path));
  if (doc.str("format") != kFormat) doc.fail("format", "expected \"" + std::string(kFormat) + "\"");
  const nlohmann::json& version = doc.get("version");
  if (!version.is_number_integer() || version.get<int64_t>() != kVersion) {
    doc.fail("version", "expected " + std::to_string(kVersion) + ", got " + json_excerpt(version));
  }
  Cluster c;
  c.name = doc.line("name");
  if (c.name.empty()) doc.fail("name", "expected a non-empty name");
  if (static_cast<int64_t>(c.name.size()) > kMaxNameBytes) {
    doc.fail("name", std::to_string(c.name.size()) + " bytes (" + json_excerpt(c.name) +
                         "), expected a name of at most " + std::to_string(kMaxNameBytes));
  }
  c.description = doc.line("description");
  {
    JsonFields lib = doc.object("collective_library");
    c.library = lib.enumeration("name", kLibraryNames);
    c.library_version = lib.str("version");
    lib.done();
  }
  {
    JsonFields a = doc.object("accelerator");
    c.accelerator.model = a.line("model");
    c.accelerator.arch = a.enumeration("arch", kArchNames);
    JsonFields peaks = a.object("dense_tflops");
    for (auto it = peaks.json().begin(); it != peaks.json().end(); ++it) {
      c.accelerator.dense_tflops[it.key()] = quantity(peaks, it.key(), kPeakTflops);
    }
    if (c.accelerator.dense_tflops.empty()) a.fail("dense_tflops", "expected at least one dtype");
    c.accelerator.memory_gb = quantity(a, "memory_gb", kMemoryGb);
    c.accelerator.memory_bandwidth_gbps = quantity(a, "memory_bandwidth_gbps", kBandwidthGbps);
    if (a.has("matmul_efficiency")) {
      JsonFields eff = a.object("matmul_efficiency");
      for (auto it = eff.json().begin(); it != eff.json().end(); ++it) {
        if (!c.accelerator.dense_tflops.contains(it.key())) {
          eff.fail(it.key(), "has no dense_tflops peak to be a fraction of");
        }
        c.accelerator.matmul_efficiency[it.key()] = quantity(eff, it.key(), kFraction);
      }
    }
    if (a.has("streaming_multiprocessors")) {
      c.accelerator.streaming_multiprocessors =
          quantity(a, "streaming_multiprocessors", kMultiprocessors);
    }
    if (a.has("memory_efficiency")) {
      c.accelerator.memory_efficiency = quantity(a, "memory_efficiency", kFraction);
    }
    a.done();
  }
  c.accelerators_per_node = quantity(doc, "accelerators_per_node", kPerNode);
  if (doc.has("accelerators_per_host")) {
    c.accelerators_per_host = quantity(doc, "accelerators_per_host", kPerNode);
    const auto host = static_cast<int64_t>(c.accelerators_per_host->value);
    const auto node = static_cast<int64_t>(c.accelerators_per_node.value);
    if (node % host != 0) {
      doc.fail("accelerators_per_host",
               std::to_string(host) + " does not divide the " + std::to_string(node) +
                   " accelerators of a node, expected a divisor of " + std::to_string(node));
    }
  }
  {
    JsonFields in = doc.object("intra_node");
    c.intra.fabric = in.enumeration("fabric", kFabricNames);
    c.intra.links_per_gpu = quantity(in, "links_per_gpu", kPerNode);
    c.intra.link_bandwidth_gbps = quantity(in, "link_bandwidth_gbps", kBandwidthGbps);
    c.intra.bus_bandwidth_gbps = quantity(in, "bus_bandwidth_gbps", kBandwidthGbps);
    c.intra.latency_us = quantity(in, "latency_us", kLatencyUs);
    c.intra.nvls = in.boolean("nvls");
    if (c.intra.nvls) {
      c.intra.nvls_efficiency = quantity(in, "nvls_efficiency", kFraction);
    } else if (in.has("nvls_efficiency")) {
      in.fail("nvls_efficiency", "given but nvls is false");
    }
    if (c.intra.nvls && c.intra.fabric != Fabric::kNvlink) in.fail("nvls", "needs fabric nvlink");
    // Achievable bandwidth cannot beat the wires it runs on.
    const double line = c.intra.links_per_gpu.value * c.intra.link_bandwidth_gbps.value;
    if (c.intra.bus_bandwidth_gbps.value > line) {
      in.fail("bus_bandwidth_gbps",
              "value " + nlohmann::json(c.intra.bus_bandwidth_gbps.value).dump() +
                  " exceeds links_per_gpu * link_bandwidth_gbps = " + nlohmann::json(line).dump());
    }
    in.done();
  }
  if (doc.has("network")) {
    JsonFields n = doc.object("network");
    NetworkSpec net;
    net.nics_per_node = quantity(n, "nics_per_node", kPerNode);
    net.nic_line_rate_gbit_per_s = quantity(n, "nic_line_rate_gbit_per_s", kLineRateGbit);
    net.nic_bandwidth_gbps = quantity(n, "nic_bandwidth_gbps", kBandwidthGbps);
    net.latency_us = quantity(n, "latency_us", kLatencyUs);
    if (n.str("topology") != kRailFatTree) {
      n.fail("topology", "unknown value, expected \"" + std::string(kRailFatTree) + "\"");
    }
    net.nodes_per_leaf = quantity(n, "nodes_per_leaf", kNodesPerLeaf);
    net.oversubscription = quantity(n, "oversubscription", kOversubscription);
    // 8 bits per byte: the line rate bounds what a NIC can achieve.
    const double line_gbps = net.nic_line_rate_gbit_per_s.value / 8;
    if (net.nic_bandwidth_gbps.value > line_gbps) {
      n.fail("nic_bandwidth_gbps",
             "value " + nlohmann::json(net.nic_bandwidth_gbps.value).dump() +
                 " exceeds the line rate / 8 = " + nlohmann::json(line_gbps).dump());
    }
    n.done();
    c.network = net;
  }
  if (doc.has("price_per_gpu_hour_usd")) {
    c.price_per_gpu_hour_usd = quantity(doc, "price_per_gpu_hour_usd", kPriceUsd);
  }
  doc.done();
  return with_nodes(std::move(c), 1);
}

Cluster load_cluster(const std::filesystem::path& path) {
  // Strict (duplicate keys refused, depth bounded): a cluster file is at most 4 objects deep.
  constexpr int kMaxDepth = 8;
  const nlohmann::json j = parse_strict_json(read_text_file(path, "cluster file"), path.string(),
                                             kMaxDepth, "a shardplan cluster file");
  return cluster_from_json(j, path.string());
}

nlohmann::ordered_json cluster_to_json(const Cluster& c) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["name"] = c.name;
  j["description"] = c.description;
  j["collective_library"] = {{"name", to_string(c.library)}, {"version", c.library_version}};
  nlohmann::ordered_json a;
  a["model"] = c.accelerator.model;
  a["arch"] = to_string(c.accelerator.arch);
  a["dense_tflops"] = nlohmann::ordered_json::object();
  for (const auto& [dtype, q] : c.accelerator.dense_tflops) a["dense_tflops"][dtype] = q_json(q);
  a["memory_gb"] = q_json(c.accelerator.memory_gb);
  a["memory_bandwidth_gbps"] = q_json(c.accelerator.memory_bandwidth_gbps);
  if (!c.accelerator.matmul_efficiency.empty()) {
    a["matmul_efficiency"] = nlohmann::ordered_json::object();
    for (const auto& [dtype, q] : c.accelerator.matmul_efficiency) {
      a["matmul_efficiency"][dtype] = q_json(q);
    }
  }
  if (c.accelerator.streaming_multiprocessors) {
    a["streaming_multiprocessors"] = q_json(*c.accelerator.streaming_multiprocessors);
  }
  if (c.accelerator.memory_efficiency) {
    a["memory_efficiency"] = q_json(*c.accelerator.memory_efficiency);
  }
  j["accelerator"] = a;
  j["accelerators_per_node"] = q_json(c.accelerators_per_node);
  if (c.accelerators_per_host) j["accelerators_per_host"] = q_json(*c.accelerators_per_host);
  nlohmann::ordered_json in;
  in["fabric"] = to_string(c.intra.fabric);
  in["links_per_gpu"] = q_json(c.intra.links_per_gpu);
  in["link_bandwidth_gbps"] = q_json(c.intra.link_bandwidth_gbps);
  in["bus_bandwidth_gbps"] = q_json(c.intra.bus_bandwidth_gbps);
  in["latency_us"] = q_json(c.intra.latency_us);
  in["nvls"] = c.intra.nvls;
  if (c.intra.nvls_efficiency) in["nvls_efficiency"] = q_json(*c.intra.nvls_efficiency);
  j["intra_node"] = in;
  if (c.network) {
    const NetworkSpec& n = *c.network;
    nlohmann::ordered_json net;
    net["nics_per_node"] = q_json(n.nics_per_node);
    net["nic_line_rate_gbit_per_s"] = q_json(n.nic_line_rate_gbit_per_s);
    net["nic_bandwidth_gbps"] = q_json(n.nic_bandwidth_gbps);
    net["latency_us"] = q_json(n.latency_us);
    net["topology"] = kRailFatTree;
    net["nodes_per_leaf"] = q_json(n.nodes_per_leaf);
    net["oversubscription"] = q_json(n.oversubscription);
    j["network"] = net;
  }
  if (c.price_per_gpu_hour_usd) j["price_per_gpu_hour_usd"] = q_json(*c.price_per_gpu_hour_usd);
  return j;
}

std::ostream& operator<<(std::ostream& os, const Cluster& c) {
  os << "Cluster(" << c.name << ", " << c.nodes << " node(s) x " << gpus_per_node(c) << " "
     << c.accelerator.model << ", " << to_string(c.intra.fabric) << " "
     << c.intra.bus_bandwidth_gbps.value << " GB/s";
  if (c.network) {
    os << ", " << c.network->nics_per_node.value << "x " << c.network->nic_bandwidth_gbps.value
       << " GB/s NICs";
  }
  return os << ")";
}

std::filesystem::path resolve_cluster(std::string_view name_or_path) {
  return find_config("clusters", name_or_path);
}

}  // namespace shardplan::collectives
