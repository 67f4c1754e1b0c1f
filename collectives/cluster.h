// A cluster description: accelerator, node, intra-node fabric and network, every number with its
// source, as read from configs/clusters/*.json (Note [Cluster file format] in cluster.cpp).
//   Cluster c = with_nodes(load_cluster(resolve_cluster("dgx-h100")), 2);  // 16 GPUs
//   double nvlink = c.intra.bus_bandwidth_gbps.value;                        // 370.8 GB/s
// Units live in the field names: _gbps is GB/s (1e9 bytes per second), _gbit_per_s is Gb/s,
// _us is microseconds, _gb is 1e9 bytes. Node count is not part of the file: with_nodes/with_gpus.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::collectives {

// A number and where it comes from (a datasheet, an NCCL source file, a calibration run).
struct Quantity {
  double value = 0;
  std::string source;
  friend bool operator==(const Quantity&, const Quantity&) = default;
};

// GPU generation; selects NCCL's per-architecture tuning rows (collectives/nccl_tuning.h).
enum class Arch { kCpu, kVolta, kAmpere, kHopper, kBlackwell };
// What connects the accelerators inside a node. NVLink here means "through NVSwitch", so every
// GPU pair sees its full per-GPU bandwidth.
enum class Fabric { kNvlink, kSharedMemory };
// The library that runs the collectives: NCCL's algorithm/protocol model, MPI's (ring), or
// PyTorch DTensor's estimator (dtensor_compat: its ring formulas, for the compatibility check).
enum class Library { kNccl, kMpi, kDTensorCompat };

std::string_view to_string(Arch a);
std::string_view to_string(Fabric f);
std::string_view to_string(Library l);
// The names to_string gives; throw shardplan::Error ("unknown arch 'x', expected one of: ...").
Arch parse_arch(std::string_view s);
Fabric parse_fabric(std::string_view s);
Library parse_library(std::string_view s);

struct AcceleratorSpec {
  std::string model;  // "H100 SXM5 80GB"
  Arch arch = Arch::kCpu;
  std::map<std::string, Quantity> dense_tflops;  // dtype name ("bf16", "fp8", ...) -> peak
  Quantity memory_gb;
  Quantity memory_bandwidth_gbps;
  // Optional (the planner's compute model, docs/cost-model.md §8.1): per dtype, the fraction of
  // the dense peak that large well-shaped GEMMs reach (a measured maximum achievable matmul rate);
  // and the number of streaming multiprocessors, which sets GEMM wave quantization.
  std::map<std::string, Quantity> matmul_efficiency;
  std::optional<Quantity> streaming_multiprocessors;
  // Optional: the fraction of memory_bandwidth_gbps that streaming kernels reach (a measured
  // figure); absent, the planner prices memory-bound work at the datasheet bandwidth.
  std::optional<Quantity> memory_efficiency;
  friend bool operator==(const AcceleratorSpec&, const AcceleratorSpec&) = default;
};

struct IntraNodeSpec {
  Fabric fabric = Fabric::kNvlink;
  Quantity links_per_gpu;        // NVLink links per GPU (1 for shared memory)
  Quantity link_bandwidth_gbps;  // line rate of one link, one direction
  Quantity bus_bandwidth_gbps;   // achievable per-GPU bus bandwidth (ring, Simple): calibrated
  Quantity latency_us;           // per ring step, Simple protocol: calibrated
  bool nvls = false;             // NVLink SHARP (multicast + in-switch reduction)
  std::optional<Quantity> nvls_efficiency;  // present iff nvls
  friend bool operator==(const IntraNodeSpec&, const IntraNodeSpec&) = default;
};

struct NetworkSpec {
  Quantity nics_per_node;
  Quantity nic_line_rate_gbit_per_s;  // marketing speed, e.g. 400 (NDR)
  Quantity nic_bandwidth_gbps;        // achievable per NIC, one direction: calibrated
  Quantity latency_us;                // per inter-node ring step, Simple protocol: calibrated
  // Rail-optimized fat tree: NIC i of every node goes to rail leaf i; leaves join through spines.
  Quantity nodes_per_leaf;    // nodes under one leaf (a scalable unit); beyond: spines
  Quantity oversubscription;  // leaf downlink : uplink bandwidth (1 = non-blocking)
  friend bool operator==(const NetworkSpec&, const NetworkSpec&) = default;
};

struct Cluster {
  std::string name;
  std::string description;
  Library library = Library::kNccl;
  std::string library_version;  // the NCCL version the constants are pinned to ("2.30.7")
  AcceleratorSpec accelerator;
  Quantity accelerators_per_node;
  // Optional: the accelerators of one host (one OS image, what a launcher's "node" is) when a node
  // of this file, an NVLink domain, spans several hosts: a GB200 NVL72 rack of 4-GPU compute
  // trays. Absent: a node is one host. Only launch lines read it (gpus_per_host).
  std::optional<Quantity> accelerators_per_host;
  IntraNodeSpec intra;
  std::optional<NetworkSpec> network;  // absent: a single-node machine (nodes must stay 1)
  // Optional: what one accelerator-hour costs, in US dollars (compare's cost columns).
  std::optional<Quantity> price_per_gpu_hour_usd;
  // Not in the file; set by with_nodes / with_gpus. gpus <= nodes * per node (a partial node is
  // allowed only when nodes == 1).
  int64_t nodes = 1;
  int64_t gpus = 0;
  friend bool operator==(const Cluster&, const Cluster&) = default;
};

int64_t gpus_per_node(const Cluster& c);
// accelerators_per_host, else gpus_per_node.
int64_t gpus_per_host(const Cluster& c);
// `nodes` full nodes. Throws shardplan::Error if nodes < 1 or the cluster has no network and
// nodes > 1.
Cluster with_nodes(Cluster c, int64_t nodes);
// `gpus` accelerators: a multiple of the per-node count, or fewer than one node.
Cluster with_gpus(Cluster c, int64_t gpus);

// Strict parse: every field required unless marked optional in the format note, no unknown
// keys, positive numbers, a non-empty `source` for every number. Errors are one line:
// "<origin>: field 'intra_node.bus_bandwidth_gbps.value': expected a positive number, got -3".
// `path` is where `j` sits inside `origin` ("cluster.facts" in a plan file; "" for a cluster file).
Cluster cluster_from_json(const nlohmann::json& j, std::string_view origin,
                          std::string_view path = "");
Cluster load_cluster(const std::filesystem::path& path);
// The file format (round-trips with cluster_from_json; nodes/gpus are not written).
nlohmann::ordered_json cluster_to_json(const Cluster& c);
std::ostream& operator<<(std::ostream& os, const Cluster& c);

// Where `name_or_path` lives: find_config("clusters", ...) of base/config_paths.h (Note
// [Locating configs]): a path is taken as is, a bare name is looked up in $SHARDPLAN_CONFIGS_DIR,
// the installed share/shardplan/configs and the source tree's configs/, in that order.
std::filesystem::path resolve_cluster(std::string_view name_or_path);

}  // namespace shardplan::collectives
