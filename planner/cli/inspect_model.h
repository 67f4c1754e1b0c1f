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

namespace shardplan::cli {

struct ModelInspectOptions {
  std::string model;  // --model NAME_OR_PATH
  // --seq: tokens per sequence of the traced forward. Unset: the model's maximum positions capped
  // at kDefaultSeqCap, so the plain command works for every model (GPT-2 has 1024 positions).
  std::optional<int64_t> seq;
  int64_t batch = 1;   // --batch: sequences
};

// The default --seq is min(max_position_embeddings, kDefaultSeqCap).
inline constexpr int64_t kDefaultSeqCap = 4096;

// Adds --model, --seq and --batch to the inspect verb.
void add_model_options(CLI::App& cmd, ModelInspectOptions& o);

// The whole report as the --json document: "model", "model_type", "architecture", "config",
// "checkpoint" (when named by one), "seq", "seq_is_default", "batch", "parameters", "parameters_by_kind",
// "embedding_parameters", "bytes_by_dtype",
// "flops_per_token" (forward, all ops), "flops_per_token_detail", "activation_bytes" (no
// recomputation), "activation_bytes_by_recompute", "notes", "modules".
nlohmann::ordered_json inspect_model_report(const ModelInspectOptions& o);

// Prints the report (text, or JSON with ctx.json).
void run_inspect_model(const ModelInspectOptions& o, const CliContext& ctx);

}  // namespace shardplan::cli
