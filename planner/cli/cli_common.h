// Shared plumbing of the shardplan CLI: the context every verb sees, the exit-code convention, and
// the output helpers. Each verb lives in planner/cli/cmd_<verb>.cpp and is listed in run.cpp:
//   void register_env(CLI::App& app, CliContext& ctx) {
//     CLI::App& cmd = add_verb(app, ctx, "env", "Print how this binary was built");
//     cmd.callback([&ctx] { ctx.json ? print_json() : print_text(); });
//   }
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/error.h"

namespace shardplan::cli {

// The process exit status (docs/architecture.md "Errors and exit codes"). Only run() (run.cpp)
// turns errors into these.
enum class ExitCode : int {
  kOk = 0,
  // The input was fine but running failed (an OS read/write error, a backend); also internal
  // errors (bugs), which print file:line.
  kRuntimeFailure = 1,
  // shardplan::Error or a command-line parse error: the user can fix it.
  kBadInput = 2,
  // plan / compare: the search ran, and no candidate fits in memory (a result, not an error: the
  // report says which resource and by how much the closest candidate misses; --out is not written).
  kNothingFits = 3,
};

// Runtime failures are shardplan::RuntimeFailure (base/error.h): run() prints
// "shardplan: error: <what>" and exits with kRuntimeFailure.
using RuntimeFailure = ::shardplan::RuntimeFailure;

// State shared by all verbs; run() owns it and it outlives the parse, so callbacks may capture it.
struct CliContext {
  // --json: exactly one JSON document on stdout, nothing else.
  bool json = false;
  // A verb may set it (say, a verification found a mismatch) instead of throwing.
  ExitCode exit_code = ExitCode::kOk;
};

// Adds the subcommand `name` with the flags every verb has (--json), and returns it for more
// options.
CLI::App& add_verb(CLI::App& app, CliContext& ctx, const std::string& name,
                   const std::string& description);

// A CLI11 check for a string option whose empty value would otherwise mean "not given" (the
// defaults are empty strings): "--checkpoint: expected a safetensors file, index or folder, got
// ''". A user who passes an empty path (an unset shell variable) is told, not silently ignored.
CLI::Validator non_empty(const std::string& expected);

// Prints a verb's --json document: one compact line on stdout, the same formatting for every verb
// (docs/user-guide.md "JSON conventions"; `jq .` pretty-prints it).
void print_json_document(const nlohmann::ordered_json& doc);

// Writes `line` and a newline to stderr in one write(2) (Note [One line, one write] in
// cli_common.cpp): newlines inside are folded to spaces and a line beyond 4,000 bytes is cut in the
// middle, so lines from the ranks of one mpirun job never run into each other.
//   print_error_line("shardplan: error: " + world.who() + ": " + e.what());
void print_error_line(std::string_view line);

// Writes `contents` to a temporary file in the directory of `path`, flushes it to disk, then
// renames it over `path`: readers see the old file or the complete new one, never a partial one.
// `path` must pass check_output_path (base/file_io.h; `flag` names it in the refusal, exit
// 2), before and again just before the rename: a FIFO, device, socket or directory is never
// replaced. A failure of the system (a full disk) is a RuntimeFailure naming the path and the OS
// error (exit 1); no temporary file is left behind either way. Verbs call check_output_path
// themselves first, before any work.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents,
                           std::string_view flag = "output path");

}  // namespace shardplan::cli
