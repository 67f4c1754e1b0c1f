// `shardplan redistribute`: the steps that change a tensor's placements on a mesh
// (collectives/redistribute_plan.h), in the greedy order PyTorch uses or the min-cost order, and,
// on a cluster, what each step costs (collectives/redistribute_cost.h).
//   shardplan redistribute --shape 8,8 --dtype bf16 --mesh 2x2 --from S0,R --to R,S1
//       [--planner greedy|min-cost] [--cluster dgx-h100 [--nodes N | --gpus N]] [--json]
// --json prints {"steps":[{"mesh_dim":0,"op":"all_gather","from":"S0","to":"R","group_size":2,
// "bytes_per_rank":...,"local_shape_before":[...],"local_shape_after":[...]}],"collectives":N,
// "planner":"greedy","from":"S0,R","to":"R,S1"}; steps gain "mesh_dim_name" with --mesh-names, and
// with --cluster "time_s", the document "cluster" and "total_time_s".
// min-cost minimises bytes moved per rank, or the time on the cluster's links when one is given.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/min_cost_redistribute.h"
#include "collectives/redistribute_cost.h"
#include "collectives/redistribute_plan.h"
#include "collectives/cluster.h"
#include "mesh/shard_spec.h"
#include "collectives/topology.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/mesh_args.h"
#include "planner/cli/text_format.h"
#include "tensor/base/error.h"

namespace shardplan::cli {
namespace {

struct RedistributeOptions {
  TensorMeshArgs tensor_mesh;
  std::string from;                // --from S0,R
  std::string to;                  // --to R,S1
  std::string planner = "greedy";  // --planner
  std::string cluster;             // --cluster NAME_OR_PATH
  int64_t nodes = 0;               // --nodes (0: not given)
  int64_t gpus = 0;                // --gpus (0: not given)
};

// The cluster the mesh runs on. Without --nodes/--gpus: just enough of it for the mesh (whole
// nodes once the mesh outgrows one).
collectives::Cluster sized_cluster(const RedistributeOptions& o, int64_t mesh_size) {
  collectives::Cluster c = collectives::load_cluster(collectives::resolve_cluster(o.cluster));
  if (o.nodes > 0) return collectives::with_nodes(std::move(c), o.nodes);
  if (o.gpus > 0) return collectives::with_gpus(std::move(c), o.gpus);
  const int64_t per_node = collectives::gpus_per_node(c);
  if (mesh_size <= per_node) return collectives::with_gpus(std::move(c), mesh_size);
  SP_CHECK(c.network.has_value(), "--cluster ", o.cluster, ": one node of ", per_node,
           " devices and no network, but the mesh has ", mesh_size, " ranks");
  return collectives::with_nodes(std::move(c), (mesh_size + per_node - 1) / per_node);
}

void print_json(const RedistributeOptions& o, const collectives::RedistributePlan& plan,
                const std::optional<collectives::PlanPrice>& price) {
  nlohmann::ordered_json j = collectives::to_json(plan);
  const std::vector<std::string>& names = plan.source.mesh.dim_names();
  if (!names.empty()) {
    for (auto& step : j["steps"]) {
      step["mesh_dim_name"] = names[step["mesh_dim"].get<size_t>()];
    }
  }
  j["planner"] = o.planner;
  j["from"] = mesh::to_string(plan.source.placements);
  j["to"] = mesh::to_string(plan.target.placements);
  if (price) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& c = price->steps[i];
      j["steps"][i]["time_s"] = c ? c->time_s : 0.0;
    }
    j["cluster"] = o.cluster;
    j["total_time_s"] = price->total_time_s;
  }
  std::cout << j.dump() << '\n';
}

