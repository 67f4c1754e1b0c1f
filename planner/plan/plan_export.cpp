#include "planner/plan/plan_export.h"

#include <algorithm>

#include "base/error.h"
#include "base/strict_json.h"
#include "collectives/cluster.h"
#include "collectives/rank_placement.h"

namespace shardplan::planner {

Framework parse_framework(std::string_view name) {
  if (name == "megatron") return Framework::kMegatron;
  if (name == "torchtitan") return Framework::kTorchtitan;
  if (name == "deepspeed") return Framework::kDeepspeed;
  SP_FAIL("--to '", printable(name, 40), "', expected megatron, torchtitan or deepspeed");
}

std::string_view to_string(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return "megatron";
    case Framework::kTorchtitan:
      return "torchtitan";
    case Framework::kDeepspeed:
      return "deepspeed";
  }
  return "?";
}

Launcher parse_launcher(std::string_view name) {
  if (name == "torchrun") return Launcher::kTorchrun;
  if (name == "srun") return Launcher::kSrun;
  SP_FAIL("--launcher '", printable(name, 40), "', expected torchrun or srun");
}

std::vector<int64_t> virtual_stage_layers(const PlanFile& plan) {
  const int64_t pp = plan.config.pp, v = std::max<int64_t>(1, plan.config.virtual_stages);
  std::vector<int64_t> out(static_cast<size_t>(pp * v), 0);
  for (int64_t s = 0; s < pp; ++s) {
    const int64_t n = plan.stage_layers[static_cast<size_t>(s)];
    for (int64_t j = 0; j < v; ++j) {
      out[static_cast<size_t>(j * pp + s)] = (j + 1) * n / v - j * n / v;
    }
  }
  return out;
}

std::string launch_line(const PlanFile& plan, Launcher launcher, const std::string& program) {
  // The planner's placement (Note [Even nodes] in collectives/rank_placement.h): whole nodes,
  // part of one, or the same number of GPUs on each node, started host by host (a GB200 rack is
  // 18 hosts of 4 GPUs).
  const collectives::LaunchHosts hosts = collectives::launch_hosts(
      plan.cluster, collectives::place_evenly(plan.cluster, plan.setup.gpus));
  const int64_t per_node = hosts.per_host;
  const int64_t nodes = hosts.hosts;
  const std::string torchrun =
      "torchrun --nnodes " + std::to_string(nodes) + " --nproc-per-node " +
      std::to_string(per_node) +
      (nodes > 1 ? " --rdzv-backend c10d --rdzv-endpoint " +
                       std::string(launcher == Launcher::kSrun ? "$(scontrol show hostnames "
                                                                 "\"$SLURM_JOB_NODELIST\" | "
                                                                 "head -n1)"
                                                               : "$MASTER_ADDR") +
                       ":29500 --rdzv-id $JOB_ID"
                 : "") +
      " " + program;
  if (launcher == Launcher::kTorchrun) return torchrun;
  return "srun --nodes " + std::to_string(nodes) + " --ntasks-per-node 1 --gpus-per-node " +
         std::to_string(per_node) + " " + torchrun;
}

FrameworkExport export_plan(const PlanFile& plan, Framework framework,
                            const ExportOptions& options) {
  switch (framework) {
    case Framework::kMegatron:
      return export_megatron(plan, options);
    case Framework::kTorchtitan:
      return export_torchtitan(plan, options);
    case Framework::kDeepspeed:
      return export_deepspeed(plan, options);
  }
  SP_ASSERT(false, "unknown framework");
  return {};
}

}  // namespace shardplan::planner
