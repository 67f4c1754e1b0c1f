// Command-line options shared by the verbs that lay a tensor out on a mesh (`shard`,
// `redistribute`): --shape, --dtype, --mesh, --mesh-names, and the parsing of their values.
//   auto args = std::make_shared<TensorMeshArgs>();
//   add_tensor_mesh_options(cmd, *args);                  // in register_<verb>
//   mesh::DeviceMesh m = args->device_mesh();             // in the callback; throws on bad input
//   mesh::ShardSpec s = args->shard_spec(mesh::parse_placements(text));
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/placement.h"
#include "mesh/shard_classes.h"
#include "mesh/shard_spec.h"
#include "tensor/dtype.h"

namespace shardplan::cli {

// The raw option values; CLI11 writes into them during parse, the accessors parse and validate
// (shardplan::Error naming the option and value, which main() maps to exit code 2).
struct TensorMeshArgs {
  std::string shape;       // --shape 10,5 (required; "" or "[]" for a 0-d tensor)
  std::string dtype = "float32";  // --dtype bf16
  std::string mesh;        // --mesh 2x4 (required)
  std::string mesh_names;  // --mesh-names dp,tp (optional)

  std::vector<int64_t> tensor_shape() const;
  tensor::DType tensor_dtype() const;
  mesh::DeviceMesh device_mesh() const;
  // The global tensor of --shape/--dtype on --mesh with `placements`, validated by make_shard_spec.
  mesh::ShardSpec shard_spec(std::vector<mesh::Placement> placements) const;
};

// The inputs every --json document of a tensor on a mesh echoes: {"shape": [10, 5], "dtype":
// "bfloat16", "mesh": {"shape": [2, 2], "names": ["dp", "tp"]}} (names only when given).
nlohmann::ordered_json tensor_mesh_json(const mesh::ShardSpec& spec);

// The classes of ranks of a layout (mesh/shard_classes.h) as every verb prints them:
// [{"count", "local_shape", "bytes", "coords": [first rank's coordinate], "global_offset"}].
nlohmann::ordered_json shard_classes_json(const mesh::LayoutShape& l, tensor::DType dtype);
// The same for a ShardSpec on a row-major mesh.
nlohmann::ordered_json shard_classes_json(const mesh::ShardSpec& spec);

// Adds --shape, --dtype, --mesh and --mesh-names to `cmd`, bound to `args` (which must outlive the
// parse: keep it in a shared_ptr captured by the callback).
void add_tensor_mesh_options(CLI::App& cmd, TensorMeshArgs& args);

// "10,5" -> {10, 5}; also "[10, 5]" and "10x5". Sizes >= 0. `option` names the flag in errors.
std::vector<int64_t> parse_int_list(std::string_view text, std::string_view option);
// "2x4" -> {2, 4}, "8" -> {8}; every size >= 1. Commas are refused: one syntax for meshes.
std::vector<int64_t> parse_mesh_shape(std::string_view text);
// "dp,tp" -> {"dp", "tp"}; "" -> {}.
std::vector<std::string> parse_name_list(std::string_view text);
// --placements: parse_placements with the option named in the error.
std::vector<mesh::Placement> parse_placements_option(std::string_view text,
                                                     std::string_view option);

}  // namespace shardplan::cli
