#include "collectives/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "base/checked.h"
#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"

// Note [Topology graph]
// Vertices: per node, its GPUs, one switch vertex for the intra-node fabric (the NVSwitch plane,
// or memory for shared_memory) and its NICs; per scalable unit of `nodes_per_leaf` nodes, one
// leaf switch per rail; per rail, one spine vertex. Edges (undirected, one direction's figure):
//   GPU - switch   achievable per-GPU bus bandwidth, half the intra-node step latency (so a
//                  GPU -> GPU path adds up to the file's latency_us)
//   GPU - NIC      GPU i uses NIC i * nics / gpus (rails); the NIC bandwidth, no latency of its own
//   NIC - leaf     achievable NIC bandwidth, half the inter-node step latency
//   leaf - spine   the leaf's downlink total / oversubscription, no latency of its own
// The file's latencies are NCCL's end-to-end per-step figures, so the switch hops carry none:
// splitting them further would invent numbers no source gives.

namespace shardplan::collectives {

// Named, not anonymous: Topology::Graph (external linkage) holds a graph of these, and GCC warns
// (-Wsubobject-linkage) when this file is compiled inside a unity batch.
namespace topology_graph {
enum class VertexKind { kGpu, kSwitch, kNic, kLeaf, kSpine };
struct VertexProp {
  VertexKind kind = VertexKind::kGpu;
  int64_t node = -1;  // -1 for leaf/spine
};
struct EdgeProp {
  double bandwidth_gbps = 0;
  double latency_us = 0;
};
using BoostGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProp, EdgeProp>;
using Vertex = BoostGraph::vertex_descriptor;
}  // namespace topology_graph
using topology_graph::BoostGraph;
using topology_graph::EdgeProp;
using topology_graph::Vertex;
using topology_graph::VertexKind;
using topology_graph::VertexProp;

namespace {
constexpr EnumName<LinkClass> kLinkClassNames[] = {{"nvlink", LinkClass::kNvlink},
                                                   {"shared_memory", LinkClass::kSharedMemory},
                                                   {"network", LinkClass::kNetwork},
                                                   {"mixed", LinkClass::kMixed}};
}  // namespace

struct Topology::Graph {
  BoostGraph g;
  std::vector<Vertex> gpu;  // by device id
};

std::string_view to_string(LinkClass c) { return enum_name(c, kLinkClassNames); }

LinkClass parse_link_class(std::string_view s) {
  return parse_enum_name(s, kLinkClassNames, "link class");
}

double bottleneck_bandwidth_gbps(const GroupLinks& g) {
  double bw = std::numeric_limits<double>::infinity();
  if (g.ranks_per_node > 1) bw = std::min(bw, g.intra_bandwidth_gbps);
  if (g.nodes > 1) bw = std::min(bw, g.inter_bandwidth_gbps);
  return std::isinf(bw) ? 0 : bw;
}

std::ostream& operator<<(std::ostream& os, const GroupLinks& g) {
  os << "GroupLinks(" << to_string(g.link_class) << ", " << g.group_size << " ranks on " << g.nodes
     << " node(s), " << g.ranks_per_node << " per node";
  if (g.ranks_per_node > 1) os << ", intra " << g.intra_bandwidth_gbps << " GB/s";
  if (g.nodes > 1) {
    os << ", inter " << g.inter_bandwidth_gbps << " GB/s (" << g.groups_sharing_nics
       << " group(s) per node's NICs" << (g.crosses_spine ? ", across spines" : "") << ")";
  }
  if (g.nvls) os << ", nvls";
  return os << ")";
}

nlohmann::ordered_json to_json(const GroupLinks& g) {
  nlohmann::ordered_json j;
  j["link_class"] = to_string(g.link_class);
  j["group_size"] = g.group_size;
  j["nodes"] = g.nodes;
  j["ranks_per_node"] = g.ranks_per_node;
  j["intra_bandwidth_gbps"] = g.intra_bandwidth_gbps;
  j["intra_latency_us"] = g.intra_latency_us;
  j["inter_bandwidth_gbps"] = g.inter_bandwidth_gbps;
  j["nic_bandwidth_gbps"] = g.nic_bandwidth_gbps;
  j["inter_latency_us"] = g.inter_latency_us;
  j["groups_sharing_nics"] = g.groups_sharing_nics;
  j["crosses_spine"] = g.crosses_spine;
  j["nvls"] = g.nvls;
  j["nvls_efficiency"] = g.nvls_efficiency;
  j["arch"] = to_string(g.arch);
  j["library"] = to_string(g.library);
  return j;
}

GroupLinks group_links_from_json(const nlohmann::json& j, std::string_view origin,
                                 std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  auto num = [&](std::string_view key) {
    const double x = f.number(key);
    if (x < 0) f.fail(key, "expected a number >= 0, got " + json_excerpt(f.get(key)));
    return x;
  };
  GroupLinks g;
  g.link_class = f.parsed("link_class", parse_link_class);
  g.group_size = f.integer("group_size", 1);
  g.nodes = f.integer("nodes", 1);
  g.ranks_per_node = f.integer("ranks_per_node", 1);
  g.intra_bandwidth_gbps = num("intra_bandwidth_gbps");
  g.intra_latency_us = num("intra_latency_us");
  g.inter_bandwidth_gbps = num("inter_bandwidth_gbps");
  g.nic_bandwidth_gbps = num("nic_bandwidth_gbps");
  g.inter_latency_us = num("inter_latency_us");
  g.groups_sharing_nics = f.integer("groups_sharing_nics", 0);
  g.crosses_spine = f.boolean("crosses_spine");
  g.nvls = f.boolean("nvls");
  g.nvls_efficiency = num("nvls_efficiency");
  g.arch = f.parsed("arch", parse_arch);
  g.library = f.parsed("library", parse_library);
  f.done();
  int64_t room = 0;  // a product beyond int64 holds any group
  if (mul_into(g.nodes, g.ranks_per_node, room) && room < g.group_size) {
    f.fail("group_size", std::to_string(g.group_size) + " ranks do not fit " +
                             std::to_string(g.nodes) + " node(s) x " +
                             std::to_string(g.ranks_per_node) + " per node");
  }
  return g;
}

Topology::Topology(Cluster cluster)
    : cluster_(std::move(cluster)), graph_(std::make_unique<Graph>()) {
  const int64_t ppn = gpus_per_node(cluster_);
  const int64_t nodes = cluster_.nodes;
  SP_ASSERT(cluster_.gpus >= 1 && cluster_.gpus <= nodes * ppn, "cluster not scaled");
  BoostGraph& g = graph_->g;
  const IntraNodeSpec& in = cluster_.intra;
  const double half_intra = in.latency_us.value / 2;
  // Note [Topology slice]: the graph holds the nodes every pair category needs, not the whole
  // cluster (131,072 nodes would be two million vertices): the first node, a second under the
  // same leaf, and one under a second leaf when the cluster has one. Every node has the same GPUs,
  // NICs and rails and every leaf the same uplinks, so the path between any two devices is the
  // path between their stand-ins in the slice (slice_device).
  const int64_t per_leaf =
      cluster_.network ? static_cast<int64_t>(cluster_.network->nodes_per_leaf.value) : 1;
  std::vector<int64_t> slice_leaf;  // leaf of each slice node
  slice_leaf.push_back(0);
  if (nodes >= 2) slice_leaf.push_back(per_leaf == 1 ? 1 : 0);
  if (nodes > per_leaf && per_leaf >= 2) slice_leaf.push_back(1);
  const auto built = static_cast<int64_t>(slice_leaf.size());
  std::vector<std::vector<Vertex>> nics(static_cast<size_t>(built));
  for (int64_t n = 0; n < built; ++n) {
    const Vertex sw = boost::add_vertex(VertexProp{VertexKind::kSwitch, n}, g);
    const int64_t local = std::min(ppn, cluster_.gpus - n * ppn);  // a partial single node
    for (int64_t i = 0; i < local; ++i) {
      const Vertex v = boost::add_vertex(VertexProp{VertexKind::kGpu, n}, g);
      graph_->gpu.push_back(v);
      boost::add_edge(v, sw, EdgeProp{in.bus_bandwidth_gbps.value, half_intra}, g);
    }
    if (!cluster_.network) continue;
    const NetworkSpec& net = *cluster_.network;
    const int64_t nic_count = static_cast<int64_t>(net.nics_per_node.value);
    for (int64_t k = 0; k < nic_count; ++k) {
      nics[static_cast<size_t>(n)].push_back(boost::add_vertex(VertexProp{VertexKind::kNic, n}, g));
    }
    for (int64_t i = 0; i < local; ++i) {
      const Vertex nic = nics[static_cast<size_t>(n)][static_cast<size_t>(i * nic_count / ppn)];
      boost::add_edge(graph_->gpu[static_cast<size_t>(n * ppn + i)], nic,
                      EdgeProp{net.nic_bandwidth_gbps.value, 0}, g);
    }
  }
  if (cluster_.network && nodes > 1) {
    const NetworkSpec& net = *cluster_.network;
    const int64_t nic_count = static_cast<int64_t>(net.nics_per_node.value);
    const int64_t units = slice_leaf.back() + 1;  // leaves in the slice: 2 iff the cluster has 2+
    const double half_net = net.latency_us.value / 2;
    for (int64_t rail = 0; rail < nic_count; ++rail) {
      const Vertex spine = boost::add_vertex(VertexProp{VertexKind::kSpine, -1}, g);
      for (int64_t u = 0; u < units; ++u) {
        const Vertex leaf = boost::add_vertex(VertexProp{VertexKind::kLeaf, -1}, g);
        const double uplink = static_cast<double>(per_leaf) * net.nic_bandwidth_gbps.value /
                              net.oversubscription.value;
        if (units > 1) boost::add_edge(leaf, spine, EdgeProp{uplink, 0}, g);
        for (int64_t n = 0; n < built; ++n) {
          if (slice_leaf[static_cast<size_t>(n)] != u) continue;
          boost::add_edge(nics[static_cast<size_t>(n)][static_cast<size_t>(rail)], leaf,
                          EdgeProp{net.nic_bandwidth_gbps.value, half_net}, g);
        }
      }
    }
  }
  // The three pair categories every group is made of (Note [Topology graph]).
  if (cluster_.gpus >= 2 && ppn >= 2) same_node_ = path(0, 1);
  if (nodes >= 2) same_leaf_ = path(0, ppn);
  if (cluster_.network && nodes > per_leaf) across_spine_ = path(0, per_leaf * ppn);
}

int64_t Topology::slice_device(int64_t device, int64_t other) const {
  const int64_t ppn = gpus_per_node(cluster_);
  const int64_t node = device / ppn, other_node = other / ppn;
  if (node == other_node) return device % ppn;
  const int64_t per_leaf =
      cluster_.network ? static_cast<int64_t>(cluster_.network->nodes_per_leaf.value) : 1;
  // Slice nodes (Note [Topology slice]): 1 shares node 0's leaf when leaves hold 2+ nodes, and
  // the last one sits under a second leaf when the cluster has one.
  const bool same_leaf = node / per_leaf == other_node / per_leaf;
  const int64_t stand_in = same_leaf ? 1 : (per_leaf == 1 ? 1 : 2);
  return stand_in * ppn + device % ppn;
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

int64_t Topology::num_vertices() const {
  return static_cast<int64_t>(boost::num_vertices(graph_->g));
}
int64_t Topology::num_edges() const { return static_cast<int64_t>(boost::num_edges(graph_->g)); }

PathInfo Topology::path(int64_t device_a, int64_t device_b) const {
  SP_CHECK(device_a >= 0 && device_a < num_devices() && device_b >= 0 && device_b < num_devices(),
           "topology path: devices ", device_a, " and ", device_b, " out of range [0, ",
           num_devices(), ")");
  const BoostGraph& g = graph_->g;
  // Stand-ins in the slice: device_a on node 0, device_b where it lies relative to device_a.
  const Vertex src = graph_->gpu[static_cast<size_t>(slice_device(device_a, device_a))];
  const Vertex dst = graph_->gpu[static_cast<size_t>(slice_device(device_b, device_a))];
  std::vector<Vertex> pred(boost::num_vertices(g), boost::graph_traits<BoostGraph>::null_vertex());
  pred[src] = src;
  boost::breadth_first_search(g, src,
                              boost::visitor(boost::make_bfs_visitor(
                                  boost::record_predecessors(pred.data(), boost::on_tree_edge()))));
  PathInfo p;
  if (device_a == device_b) return p;
  SP_ASSERT(pred[dst] != boost::graph_traits<BoostGraph>::null_vertex(), "disconnected topology");
  p.bottleneck_gbps = std::numeric_limits<double>::infinity();
  for (Vertex v = dst; v != src; v = pred[v]) {
    const auto [e, found] = boost::edge(pred[v], v, g);
    SP_ASSERT(found);
    ++p.hops;
    p.bottleneck_gbps = std::min(p.bottleneck_gbps, g[e].bandwidth_gbps);
    p.latency_us += g[e].latency_us;
    p.through_network |= g[v].kind == VertexKind::kNic;
    p.through_spine |= g[v].kind == VertexKind::kSpine;
  }
  return p;
}

GroupLinks Topology::group_links(std::span<const int64_t> devices, int64_t sharing) const {
  SP_CHECK(!devices.empty(), "group links: empty group");
  const int64_t ppn = gpus_per_node(cluster_);
  std::unordered_map<int64_t, int64_t> per_node;
  std::unordered_set<int64_t> leaves;
  for (int64_t d : devices) {
    SP_CHECK(d >= 0 && d < num_devices(), "group links: device ", d, " out of range [0, ",
             num_devices(), ") on ", cluster_.name, " with ", cluster_.nodes, " node(s)");
    const int64_t node = d / ppn;
    ++per_node[node];
    if (cluster_.network)
      leaves.insert(node / static_cast<int64_t>(cluster_.network->nodes_per_leaf.value));
  }
  GroupShape shape;
  shape.size = static_cast<int64_t>(devices.size());
  shape.nodes = static_cast<int64_t>(per_node.size());
  for (const auto& [node, count] : per_node)
    shape.ranks_per_node = std::max(shape.ranks_per_node, count);
  shape.crosses_spine = leaves.size() > 1;
  return group_links_of(shape, sharing);
}

GroupLinks Topology::group_links_of(const GroupShape& shape, int64_t sharing) const {
  const int64_t ppn = gpus_per_node(cluster_);
  GroupLinks out;
  out.group_size = shape.size;
  out.nodes = shape.nodes;
  out.ranks_per_node = shape.ranks_per_node;
  out.arch = cluster_.accelerator.arch;
  out.library = cluster_.library;
  if (out.ranks_per_node > 1) {
    out.intra_bandwidth_gbps = same_node_.bottleneck_gbps;
    out.intra_latency_us = same_node_.latency_us;
    out.nvls = cluster_.intra.nvls;
    out.nvls_efficiency =
        cluster_.intra.nvls_efficiency ? cluster_.intra.nvls_efficiency->value : 0;
  }
  if (out.nodes == 1) {
    out.link_class =
        cluster_.intra.fabric == Fabric::kNvlink ? LinkClass::kNvlink : LinkClass::kSharedMemory;
    return out;
  }
  SP_CHECK(sharing >= 1, "group links: groups sharing NICs ", sharing, ", expected >= 1");
  const NetworkSpec& net = *cluster_.network;
  out.link_class = out.ranks_per_node == 1 ? LinkClass::kNetwork : LinkClass::kMixed;
  out.crosses_spine = shape.crosses_spine;
  const PathInfo& p = out.crosses_spine ? across_spine_ : same_leaf_;
  out.inter_latency_us = p.latency_us;
  out.groups_sharing_nics = sharing;
  // A spine crossing leaves each node 1/oversubscription of its NIC bandwidth: the leaf's uplink
  // (graph edge) is its downlink total divided by the oversubscription.
  const double nic =
      p.through_spine
          ? std::min(p.bottleneck_gbps, net.nic_bandwidth_gbps.value / net.oversubscription.value)
          : p.bottleneck_gbps;
  // Rails: GPU i drives NIC i * nics / gpus (the graph's GPU-NIC edges), and NCCL keeps a rank's
  // traffic on its own rail NIC(s); a NIC behind another GPU is a PCIe/CPU hop away. So a node with
  // k ranks in traffic (the groups sharing its NICs, times this group's ranks there) uses
  // ceil(k * nics / gpus) of its NICs, at most all of them: one rank per node of a DGX H100 gets
  // one 400 Gb/s NIC, not eight (docs/cost-model.md §5.5 "Rails").
  const double nics = net.nics_per_node.value;
  const double busy_gpus =
      std::min(static_cast<double>(sharing) * static_cast<double>(out.ranks_per_node),
               static_cast<double>(ppn));
  const double usable_nics = std::min(nics, std::ceil(busy_gpus * nics / static_cast<double>(ppn)));
  out.inter_bandwidth_gbps = usable_nics * nic / static_cast<double>(sharing);
  // Per rank, at most one NIC: NCCL cannot aggregate NICs for point-to-point traffic such as
  // alltoall (sjeaugey, NVIDIA/nccl-tests#267; docs/cost-model.md §5.2).
  out.nic_bandwidth_gbps =
      std::min(nic, out.inter_bandwidth_gbps / static_cast<double>(out.ranks_per_node));
  return out;
}

std::vector<int64_t> rank_order_by_dims(std::span<const int64_t> shape,
                                        std::span<const int64_t> dim_order) {
  const size_t nd = shape.size();
  SP_CHECK(dim_order.size() == nd, "mesh dim order has ", dim_order.size(), " entries, expected ",
           nd, " (one per mesh dim)");
  std::vector<bool> seen(nd, false);
  for (int64_t d : dim_order) {
    SP_CHECK(d >= 0 && d < static_cast<int64_t>(nd) && !seen[static_cast<size_t>(d)],
             "mesh dim order: dim ", d, " out of range or repeated, expected a permutation of 0..",
             nd - 1);
    seen[static_cast<size_t>(d)] = true;
  }
  int64_t world = 1;
  for (int64_t s : shape) {
    SP_CHECK(s >= 1 && world <= std::numeric_limits<int32_t>::max() / s, "mesh shape: size ", s,
             " invalid or the mesh is too large");
    world *= s;
  }
  // Device strides: the last dim in dim_order varies fastest over devices.
  std::vector<int64_t> dev_stride(nd, 1);
  int64_t acc = 1;
  for (size_t k = nd; k-- > 0;) {
    dev_stride[static_cast<size_t>(dim_order[k])] = acc;
    acc *= shape[static_cast<size_t>(dim_order[k])];
  }
  std::vector<int64_t> device(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    int64_t rem = r, dev = 0;
    for (size_t d = nd; d-- > 0;) {  // row-major rank -> coordinates
      dev += (rem % shape[d]) * dev_stride[d];
      rem /= shape[d];
    }
    device[static_cast<size_t>(r)] = dev;
  }
  return device;
}

namespace {

// Whether `g` is the group a mesh dim reports instead of `worst`: the whole dim's collective
// finishes when its slowest group does (lower bottleneck bandwidth; at equal bandwidth, more
// nodes). mesh_dim_links and strided_group_links must choose alike, so both ask this.
bool slower(const GroupLinks& g, const GroupLinks& worst) {
  const double bw = bottleneck_bandwidth_gbps(g), worst_bw = bottleneck_bandwidth_gbps(worst);
  return g.group_size > 1 && (bw < worst_bw || (bw == worst_bw && g.nodes > worst.nodes));
}

}  // namespace

std::vector<GroupLinks> mesh_dim_links(const Topology& topo, std::span<const int64_t> shape,
                                       std::span<const int64_t> device_of_rank, int64_t only_dim) {
  int64_t world = 1;
  for (int64_t s : shape) {
    SP_CHECK(s >= 1 && world <= topo.num_devices() / s, "mesh ", std::span<const int64_t>(shape),
             " needs more devices than the ", topo.num_devices(), " of ", topo.cluster().name,
             " with ", topo.cluster().nodes, " node(s)");
    world *= s;
  }
  // The device order as given (not copied: the planner prices a hundred dims of one 16,384-rank
  // order), or the identity.
  std::vector<int64_t> identity;
  std::span<const int64_t> device = device_of_rank;
  if (device.empty()) {
    identity.resize(static_cast<size_t>(world));
    for (int64_t r = 0; r < world; ++r) identity[static_cast<size_t>(r)] = r;
    device = identity;
  }
  SP_CHECK(static_cast<int64_t>(device.size()) == world, "device order has ", device.size(),
           " entries, expected ", world, " (one per mesh rank)");
  std::vector<bool> used(static_cast<size_t>(topo.num_devices()), false);
  for (int64_t d : device) {
    SP_CHECK(d >= 0 && d < topo.num_devices() && !used[static_cast<size_t>(d)],
             "device order: device ", d, " out of range [0, ", topo.num_devices(),
             ") or used twice");
    used[static_cast<size_t>(d)] = true;
  }
  const int64_t ppn = gpus_per_node(topo.cluster());
  const int64_t per_leaf = topo.cluster().network
                               ? static_cast<int64_t>(topo.cluster().network->nodes_per_leaf.value)
                               : 1;
  const int64_t num_nodes = (topo.num_devices() + ppn - 1) / ppn;
  std::vector<GroupLinks> out;
  int64_t stride = world;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    const int64_t size = shape[dim];
    stride /= size;
    if (only_dim >= 0 && static_cast<int64_t>(dim) != only_dim) {
      out.emplace_back();
      continue;
    }
    // Groups of this dim: ranks r with coordinate 0 on `dim`, plus k * stride. What group_links
    // makes of a group depends only on how many nodes it spans, its most members on one node and
    // whether it leaves its leaf, so one group of each such kind is priced (a mesh of 16,384
    // ranks has thousands of groups per dim but a handful of kinds).
    std::vector<int64_t> spanning_per_node(static_cast<size_t>(num_nodes), 0);
    std::vector<int64_t> kind_starts;
    std::vector<std::tuple<int64_t, int64_t, bool>> kinds;
    std::vector<int64_t> nodes(static_cast<size_t>(size));
    // Group starts: the ranks with coordinate 0 on this dim, r = block * size * stride + j.
    for (int64_t r = 0; r < world; r += (r + 1) % stride == 0 ? (size - 1) * stride + 1 : 1) {
      for (int64_t k = 0; k < size; ++k) {
        nodes[static_cast<size_t>(k)] = device[static_cast<size_t>(r + k * stride)] / ppn;
      }
      std::sort(nodes.begin(), nodes.end());
      int64_t distinct = 0, most = 0, run = 0;
      for (size_t k = 0; k < nodes.size(); ++k) {
        const bool same = k > 0 && nodes[k] == nodes[k - 1];
        run = same ? run + 1 : 1;
        if (!same) ++distinct;
        most = std::max(most, run);
      }
      // NIC sharing: per node, the groups spanning nodes that have a member there, all at once.
      if (distinct > 1) {
        for (size_t k = 0; k < nodes.size(); ++k) {
          if (k == 0 || nodes[k] != nodes[k - 1])
            ++spanning_per_node[static_cast<size_t>(nodes[k])];
        }
      }
      const bool spine = nodes.front() / per_leaf != nodes.back() / per_leaf;
      const std::tuple<int64_t, int64_t, bool> kind{distinct, most, spine};
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        kinds.push_back(kind);
        kind_starts.push_back(r);
      }
    }
    int64_t sharing = 1;
    for (int64_t count : spanning_per_node) sharing = std::max(sharing, count);
    // Report the slowest group: the whole dim's collective finishes when it does.
    GroupLinks worst;
    bool first = true;
    std::vector<int64_t> members(static_cast<size_t>(size));
    for (int64_t r : kind_starts) {
      for (int64_t k = 0; k < size; ++k) {
        members[static_cast<size_t>(k)] = device[static_cast<size_t>(r + k * stride)];
      }
      GroupLinks g = topo.group_links(members, sharing);
      if (first || slower(g, worst)) {
        worst = g;
        first = false;
      }
    }
    out.push_back(worst);
  }
  return out;
}

