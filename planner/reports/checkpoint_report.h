// What `shardplan inspect --checkpoint` reports about a safetensors checkpoint (one file, an
// index, or a folder), read from the headers only: every tensor, totals by dtype, and with a config
// the check of the checkpoint against the model it describes (tensor/safetensors.h).
//   CheckpointReport r = checkpoint_report("llama/model.safetensors.index.json", "llama3-8b");
//   r.summary["check"]["loadable"];  // true when nothing is missing, unexpected or mis-shaped
//   r.write_json(std::cout);         // the whole document, a tensor row at a time
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "tensor/safetensors.h"

namespace shardplan::planner {

// Note [Checkpoint rows one at a time]
// A safetensors header may list 1.4 million tensors within its 100 MB limit (an index, 3 million).
// Built as one JSON document, their rows took 2.1 GB and 20 s to print; so the report keeps the
// checkpoint's own table (a name, a shape and offsets per tensor) and makes each row when it is
// written. `summary` holds every other key.
struct CheckpointReport {
  tensor::Checkpoint checkpoint;
  // "checkpoint", "files", "tensor_count", "parameters", "bytes", "by_dtype", and "check" when a
  // config was given.
  nlohmann::ordered_json summary;

  size_t tensor_count() const { return checkpoint.tensors.size(); }
  // Row i of "tensors": name, dtype, shape, file, offset, nbytes.
  nlohmann::ordered_json tensor_row(size_t i) const;
  // The document: the summary with "tensors" after "files", compact, as one JSON value.
  void write_json(std::ostream& os) const;
};

// `config` is a config.json path or a name in configs/models/ ("" for none). Throws
// shardplan::Error for unreadable or hostile files.
CheckpointReport checkpoint_report(const std::string& checkpoint, const std::string& config);

}  // namespace shardplan::planner
