#include "collectives/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "tensor/base/checked.h"
#include "tensor/base/enum_names.h"
#include "tensor/base/error.h"
#include "tensor/base/json_fields.h"

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
  std::vector<std::vector<Vertex>> nics(static_cast<size_t>(nodes));
  for (int64_t n = 0; n < nodes; ++n) {
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
    const int64_t per_leaf = static_cast<int64_t>(net.nodes_per_leaf.value);
    const int64_t units = (nodes + per_leaf - 1) / per_leaf;
    const double half_net = net.latency_us.value / 2;
    for (int64_t rail = 0; rail < nic_count; ++rail) {
      const Vertex spine = boost::add_vertex(VertexProp{VertexKind::kSpine, -1}, g);
      for (int64_t u = 0; u < units; ++u) {
        const Vertex leaf = boost::add_vertex(VertexProp{VertexKind::kLeaf, -1}, g);
        const double uplink = static_cast<double>(per_leaf) * net.nic_bandwidth_gbps.value /
                              net.oversubscription.value;
        if (units > 1) boost::add_edge(leaf, spine, EdgeProp{uplink, 0}, g);
        for (int64_t n = u * per_leaf; n < std::min(nodes, (u + 1) * per_leaf); ++n) {
          boost::add_edge(nics[static_cast<size_t>(n)][static_cast<size_t>(rail)], leaf,
                          EdgeProp{net.nic_bandwidth_gbps.value, half_net}, g);
        }
      }
    }
  }
  // The three pair categories every group is made of (Note [Topology graph]).
  if (cluster_.gpus >= 2 && ppn >= 2) same_node_ = path(0, 1);
  if (nodes >= 2) same_leaf_ = path(0, ppn);
  if (cluster_.network && nodes > static_cast<int64_t>(cluster_.network->nodes_per_leaf.value)) {
    across_spine_ = path(0, static_cast<int64_t>(cluster_.network->nodes_per_leaf.value) * ppn);
  }
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
  const Vertex src = graph_->gpu[static_cast<size_t>(device_a)];
  const Vertex dst = graph_->gpu[static_cast<size_t>(device_b)];
  std::vector<Vertex> pred(boost::num_vertices(g), boost::graph_traits<BoostGraph>::null_vertex());
  pred[src] = src;
  boost::breadth_first_search(g, src,
                              boost::visitor(boost::make_bfs_visitor(
                                  boost::record_predecessors(pred.data(), boost::on_tree_edge()))));
  PathInfo p;
  if (src == dst) return p;
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
  GroupLinks out;
  out.group_size = static_cast<int64_t>(devices.size());
  out.nodes = static_cast<int64_t>(per_node.size());
  for (const auto& [node, count] : per_node)
    out.ranks_per_node = std::max(out.ranks_per_node, count);
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
  out.crosses_spine = leaves.size() > 1;
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
      const double bw = bottleneck_bandwidth_gbps(g), worst_bw = bottleneck_bandwidth_gbps(worst);
      if (first ||
          (g.group_size > 1 && (bw < worst_bw || (bw == worst_bw && g.nodes > worst.nodes)))) {
        worst = g;
        first = false;
      }
    }
    out.push_back(worst);
  }
  return out;
}

}  // namespace shardplan::collectives