void print_text(const RedistributeOptions& o, const collectives::RedistributePlan& plan,
                const std::optional<collectives::PlanPrice>& price) {
  const mesh::ShardSpec& s = plan.source;
  std::cout << "tensor   " << bracketed(s.shape) << ' ' << s.dtype << '\n'
            << "mesh     " << s.mesh << '\n'
            << "from     " << mesh::to_string(s.placements) << '\n'
            << "to       " << mesh::to_string(plan.target.placements) << '\n'
            << "planner  " << o.planner << (price ? " on " + o.cluster : "") << "\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"step", "mesh_dim", "change", "op", "group", "bytes_per_rank", "local_shape"}};
  if (price) rows[0].push_back("time_us");
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const collectives::RedistributeStep& st = plan.steps[i];
    const std::vector<std::string>& names = s.mesh.dim_names();
    std::string dim = std::to_string(st.mesh_dim);
    if (!names.empty()) dim += " (" + names[static_cast<size_t>(st.mesh_dim)] + ")";
    rows.push_back({std::to_string(i), dim,
                    mesh::to_string(st.src) + "->" + mesh::to_string(st.dst),
                    std::string(collectives::to_string(st.op)), std::to_string(st.group_size),
                    std::to_string(st.bytes_per_rank),
                    bracketed(st.local_shape_before) + "->" + bracketed(st.local_shape_after)});
    if (price) {
      std::ostringstream t;
      const auto& c = price->steps[i];
      t << std::fixed << std::setprecision(3) << (c ? c->time_s * 1e6 : 0.0);
      rows.back().push_back(t.str());
    }
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += (c ? "  " : "") + r[c] + std::string(width[c] - r[c].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << '\n';
  }
  std::cout << '\n' << plan.steps.size() << " steps, " << plan.num_collectives() << " collectives";
  if (price) {
    std::cout << ", " << std::fixed << std::setprecision(3) << price->total_time_s * 1e6
              << " us in total";
  }
  std::cout << '\n';
}

}  // namespace

void register_redistribute(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "redistribute",
                           "Plan the collectives that change a tensor's placements on a device "
                           "mesh (and price them on a cluster)");
  auto opts = std::make_shared<RedistributeOptions>();
  add_tensor_mesh_options(cmd, opts->tensor_mesh);
  cmd.add_option("--from", opts->from, "Source placements, one per mesh dim, e.g. S0,R")
      ->required()
      ->type_name("P,P,...");
  cmd.add_option("--to", opts->to, "Target placements, one per mesh dim, e.g. R,S1")
      ->required()
      ->type_name("P,P,...");
  cmd.add_option("--planner", opts->planner,
                 "greedy (PyTorch's default order) or min-cost (shortest path; bytes moved, or "
                 "time on --cluster)")
      ->check(CLI::IsMember({"greedy", "min-cost"}))
      ->type_name("NAME");
  CLI::Option* cluster =
      cmd.add_option("--cluster", opts->cluster,
                     "Price each step on this cluster (configs/clusters name or path)")
          ->type_name("NAME");
  CLI::Option* nodes = cmd.add_option("--nodes", opts->nodes, "Nodes of the cluster")
                           ->check(CLI::PositiveNumber)
                           ->needs(cluster)
                           ->type_name("N");
  cmd.add_option("--gpus", opts->gpus, "GPUs of the cluster (instead of --nodes)")
      ->check(CLI::PositiveNumber)
      ->needs(cluster)
      ->excludes(nodes)
      ->type_name("N");
  cmd.callback([&ctx, opts] {
    const mesh::ShardSpec source =
        opts->tensor_mesh.shard_spec(parse_placements_option(opts->from, "--from"));
    const std::vector<mesh::Placement> target = parse_placements_option(opts->to, "--to");
    // Empty shards are valid on both sides (distribute_tensor's rule, docs/semantics.md §2.4): the
    // planners pad them like any uneven shard, and refuse (checked_target) what DTensor refuses.

    std::optional<std::vector<collectives::GroupLinks>> links;
    if (!opts->cluster.empty()) {
      const collectives::Topology topo(sized_cluster(*opts, source.mesh.size()));
      links = collectives::mesh_dim_links(topo, source.mesh.shape());
    }
    const collectives::RedistributePlan plan =
        opts->planner == "greedy"
            ? collectives::plan_redistribute(source, target)
            : collectives::plan_min_cost_redistribute(
                  source, target,
                  links ? collectives::link_time_cost(*links)
                        : collectives::StepCostFn(collectives::bytes_moved_cost));
    std::optional<collectives::PlanPrice> price;
    if (links) price = collectives::price_plan(plan, *links);
    ctx.json ? print_json(*opts, plan, price) : print_text(*opts, plan, price);
  });
}

}  // namespace shardplan::cli
