// `shardplan collective`: what one collective costs on a cluster (collectives/cost_model.h): the
// algorithm and protocol NCCL would pick, the time, and nccl-tests' algbw and busbw.
//   shardplan collective --cluster dgx-h100 --nodes 2 --kind all_reduce --group-size 16
//       --bytes 1GiB [--gpus N] [--ranks-per-node K] [--algorithm ring] [--json]
// The group is ranks 0..group-size-1 of a job of --gpus ranks (default: --nodes x
// --ranks-per-node when both are given, else the group alone), placed on nodes by
// collectives/rank_placement.h: `--nodes 16 --group-size 16` is one rank per node. --bytes is
// nccl-tests' size S (the whole gathered buffer for all_gather, reduce_scatter and all_to_all).
// --json prints {"cluster", "placement": {"cluster", "world", "nodes", "ranks_per_node"}, "kind",
// "group_size", "nodes", "ranks_per_node", "link_class", "bytes", "algorithm", "protocol",
// "time_s", "latency_s", "algbw_gbps", "busbw_gbps"}; the top-level nodes and ranks_per_node are
// the group's.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/cost_model.h"
#include "collectives/topology.h"
#include "planner/cli/byte_size.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/placement_args.h"

namespace shardplan::cli {
namespace {

struct CollectiveOptions {
  PlacementArgs where;     // --cluster, --gpus, --nodes, --ranks-per-node
  std::string kind;        // --kind all_reduce
  int64_t group_size = 0;  // --group-size
  std::string bytes;       // --bytes 1GiB
  std::string algorithm;   // --algorithm (empty: the cheapest)
};

// The job the group belongs to: --gpus ranks, or --nodes x --ranks-per-node, or just the group.
int64_t world_size(const CollectiveOptions& o) {
  if (o.where.gpus > 0) return o.where.gpus;
  if (o.where.nodes > 0 && o.where.ranks_per_node > 0) {
    const std::optional<int64_t> world = checked_mul(o.where.nodes, o.where.ranks_per_node);
    SP_CHECK(world.has_value(), "--nodes ", o.where.nodes, " x --ranks-per-node ",
             o.where.ranks_per_node, " overflows int64, expected a job of at most 2^63-1 ranks");
    return *world;
  }
  return o.group_size;
}

void print_text(const CollectiveOptions& o, const collectives::RankPlacement& p,
                const collectives::CollectiveCall& call, const collectives::CollectiveCost& cost) {
  const collectives::GroupLinks& g = call.links;
  std::cout << collectives::to_string(call.kind) << " of " << call.bytes << " bytes ("
            << format_byte_size(call.bytes) << ") over ranks 0-" << call.group_size - 1 << " of "
            << p.world << " on " << o.where.cluster << " (" << p.ranks_per_node << " per node on "
            << p.nodes << " node(s))\n"
            << "group      " << g.nodes << " node(s), up to " << g.ranks_per_node << " per node, "
            << collectives::to_string(g.link_class) << "\n"
            << std::fixed << std::setprecision(3) << "algorithm  "
            << collectives::to_string(cost.algorithm) << " ("
            << collectives::to_string(cost.protocol) << ")\n"
            << "time       " << cost.time_s * 1e6 << " us (latency " << cost.latency_s * 1e6
            << " us)\n"
            << "algbw      " << cost.algbw_gbps << " GB/s\n"
            << "busbw      " << cost.busbw_gbps << " GB/s\n";
}

void print_json(const CollectiveOptions& o, const collectives::RankPlacement& p,
                const collectives::CollectiveCall& call, const collectives::CollectiveCost& cost) {
  nlohmann::ordered_json j;
  j["cluster"] = o.where.cluster;
  j["placement"] = placement_json(o.where, p);
  j["kind"] = collectives::to_string(call.kind);
  j["group_size"] = call.group_size;
  j["nodes"] = call.links.nodes;
  j["ranks_per_node"] = call.links.ranks_per_node;
  j["link_class"] = collectives::to_string(call.links.link_class);
  j["bytes"] = call.bytes;
  const nlohmann::ordered_json c = collectives::to_json(cost);
  for (const auto& [key, value] : c.items()) j[key] = value;
  print_json_document(j);
}

}  // namespace

void register_collective(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "collective",
                           "Price one collective on a cluster: algorithm, time, algbw, busbw");
  auto opts = std::make_shared<CollectiveOptions>();
  add_placement_options(cmd, opts->where, /*cluster_required=*/true,
                        "Cluster (configs/clusters name or path)");
  cmd.add_option("--kind", opts->kind,
                 "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, "
                 "send_recv")
      ->required()
      ->type_name("KIND");
  cmd.add_option("--group-size", opts->group_size,
                 "Ranks in the group: ranks 0..N-1 of the job, placed on nodes as --nodes says")
      ->required()
      ->transform(positive_count("ranks"))
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
    const int64_t world = world_size(*opts);
    SP_CHECK(opts->group_size <= world, "--group-size ", opts->group_size, " is larger than the ",
             world, " ranks of the job, expected at most ", world);
    const Placed placed = opts->where.place(world);
    std::vector<int64_t> devices(static_cast<size_t>(opts->group_size));
    for (int64_t r = 0; r < opts->group_size; ++r) {
      devices[static_cast<size_t>(r)] = placed.placement.device_of(r);
    }
    const collectives::CollectiveCall call{kind, opts->group_size, bytes,
                                           placed.topology.group_links(devices)};
    collectives::CollectiveCost cost;
    if (opts->algorithm.empty()) {
      cost = collectives::collective_cost(call);
    } else {
      const collectives::Algorithm a = collectives::parse_algorithm(opts->algorithm);
      const auto only = collectives::collective_cost_with(call, a);
      SP_CHECK(only.has_value(), "--algorithm ", opts->algorithm, " cannot run ",
               collectives::to_string(kind), " over ", call.group_size, " ranks on ",
               opts->where.cluster, " (", collectives::to_string(call.links.link_class),
               "), expected one that applies (omit --algorithm for the cheapest)");
      cost = *only;
    }
    ctx.json ? print_json(*opts, placed.placement, call, cost)
             : print_text(*opts, placed.placement, call, cost);
  });
}

}  // namespace shardplan::cli
