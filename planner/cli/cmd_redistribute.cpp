// `shardplan redistribute`: the steps that change a tensor's placements on a mesh
// (collectives/redistribute_plan.h), in the greedy order PyTorch uses or the min-cost order, and,
// on a cluster, what each step costs (collectives/redistribute_cost.h).
//   shardplan redistribute --shape 8,8 --dtype bf16 --mesh 2x2 --from S0,R --to R,S1
//       [--planner greedy|min-cost] [--cluster dgx-h100 [--nodes N | --ranks-per-node K]] [--json]
// The mesh's ranks sit on nodes by collectives/rank_placement.h (--nodes 2: mesh ranks 0-3 on node
// 0, 4-7 on node 1). --json prints {"shape", "dtype", "mesh": {"shape", "names"}, "steps":
// [{"mesh_dim", "op", "from", "to", "group_size", "bytes_per_rank", "local_shape_before",
// "local_shape_after", "bytes_per_rank_buffer"}], "collectives", "planner", "from", "to",
// "bytes_moved_per_rank"}; steps gain "mesh_dim_name" with --mesh-names, and with --cluster
// "time_s", the document "cluster", "placement", "mesh_dims" (which cross nodes) and
// "total_time_s". min-cost minimises bytes moved per rank, or the time on the cluster's links when
// one is given.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/min_cost_redistribute.h"
#include "collectives/redistribute_cost.h"
#include "collectives/redistribute_plan.h"
#include "collectives/topology.h"
#include "mesh/shard_spec.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/mesh_args.h"
#include "planner/cli/placement_args.h"
#include "planner/cli/text_format.h"

namespace shardplan::cli {
namespace {

struct RedistributeOptions {
  TensorMeshArgs tensor_mesh;
  std::string from;                // --from S0,R
  std::string to;                  // --to R,S1
  std::string planner = "greedy";  // --planner
  PlacementArgs where;             // --cluster, --gpus, --nodes, --ranks-per-node
};

// What the plan costs: per-step time and links on a cluster, or only bytes without one.
struct Priced {
  std::optional<collectives::PlanPrice> price;
  std::optional<collectives::RankPlacement> placement;
  std::vector<collectives::GroupLinks> dims;  // per mesh dim; empty without a cluster
};

// Which buffer bytes_per_rank measures: nccl-tests' size S, the output of an all_gather, the input
// of a reduce_scatter, both (equal) for all_reduce and all_to_all; local_chunk: what the rank
// keeps.
std::string_view buffer_of(collectives::StepOp op) {
  switch (op) {
    case collectives::StepOp::kAllGather:
    case collectives::StepOp::kLocalChunk:
      return "output";
    case collectives::StepOp::kReduceScatter:
      return "input";
    case collectives::StepOp::kAllReduce:
    case collectives::StepOp::kAllToAll:
      return "input_and_output";
    case collectives::StepOp::kNoop:
      return "none";
  }
  return "none";
}

// What min-cost minimises without a cluster: the bytes one rank sends over all steps, counted the
// nccl-tests way (docs/cost-model.md "Bytes moved").
int64_t bytes_moved(const collectives::RedistributePlan& plan) {
  return static_cast<int64_t>(collectives::plan_cost(plan, collectives::bytes_moved_cost));
}

void print_json(const RedistributeOptions& o, const collectives::RedistributePlan& plan,
                const Priced& priced) {
  const std::optional<collectives::PlanPrice>& price = priced.price;
  nlohmann::ordered_json j = tensor_mesh_json(plan.source);
  const nlohmann::ordered_json steps = collectives::to_json(plan);  // items() must not outlive it
  for (const auto& [key, value] : steps.items()) j[key] = value;
  const std::vector<std::string>& names = plan.source.mesh.dim_names();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    nlohmann::ordered_json& step = j["steps"][i];
    step["bytes_per_rank_buffer"] = buffer_of(plan.steps[i].op);
    if (!names.empty()) step["mesh_dim_name"] = names[static_cast<size_t>(plan.steps[i].mesh_dim)];
  }
  j["planner"] = o.planner;
  j["from"] = mesh::to_string(plan.source.placements);
  j["to"] = mesh::to_string(plan.target.placements);
  j["bytes_moved_per_rank"] = bytes_moved(plan);
  // Which ranks hold what before and after, at any mesh size (docs/user-guide.md "shard").
  j["classes"] = {{"from", shard_classes_json(plan.source)},
                  {"to", shard_classes_json(plan.target)}};
  if (price) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& c = price->steps[i];
      j["steps"][i]["time_s"] = c ? c->time_s : 0.0;
    }
    j["cluster"] = o.where.cluster;
    j["placement"] = placement_json(o.where, *priced.placement);
    j["mesh_dims"] = mesh_dims_json(priced.dims, plan.source.mesh.dim_names());
    j["total_time_s"] = price->total_time_s;
  }
  print_json_document(j);
}

void print_text(const RedistributeOptions& o, const collectives::RedistributePlan& plan,
                const Priced& priced) {
  const std::optional<collectives::PlanPrice>& price = priced.price;
  const mesh::ShardSpec& s = plan.source;
  std::cout << "tensor   " << bracketed(s.shape) << ' ' << s.dtype << '\n'
            << "mesh     " << s.mesh << '\n'
            << "from     " << mesh::to_string(s.placements) << '\n'
            << "to       " << mesh::to_string(plan.target.placements) << '\n'
            << "planner  " << o.planner << (price ? " on " + o.where.cluster : "") << '\n';
  if (price) {
    const collectives::RankPlacement& p = *priced.placement;
    std::cout << "ranks    " << p.world << " on " << p.nodes << " node(s), " << p.ranks_per_node
              << " per node\n"
              << mesh_dims_text(priced.dims, s.mesh.dim_names());
  }
  std::cout << '\n';
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
  std::cout << '\n'
            << plan.steps.size() << " steps, " << plan.num_collectives() << " collectives, "
            << with_commas(bytes_moved(plan)) << " bytes moved per rank";
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
  add_placement_options(cmd, opts->where, /*cluster_required=*/false,
                        "Price each step on this cluster (configs/clusters name or path)");
  cmd.callback([&ctx, opts] {
    const mesh::ShardSpec source =
        opts->tensor_mesh.shard_spec(parse_placements_option(opts->from, "--from"));
    const std::vector<mesh::Placement> target = parse_placements_option(opts->to, "--to");
    // Empty shards are valid on both sides (distribute_tensor's rule, docs/semantics.md §2.4): the
    // planners pad them like any uneven shard, and refuse (checked_target) what DTensor refuses.

    Priced priced;
    std::optional<std::vector<collectives::GroupLinks>> links;
    if (!opts->where.cluster.empty()) {
      const Placed placed = opts->where.place(source.mesh.size());
      links = collectives::mesh_dim_links(placed.topology, source.mesh.shape(),
                                          placed.placement.devices());
      priced.placement = placed.placement;
      priced.dims = *links;
    }
    const collectives::RedistributePlan plan =
        opts->planner == "greedy"
            ? collectives::plan_redistribute(source, target)
            : collectives::plan_min_cost_redistribute(
                  source, target,
                  links ? collectives::link_time_cost(*links)
                        : collectives::StepCostFn(collectives::bytes_moved_cost));
    if (links) priced.price = collectives::price_plan(plan, *links);
    ctx.json ? print_json(*opts, plan, priced) : print_text(*opts, plan, priced);
  });
}

}  // namespace shardplan::cli
