// `shardplan collective`: what one collective costs on a cluster (collectives/cost_model.h): the
// algorithm and protocol NCCL would pick, the time, and nccl-tests' algbw and busbw.
//   shardplan collective --cluster dgx-h100 --nodes 2 --kind all_reduce --group-size 16
//       --bytes 1GiB [--algorithm ring] [--json]
// The group is `--group-size` consecutive devices (node-major, so it fills whole nodes first),
// alone on the cluster. --bytes is nccl-tests' size S (the whole gathered buffer for all_gather,
// reduce_scatter and all_to_all). --json prints {"cluster", "kind", "group_size", "nodes",
// "ranks_per_node", "link_class", "bytes", "algorithm", "protocol", "time_s", "latency_s",
// "algbw_gbps", "busbw_gbps"}.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/cluster.h"
#include "collectives/topology.h"
#include "planner/cli/byte_size.h"
#include "planner/cli/cli_common.h"
#include "tensor/base/error.h"

namespace shardplan::cli {
namespace {

struct CollectiveOptions {
  std::string cluster;     // --cluster NAME_OR_PATH
  int64_t nodes = 0;       // --nodes (0: not given)
  int64_t gpus = 0;        // --gpus (0: not given)
  std::string kind;        // --kind all_reduce
  int64_t group_size = 0;  // --group-size
  std::string bytes;       // --bytes 1GiB
  std::string algorithm;   // --algorithm (empty: the cheapest)
};

// Without --nodes/--gpus, just enough of the cluster for the group (whole nodes once it outgrows
// one). With them, the group must fit in what they give.
collectives::Cluster sized_cluster(const CollectiveOptions& o) {
  collectives::Cluster c = collectives::load_cluster(collectives::resolve_cluster(o.cluster));
  const int64_t per_node = collectives::gpus_per_node(c);
  if (o.nodes > 0) {
    c = collectives::with_nodes(std::move(c), o.nodes);
  } else if (o.gpus > 0) {
    c = collectives::with_gpus(std::move(c), o.gpus);
  } else if (o.group_size <= per_node) {
    c = collectives::with_gpus(std::move(c), o.group_size);
  } else {
    SP_CHECK(c.network.has_value(), "--group-size ", o.group_size, ": cluster ", c.name,
             " is one node of ", per_node, " devices without a network, expected at most ",
             per_node);
    c = collectives::with_nodes(std::move(c), (o.group_size + per_node - 1) / per_node);
  }
  SP_CHECK(o.group_size <= c.gpus, "--group-size ", o.group_size,
           " is beyond the cluster: ", c.name, " with ", c.nodes, " node(s) has ", c.gpus,
           " devices, expected at most ", c.gpus);
  return c;
}

void print_text(const CollectiveOptions& o, const collectives::CollectiveCall& call,
                const collectives::CollectiveCost& cost) {
  const collectives::GroupLinks& g = call.links;
  std::cout << collectives::to_string(call.kind) << " of " << call.bytes << " B ("
            << format_byte_size(call.bytes) << ") over " << call.group_size << " ranks on "
            << o.cluster << " (" << g.nodes << " node(s), up to " << g.ranks_per_node
            << " per node, " << collectives::to_string(g.link_class) << ")\n"
            << std::fixed << std::setprecision(3) << "algorithm  "
            << collectives::to_string(cost.algorithm) << " ("
            << collectives::to_string(cost.protocol) << ")\n"
            << "time       " << cost.time_s * 1e6 << " us (latency " << cost.latency_s * 1e6
            << " us)\n"
            << "algbw      " << cost.algbw_gbps << " GB/s\n"
            << "busbw      " << cost.busbw_gbps << " GB/s\n";
}

void print_json(const CollectiveOptions& o, const collectives::CollectiveCall& call,
                const collectives::CollectiveCost& cost) {
  nlohmann::ordered_json j;
  j["cluster"] = o.cluster;
  j["kind"] = collectives::to_string(call.kind);
  j["group_size"] = call.group_size;
  j["nodes"] = call.links.nodes;
  j["ranks_per_node"] = call.links.ranks_per_node;
  j["link_class"] = collectives::to_string(call.links.link_class);
  j["bytes"] = call.bytes;
  const nlohmann::ordered_json c = collectives::to_json(cost);
  for (const auto& [key, value] : c.items()) j[key] = value;
  std::cout << j.dump() << '\n';
}

}  // namespace

void register_collective(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "collective",
                           "Price one collective on a cluster: algorithm, time, algbw, busbw");
  auto opts = std::make_shared<CollectiveOptions>();
  cmd.add_option("--cluster", opts->cluster, "Cluster (configs/clusters name or path)")
      ->required()
      ->type_name("NAME");
  CLI::Option* nodes = cmd.add_option("--nodes", opts->nodes, "Nodes of the cluster")
                           ->check(CLI::PositiveNumber)
                           ->type_name("N");
  cmd.add_option("--gpus", opts->gpus, "GPUs of the cluster (instead of --nodes)")
      ->check(CLI::PositiveNumber)
      ->excludes(nodes)
      ->type_name("N");
  cmd.add_option("--kind", opts->kind,
                 "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, "
                 "send_recv")
      ->required()
      ->type_name("KIND");
  cmd.add_option("--group-size", opts->group_size, "Ranks in the group (consecutive devices)")
      ->required()
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  cmd.add_option("--bytes", opts->bytes,
                 "nccl-tests' size S: 123, 512MB (1e6), 64KiB, 1GiB, 128M (nccl-tests' 2^20)")
      ->required()
      ->type_name("SIZE");
  cmd.add_option("--algorithm", opts->algorithm,
                 "Price only this algorithm (ring, tree, nvls, hierarchical, direct), like "
                 "NCCL_ALGO; default: the cheapest")
      ->type_name("NAME");
  cmd.callback([&ctx, opts] {
    const collectives::CollectiveKind kind = collectives::parse_collective_kind(opts->kind);
    const int64_t bytes = parse_byte_size(opts->bytes, "--bytes");
    const collectives::Topology topo(sized_cluster(*opts));
    std::vector<int64_t> devices(static_cast<size_t>(opts->group_size));
    std::iota(devices.begin(), devices.end(), int64_t{0});
    const collectives::CollectiveCall call{kind, opts->group_size, bytes,
                                           topo.group_links(devices)};
    collectives::CollectiveCost cost;
    if (opts->algorithm.empty()) {
      cost = collectives::collective_cost(call);
    } else {
      const collectives::Algorithm a = collectives::parse_algorithm(opts->algorithm);
      const auto only = collectives::collective_cost_with(call, a);
      SP_CHECK(only.has_value(), "--algorithm ", opts->algorithm, " cannot run ",
               collectives::to_string(kind), " over ", call.group_size, " ranks on ", opts->cluster,
               " (", collectives::to_string(call.links.link_class),
               "), expected one that applies (omit --algorithm for the cheapest)");
      cost = *only;
    }
    ctx.json ? print_json(*opts, call, cost) : print_text(*opts, call, cost);
  });
}

}  // namespace shardplan::cli
