// fuzz_cluster: a cluster file (configs/clusters/*.json), parsed as load_cluster does (strict JSON,
// then cluster_from_json; collectives/cluster.h). A cluster that parses must round-trip through
// cluster_to_json, and, when its nodes are small, build its Topology and price a collective on
// each mesh dim of a two-node (or one-node) mesh.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strict_json.h"
#include "collectives/cluster.h"
#include "collectives/cost_model.h"
#include "collectives/topology.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::collectives;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Cluster c;
  if (!fuzz::run([&] {
        // What load_cluster passes (kMaxDepth there).
        const nlohmann::json j = parse_strict_json(fuzz::as_text(data, size), "cluster.json", 8,
                                                   "a shardplan cluster file");
        c = cluster_from_json(j, "cluster.json");
      })) {
    return 0;
  }
  std::ostringstream os;
  os << c;
  // The file format round-trips (nodes and gpus are not part of it).
  Cluster back;
  FUZZ_CHECK(fuzz::run([&] {
    back = cluster_from_json(
        parse_strict_json(cluster_to_json(c).dump(), "cluster_to_json", 8, "a cluster"), "back");
  }));
  FUZZ_CHECK(back == c);

  fuzz::run([&] {
    const int64_t per_node = gpus_per_node(c);
    if (per_node > 64) return;  // one graph vertex per GPU
    const int64_t nodes = c.network ? 2 : 1;
    const Topology topo(with_nodes(c, nodes));
    const std::vector<int64_t> mesh = {nodes, per_node};
    for (const GroupLinks& links : mesh_dim_links(topo, mesh)) {
      (void)bottleneck_bandwidth_gbps(links);
      for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather}) {
        for (int64_t bytes : {int64_t{0}, int64_t{1} << 20, int64_t{1} << 40}) {
          (void)collective_cost({kind, std::max<int64_t>(links.group_size, 1), bytes, links});
        }
      }
    }
  });
  return 0;
}
