// `shardplan inspect --checkpoint`: the tensors of a safetensors checkpoint (one file, an index, or
// a folder), read from the headers only, with totals by dtype; with --config, the check of the
// checkpoint against the model that config.json describes (tensor/safetensors.h).
//   shardplan inspect --checkpoint llama/model.safetensors.index.json --config llama/config.json
// Exit codes: 0 with the report, also when the check finds missing, unexpected or mis-shaped
// tensors (a finding, not bad input); with --strict such a finding exits 1 (ExitCode's "a
// verification found a mismatch"). Unreadable or hostile files are bad input: exit 2.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "planner/cli/cli_common.h"

namespace shardplan::cli {

struct CheckpointInspectOptions {
  std::string checkpoint;  // --checkpoint PATH
  std::string config;      // --config FILE (needs --checkpoint)
  bool strict = false;     // --strict: a failed check exits 1
};

// Adds --checkpoint, --config and --strict to the inspect verb.
void add_checkpoint_options(CLI::App& cmd, CheckpointInspectOptions& o);

// Prints the report (text, or JSON with ctx.json) and sets ctx.exit_code under --strict.
void run_inspect_checkpoint(const CheckpointInspectOptions& o, CliContext& ctx);

}  // namespace shardplan::cli
