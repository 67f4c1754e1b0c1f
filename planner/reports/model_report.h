// What `shardplan inspect --model` reports about a model built on meta from a Hugging Face
// config.json (by name in configs/models/, by path, or by a checkpoint with its config.json beside
// it): parameters (total, per block kind), bytes by dtype, FLOPs per token from the traced forward,
// activation memory of one training step per recomputation policy, and a per-module table.
//   nlohmann::ordered_json r = model_report({"llama3-70b", 4096, 1});
//   r["parameters"];  // 70'553'706'496
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace shardplan::planner {

// Unset seq: the model's maximum positions capped at kDefaultSeqCap, so the plain command works
// for every model (GPT-2 has 1024 learned positions, Llama 3 8192).
inline constexpr int64_t kDefaultSeqCap = 4096;

struct ModelReportOptions {
  std::string model;           // a name, a config.json, or a checkpoint with its config.json
  std::optional<int64_t> seq;  // tokens per sequence of the traced forward
  int64_t batch = 1;           // sequences
};

// The report as a JSON document: "model", "model_type", "architecture", "config", "checkpoint"
// (when named by one), "seq", "seq_is_default", "batch", "parameters", "parameters_by_kind",
// "embedding_parameters", "bytes_by_dtype", "bytes", "flops_per_token" (forward, all ops),
// "flops_per_token_detail", "activation_bytes" (no recomputation), "activation_bytes_by_recompute",
// "notes", "modules". Throws shardplan::Error for bad options or a bad model.
nlohmann::ordered_json model_report(const ModelReportOptions& options);

}  // namespace shardplan::planner
