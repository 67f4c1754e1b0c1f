// What `--model NAME_OR_PATH` names (docs/architecture.md §4.4, "Models are named by..."): a file
// in configs/models/, a Hugging Face config.json, or a safetensors checkpoint (a .safetensors file,
// a model.safetensors.index.json, or their folder) whose config.json lies beside it, as
// save_pretrained writes them.
//   ModelSource src = find_model_source("ckpt/model.safetensors.index.json");
//   ModulePtr m = build_model(src.config);  // src.checkpoint: headers read, checked against m
//
// Note [A checkpoint names a model only with its config.json]
// A checkpoint's tensor names and shapes do not fix the architecture (activation, rope theta,
// norm eps, tied embeddings, MoE top-k are not in it), so a checkpoint without a config.json in
// its folder is refused with a pointer to --model config.json. With one, the checkpoint must be
// loadable into the model that config builds (no missing, unexpected or mis-shaped tensor):
// planning a model its own weights do not fit would be planning the wrong model. The error names
// the checkpoint and the first offending tensor; `shardplan inspect --checkpoint ... --config ...`
// lists them all.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "tensor/models/model_config.h"
#include "tensor/safetensors.h"

namespace shardplan::tensor {

struct ModelSource {
  std::filesystem::path config_path;  // the config.json the model is built from
  ModelConfig config;
  // Set when the model was named by a checkpoint: its headers, already checked loadable.
  std::optional<Checkpoint> checkpoint;
  // How the checkpoint matched the model (set with checkpoint): loadable.
  CheckpointReport check;
};

// True for what read_checkpoint reads: a path ending in ".safetensors" or
// ".safetensors.index.json", or an existing folder (a bare relative name too: a local folder is
// looked at before configs/models/, as Hugging Face's from_pretrained does).
bool names_a_checkpoint(std::string_view name_or_path);

// Resolves `name_or_path` (Note [A checkpoint names a model only with its config.json]). Throws
// shardplan::Error naming the file (and the field or tensor) for bad input.
ModelSource find_model_source(std::string_view name_or_path);

// quantization_config.quant_method of a config.json (DeepSeek-V3: "fp8", GPT-OSS: "mxfp4"),
// "unnamed" for a quantization_config without one, "" for none: how the published checkpoint
// stores its weights. It changes no shape or count, so ModelConfig does not keep it.
std::string config_quantization_method(const std::filesystem::path& config);

// What config `c`, read from `config_path`, says of its checkpoint beyond the module tree: the
// multi-token prediction layers after the last layer (ModelConfig::mtp_layers: transformers'
// _keys_to_ignore_on_load_unexpected skips them) and the quantization method.
CheckpointExpectations checkpoint_expectations(const ModelConfig& c,
                                               const std::filesystem::path& config_path);

}  // namespace shardplan::tensor
