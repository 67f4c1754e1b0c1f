// A plan written as the configuration of the framework that trains with it (`shardplan export`,
// docs/user-guide.md "export"): Megatron-LM `pretrain_gpt.py` arguments, a torchtitan TOML job
// config, a DeepSpeed JSON config, with the launch line for the plan's nodes.
//   FrameworkExport e = export_plan(read_plan_file("plan.json"), Framework::kMegatron, {});
//   std::cout << e.config;   // one flag per line; the launch line a comment at the top
//
// Note [Export is exact or refused]
// Every degree, schedule and split of the plan appears in the output as the framework spells it,
// or the export is refused naming what the framework cannot express (torchtitan has no ZeRO-1;
// DeepSpeed's config holds no tensor, pipeline or context parallelism). Uneven or interleaved
// layer splits are written out whole: Megatron's --pipeline-model-parallel-layout (its stages in
// virtual-stage order, chunk j of rank s at position j * pp + s, as Note [Interleaved layer order]
// numbers them), torchtitan's module_fqns_per_model_part. Option names are those of the pinned
// sources listed in tests/data/frameworks/ (docs/frameworks.md), which the tests check every
// emitted name against.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/plan/plan_file.h"

namespace shardplan::planner {

enum class Framework { kMegatron, kTorchtitan, kDeepspeed };
// "megatron", "torchtitan", "deepspeed"; anything else is bad input naming the choices.
Framework parse_framework(std::string_view name);
std::string_view to_string(Framework f);

// How the job is started: torchrun on every node, or srun starting torchrun once per node.
enum class Launcher { kTorchrun, kSrun };
Launcher parse_launcher(std::string_view name);

struct ExportOptions {
  Launcher launcher = Launcher::kTorchrun;
  std::string config_path = "<this file>";  // what the launch line names
};

struct FrameworkExport {
  std::string config;  // the file's text
  std::string launch;  // the launch line (also a comment in `config` where the format has them)
  std::vector<std::string> notes;  // what the user must still add (data, tokenizer), one per line
};

// Throws shardplan::Error for what `framework` cannot express (Note [Export is exact or refused]).
FrameworkExport export_plan(const PlanFile& plan, Framework framework,
                            const ExportOptions& options);

// Layers of each virtual pipeline stage in Megatron's order (pp x v entries; Note [Interleaved
// layer order]): stage s's layers split into v chunks, the later ones one more.
std::vector<int64_t> virtual_stage_layers(const PlanFile& plan);

// The three formats, for export_plan.
FrameworkExport export_megatron(const PlanFile& plan, const ExportOptions& options);
FrameworkExport export_torchtitan(const PlanFile& plan, const ExportOptions& options);
FrameworkExport export_deepspeed(const PlanFile& plan, const ExportOptions& options);
// "torchrun --nnodes 8 --nproc-per-node 8 ... <program>" for the plan's nodes.
std::string launch_line(const PlanFile& plan, Launcher launcher, const std::string& program);

}  // namespace shardplan::planner
