// Ranks on nodes (collectives/rank_placement.h, Note [Ranks on nodes]): blocks of consecutive
// ranks per node, as `mpirun --map-by ppr:K:node` places them, checked against placements worked
// out by hand, and what the blocks do to the links a mesh dim crosses (the rails rule of
// Topology::group_links, docs/cost-model.md §5.5).
#include "collectives/rank_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "base/error.h"
#include "collectives/topology.h"

namespace shardplan::collectives {
namespace {

using ::testing::HasSubstr;

Cluster dgx_h100() { return load_cluster(resolve_cluster("dgx-h100")); }  // 8 GPUs, 8 NICs

std::string error_of(const Cluster& c, const RankPlacementRequest& req) {
  try {
    place_ranks(c, req);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlaceRanks, NodesSpreadTheWorldInEqualBlocks) {
  // 8 ranks on 2 nodes: 4 per node; rank 5 is node 1's local rank 1, i.e. device 8 + 1.
  const RankPlacement p = place_ranks(dgx_h100(), {.world = 8, .nodes = 2});
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.ranks_per_node, 4);
  EXPECT_EQ(p.node_of(5), 1);
  EXPECT_EQ(p.local_rank(5), 1);
  EXPECT_EQ(p.device_of(5), 9);
  EXPECT_EQ(p.devices(), (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11}));
}

TEST(PlaceRanks, RanksPerNodeIsTheSameRequest) {
  EXPECT_EQ(place_ranks(dgx_h100(), {.world = 8, .ranks_per_node = 4}),
            place_ranks(dgx_h100(), {.world = 8, .nodes = 2}));
  EXPECT_EQ(place_ranks(dgx_h100(), {.world = 8, .nodes = 2, .ranks_per_node = 4}).nodes, 2);
}

TEST(PlaceRanks, OneRankPerNodeSkipsWholeNodes) {
  // 16 ranks on 16 nodes: rank r on GPU 0 of node r, device 8r.
  const RankPlacement p = place_ranks(dgx_h100(), {.world = 16, .nodes = 16});
  EXPECT_EQ(p.ranks_per_node, 1);
  EXPECT_EQ(p.device_of(15), 120);
}

TEST(PlaceRanks, WithoutNodesRanksFillNodesInOrder) {
  const RankPlacement small = place_ranks(dgx_h100(), {.world = 3});
  EXPECT_EQ(small.nodes, 1);
  EXPECT_EQ(small.ranks_per_node, 3);
  // 20 ranks: nodes of 8, 8 and 4; rank 17 is the second GPU of node 2.
  const RankPlacement p = place_ranks(dgx_h100(), {.world = 20});
  EXPECT_EQ(p.nodes, 3);
  EXPECT_EQ(p.ranks_per_node, 8);
  EXPECT_EQ(p.device_of(17), 17);
  EXPECT_EQ(cluster_for(dgx_h100(), p).gpus, 24);
  EXPECT_EQ(cluster_for(dgx_h100(), small).gpus, 3);
}

TEST(PlaceRanks, BadRequestsNameTheFlagAndWhatWasExpected) {
  const Cluster c = dgx_h100();
  EXPECT_THAT(error_of(c, {.world = 8, .nodes = 3}),
              HasSubstr("--nodes 3 does not divide the 8 ranks, expected a divisor of 8"));
  EXPECT_THAT(error_of(c, {.world = 8, .ranks_per_node = 3}),
              HasSubstr("--ranks-per-node 3 does not divide the 8 ranks"));
  EXPECT_THAT(error_of(c, {.world = 8, .nodes = 2, .ranks_per_node = 2}), HasSubstr("expected 8"));
  // 32 ranks on 2 nodes would be 16 per node on 8-GPU nodes.
  EXPECT_THAT(error_of(c, {.world = 32, .nodes = 2}),
              HasSubstr("16 ranks per node (32 ranks on 2 node(s)) exceed the 8 accelerators"));
  EXPECT_THAT(error_of(c, {.world = 0}), HasSubstr("expected a positive number of ranks"));
  EXPECT_THAT(error_of(c, {.world = 8, .nodes = -1}),
              HasSubstr("expected a positive number of nodes"));
  // cpu-local is one machine of 2 ranks without a network.
  const Cluster cpu = load_cluster(resolve_cluster("cpu-local"));
  EXPECT_THAT(error_of(cpu, {.world = 4, .nodes = 2}), HasSubstr("without a network"));
}

TEST(PlaceRanks, TheLargestJobIsPlacedAndALargerOneRefused) {
  // 2^20 ranks (kMaxRanks, docs/user-guide.md "Limits") on 131,072 nodes; beyond it one line
  // naming the limit, never a wrapped count or an allocation the size of the job.
  const int64_t big = int64_t{1} << 20;
  const RankPlacement p = place_ranks(dgx_h100(), {.world = big, .ranks_per_node = 8});
  EXPECT_EQ(p.nodes, big / 8);
  EXPECT_EQ(p.device_of(big - 1), big - 1);
  EXPECT_THAT([] { place_ranks(dgx_h100(), {.world = int64_t{1} << 62, .ranks_per_node = 8}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "a job of 4611686018427387904 ranks is more than shardplan plans for, expected "
                  "at most 1048576")));
  EXPECT_THAT([] { place_ranks(dgx_h100(), {.world = 8, .nodes = int64_t{1} << 40}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--nodes 1099511627776")));
}

// The 2x4 mesh on 2 nodes: dp (dim 0) pairs rank i with rank i + 4 on the other node, tp (dim 1)
// stays on one node. The 4 dp groups are 4 busy GPUs per node, so 4 of the 8 NICs carry them: 4 x
// 48 GB/s shared by 4 groups = 48 GB/s each (filling one node would have put dp on NVLink).
TEST(PlaceRanks, TwoByFourOnTwoNodesPutsDpOnTheNetwork) {
  const RankPlacement p = place_ranks(dgx_h100(), {.world = 8, .nodes = 2});
  const Topology topo(cluster_for(dgx_h100(), p));
  const std::vector<GroupLinks> dims =
      mesh_dim_links(topo, std::vector<int64_t>{2, 4}, p.devices());
  EXPECT_EQ(dims[0].link_class, LinkClass::kNetwork);
  EXPECT_EQ(dims[0].groups_sharing_nics, 4);
  EXPECT_DOUBLE_EQ(dims[0].inter_bandwidth_gbps, 4 * 48.0 / 4);
  EXPECT_EQ(dims[1].link_class, LinkClass::kNvlink);
  const std::vector<GroupLinks> packed =
      mesh_dim_links(Topology(cluster_for(dgx_h100(), place_ranks(dgx_h100(), {.world = 8}))),
                     std::vector<int64_t>{2, 4});
  EXPECT_EQ(packed[0].link_class, LinkClass::kNvlink);
}

// One rank per node drives one rail NIC: 48 GB/s, not the node's 8 x 48.
TEST(PlaceRanks, OneRankPerNodeGetsOneNic) {
  const RankPlacement p = place_ranks(dgx_h100(), {.world = 16, .nodes = 16});
  const Topology topo(cluster_for(dgx_h100(), p));
  const std::vector<int64_t> devices = p.devices();
  const GroupLinks g = topo.group_links(devices);
  EXPECT_EQ(g.link_class, LinkClass::kNetwork);
  EXPECT_EQ(g.nodes, 16);
  EXPECT_DOUBLE_EQ(g.inter_bandwidth_gbps, 48);
}

// Fewer NICs than GPUs (4 NICs for 8 GPUs: GPUs 2i and 2i+1 share NIC i): 1 or 2 busy GPUs reach
// ceil(k * 4 / 8) = 1 NIC, 3 reach 2, 8 reach all 4.
TEST(PlaceRanks, SharedRailNicsAreCountedOnce) {
  std::ifstream in(resolve_cluster("dgx-h100"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["network"]["nics_per_node"]["value"] = 4;
  const Cluster c = cluster_from_json(j, "four nics");
  const Topology topo(with_nodes(c, 2));
  const auto bw = [&](int64_t per_node) {
    std::vector<int64_t> devices;
    for (int64_t node = 0; node < 2; ++node) {
      for (int64_t i = 0; i < per_node; ++i) devices.push_back(node * 8 + i);
    }
    return topo.group_links(devices).inter_bandwidth_gbps;
  };
  EXPECT_DOUBLE_EQ(bw(1), 48);
  EXPECT_DOUBLE_EQ(bw(2), 48);
  EXPECT_DOUBLE_EQ(bw(3), 2 * 48.0);
  EXPECT_DOUBLE_EQ(bw(8), 4 * 48.0);
}

// Note [Even nodes]: the planner's placement. Whole nodes and part of one are place_ranks'; any
// other count spreads over the fewest nodes that hold it evenly, K = its largest divisor <= 8.
TEST(PlaceEvenly, AJobThatFillsNoWholeNodesSpreadsEvenly) {
  const Cluster c = dgx_h100();
  EXPECT_EQ(place_evenly(c, 5), place_ranks(c, {.world = 5}));
  EXPECT_EQ(place_evenly(c, 16), place_ranks(c, {.world = 16}));
  // 12 = 2 x 6 (8 does not divide 12, 7 neither, 6 does); rank 7 is node 1's local rank 1.
  const RankPlacement twelve = place_evenly(c, 12);
  EXPECT_EQ(twelve.nodes, 2);
  EXPECT_EQ(twelve.ranks_per_node, 6);
  EXPECT_EQ(twelve.devices_per_node, 6);
  EXPECT_EQ(twelve.device_of(7), 7);
  EXPECT_EQ(uneven_nodes_text(c, twelve), "2 nodes x 6 of their 8 GPUs");
  EXPECT_EQ(uneven_nodes_text(c, place_evenly(c, 16)), "");
  // 20 = 4 x 5; 13 (a prime above 8) = 13 x 1; 2^20 - 1 = 3 x 5^2 x 11 x 31 x 41, whose largest
  // divisor <= 8 is 5.
  EXPECT_EQ(place_evenly(c, 20).ranks_per_node, 5);
  EXPECT_EQ(place_evenly(c, 13).nodes, 13);
  EXPECT_EQ(place_evenly(c, (int64_t{1} << 20) - 1).ranks_per_node, 5);
  // One machine without a network places as place_ranks does: cpu-local (2 cores) runs 3 ranks
  // oversubscribed on its one host.
  const Cluster cpu = load_cluster(resolve_cluster("cpu-local"));
  EXPECT_EQ(place_evenly(cpu, 3), place_ranks(cpu, {.world = 3}));
  EXPECT_EQ(place_evenly(cpu, 3).nodes, 1);
}

// A GB200 NVL72 rack is one node of 72 GPUs on 18 hosts (compute trays) of 4: K fills whole
// trays where a divisor does (100 GPUs: 20 = 5 trays per rack, not 2 racks x 50 = 12.5 trays),
// and the launcher starts hosts (256 GPUs: 4 racks x 64 = 64 hosts x 4).
TEST(PlaceEvenly, RacksOfTraysFillWholeTraysAndLaunchByTray) {
  const Cluster gb200 = load_cluster(resolve_cluster("gb200-nvl72"));
  EXPECT_EQ(gpus_per_host(gb200), 4);
  const RankPlacement hundred = place_evenly(gb200, 100);
  EXPECT_EQ(hundred.nodes, 5);
  EXPECT_EQ(hundred.ranks_per_node, 20);
  const LaunchHosts h256 = launch_hosts(gb200, place_evenly(gb200, 256));
  EXPECT_EQ(h256.hosts, 64);
  EXPECT_EQ(h256.per_host, 4);
  // 75 = 3 x 5^2 has no divisor <= 72 that fills whole trays: 25 per rack (the largest divisor),
  // launched as 25 single-GPU hosts per rack, the most even start a launcher can make.
  const RankPlacement odd = place_evenly(gb200, 75);
  EXPECT_EQ(odd.ranks_per_node, 25);
  EXPECT_EQ(launch_hosts(gb200, odd).hosts, 75);
  // 6 GPUs in one rack: 2 trays of 3. Without accelerators_per_host a node is one host.
  EXPECT_EQ(launch_hosts(gb200, place_evenly(gb200, 6)).per_host, 3);
  const LaunchHosts h12 = launch_hosts(dgx_h100(), place_evenly(dgx_h100(), 12));
  EXPECT_EQ(h12.hosts, 2);
  EXPECT_EQ(h12.per_host, 6);
}

// The priced cluster keeps the job's K GPUs per node and their rails' NICs: 6 of a DGX H100's 8
// NICs, ceil(3 * 4 / 8) = 2 of a 4-NIC node's for 3 GPUs.
TEST(PlaceEvenly, TheNodesNarrowToTheJobsGpusAndTheirNics) {
  const Cluster narrowed = cluster_for(dgx_h100(), place_evenly(dgx_h100(), 12));
  EXPECT_EQ(narrowed.gpus, 12);
  EXPECT_EQ(narrowed.nodes, 2);
  EXPECT_EQ(gpus_per_node(narrowed), 6);
  EXPECT_DOUBLE_EQ(narrowed.network->nics_per_node.value, 6);
  std::ifstream in(resolve_cluster("dgx-h100"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["network"]["nics_per_node"]["value"] = 4;
  const Cluster four = cluster_from_json(j, "four nics");
  EXPECT_DOUBLE_EQ(cluster_for(four, place_evenly(four, 9)).network->nics_per_node.value, 2);
}

// The narrowed cluster prices a group as the full nodes do when the job's ranks sit on them
// sparsely (place_ranks with --ranks-per-node 6: devices 0-5 and 8-13): two computations, the
// planner's strided one on the narrowed nodes and the device walk on the real ones, agree.
TEST(PlaceEvenly, NarrowedNodesPriceGroupsAsTheSparseDevicesDo) {
  const Cluster c = dgx_h100();
  const Topology narrowed(cluster_for(c, place_evenly(c, 12)));
  const RankPlacement sparse = place_ranks(c, {.world = 12, .ranks_per_node = 6});
  const Topology full(cluster_for(c, sparse));
  for (const std::vector<int64_t>& mesh :
       {std::vector<int64_t>{12}, std::vector<int64_t>{2, 6}, std::vector<int64_t>{6, 2},
        std::vector<int64_t>{4, 3}}) {
    const std::vector<GroupLinks> walked = mesh_dim_links(full, mesh, sparse.devices());
    int64_t stride = 12;
    for (size_t d = 0; d < mesh.size(); ++d) {
      stride /= mesh[d];
      SCOPED_TRACE("mesh dim " + std::to_string(d) + " of size " + std::to_string(mesh[d]));
      EXPECT_EQ(strided_group_links(narrowed, mesh[d], stride), walked[d]);
    }
  }
  // The dp group of 12 crosses the 2 nodes over 6 NICs each: 6 x 48 GB/s.
  EXPECT_DOUBLE_EQ(strided_group_links(narrowed, 12, 1).inter_bandwidth_gbps, 6 * 48.0);
  // Mesh 3 x 4, dim 0: groups {0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}; node 0 (ranks 0-5)
  // holds 2, 2, 1 and 1 of them, so its 6 busy GPUs reach 6 NICs, shared by 4 groups: 72 GB/s.
  // The walk on full nodes bounds the busy GPUs by the node's 8 (4 groups x 2), not the job's 6,
  // and says 96: the narrowed nodes know the job holds 6.
  EXPECT_DOUBLE_EQ(strided_group_links(narrowed, 3, 4).inter_bandwidth_gbps, 6 * 48.0 / 4);
}

}  // namespace
}  // namespace shardplan::collectives
