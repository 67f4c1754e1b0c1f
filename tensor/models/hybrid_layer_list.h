// The hybrid-layer list of Zyphra's Zamba and Zamba2 configs: which layers run a shared transformer
// block before their Mamba mixer. Internal to tensor/models/:
//   std::vector<bool> hybrid = read_hybrid_layer_list(f, layers, {"Zamba2Config", "Zamba2",
//   "Mamba-2"},
//                                                     [&] { return class_default(); });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/models/config_fields.h"

namespace shardplan::tensor::models {

// The names an error states.
struct HybridListNames {
  std::string config_class;  // "ZambaConfig"
  std::string model;         // "Zamba": "... is not a Zamba layer"
  std::string mixer;         // "Mamba": "transformers builds a Mamba layer for any other type"
};

// Which layers are hybrid, from layers_block_type (or layer_types, its attribute_map alias): each
// "hybrid", or "mamba" / "linear_attention" (remap_legacy_layer_types) for a Mamba layer; the
// model builds a Mamba layer for any entry but "hybrid", so another type is refused, as are two
// lists that differ. PreTrainedConfig.validate_layer_type requires num_hidden_layers entries.
// Without either list: `class_default()`, the config class's own list (which may refuse the
// layer count itself).
std::vector<bool> read_hybrid_layer_list(const ConfigFields& f, int64_t layers,
                                         const HybridListNames& names,
                                         const std::function<std::vector<bool>()>& class_default);

}  // namespace shardplan::tensor::models
