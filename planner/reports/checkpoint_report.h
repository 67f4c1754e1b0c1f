// What `shardplan inspect --checkpoint` reports about a safetensors checkpoint (one file, an
// index, or a folder), read from the headers only: every tensor, totals by dtype, and with a config
// the check of the checkpoint against the model it describes (tensor/safetensors.h).
//   nlohmann::ordered_json r = checkpoint_report("llama/model.safetensors.index.json",
//   "llama3-8b"); r["check"]["loadable"];  // true when nothing is missing, unexpected or
//   mis-shaped
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace shardplan::planner {

// The report as a JSON document: "checkpoint", "files", "tensors", "tensor_count", "parameters",
// "bytes", "by_dtype", and "check" when `config` (a config.json path or a name in configs/models/)
// is not empty. Throws shardplan::Error for unreadable or hostile files.
nlohmann::ordered_json checkpoint_report(const std::string& checkpoint, const std::string& config);

}  // namespace shardplan::planner
