// The cluster as a graph (GPUs, NVSwitches, NICs, rail leaf and spine switches; links with
// bandwidth and latency), and what a communication group crosses on it: link class, bottleneck
// bandwidth, and how many groups share one node's NICs at once.
//   Topology t(with_nodes(load_cluster(resolve_cluster("dgx-h100")), 4));   // 32 GPUs
//   std::vector<GroupLinks> dims = mesh_dim_links(t, {4, 8});  // dim 0: network, dim 1: nvlink
// Mesh ranks are row-major over the mesh shape; by default rank r runs on device r (last mesh dim
// fastest, so inner dims stay inside a node). Devices are numbered node-major: device d is GPU
// d % gpus_per_node of node d / gpus_per_node.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string_view>
#include <vector>

#include "collectives/cluster.h"

namespace shardplan::collectives {

// What a group's traffic crosses: one node's fabric (nvlink or shared_memory), only the network
// (one rank per node), or both (several ranks on each of several nodes).
enum class LinkClass { kNvlink, kSharedMemory, kNetwork, kMixed };
std::string_view to_string(LinkClass c);
// Throws shardplan::Error naming the value and the accepted names.
LinkClass parse_link_class(std::string_view s);

// Everything the cost model needs about one group: a plain value (collectives::CollectiveCall
// carries it), so pricing a collective never touches the graph.
struct GroupLinks {
  LinkClass link_class = LinkClass::kNvlink;
  int64_t group_size = 1;
  int64_t nodes = 1;           // distinct nodes holding members
  int64_t ranks_per_node = 1;  // most members on one node
  // Intra-node: per-rank bus bandwidth and per-step latency (0 when ranks_per_node == 1).
  double intra_bandwidth_gbps = 0;
  double intra_latency_us = 0;
  // Network: bandwidth one node can give this group (its NICs divided among the groups sharing
  // them, divided by the oversubscription when the group leaves its leaf), one NIC's share, and
  // the per-step latency (all 0 when nodes == 1).
  double inter_bandwidth_gbps = 0;
  double nic_bandwidth_gbps = 0;
  double inter_latency_us = 0;
  int64_t groups_sharing_nics = 0;  // groups of the same mesh dim using one node's NICs at once
  bool crosses_spine = false;       // some member pair is under different leaf switches
  bool nvls = false;                // NVLink SHARP usable inside a node
  double nvls_efficiency = 0;
  Arch arch = Arch::kCpu;  // selects NCCL's per-architecture rows
  Library library = Library::kNccl;
  friend bool operator==(const GroupLinks&, const GroupLinks&) = default;
};
// The bandwidth a ring over the group gets: the slower of the fabric and the node's network share.
double bottleneck_bandwidth_gbps(const GroupLinks& g);
std::ostream& operator<<(std::ostream& os, const GroupLinks& g);
nlohmann::ordered_json to_json(const GroupLinks& g);
// Reads what to_json writes; unknown keys are refused. `j` is the value at `path` ("" for the
// document) of `origin`; bad input is a shardplan::Error naming the field ("collective call: field
// 'links.nodes': expected an integer >= 1, got 0").
GroupLinks group_links_from_json(const nlohmann::json& j, std::string_view origin = "group links",
                                 std::string_view path = "");

// What the links of a group depend on: its size, the nodes it spans, its most members on one
// node, and whether two members sit under different leaf switches.
struct GroupShape {
  int64_t size = 1;
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;
  bool crosses_spine = false;
  friend bool operator==(const GroupShape&, const GroupShape&) = default;
};

// A path between two devices on the graph.
struct PathInfo {
  int hops = 0;                  // edges on the path
  double bottleneck_gbps = 0;    // slowest edge
  double latency_us = 0;         // sum over edges
  bool through_network = false;  // passes a NIC
  bool through_spine = false;    // passes a spine switch
};

class Topology {
 public:
  // Builds the graph for the cluster's current node count (with_nodes / with_gpus).
  explicit Topology(Cluster cluster);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  const Cluster& cluster() const { return cluster_; }
  int64_t num_devices() const { return cluster_.gpus; }
  // Of the graph as built: a slice of at most three nodes (Note [Topology slice] in topology.cpp).
  int64_t num_vertices() const;
  int64_t num_edges() const;
  // Shortest path (fewest hops) between two devices, found on the graph (Boost.Graph BFS).
  PathInfo path(int64_t device_a, int64_t device_b) const;
  // The link properties of one group of devices, when `groups_sharing_nics` groups like it run at
  // once on each of its nodes (1 for a lone collective).
  GroupLinks group_links(std::span<const int64_t> devices, int64_t groups_sharing_nics = 1) const;
  // The same for a group known by its shape.
  GroupLinks group_links_of(const GroupShape& shape, int64_t groups_sharing_nics = 1) const;

 private:
  struct Graph;
  Cluster cluster_;
  std::unique_ptr<Graph> graph_;
  // Paths of the three pair categories (same node, same leaf, across spines), from the graph.
  PathInfo same_node_, same_leaf_, across_spine_;
  // The slice's stand-in for `device` in a path from `other` (Note [Topology slice]).
  int64_t slice_device(int64_t device, int64_t other) const;
};

// device_of_rank for mesh dims laid out in `dim_order` (slowest first, fastest last):
// {0, 1} is the default row-major layout; {1, 0} puts mesh dim 0 inside the node.
std::vector<int64_t> rank_order_by_dims(std::span<const int64_t> mesh_shape,
                                        std::span<const int64_t> dim_order);
// For each mesh dim, the links of its groups (all groups of the dim run at once; the slowest
// group is reported). `device_of_rank` empty: rank r on device r; else a permutation-free
// assignment of distinct devices. Throws shardplan::Error if the mesh has more ranks than the
// cluster has devices, a device is out of range or used twice. `only_dim` >= 0 prices that dim
// alone (the others are left default-constructed): each dim walks every rank, so a caller that
// needs one saves the rest.
std::vector<GroupLinks> mesh_dim_links(const Topology& topo, std::span<const int64_t> mesh_shape,
                                       std::span<const int64_t> device_of_rank = {},
                                       int64_t only_dim = -1);

// The links of the groups {r + k * stride : k < size} of all topo.num_devices() ranks, rank r on
// device r: exactly mesh_dim_links(topo, {world / (size * stride), size, stride}, {}, 1)[1], the
// middle dim of that mesh, found from the residues of the group starts modulo a leaf's ranks
// instead of walking every rank (Note [Strided groups] in topology.cpp), so its time does not grow
// with the world for the planner's candidate meshes. Throws shardplan::Error unless size * stride
// divides the world.
GroupLinks strided_group_links(const Topology& topo, int64_t size, int64_t stride);

// The links of the groups {r + i * inner_stride + k * outer_stride : i < inner_size, k <
// outer_size}: two mesh dims that other dims separate (the context and data-parallel ranks of a
// dense weight when tp lies between them). Priced from the group of rank 0 and every group
// assumed alike: members on a node, nodes spanned, and the groups of a node sharing its NICs
// (ppn / members on a node when the group spans nodes). Adjacent dims are a strided group and
// give strided_group_links' answer.
GroupLinks two_level_group_links(const Topology& topo, int64_t inner_size, int64_t inner_stride,
                                 int64_t outer_size, int64_t outer_stride);

}  // namespace shardplan::collectives