// Note [Strided groups]
// The planner prices each (size, stride) its candidate meshes use: the groups {b * size * stride
// + j + k * stride : k < size} (block b, offset j < stride) with rank r on device r.
// mesh_dim_links walks every rank to find the kinds of group (nodes spanned, most members on a
// node, whether it leaves its leaf) and how many spanning groups share one node's NICs; three
// facts give the same answer from a bounded amount of work:
// - A group moved U = (ranks per node) x (nodes per leaf) ranks along has every member one leaf
//   along: its kind depends on its start modulo U. So within a block only the first
//   min(stride, U) starts, and only the first U / gcd(size * stride, U) blocks, can show a kind
//   not met before, and they meet new kinds in the order the walk does (which decides the group
//   reported among equally slow ones).
// - With stride >= ranks per node, every member sits on its own node and every rank of a node is
//   in a different group: all groups span `size` nodes, and each node's NICs carry one group per
//   rank.
// - With a smaller stride, a group's members fill consecutive nodes. If they reach over a node's
//   worth of ranks every group spans nodes, and a node carries the groups of at most the two
//   blocks it touches: stride of them inside a block, min(o, stride) + min(ranks per node - o,
//   stride) across a block boundary o ranks into it. Otherwise a block is shorter than two nodes,
//   and the node counts repeat every size * stride / gcd(size * stride, ranks per node) nodes.
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The shape of the group {x + k * stride : k < size}, `ppn` ranks to a node, `per_leaf` nodes to a
// leaf.
GroupShape strided_shape(int64_t x, int64_t size, int64_t stride, int64_t ppn, int64_t per_leaf) {
  GroupShape g;
  g.size = size;
  const int64_t last = x + (size - 1) * stride;
  g.crosses_spine = (x / ppn) / per_leaf != (last / ppn) / per_leaf;
  if (stride >= ppn || size == 1) {
    g.nodes = size;
    g.ranks_per_node = 1;
    return g;
  }
  const int64_t first_node = x / ppn, last_node = last / ppn;
  g.nodes = last_node - first_node + 1;
  const auto members_on = [&](int64_t n) {
    const int64_t lo = std::max<int64_t>(0, ceil_div(n * ppn - x, stride));
    const int64_t hi = std::min(size - 1, floor_div((n + 1) * ppn - 1 - x, stride));
    return std::max<int64_t>(0, hi - lo + 1);
  };
  // A node's count depends on where the first member lands in it, which repeats every
  // stride / gcd(stride, ppn) nodes; the first and the last node may be cut short.
  const int64_t period = stride / std::gcd(stride, ppn);
  int64_t most = members_on(last_node);
  for (int64_t n = first_node; n <= std::min(last_node, first_node + period); ++n) {
    most = std::max(most, members_on(n));
  }
  g.ranks_per_node = most;
  return g;
}

