#include "collectives/rank_placement.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/limits.h"

namespace shardplan::collectives {

std::vector<int64_t> RankPlacement::devices() const {
  std::vector<int64_t> out(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) out[static_cast<size_t>(r)] = device_of(r);
  return out;
}

RankPlacement place_ranks(const Cluster& c, const RankPlacementRequest& req) {
  const int64_t per_node = gpus_per_node(c);
  SP_CHECK(req.world >= 1, req.world, " ranks, expected a positive number of ranks");
  // One bound for every verb that places ranks (docs/user-guide.md "Limits"): work and memory
  // grow with the ranks (a device order, the groups of each mesh dim).
  SP_CHECK(req.world <= kMaxRanks, "a job of ", req.world,
           " ranks is more than shardplan plans for, expected at most ", kMaxRanks,
           " (2^20; docs/user-guide.md \"Limits\")");
  SP_CHECK(req.nodes <= kMaxRanks, "--nodes ", req.nodes, ", expected at most ", kMaxRanks,
           " (2^20; docs/user-guide.md \"Limits\")");
  SP_CHECK(req.nodes >= 0, "--nodes ", req.nodes, ", expected a positive number of nodes");
  SP_CHECK(req.ranks_per_node >= 0, "--ranks-per-node ", req.ranks_per_node,
           ", expected a positive number of ranks per node");
  // Whole nodes the world needs when ranks fill them in order.
  const int64_t fewest_nodes = req.world / per_node + (req.world % per_node != 0 ? 1 : 0);
  RankPlacement p;
  p.world = req.world;
  p.devices_per_node = per_node;
  if (req.nodes > 0) {
    SP_CHECK(req.world % req.nodes == 0, "--nodes ", req.nodes, " does not divide the ", req.world,
             " ranks, expected a divisor of ", req.world,
             " (every node holds the same number of ranks; without --nodes ranks fill nodes in "
             "order)");
    p.nodes = req.nodes;
    p.ranks_per_node = req.world / req.nodes;
    SP_CHECK(req.ranks_per_node == 0 || req.ranks_per_node == p.ranks_per_node, "--nodes ",
             req.nodes, " and --ranks-per-node ", req.ranks_per_node, " place ", req.ranks_per_node,
             " x ", req.nodes, " ranks, expected ", req.world,
             " (give one of them, or a product of ", req.world, ")");
  } else if (req.ranks_per_node > 0) {
    SP_CHECK(req.world % req.ranks_per_node == 0, "--ranks-per-node ", req.ranks_per_node,
             " does not divide the ", req.world, " ranks, expected a divisor of ", req.world);
    p.ranks_per_node = req.ranks_per_node;
    p.nodes = req.world / req.ranks_per_node;
  } else if (c.accelerator.arch == Arch::kCpu && !c.network.has_value()) {
    // One host without a network runs every rank, oversubscribed beyond its cores (mpirun
    // --oversubscribe): how materialization is tested on a laptop or a CI runner.
    p.ranks_per_node = req.world;
    p.nodes = 1;
    return p;
  } else {
    p.ranks_per_node = req.world < per_node ? req.world : per_node;
    p.nodes = fewest_nodes;
  }
  SP_CHECK(p.ranks_per_node <= per_node, p.ranks_per_node, " ranks per node (", req.world,
           " ranks on ", p.nodes, " node(s)) exceed the ", per_node, " accelerators of a ", c.name,
           " node, expected at most ", per_node, " (at least ", fewest_nodes, " nodes)");
  SP_CHECK(p.nodes == 1 || c.network.has_value(), "cluster ", c.name,
           " is one machine without a network, but ", req.world, " ranks need ", p.nodes,
           " nodes, expected at most ", per_node, " ranks");
  return p;
}

RankPlacement place_evenly(const Cluster& c, int64_t world) {
  const int64_t per_node = gpus_per_node(c);
  // One machine (no network) runs or refuses the job as place_ranks says: a CPU host
  // oversubscribes, a GPU box holds at most its accelerators.
  if (world <= per_node || world % per_node == 0 || !c.network.has_value()) {
    return place_ranks(c, {.world = world});
  }
  // Whole hosts first (a GB200 rack's 4-GPU trays: a launcher starts the same number of ranks
  // on every host), any divisor else. per_node <= 1024 (validated): the loops are short.
  const int64_t host = gpus_per_host(c);
  int64_t k = per_node - per_node % host;
  while (k > 0 && world % k != 0) k -= host;
  if (k == 0) {
    k = per_node;
    while (world % k != 0) --k;
  }
  RankPlacement p = place_ranks(c, {.world = world, .ranks_per_node = k});
  p.devices_per_node = k;
  return p;
}

LaunchHosts launch_hosts(const Cluster& c, const RankPlacement& p) {
  int64_t per_host = std::min(gpus_per_host(c), p.ranks_per_node);
  while (p.ranks_per_node % per_host != 0) --per_host;
  return {.hosts = p.nodes * (p.ranks_per_node / per_host), .per_host = per_host};
}

bool fills_no_whole_node(const Cluster& c, const RankPlacement& p) {
  return p.nodes > 1 && p.ranks_per_node != gpus_per_node(c);
}

std::string uneven_nodes_text(const Cluster& c, const RankPlacement& p) {
  if (!fills_no_whole_node(c, p)) return "";
  return std::to_string(p.nodes) + " nodes x " + std::to_string(p.ranks_per_node) + " of their " +
         std::to_string(gpus_per_node(c)) + " GPUs";
}

Cluster cluster_for(Cluster c, const RankPlacement& p) {
  const auto per_node = static_cast<int64_t>(c.accelerators_per_node.value);
  if (p.nodes > 1 && p.devices_per_node < per_node && c.network.has_value()) {
    // Note [Even nodes]: only the job's K accelerators of each node, and their rails' NICs.
    const double k = static_cast<double>(p.devices_per_node);
    NetworkSpec& net = *c.network;
    net.nics_per_node.value =
        std::max(1.0, std::ceil(net.nics_per_node.value * k / static_cast<double>(per_node)));
    c.accelerators_per_node.value = k;
    return with_nodes(std::move(c), p.nodes);
  }
  if (p.nodes == 1 && p.ranks_per_node > per_node) {
    // Oversubscribed host (place_ranks): its memory is shared by all the ranks.
    c.accelerator.memory_gb.value *=
        static_cast<double>(per_node) / static_cast<double>(p.ranks_per_node);
    c.accelerators_per_node.value = static_cast<double>(p.ranks_per_node);
  }
  if (p.nodes == 1) return with_gpus(std::move(c), p.ranks_per_node);
  return with_nodes(std::move(c), p.nodes);
}

}  // namespace shardplan::collectives
