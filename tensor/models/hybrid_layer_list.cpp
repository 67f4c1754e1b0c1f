#include "tensor/models/hybrid_layer_list.h"

#include <iterator>
#include <nlohmann/json.hpp>

namespace shardplan::tensor::models {

std::vector<bool> read_hybrid_layer_list(const ConfigFields& f, int64_t layers,
                                         const HybridListNames& names,
                                         const std::function<std::vector<bool>()>& class_default) {
  const bool block_type = f.has("layers_block_type"), alias = f.has("layer_types");
  if (block_type && alias && f.raw("layers_block_type") != f.raw("layer_types")) {
    f.fail("layer_types", "differs from layers_block_type, which it aliases (" +
                              names.config_class + "'s attribute_map); expected one list");
  }
  if (!block_type && !alias) return class_default();
  const char* key = block_type ? "layers_block_type" : "layer_types";
  const nlohmann::json& list = f.raw(key);
  if (!list.is_array() || std::ssize(list) != layers) {
    f.fail(key, "expected a list of num_hidden_layers = " + std::to_string(layers) +
                    " entries (\"mamba\" or \"hybrid\"), got " + list.dump().substr(0, 60));
  }
  std::vector<bool> out;
  for (const nlohmann::json& t : list) {
    const std::string s = t.is_string() ? t.get<std::string>() : "";
    if (s != "hybrid" && s != "mamba" && s != "linear_attention") {
      f.fail(key, t.dump().substr(0, 60) + " is not a " + names.model +
                      " layer; expected \"mamba\" (or \"linear_attention\") or \"hybrid\" "
                      "(transformers builds a " +
                      names.mixer + " layer for any other type)");
    }
    out.push_back(s == "hybrid");
  }
  return out;
}

}  // namespace shardplan::tensor::models
