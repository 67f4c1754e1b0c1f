// The collectives layer's JSON readers under hostile input (tests/tensor/json_hostile_support.h):
// every malformed document is a shardplan::Error naming the field, never a library exception.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/collective_call.h"
#include "collectives/redistribute_step.h"
#include "collectives/topology.h"
#include "mesh/shard_spec.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::collectives {
namespace {

using nlohmann::json;
using test::Reader;
using ::testing::HasSubstr;

Cluster h100(int64_t nodes) { return with_nodes(load_cluster(resolve_cluster("dgx-h100")), nodes); }

// Dim 0 of a (2, 8) mesh on two DGX H100 nodes: the network, 2 ranks on 2 nodes.
GroupLinks network_links() {
  return mesh_dim_links(Topology(h100(2)), std::vector<int64_t>{2, 8})[0];
}

CollectiveCall reduce_scatter_16() {
  const Topology t(h100(2));
  std::vector<int64_t> devices(16);
  for (int64_t i = 0; i < 16; ++i) devices[static_cast<size_t>(i)] = i;
  const GroupLinks g = t.group_links(devices);
  return {CollectiveKind::kReduceScatter, 16, 12345, g};
}

RedistributeStep all_gather_step() {
  const mesh::ShardSpec s =
      mesh::make_shard_spec(std::vector<int64_t>{5, 5}, tensor::DType::kBFloat16,
                            mesh::DeviceMesh({2, 2}), mesh::parse_placements("S0,S1"));
  return make_step(s, 1, mesh::Replicate{});
}

Reader links_reader() {
  return {"group links", [](const json& j) { (void)group_links_from_json(j); },
          json(to_json(network_links()))};
}

Reader call_reader() {
  return {"collective call", [](const json& j) { (void)collective_call_from_json(j); },
          json(to_json(reduce_scatter_16()))};
}

// A step as `shardplan redistribute --json` prints it with --mesh-names and --cluster.
Reader step_reader() {
  json j = to_json(all_gather_step());
  j["mesh_dim_name"] = "tp";
  j["time_s"] = 1.5e-6;
  return {"redistribute step", [](const json& j) { (void)redistribute_step_from_json(j); }, j};
}

Reader cluster_reader() {
  return {"cluster", [](const json& j) { (void)cluster_from_json(j, "cluster.json"); },
          json(cluster_to_json(h100(1))),
          /*free_keys=*/{"accelerator.dense_tflops", "accelerator.matmul_efficiency"}};
}

json with(json j, const json::json_pointer& p, const json& v) {
  j[p] = v;
  return j;
}
json without(json j, const char* key) {
  j.erase(key);
  return j;
}

// ---- tables of malformed documents

TEST(GroupLinksJsonHostile, MalformedDocumentsNameTheField) {
  const json v = links_reader().valid;
  auto set = [&](const char* key, const json& x) {
    return with(v, json::json_pointer("/" + std::string(key)), x).dump();
  };
  test::expect_errors(
      links_reader(),
      {
          {R"([1])", {"group links: field '<document>': expected a JSON object, got array"}},
          {without(v, "link_class").dump(),
           {"group links: field 'link_class': missing (required)"}},
          {without(v, "nvls").dump(), {"field 'nvls': missing (required)"}},
          {set("link_class", "pcie"),
           {"field 'link_class': unknown link class 'pcie', expected one of: nvlink, "
            "shared_memory, network, mixed"}},
          {set("link_class", 3), {"field 'link_class': expected a string, got 3"}},
          {set("group_size", 0), {"field 'group_size': expected an integer >= 1, got 0"}},
          {set("group_size", 2.0), {"field 'group_size': expected an integer >= 1, got 2.0"}},
          {set("nodes", json::parse("9223372036854775808")),
           {"field 'nodes': expected an integer >= 1, got 9223372036854775808"}},
          {set("ranks_per_node", "1"), {"field 'ranks_per_node'"}},
          {set("groups_sharing_nics", -1),
           {"field 'groups_sharing_nics': expected an integer >= 0"}},
          {set("intra_bandwidth_gbps", -1),
           {"field 'intra_bandwidth_gbps': expected a number >= 0, got -1"}},
          {set("inter_latency_us", "fast"),
           {"field 'inter_latency_us': expected a number, got \"fast\""}},
          {set("nic_bandwidth_gbps", json::array()),
           {"field 'nic_bandwidth_gbps': expected a number"}},
          {set("crosses_spine", 1), {"field 'crosses_spine': expected true or false, got 1"}},
          {set("nvls", "false"), {"field 'nvls': expected true or false"}},
          {set("arch", "ampere2"),
           {"field 'arch': unknown arch 'ampere2' (did you mean 'ampere'?), expected one of: cpu, "
            "volta, ampere, hopper, blackwell"}},
          {set("library", "gloo"),
           {"field 'library': unknown library 'gloo', expected one of: nccl, mpi, dtensor_compat"}},
          {set("group_size", 64),
           {"field 'group_size': 64 ranks do not fit 2 node(s) x 1 per node"}},
          {set("bandwidth", 1.0), {"group links: field 'bandwidth': unknown key"}},
      });
  // nodes x ranks_per_node beyond int64 holds any group.
  json big = with(v, json::json_pointer("/nodes"), int64_t{1} << 62);
  big["ranks_per_node"] = 4;
  EXPECT_NO_THROW((void)group_links_from_json(big));
}

TEST(CollectiveCallJsonHostile, MalformedDocumentsNameTheField) {
  const json v = call_reader().valid;
  auto set = [&](const char* pointer, const json& x) {
    return with(v, json::json_pointer(pointer), x).dump();
  };
  test::expect_errors(
      call_reader(),
      {
          {R"("all_reduce")", {"collective call: field '<document>': expected a JSON object"}},
          {without(v, "kind").dump(), {"collective call: field 'kind': missing (required)"}},
          {without(v, "links").dump(), {"field 'links': missing (required)"}},
          {set("/kind", "all_scatter"),
           {"field 'kind': unknown collective kind 'all_scatter', expected one of: all_reduce, "
            "all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv"}},
          {set("/kind", "all_scatter_perf"), {"unknown collective kind 'all_scatter_perf'"}},
          {set("/kind", json::array({"all_reduce"})), {"field 'kind': expected a string"}},
          {set("/group_size", "16"), {"field 'group_size': expected an integer >= 1, got \"16\""}},
          {set("/group_size", json::parse("1e30")), {"field 'group_size'"}},
          {set("/bytes", -1), {"field 'bytes': expected an integer >= 0, got -1"}},
          {set("/bytes", 1e3), {"field 'bytes': expected an integer >= 0, got 1000.0"}},
          {set("/bytes", json::parse("18446744073709551615")), {"field 'bytes'"}},
          {set("/links", json::array()), {"field 'links': expected a JSON object, got array"}},
          {set("/links/nodes", 0),
           {"collective call: field 'links.nodes': expected an integer >= 1, got 0"}},
          {set("/links/arch", nullptr), {"field 'links.arch': expected a string, got null"}},
          {set("/links/bogus", 1), {"collective call: field 'links.bogus': unknown key"}},
          {set("/links/group_size", 8),
           {"field 'links': for a group of 8 ranks, expected 16 (group_size)"}},
          {set("/time_s", 1.0), {"collective call: field 'time_s': unknown key"}},
      });
  // nccl-tests' binary names are kinds too.
  EXPECT_EQ(collective_call_from_json(with(v, json::json_pointer("/kind"), "reducescatter_perf")),
            reduce_scatter_16());
}

TEST(RedistributeStepJsonHostile, MalformedDocumentsNameTheField) {
  const json v = step_reader().valid;
  auto set = [&](const char* key, const json& x) {
    return with(v, json::json_pointer("/" + std::string(key)), x).dump();
  };
  test::expect_errors(
      step_reader(),
      {
          {R"(null)", {"redistribute step: field '<document>': expected a JSON object, got null"}},
          {without(v, "op").dump(), {"redistribute step: field 'op': missing (required)"}},
          {without(v, "local_shape_after").dump(),
           {"field 'local_shape_after': missing (required)"}},
          {set("op", "broadcast"),
           {"field 'op': unknown redistribute op 'broadcast', expected one of: noop, local_chunk, "
            "all_gather, reduce_scatter, all_reduce, all_to_all"}},
          {set("op", 2), {"field 'op': expected a string, got 2"}},
          {set("mesh_dim", -1), {"field 'mesh_dim': expected an integer >= 0, got -1"}},
          {set("mesh_dim", 0.5), {"field 'mesh_dim'", "got 0.5"}},
          {set("from", 0), {"field 'from': expected a placement string such as \"S0\", got 0"}},
          {set("to", "S"), {"field 'to': placement 'S' is not valid"}},
          {set("to", json::array({"R"})), {"field 'to': expected a placement string"}},
          {set("group_size", 0), {"field 'group_size': expected an integer >= 1, got 0"}},
          {set("bytes_per_rank", 2.5),
           {"field 'bytes_per_rank': expected an integer >= 0, got 2.5"}},
          {set("local_shape_before", json::array({5, -1})),
           {"field 'local_shape_before': element 1: expected an integer >= 0, got -1"}},
          {set("local_shape_after", "5,5"),
           {"field 'local_shape_after': expected an array of integers"}},
          {set("mesh_dim_name", 3), {"field 'mesh_dim_name': expected a string, got 3"}},
          {set("time_s", -1.0), {"field 'time_s': expected a number >= 0, got -1.0"}},
          {set("time_s", "1us"), {"field 'time_s': expected a number, got \"1us\""}},
          {set("collective", "all_gather"), {"redistribute step: field 'collective': unknown key"}},
      });
  // What to_json writes reads back, with or without the CLI's extras.
  EXPECT_EQ(redistribute_step_from_json(v), all_gather_step());
  EXPECT_EQ(redistribute_step_from_json(json(to_json(all_gather_step()))), all_gather_step());
}

// ---- every field, every kind of value; then random mutations

TEST(CollectivesJsonReadersHostile, EveryFieldTakesEveryKindOfValue) {
  for (const Reader& r : {links_reader(), call_reader(), step_reader(), cluster_reader()}) {
    test::sweep_fields(r);
  }
}

TEST(CollectivesJsonReadersHostile, RandomlyMutatedDocumentsThrowOnlyShardplanErrors) {
  uint32_t seed = 777;
  for (const Reader& r : {links_reader(), call_reader(), step_reader(), cluster_reader()}) {
    const int refused = test::fuzz(r, 300, seed++);
    EXPECT_GT(refused, 30) << r.name << ": the mutations should break most documents";
  }
}

}  // namespace
}  // namespace shardplan::collectives
