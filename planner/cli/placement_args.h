// The options that say where a verb's ranks run: --cluster, --gpus (the world size, on every
// verb), --nodes and --ranks-per-node (how the ranks sit on nodes: collectives/rank_placement.h),
// and the report of which mesh dims cross nodes.
//   auto args = std::make_shared<PlacementArgs>();
//   add_placement_options(cmd, *args, /*cluster_required=*/false);      // in register_<verb>
//   Placed p = args->place(world);                                   // in the callback
//   auto dims = collectives::mesh_dim_links(p.topology, shape, p.placement.devices());
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "collectives/rank_placement.h"
#include "collectives/topology.h"

namespace shardplan::cli {

// A CLI11 check for a count flag: "--nodes: expected a positive number of nodes, got '0'".
CLI::Validator positive_count(const std::string& noun);
// A whole number in [lo, hi]: "--zero: expected 0 to 3 (the ZeRO stage), got '1.5'".
CLI::Validator count_in(int64_t lo, int64_t hi, const std::string& what);
// A number in [lo, hi]: "--moe-imbalance: expected a number from 1 to 1000 (...), got 'nan'".
// CLI11's Range lets NaN through (every comparison with NaN is false), so floating options use
// this.
CLI::Validator number_in(double lo, double hi, const std::string& what);

// The cluster, sized for the placement, and the placement.
struct Placed {
  collectives::Topology topology;
  collectives::RankPlacement placement;
};

struct PlacementArgs {
  std::string cluster;         // --cluster NAME_OR_PATH ("" when optional and not given)
  int64_t gpus = 0;            // --gpus (0: not given)
  int64_t nodes = 0;           // --nodes (0: not given)
  int64_t ranks_per_node = 0;  // --ranks-per-node (0: not given)

  // `world` ranks on --cluster as --nodes / --ranks-per-node say. --gpus, when given, must equal
  // `world` (it names the same thing); throws shardplan::Error otherwise.
  Placed place(int64_t world) const;
};

// Adds --cluster, --gpus, --nodes and --ranks-per-node to `cmd`, bound to `args` (which must
// outlive the parse). Without a required cluster the other three need --cluster.
void add_placement_options(CLI::App& cmd, PlacementArgs& args, bool cluster_required,
                           const std::string& cluster_help);

// {"cluster", "nodes", "ranks_per_node", "world"}: the echo every --json document carries.
nlohmann::ordered_json placement_json(const PlacementArgs& args,
                                      const collectives::RankPlacement& p);
// Per mesh dim: {"mesh_dim", ["name"], "size", "nodes", "crosses_nodes", "link_class"}.
nlohmann::ordered_json mesh_dims_json(std::span<const collectives::GroupLinks> dims,
                                      std::span<const std::string> names);
// "dim 0 (dp): 2 nodes, network" lines for the text output.
std::string mesh_dims_text(std::span<const collectives::GroupLinks> dims,
                           std::span<const std::string> names);

}  // namespace shardplan::cli