// The most groups spanning nodes that have a member on one node (at least 1).
int64_t strided_sharing(int64_t world, int64_t size, int64_t stride, int64_t ppn) {
  if (size == 1) return 1;
  if (stride >= ppn) return ppn;  // size > 1: world >= 2 * stride, so every node is full
  const int64_t span = size * stride;
  if ((size - 1) * stride >= ppn) {
    // Every group spans; span > ppn, so a node touches at most two blocks.
    int64_t most = stride;
    const int64_t blocks = world / span;
    const int64_t repeat = ppn / std::gcd(span, ppn);  // block boundaries' offsets in a node
    for (int64_t m = 1; m < std::min(blocks, repeat + 1); ++m) {
      const int64_t o = (m * span) % ppn;
      if (o != 0) most = std::max(most, std::min(o, stride) + std::min(ppn - o, stride));
    }
    return most;
  }
  // A group spans iff it crosses a node boundary; count the distinct spanning groups per node over
  // one period of nodes.
  const int64_t nodes = (world + ppn - 1) / ppn;
  const int64_t period = span / std::gcd(span, ppn);
  int64_t most = 1;
  std::vector<int64_t> starts;
  for (int64_t n = 0; n < std::min(nodes, period); ++n) {
    starts.clear();
    for (int64_t x = n * ppn; x < std::min(world, (n + 1) * ppn); ++x) {
      const int64_t start = x / span * span + x % stride;
      if (start % ppn + (size - 1) * stride >= ppn) starts.push_back(start);
    }
    std::sort(starts.begin(), starts.end());
    most = std::max(
        most, static_cast<int64_t>(std::unique(starts.begin(), starts.end()) - starts.begin()));
  }
  return most;
}

}  // namespace

