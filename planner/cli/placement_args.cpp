#include "planner/cli/placement_args.h"

#include <charconv>
#include <sstream>

#include "base/error.h"
#include "base/strict_json.h"
#include "planner/cli/count_text.h"

namespace shardplan::cli {

CLI::Validator positive_count(const std::string& noun) {
  // CLI11's PositiveNumber prints its range up to the largest double (a 300-digit number).
  // The text becomes the number ("4k" -> "4096") before CLI11 converts it.
  return CLI::Validator(
      [noun](std::string& text) -> std::string {
        const std::optional<int64_t> v = parse_binary_count(text);
        if (v && *v >= 1) {
          text = std::to_string(*v);
          return "";
        }
        return "expected a positive number of " + noun + ", got '" + printable(text, 40) + "'";
      },
      "N");
}

namespace {

// A whole-text number of type T in [lo, hi] (false for NaN), else "expected <range> (<what>), got
// '<text>'": count_in and number_in differ only in T and how the range reads.
template <class T>
CLI::Validator in_range(T lo, T hi, const std::string& range, const std::string& what,
                        const std::string& type_name) {
  return CLI::Validator(
      [lo, hi, range, what](std::string& text) -> std::string {
        T v{};
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc() && ptr == end && v >= lo && v <= hi) return "";
        return "expected " + range + " (" + what + "), got '" + printable(text, 40) + "'";
      },
      type_name);
}

}  // namespace

CLI::Validator count_in(int64_t lo, int64_t hi, const std::string& what) {
  return in_range(lo, hi, std::to_string(lo) + " to " + std::to_string(hi), what, "N");
}

CLI::Validator number_in(double lo, double hi, const std::string& what) {
  std::ostringstream range;
  range << "a number from " << lo << " to " << hi;
  return in_range(lo, hi, range.str(), what, "X");
}

Placed PlacementArgs::place(int64_t world) const {
  SP_CHECK(gpus == 0 || gpus == world, "--gpus ", gpus, " but the job has ", world,
           " ranks, expected --gpus ", world, " (the world size) or no --gpus");
  const collectives::Cluster c = collectives::load_cluster(collectives::resolve_cluster(cluster));
  const collectives::RankPlacement p = collectives::place_ranks(
      c, {.world = world, .nodes = nodes, .ranks_per_node = ranks_per_node});
  return Placed{collectives::Topology(collectives::cluster_for(c, p)), p};
}

void add_placement_options(CLI::App& cmd, PlacementArgs& args, bool cluster_required,
                           const std::string& cluster_help) {
  CLI::Option* cluster = cmd.add_option("--cluster", args.cluster, cluster_help)->type_name("NAME");
  if (cluster_required) cluster->required();
  CLI::Option* gpus =
      cmd.add_option("--gpus", args.gpus, "GPUs (ranks) the job uses: the world size")
          ->transform(positive_count("GPUs"))
          ->type_name("N");
  CLI::Option* nodes =
      cmd.add_option("--nodes", args.nodes,
                     "Nodes the ranks are spread over, the same number on each, consecutive ranks "
                     "together (mpirun --map-by ppr:K:node); default: ranks fill nodes in order")
          ->transform(positive_count("nodes"))
          ->type_name("N");
  CLI::Option* per_node =
      cmd.add_option("--ranks-per-node", args.ranks_per_node,
                     "Ranks on each node (the K of --map-by ppr:K:node), instead of --nodes")
          ->transform(positive_count("ranks per node"))
          ->type_name("K");
  if (!cluster_required) {
    gpus->needs(cluster);
    nodes->needs(cluster);
    per_node->needs(cluster);
  }
}

nlohmann::ordered_json placement_json(const PlacementArgs& args,
                                      const collectives::RankPlacement& p) {
  return {{"cluster", args.cluster},
          {"world", p.world},
          {"nodes", p.nodes},
          {"ranks_per_node", p.ranks_per_node}};
}

nlohmann::ordered_json mesh_dims_json(std::span<const collectives::GroupLinks> dims,
                                      std::span<const std::string> names) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t d = 0; d < dims.size(); ++d) {
    nlohmann::ordered_json row;
    row["mesh_dim"] = d;
    if (d < names.size()) row["name"] = names[d];
    row["size"] = dims[d].group_size;
    row["nodes"] = dims[d].nodes;
    row["crosses_nodes"] = dims[d].nodes > 1;
    row["link_class"] = collectives::to_string(dims[d].link_class);
    out.push_back(std::move(row));
  }
  return out;
}

std::string mesh_dims_text(std::span<const collectives::GroupLinks> dims,
                           std::span<const std::string> names) {
  std::string out;
  for (size_t d = 0; d < dims.size(); ++d) {
    out += "dim " + std::to_string(d);
    if (d < names.size()) out += " (" + names[d] + ")";
    out += ": groups of " + std::to_string(dims[d].group_size) + " on " +
           std::to_string(dims[d].nodes) + (dims[d].nodes > 1 ? " nodes, " : " node, ") +
           std::string(collectives::to_string(dims[d].link_class)) + "\n";
  }
  return out;
}

}  // namespace shardplan::cli
