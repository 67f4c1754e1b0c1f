#include "planner/cli/mesh_args.h"

#include <algorithm>
#include <charconv>

#include "base/error.h"

namespace shardplan::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on any of `seps`, keeping empty items (so "2,,3" is caught as an empty entry).
std::vector<std::string_view> split(std::string_view text, std::string_view seps) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = text.find_first_of(seps, start);
    out.push_back(trim(text.substr(start, at == std::string_view::npos ? at : at - start)));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace

std::vector<int64_t> parse_int_list(std::string_view text, std::string_view option) {
  std::string_view t = trim(text);
  // Accept a Python/JSON-looking list as well: "[10, 5]" or "(10, 5)".
  if (t.size() >= 2 && ((t.front() == '[' && t.back() == ']') || (t.front() == '(' && t.back() == ')'))) {
    t = trim(t.substr(1, t.size() - 2));
  }
  std::vector<int64_t> out;
  if (t.empty()) return out;  // a 0-d tensor
  for (std::string_view item : split(t, ",x")) {
    int64_t v = 0;
    const char* end = item.data() + item.size();
    auto [ptr, ec] = std::from_chars(item.data(), end, v);
    SP_CHECK(!item.empty() && ec == std::errc() && ptr == end, option, " '", text, "': '", item,
             "' is not an integer, expected sizes like 10,5");
    SP_CHECK(v >= 0, option, " '", text, "': size ", v, " is negative, expected sizes >= 0");
    out.push_back(v);
  }
  return out;
}

std::vector<int64_t> parse_mesh_shape(std::string_view text) {
  // One syntax, sizes joined by x ("2x4", "8"), so a mesh never reads like a tensor shape.
  constexpr std::string_view kLike = "expected a mesh shape like 2x4 (dim sizes joined by x)";
  const std::string_view t = trim(text);
  SP_CHECK(!t.empty(), "--mesh: empty, ", kLike);
  SP_CHECK(t.find_first_of(",[]() ") == std::string_view::npos, "--mesh '", text, "': ", kLike,
           "; commas and brackets are for --shape");
  std::vector<int64_t> shape;
  for (std::string_view item : split(t, "xX")) {
    int64_t v = 0;
    const char* end = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(item.data(), end, v);
    SP_CHECK(!item.empty(), "--mesh '", text, "': a missing dim size, ", kLike);
    SP_CHECK(ec != std::errc::result_out_of_range, "--mesh '", text, "': '", item,
             "' is too large, expected a size below 2^63");
    SP_CHECK(ec == std::errc() && ptr == end, "--mesh '", text, "': '", item, "' is not a size, ",
             kLike);
    SP_CHECK(v >= 1, "--mesh '", text, "': mesh dim of size ", v, ", expected sizes >= 1");
    shape.push_back(v);
  }
  return shape;
}

std::vector<std::string> parse_name_list(std::string_view text) {
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  for (std::string_view item : split(text, ",")) {
    SP_CHECK(!item.empty(), "--mesh-names '", text, "': empty name, expected names like dp,tp");
    // DTensor refuses a mesh with two dims of one name; so do redistribute and shard.
    SP_CHECK(std::find(out.begin(), out.end(), item) == out.end(), "--mesh-names '", text, "': '",
             item, "' names two dims, expected distinct names");
    out.emplace_back(item);
  }
  return out;
}

std::vector<mesh::Placement> parse_placements_option(std::string_view text,
                                                     std::string_view option) {
  try {
    return mesh::parse_placements(text);
  } catch (const shardplan::Error& e) {
    throw shardplan::Error(std::string(option) + ": " + e.what());
  }
}

std::vector<int64_t> TensorMeshArgs::tensor_shape() const { return parse_int_list(shape, "--shape"); }

tensor::DType TensorMeshArgs::tensor_dtype() const { return tensor::parse_dtype(dtype); }

mesh::DeviceMesh TensorMeshArgs::device_mesh() const {
  std::vector<int64_t> s = parse_mesh_shape(mesh);
  std::vector<std::string> names = parse_name_list(mesh_names);
  SP_CHECK(names.empty() || names.size() == s.size(), "--mesh-names '", mesh_names, "' has ",
           names.size(), " names for the ", s.size(), "-d mesh '", mesh,
           "', expected one name per mesh dim");
  return mesh::DeviceMesh(std::move(s), std::move(names));
}

mesh::ShardSpec TensorMeshArgs::shard_spec(std::vector<mesh::Placement> placements) const {
  const std::vector<int64_t> s = tensor_shape();
  return mesh::make_shard_spec(s, tensor_dtype(), device_mesh(), std::move(placements));
}

void add_tensor_mesh_options(CLI::App& cmd, TensorMeshArgs& args) {
  cmd.add_option("--shape", args.shape, "Global tensor shape, e.g. 10,5")
      ->required()
      ->type_name("N,N,...");
  cmd.add_option("--dtype", args.dtype, "Element type, e.g. bf16, fp32 (default float32)")
      ->type_name("DTYPE");
  cmd.add_option("--mesh", args.mesh, "Device mesh shape, e.g. 2x4 (ranks row-major)")
      ->required()
      ->type_name("AxB...");
  cmd.add_option("--mesh-names", args.mesh_names, "Mesh dim names, e.g. dp,tp")
      ->type_name("NAME,...");
}

nlohmann::ordered_json tensor_mesh_json(const mesh::ShardSpec& spec) {
  nlohmann::ordered_json mesh_doc;
  mesh_doc["shape"] = spec.mesh.shape();
  if (!spec.mesh.dim_names().empty()) mesh_doc["names"] = spec.mesh.dim_names();
  return {{"shape", std::vector<int64_t>(spec.shape.begin(), spec.shape.end())},
          {"dtype", tensor::dtype_name(spec.dtype)},
          {"mesh", mesh_doc}};
}

nlohmann::ordered_json shard_classes_json(const mesh::LayoutShape& l, tensor::DType dtype) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const mesh::ShardClass& c : mesh::shard_classes(l)) {
    // Cannot overflow: a shard is no larger than the global tensor, checked by layout_shape.
    int64_t bytes = tensor::itemsize(dtype);
    for (int64_t n : c.local_shape) bytes *= n;
    out.push_back({{"count", c.count},
                   {"local_shape", c.local_shape.vec()},
                   {"bytes", bytes},
                   {"coords", c.coords},
                   {"global_offset", c.first_offset.vec()}});
  }
  return out;
}

nlohmann::ordered_json shard_classes_json(const mesh::ShardSpec& spec) {
  const std::vector<int64_t> shape(spec.shape.begin(), spec.shape.end());
  return shard_classes_json(mesh::layout_shape(shape, spec.mesh.shape(), spec.placements),
                            spec.dtype);
}

}  // namespace shardplan::cli
