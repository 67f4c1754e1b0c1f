// Candidate meshes (planner/candidate/candidate_mesh.h, Note [Candidate mesh dims]) on DGX H100
// nodes (8 GPUs, 8 rail NICs of 48 GB/s): which dims stay inside a node, worked out by hand from
// the row-major layout [pp, dp/ep, ep, cp, tp] and blocks of 8 consecutive launch ranks per node.
#include "planner/candidate/candidate_mesh.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"

namespace shardplan::planner {
namespace {

using collectives::LinkClass;

collectives::Cluster h100() {
  return collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
}

TEST(CandidateMesh, TensorParallelStaysInsideANode) {
  // 64 ranks: tp 8 fastest, so each TP group is one node; dp pairs ranks r and r + 8 (two nodes),
  // pp steps by 16.
  const CandidateMesh m = place_candidate(h100(), {.tp = 8, .pp = 4, .dp = 2});
  EXPECT_EQ(m.mesh.shape(), (std::vector<int64_t>{4, 2, 1, 1, 8}));
  EXPECT_EQ(m.mesh.dim_names(), (std::vector<std::string>{"pp", "dp", "ep", "cp", "tp"}));
  EXPECT_EQ(m.placement.nodes, 8);
  EXPECT_EQ(m.links[kTpDim].link_class, LinkClass::kNvlink);
  EXPECT_EQ(m.links[kTpDim].group_size, 8);
  // dp: one rank per node per group, the 8 groups of a node pair use all 8 NICs, one each.
  EXPECT_EQ(m.links[kDpDim].link_class, LinkClass::kNetwork);
  EXPECT_EQ(m.links[kDpDim].groups_sharing_nics, 8);
  EXPECT_DOUBLE_EQ(m.links[kDpDim].inter_bandwidth_gbps, 48);
  EXPECT_EQ(m.links[kPpDim].link_class, LinkClass::kNetwork);
  EXPECT_EQ(m.links[kEpDim].group_size, 1);  // size-1 dims are kept
}

TEST(CandidateMesh, AnotherDimOrderMovesDataParallelInside) {
  // dp fastest: launch ranks 2k and 2k + 1 form a dp pair (one node), and a TP group of 8 steps by
  // 2, so it spans 16 consecutive ranks: 4 per node on 2 nodes.
  const std::vector<int64_t> order = {kPpDim, kEpDim, kCpDim, kTpDim, kDpDim};
  const CandidateMesh m = place_candidate(h100(), {.tp = 8, .pp = 4, .dp = 2}, order);
  EXPECT_EQ(m.links[kDpDim].link_class, LinkClass::kNvlink);
  EXPECT_EQ(m.links[kTpDim].link_class, LinkClass::kMixed);
  EXPECT_EQ(m.links[kTpDim].nodes, 2);
  EXPECT_EQ(m.links[kTpDim].ranks_per_node, 4);
  // Mesh position 1 (pp 0, dp 0, tp 1) is launch rank 2.
  EXPECT_EQ(m.mesh.rank_at_flat_index(1), 2);
}

TEST(CandidateMesh, ExpertParallelismSplitsDataParallel) {
  // Mixtral-like: tp 4, dp 8 of which ep 8, pp 2: shape [2, 1, 8, 1, 4]. An ep group steps by 4
  // over 32 ranks: 2 ranks on each of 4 nodes.
  const CandidateMesh m = place_candidate(h100(), {.tp = 4, .pp = 2, .dp = 8, .ep = 8});
  EXPECT_EQ(m.mesh.shape(), (std::vector<int64_t>{2, 1, 8, 1, 4}));
  EXPECT_EQ(m.links[kEpDim].link_class, LinkClass::kMixed);
  EXPECT_EQ(m.links[kEpDim].nodes, 4);
  EXPECT_EQ(m.links[kEpDim].ranks_per_node, 2);
  EXPECT_THROW(place_candidate(h100(), {.tp = 4, .pp = 2, .dp = 8, .ep = 3}), Error);
}

}  // namespace
}  // namespace shardplan::planner
