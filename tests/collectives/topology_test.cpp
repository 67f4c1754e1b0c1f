// Topology: the graph's shape and paths, counted by hand from Note [Topology graph], and the links
// each mesh dim's groups cross under the default and explicit rank orders.
#include "collectives/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tensor/base/error.h"

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

}  // namespace
}  // namespace shardplan::collectives
