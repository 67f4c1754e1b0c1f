// Topology: the graph's shape and paths, counted by hand from Note [Topology graph], and the links
// each mesh dim's groups cross under the default and explicit rank orders.
#include "collectives/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "base/error.h"
#include "collectives/rank_placement.h"

namespace shardplan::collectives {
namespace {

using ::testing::HasSubstr;

Cluster h100(int64_t nodes) { return with_nodes(load_cluster(resolve_cluster("dgx-h100")), nodes); }

TEST(TopologyGraph, TwoDgxH100NodesCountedByHand) {
  const Topology t(h100(2));
  // Per node: 8 GPUs + 1 NVSwitch plane + 8 NICs = 17; one scalable unit: 8 rail leaves; 8 spines.
  EXPECT_EQ(t.num_vertices(), 2 * 17 + 8 + 8);
  // Per node: 8 GPU-switch + 8 GPU-NIC; 16 NIC-leaf; no leaf-spine edges within one unit.
  EXPECT_EQ(t.num_edges(), 2 * 16 + 16);
  const PathInfo in = t.path(0, 7);  // GPU - NVSwitch - GPU
  EXPECT_EQ(in.hops, 2);
  EXPECT_NEAR(in.bottleneck_gbps, 370.8, 1e-9);
  EXPECT_NEAR(in.latency_us, 3.4, 1e-12);
  EXPECT_FALSE(in.through_network);
  const PathInfo out = t.path(3, 11);  // GPU3 - NIC3 - rail-3 leaf - NIC3 - GPU11
  EXPECT_EQ(out.hops, 4);
  EXPECT_DOUBLE_EQ(out.bottleneck_gbps, 48);
  EXPECT_DOUBLE_EQ(out.latency_us, 14);
  EXPECT_TRUE(out.through_network);
  EXPECT_FALSE(out.through_spine);
  EXPECT_THROW(t.path(0, 16), Error);
}

TEST(TopologyGraph, BeyondOneLeafThePathClimbsToASpine) {
  const Topology t(h100(33));  // scalable units of 32 nodes: node 32 is under another leaf
  const PathInfo p = t.path(0, 32 * 8);
  EXPECT_EQ(p.hops, 6);
  EXPECT_TRUE(p.through_spine);
  EXPECT_FALSE(t.path(0, 31 * 8).through_spine);
}

TEST(MeshDimLinks, DefaultOrderKeepsTheInnerDimInsideANode) {
  const Topology t(h100(2));
  const std::vector<GroupLinks> dims = mesh_dim_links(t, std::vector<int64_t>{2, 8});
  ASSERT_EQ(dims.size(), 2u);
  // dim 1 (tp = 8): one node, NVLink.
  EXPECT_EQ(dims[1].link_class, LinkClass::kNvlink);
  EXPECT_EQ(dims[1].nodes, 1);
  EXPECT_NEAR(bottleneck_bandwidth_gbps(dims[1]), 370.8, 1e-9);
  EXPECT_TRUE(dims[1].nvls);
  // dim 0 (dp = 2): one rank per node, and the 8 dp groups share each node's 8 NICs: one each.
  EXPECT_EQ(dims[0].link_class, LinkClass::kNetwork);
  EXPECT_EQ(dims[0].groups_sharing_nics, 8);
  EXPECT_DOUBLE_EQ(dims[0].inter_bandwidth_gbps, 8 * 48.0 / 8);
  EXPECT_DOUBLE_EQ(dims[0].inter_latency_us, 14);
}

TEST(MeshDimLinks, OneGroupOverTwoFullNodesHasAllNics) {
  const Topology t(h100(2));
  const GroupLinks g = mesh_dim_links(t, std::vector<int64_t>{16})[0];
  EXPECT_EQ(g.link_class, LinkClass::kMixed);
  EXPECT_EQ(g.ranks_per_node, 8);
  EXPECT_EQ(g.groups_sharing_nics, 1);
  EXPECT_DOUBLE_EQ(g.inter_bandwidth_gbps, 8 * 48.0);
  EXPECT_DOUBLE_EQ(g.nic_bandwidth_gbps, 48);  // one NIC per rank at most
}

TEST(MeshDimLinks, ExplicitOrderPutsTheOuterDimInside) {
  const Topology t(h100(2));
  const std::vector<int64_t> shape = {2, 8};
  // Mesh dim 0 fastest: rank (i, j) on device 2j + i.
  const std::vector<int64_t> order = rank_order_by_dims(shape, std::vector<int64_t>{1, 0});
  EXPECT_EQ(order, (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(rank_order_by_dims(shape, std::vector<int64_t>{0, 1})[9], 9);  // default = identity
  const std::vector<GroupLinks> dims = mesh_dim_links(t, shape, order);
  EXPECT_EQ(dims[0].link_class, LinkClass::kNvlink);  // devices {2j, 2j+1}: same node
  // dim 1: 8 ranks with stride 2 = 4 on each of 2 nodes; both groups use both nodes' NICs.
  EXPECT_EQ(dims[1].link_class, LinkClass::kMixed);
  EXPECT_EQ(dims[1].ranks_per_node, 4);
  EXPECT_EQ(dims[1].groups_sharing_nics, 2);
  EXPECT_DOUBLE_EQ(dims[1].inter_bandwidth_gbps, 8 * 48.0 / 2);
}

TEST(MeshDimLinks, OversubscribedSpineDividesTheNicBandwidth) {
  std::ifstream in(resolve_cluster("dgx-h100"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["network"]["nodes_per_leaf"]["value"] = 1;
  j["network"]["oversubscription"]["value"] = 2;
  const Topology t(with_nodes(cluster_from_json(j, "test"), 2));
  const GroupLinks g = mesh_dim_links(t, std::vector<int64_t>{16})[0];
  EXPECT_TRUE(g.crosses_spine);
  EXPECT_DOUBLE_EQ(g.inter_bandwidth_gbps, 8 * 48.0 / 2);
}

TEST(MeshDimLinks, BadMeshesAreErrors) {
  const Topology t(h100(1));
  EXPECT_THAT(
      [&] {
        mesh_dim_links(t, std::vector<int64_t>{4, 4});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("needs more devices than the 8")));
  EXPECT_THAT(
      [&] {
        mesh_dim_links(t, std::vector<int64_t>{2}, std::vector<int64_t>{3, 3});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("device 3 out of range [0, 8) or used twice")));
  EXPECT_THROW(rank_order_by_dims(std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0}), Error);
  EXPECT_THAT([] { parse_link_class("pcie"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown link class 'pcie'")));
}

// A DGX H100 file reshaped: `per_node` GPUs and NICs to a node, `per_leaf` nodes to a leaf.
Cluster reshaped(int64_t per_node, int64_t per_leaf, double oversubscription = 1) {
  std::ifstream in(resolve_cluster("dgx-h100"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["accelerators_per_node"]["value"] = per_node;
  j["intra_node"]["links_per_gpu"]["value"] = 18;
  j["network"]["nics_per_node"]["value"] = per_node;
  j["network"]["nodes_per_leaf"]["value"] = per_leaf;
  j["network"]["oversubscription"]["value"] = oversubscription;
  return cluster_from_json(j, "test");
}

TEST(StridedGroupLinks, EqualsTheRankWalkOfMeshDimLinks) {
  // The planner's fast path (Note [Strided groups]) against the walk over every rank, for every
  // (size, stride) dividing the world, on nodes of 2, 3, 4, 6 and 8 GPUs, leaves of 1 to 4 nodes,
  // whole and partial single nodes, and an oversubscribed spine.
  struct Case {
    int64_t per_node, per_leaf, world;
    double oversubscription;
  };
  const Case cases[] = {{8, 2, 64, 1}, {8, 1, 48, 2},  {4, 3, 96, 1},  {6, 2, 72, 1.5},
                        {3, 4, 72, 1}, {2, 2, 32, 1},  {8, 4, 8, 1},   {8, 4, 6, 1},
                        {6, 1, 36, 3}, {8, 2, 128, 1}, {4, 2, 120, 1}, {8, 3, 96, 2}};
  int64_t compared = 0;
  for (const Case& k : cases) {
    const Cluster c = reshaped(k.per_node, k.per_leaf, k.oversubscription);
    const Topology t(with_gpus(c, k.world));
    for (int64_t size = 1; size <= k.world; ++size) {
      for (int64_t stride = 1; size * stride <= k.world; ++stride) {
        if (k.world % (size * stride) != 0) continue;
        const std::vector<int64_t> mesh = {k.world / (size * stride), size, stride};
        const GroupLinks walked = mesh_dim_links(t, mesh, {}, 1)[1];
        EXPECT_EQ(strided_group_links(t, size, stride), walked)
            << k.per_node << " per node, " << k.per_leaf << " per leaf, world " << k.world
            << ": size " << size << " stride " << stride;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 500);
}

TEST(StridedGroupLinks, RandomClustersAgreeWithTheWalk) {
  // 400 clusters drawn with a fixed seed: 1-12 GPUs and 1-12 NICs to a node, 1-6 nodes to a leaf,
  // oversubscription 1-2, whole nodes or one partial node; every (size, stride) dividing the world.
  std::mt19937 rng(7);
  int64_t compared = 0;
  for (int draw = 0; draw < 400; ++draw) {
    const int64_t per_node = 1 + static_cast<int64_t>(rng() % 12);
    const int64_t per_leaf = 1 + static_cast<int64_t>(rng() % 6);
    std::ifstream in(resolve_cluster("dgx-h100"));
    nlohmann::json j = nlohmann::json::parse(in);
    j["accelerators_per_node"]["value"] = per_node;
    j["network"]["nics_per_node"]["value"] = 1 + static_cast<int64_t>(rng() % per_node);
    j["network"]["nodes_per_leaf"]["value"] = per_leaf;
    j["network"]["oversubscription"]["value"] = 1 + static_cast<double>(rng() % 3) * 0.5;
    const int64_t nodes = 1 + static_cast<int64_t>(rng() % 24);
    const int64_t world =
        rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % per_node) : nodes * per_node;
    const Topology t(with_gpus(cluster_from_json(j, "test"), world));
    for (int64_t size = 1; size <= world; ++size) {
      for (int64_t stride = 1; size * stride <= world; ++stride) {
        if (world % (size * stride) != 0) continue;
        const std::vector<int64_t> mesh = {world / (size * stride), size, stride};
        ASSERT_EQ(strided_group_links(t, size, stride), mesh_dim_links(t, mesh, {}, 1)[1])
            << per_node << " per node, " << per_leaf << " per leaf, world " << world << ": size "
            << size << " stride " << stride;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 5000);
}

TEST(StridedGroupLinks, OversubscribedHostAndBadShapes) {
  // Four ranks on a two-core host share it (rank_placement.h): one node of four.
  const Cluster cpu = load_cluster(resolve_cluster("cpu-local"));
  const Topology t(cluster_for(cpu, place_ranks(cpu, {.world = 4})));
  for (int64_t size : {1, 2, 4}) {
    for (int64_t stride = 1; size * stride <= 4; stride *= 2) {
      EXPECT_EQ(
          strided_group_links(t, size, stride),
          (mesh_dim_links(t, std::vector<int64_t>{4 / (size * stride), size, stride}, {}, 1)[1]));
    }
  }
  EXPECT_THAT([&] { strided_group_links(t, 3, 1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("do not divide the 4 ranks")));
}

TEST(StridedGroupLinks, AMillionRanksArePricedWithoutWalkingThem) {
  // 2^20 ranks on 131,072 DGX H100 nodes: the topology is a slice of three nodes, and the outer dim
  // of a [8, 16384, 8] mesh spans 8 nodes under different leaves.
  const Topology t(h100(int64_t{1} << 17));
  EXPECT_LT(t.num_vertices(), 100);
  const GroupLinks pp = strided_group_links(t, 8, int64_t{1} << 17);
  EXPECT_EQ(pp.nodes, 8);
  EXPECT_EQ(pp.ranks_per_node, 1);
  EXPECT_TRUE(pp.crosses_spine);
  EXPECT_EQ(pp.groups_sharing_nics, 8);
  const GroupLinks tp = strided_group_links(t, 8, 1);
  EXPECT_EQ(tp.link_class, LinkClass::kNvlink);
}

TEST(GroupLinksValue, JsonRoundTripAndPrinting) {
  const Topology t(h100(2));
  const GroupLinks g = mesh_dim_links(t, std::vector<int64_t>{2, 8})[0];
  EXPECT_EQ(group_links_from_json(to_json(g)), g);
  std::ostringstream os;
  os << g;
  EXPECT_THAT(os.str(), HasSubstr("network, 2 ranks on 2 node(s)"));
  nlohmann::json bad = to_json(g);
  bad["link_class"] = "pcie";
  EXPECT_THROW(group_links_from_json(bad), Error);
}

TEST(TwoLevelGroupLinks, EqualsTheRankWalkOverTheSameGroups) {
  // Groups {r + i * inner_stride + k * outer_stride} (the cp and dp ranks of a dense weight with
  // tp between them): the walk of mesh_dim_links over a mesh whose second dim lists exactly those
  // groups (a device permutation) against the priced group of rank 0.
  struct Case {
    int64_t inner, inner_stride, outer, outer_stride;
  };
  const Topology t(h100(8));  // 64 ranks, 8 to a node
  const Case cases[] = {{2, 1, 4, 8},  {4, 1, 2, 16}, {2, 1, 8, 4}, {2, 2, 4, 8},
                        {2, 1, 32, 2}, {4, 2, 8, 8},  {2, 4, 2, 32}};
  for (const Case& k : cases) {
    const int64_t world = 64, size = k.inner * k.outer;
    std::vector<int64_t> device_of_rank;
    for (int64_t r = 0; r < world; ++r) {
      if ((r / k.inner_stride) % k.inner != 0 || (r / k.outer_stride) % k.outer != 0) continue;
      for (int64_t o = 0; o < k.outer; ++o) {
        for (int64_t i = 0; i < k.inner; ++i) {
          device_of_rank.push_back(r + i * k.inner_stride + o * k.outer_stride);
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(device_of_rank.size()), world);
    const std::vector<int64_t> mesh = {world / size, size};
    EXPECT_EQ(two_level_group_links(t, k.inner, k.inner_stride, k.outer, k.outer_stride),
              mesh_dim_links(t, mesh, device_of_rank, 1)[1])
        << k.inner << " x " << k.inner_stride << " inside " << k.outer << " x " << k.outer_stride;
  }
  // Adjacent dims are one strided group.
  EXPECT_EQ(two_level_group_links(t, 2, 1, 4, 2), strided_group_links(t, 8, 1));
}

}  // namespace
}  // namespace shardplan::collectives
