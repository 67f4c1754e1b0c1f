// A candidate's ranks on the cluster: the device mesh over (pp, dp, ep, cp, tp) a ParallelConfig
// runs on, which mesh dims sit inside a node, and the links each mesh dim's groups cross. The
// ranks are launch ranks placed on nodes by the one mapping (collectives/rank_placement.h), so
// `materialize` under mpirun builds the same groups the planner priced.
//   CandidateMesh m = place_candidate(cluster, {.tp = 8, .pp = 4, .dp = 2});
//   m.mesh.shape();             // {4, 2, 1, 1, 8}: pp, dp, ep, cp, tp
//   m.links[4].link_class;      // tp: nvlink (one node); m.links[1]: dp groups cross nodes
//
// Note [Candidate mesh dims]: the mesh is [pp, dp / ep, ep, cp, tp] (MeshDim; its names are the
// dimensions' names of Note [Parallel dimensions]; size-1 dims kept so every plan has the same
// five), ranks row-major by default: tp
// fastest, so a TP group is consecutive launch ranks and sits in one node when it fits, then cp,
// the expert split of dp, the rest of dp, and pp slowest (Megatron-LM's default order
// tp-cp-ep-dp-pp). Expert parallelism splits the data-parallel ranks: an expert's tokens come from
// the ep ranks of one dp slice. Another `dim_order` (slowest first) puts other dims inside nodes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/cluster.h"
#include "collectives/rank_placement.h"
#include "collectives/topology.h"
#include "mesh/device_mesh.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {

inline constexpr std::array<int64_t, 5> kDefaultDimOrder = {kPpDim, kDpDim, kEpDim, kCpDim, kTpDim};

struct CandidateMesh {
  mesh::DeviceMesh mesh;                       // mesh position -> launch rank
  collectives::RankPlacement placement;        // launch rank -> node and device
  std::vector<int64_t> devices;                // mesh position -> device (node-major numbering)
  std::vector<collectives::GroupLinks> links;  // per mesh dim: what its groups cross
};

// The mesh of `c` on `cluster`, ranks filling nodes in order (as a launcher with one rank per GPU
// places them), mesh dims laid out in `dim_order` (a permutation of the five dims, slowest
// first). Throws shardplan::Error for degrees that do not multiply to a placeable world (see
// place_ranks) or ep not dividing dp.
CandidateMesh place_candidate(const collectives::Cluster& cluster, const ParallelConfig& c,
                              std::span<const int64_t> dim_order = kDefaultDimOrder);

}  // namespace shardplan::planner