GroupLinks strided_group_links(const Topology& topo, int64_t size, int64_t stride) {
  const int64_t world = topo.num_devices();
  int64_t span = 0;
  SP_CHECK(size >= 1 && stride >= 1 && mul_into(size, stride, span) && world % span == 0,
           "strided group links: ", size, " x ", stride, " ranks do not divide the ", world,
           " ranks of ", topo.cluster().name, ", expected a divisor");
  const Cluster& c = topo.cluster();
  const int64_t ppn = gpus_per_node(c);
  const int64_t per_leaf = c.network ? static_cast<int64_t>(c.network->nodes_per_leaf.value) : 1;
  const int64_t unit = ppn * per_leaf;  // both validated to at most 1e6
  const int64_t blocks = world / span;
  // The kinds, in the order the rank walk of mesh_dim_links meets them (Note [Strided groups]).
  std::vector<GroupShape> kinds;
  const int64_t block_period = unit / std::gcd(span, unit);
  for (int64_t b = 0; b < std::min(blocks, block_period); ++b) {
    for (int64_t j = 0; j < std::min(stride, unit); ++j) {
      const GroupShape g = strided_shape(b * span + j, size, stride, ppn, per_leaf);
      if (std::find(kinds.begin(), kinds.end(), g) == kinds.end()) kinds.push_back(g);
    }
  }
  const int64_t sharing = strided_sharing(world, size, stride, ppn);
  // The slowest group, chosen as mesh_dim_links chooses it.
  GroupLinks worst;
  bool first = true;
  for (const GroupShape& k : kinds) {
    const GroupLinks g = topo.group_links_of(k, sharing);
    if (first || slower(g, worst)) {
      worst = g;
      first = false;
    }
  }
  return worst;
}

