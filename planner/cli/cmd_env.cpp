// `shardplan env`: how this binary was built (backends compiled in, compiler, build type), for bug
// reports and for launch scripts that must check, say, NCCL before `mpirun shardplan materialize`.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/cli/cli_common.h"
#include "shardplan/build_info.h"

// Exported (1 or 0) by shardplan::kernels and shardplan::collectives; always defined, never
// guessed.
#if !defined(SHARDPLAN_HAVE_CUDA) || !defined(SHARDPLAN_HAVE_NCCL) || !defined(SHARDPLAN_HAVE_MPI)
#error "SHARDPLAN_HAVE_{CUDA,NCCL,MPI} must come from the shardplan::planner link dependencies"
#endif

namespace shardplan::cli {
namespace {

nlohmann::ordered_json build_environment() {
  nlohmann::ordered_json env;
  env["version"] = SHARDPLAN_VERSION;
  env["build_type"] = SHARDPLAN_BUILD_TYPE;
  env["compiler"] = SHARDPLAN_CXX_COMPILER;
  env["cxx_standard"] = "C++" SHARDPLAN_CXX_STANDARD;
  env["cuda"] = SHARDPLAN_HAVE_CUDA == 1;
  env["cuda_version"] = SHARDPLAN_HAVE_CUDA == 1 ? nlohmann::ordered_json(SHARDPLAN_CUDA_VERSION)
                                                 : nlohmann::ordered_json(nullptr);
  env["nccl"] = SHARDPLAN_HAVE_NCCL == 1;
  env["mpi"] = SHARDPLAN_HAVE_MPI == 1;
  env["sanitizers"] = SHARDPLAN_SANITIZE == 1;
  return env;
}

void print_env_text(const nlohmann::ordered_json& env) {
  size_t width = 0;
  for (const auto& [key, value] : env.items()) width = std::max(width, key.size());
  for (const auto& [key, value] : env.items()) {
    std::string shown;
    if (value.is_boolean()) {
      shown = value.get<bool>() ? "yes" : "no";
    } else if (value.is_null()) {
      shown = "-";
    } else {
      shown = value.get<std::string>();
    }
    std::cout << key << std::string(width + 2 - key.size(), ' ') << shown << '\n';
  }
}

}  // namespace

void register_env(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd =
      add_verb(app, ctx, "env", "Print how this binary was built: backends, compiler, build type");
  cmd.callback([&ctx] {
    const nlohmann::ordered_json env = build_environment();
    if (ctx.json) {
      print_json_document(env);
    } else {
      print_env_text(env);
    }
  });
}

}  // namespace shardplan::cli
