// How a job's ranks sit on a cluster's nodes: the one mapping every verb, the planner and
// `materialize` use (docs/user-guide.md "Ranks on nodes").
//   RankPlacement p = place_ranks(cluster, {.world = 8, .nodes = 2});  // 4 ranks per node
//   p.device_of(5) == 1 * 8 + 1                                       // node 1, its GPU 1
//   Topology topo(cluster_for(cluster, p));
//   auto dims = mesh_dim_links(topo, {2, 4}, p.devices());            // dim 0 crosses nodes
//
// Note [Ranks on nodes]: ranks are placed in blocks, consecutive ranks on one node, as
// `mpirun --map-by ppr:K:node` (and torchrun, one launch per node) does: rank r runs on node
// r / K as local rank r % K, which is also the GPU it drives. With the number of nodes or of ranks
// per node asked for, every node holds the same K ranks, so the world size must divide evenly;
// with neither, ranks fill whole nodes in order (K = the node's accelerators) and the last node
// may hold fewer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/cluster.h"

namespace shardplan::collectives {

// What the user asked for; 0 means "not given".
struct RankPlacementRequest {
  int64_t world = 0;           // ranks in the job (--gpus, a mesh's size, a group's size)
  int64_t nodes = 0;           // --nodes
  int64_t ranks_per_node = 0;  // --ranks-per-node
};

struct RankPlacement {
  int64_t world = 1;
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;    // K: ranks on every node (the last one may hold fewer)
  int64_t devices_per_node = 1;  // the cluster's accelerators per node (place_evenly: K)

  int64_t node_of(int64_t rank) const { return rank / ranks_per_node; }
  int64_t local_rank(int64_t rank) const { return rank % ranks_per_node; }
  // Devices are numbered node-major, as in collectives/topology.h.
  int64_t device_of(int64_t rank) const {
    return node_of(rank) * devices_per_node + local_rank(rank);
  }
  // device_of(r) for r in [0, world): the device order mesh_dim_links takes.
  std::vector<int64_t> devices() const;
  friend bool operator==(const RankPlacement&, const RankPlacement&) = default;
};

// Places `req.world` ranks on `c`. Bad input is a shardplan::Error naming the flag and what was
// expected: a world or node count below 1, a node count or ranks-per-node that does not divide the
// world (or that disagree with each other), more ranks on a node than it has accelerators, more
// than one node on a cluster without a network.
RankPlacement place_ranks(const Cluster& c, const RankPlacementRequest& req);

// Note [Even nodes]: how the planner (plan, estimate, compare, export) places a job of `world`
// ranks. A job that fills whole nodes, or part of one, is placed as place_ranks places it. Any
// other job is spread evenly over the fewest nodes that hold it evenly: K ranks on each node, K
// the largest divisor of the world that a node holds and that fills whole hosts (any divisor when
// none does), as a scheduler asked for `--ntasks-per-node K` (srun) or `--map-by ppr:K:node`
// (mpirun) places it. 12 ranks on 8-GPU nodes are 2 nodes x 6; 256 on GB200 NVL72 racks (72 GPUs
// in one NVLink domain, on 4-GPU trays) are 4 racks x 64, the usual way such jobs leave a rack's
// spare trays free, and 100 are 5 racks x 20 (5 trays each), not 2 x 50. The unused accelerators of
// each node are left out of the priced cluster (`devices_per_node` = K, which cluster_for narrows
// the nodes to): the planner's strided-group pricing (Note [Strided groups] in topology.cpp)
// assumes full nodes.
RankPlacement place_evenly(const Cluster& c, int64_t world);

// What a launcher starts (torchrun --nnodes, srun --nodes): `hosts` hosts of `per_host` ranks.
// A node that spans hosts (Cluster::accelerators_per_host: a GB200 rack's 4-GPU trays) is that
// many hosts: 256 GPUs of gb200-nvl72 are 4 racks x 64 GPUs, 64 hosts x 4. A node's ranks that
// fill no whole hosts go on the most hosts' worth that divides them evenly.
struct LaunchHosts {
  int64_t hosts = 1;
  int64_t per_host = 1;
};
LaunchHosts launch_hosts(const Cluster& c, const RankPlacement& p);

// Whether place_evenly left part of each of several nodes unused (12 GPUs of 8-GPU nodes).
bool fills_no_whole_node(const Cluster& c, const RankPlacement& p);

// "2 nodes x 6 of their 8 GPUs" when place_evenly left part of each node unused,
// "" otherwise: what the planner's outputs print beside the GPU count.
std::string uneven_nodes_text(const Cluster& c, const RankPlacement& p);

// `c` sized to the nodes the placement uses (with_nodes, or with_gpus for less than one node).
// A placement of place_evenly's with fewer devices per node than the cluster's narrows each node
// to them and to the NICs that serve them (GPU i drives NIC i * nics / gpus: rails).
Cluster cluster_for(Cluster c, const RankPlacement& p);

}  // namespace shardplan::collectives