GroupLinks two_level_group_links(const Topology& topo, int64_t inner_size, int64_t inner_stride,
                                 int64_t outer_size, int64_t outer_stride) {
  if (outer_size == 1) return strided_group_links(topo, inner_size, inner_stride);
  if (inner_size == 1) return strided_group_links(topo, outer_size, outer_stride);
  if (inner_size * inner_stride == outer_stride) {
    return strided_group_links(topo, inner_size * outer_size, inner_stride);
  }
  const int64_t world = topo.num_devices();
  int64_t last = 0;
  SP_CHECK(inner_size >= 1 && outer_size >= 1 && inner_stride >= 1 && outer_stride >= 1 &&
               mul_into(outer_size - 1, outer_stride, last) && last < world &&
               (inner_size - 1) * inner_stride < outer_stride,
           "two-level group links: ", inner_size, " x ", inner_stride, " inside ", outer_size,
           " x ", outer_stride, " ranks do not fit the ", world, " ranks of ", topo.cluster().name,
           ", expected nested strides within the world");
  const Cluster& c = topo.cluster();
  const int64_t ppn = gpus_per_node(c);
  const int64_t per_leaf = c.network ? static_cast<int64_t>(c.network->nodes_per_leaf.value) : 1;
  // The inner ranks of one outer member sit within one stride-sized span: count them per node
  // once, then the outer members' spans, which are disjoint.
  const GroupShape inner = strided_shape(0, inner_size, inner_stride, ppn, per_leaf);
  GroupShape g;
  g.size = inner_size * outer_size;
  const int64_t inner_span = (inner_size - 1) * inner_stride + 1;
  if (outer_stride >= ppn) {
    g.nodes = inner.nodes * outer_size;
    g.ranks_per_node = inner.ranks_per_node;
  } else {
    // Outer members share nodes: count members per node along the whole group.
    const int64_t last_rank = (outer_size - 1) * outer_stride + inner_span - 1;
    g.nodes = last_rank / ppn + 1;
    std::vector<int64_t> on(static_cast<size_t>(g.nodes), 0);
    for (int64_t k = 0; k < outer_size; ++k) {
      for (int64_t i = 0; i < inner_size; ++i) {
        ++on[static_cast<size_t>((k * outer_stride + i * inner_stride) / ppn)];
      }
    }
    g.ranks_per_node = *std::max_element(on.begin(), on.end());
  }
  const int64_t last_member = (outer_size - 1) * outer_stride + (inner_size - 1) * inner_stride;
  g.crosses_spine = last_member / ppn / per_leaf != 0;
  const int64_t sharing = g.nodes > 1 ? std::max<int64_t>(1, ppn / g.ranks_per_node) : 1;
  return topo.group_links_of(g, sharing);
}

}  // namespace shardplan::collectives
