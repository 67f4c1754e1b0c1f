// shardplan export: a plan as the configuration of the framework that trains with it (Note
// [Export is exact or refused] in planner/plan/plan_export.h; docs/user-guide.md "export"):
//   shardplan export --plan plan.json --to megatron > llama.args
//   shardplan export --plan plan.json --to torchtitan --launcher srun > llama.toml
// Standard output carries the configuration alone, so it can be redirected to a file; the launch
// line is a comment in it (Megatron arguments, TOML) and, with what is left to add, a line on
// standard error.
#include <filesystem>
#include <iostream>
#include <system_error>

#include "base/error.h"
#include "base/file_io.h"
#include "planner/cli/cli_common.h"
#include "planner/plan/plan_export.h"
#include "planner/plan/plan_file.h"

namespace shardplan::cli {
namespace {

struct ExportArgs {
  std::string plan;
  std::string to;
  std::string launcher = "torchrun";
  std::string out;
};

void run_export(const CliContext& ctx, const ExportArgs& a) {
  const planner::Framework fw = planner::parse_framework(a.to);
  planner::ExportOptions o;
  o.launcher = planner::parse_launcher(a.launcher);
  if (!a.out.empty()) {
    check_output_path(a.out, "--out");
    std::error_code ec;
    SP_CHECK(!std::filesystem::equivalent(a.out, a.plan, ec), "--out ", a.out,
             " is the plan being exported (--plan ", a.plan, "), expected another file");
    o.config_path = a.out;
  } else {
    o.config_path = fw == planner::Framework::kMegatron     ? "plan.args"
                    : fw == planner::Framework::kTorchtitan ? "plan.toml"
                                                            : "ds_config.json";
  }
  const planner::PlanFile f = planner::read_plan_file(a.plan);
  const planner::FrameworkExport e = planner::export_plan(f, fw, o);
  if (!a.out.empty()) write_file_atomically(a.out, e.config, "--out");
  if (ctx.json) {  // one document: the configuration inside it unless it went to --out
    nlohmann::ordered_json j;
    j["to"] = a.to;
    j["plan"] = a.plan;
    if (a.out.empty()) {
      j["config"] = e.config;
    } else {
      j["out"] = a.out;
    }
    j["launch"] = e.launch;
    j["notes"] = e.notes;
    print_json_document(j);
    return;
  }
  if (a.out.empty()) {
    std::cout << e.config;
    std::cout.flush();
  }
  print_error_line("launch: " + e.launch);
  for (const std::string& n : e.notes) print_error_line("note: " + n);
  if (!a.out.empty()) print_error_line("wrote " + a.out);
}

}  // namespace

void register_export(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "export",
                           "Write a plan as a framework's configuration: Megatron-LM arguments, "
                           "a torchtitan TOML or a DeepSpeed JSON, with its launch line");
  auto a = std::make_shared<ExportArgs>();
  cmd.add_option("--plan", a->plan, "plan.json written by 'shardplan plan --out'")->required();
  cmd.add_option("--to", a->to, "megatron, torchtitan or deepspeed")->required();
  cmd.add_option("--launcher", a->launcher,
                 "The launch line: torchrun (default) or srun (torchrun once per node)");
  cmd.add_option("--out", a->out,
                 "Write the configuration to this file (atomically) instead of standard output");
  cmd.callback([&ctx, a] { run_export(ctx, *a); });
}

}  // namespace shardplan::cli
