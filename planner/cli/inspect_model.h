// `shardplan inspect --model`: a model built on meta from a Hugging Face config.json (by name in
// configs/models/, by path to a config.json, or by a checkpoint with its config.json beside it):
// parameters (total, per block kind), bytes by dtype, FLOPs per token from the traced forward,
// activation memory of one training step, and a per-module table.
//   shardplan inspect --model llama3-70b --seq 4096 --batch 1 [--json]
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "planner/cli/cli_common.h"
#include "planner/reports/model_report.h"

namespace shardplan::cli {

// --model NAME_OR_PATH, --seq, --batch: the report's options (planner/reports/model_report.h).
using ModelInspectOptions = planner::ModelReportOptions;

// Adds --model, --seq and --batch to the inspect verb.
void add_model_options(CLI::App& cmd, ModelInspectOptions& o);

// Prints the report (text, or JSON with ctx.json).
void run_inspect_model(const ModelInspectOptions& o, const CliContext& ctx);

}  // namespace shardplan::cli
