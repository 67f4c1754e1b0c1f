// safetensors checkpoints: one file, a sharded index or a folder, read header by header.
// See Note [safetensors format] and Note [Untrusted safetensors headers] in tensor/safetensors.h.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/strict_json.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// a + b for offsets and sizes read from a file, refused (bad input) when it overflows int64.
int64_t checked_add(int64_t a, int64_t b, std::string_view source, std::string_view what) {
  int64_t out = 0;
  SP_CHECK(add_into(a, b, out), source, ": ", what, " overflows int64");
  return out;
}

// ---- Checkpoints ----

// The tensors of one file as CheckpointTensors with absolute offsets.
void add_tensors(const SafetensorsHeader& h, size_t file, std::vector<CheckpointTensor>& out) {
  out.reserve(out.size() + h.tensors.size());
  for (const SafetensorsEntry& e : h.tensors) {
    CheckpointTensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.strides = contiguous_strides(e.shape);
    t.file = file;
    t.offset = h.data_start() + e.begin;  // cannot overflow: end <= file size - data_start
    t.nbytes = e.end - e.begin;
    out.push_back(std::move(t));
  }
}

void sort_by_name(std::vector<CheckpointTensor>& tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
}

std::string read_small_file(const fs::path& path, std::string_view what) {
  std::unique_ptr<ByteReader> r = open_file_reader(path);
  SP_CHECK(r->size() <= kMaxSafetensorsHeaderBytes, "'", path.string(), "': ", what, " of ",
           r->size(), " bytes is larger than the ", kMaxSafetensorsHeaderBytes, "-byte limit");
  std::string text(static_cast<size_t>(r->size()), '\0');
  r->read_at(0, text);
  return text;
}

// A weight_map file name stays in the index's folder: relative, no "..".
void check_shard_name(const std::string& file, const std::string& tensor, std::string_view source) {
  const fs::path p(file);
  bool escapes = file.empty() || p.is_absolute() || p.has_root_name();
  for (const fs::path& part : p) escapes = escapes || part == "..";
  SP_CHECK(!escapes, source, ": weight_map[", quote_json(tensor), "] is ", quote_json(file),
           ", expected a file name in the index's folder");
}

}  // namespace

// ---- Checkpoints ----

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  auto it =
      std::lower_bound(tensors.begin(), tensors.end(), name,
                       [](const CheckpointTensor& t, std::string_view n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

int64_t Checkpoint::numel() const {
  int64_t total = 0;
  for (const CheckpointTensor& t : tensors) {
    total =
        checked_add(total, checked_numel(t.shape, "checkpoint"), source.string(), "total numel");
  }
  return total;
}

int64_t Checkpoint::nbytes() const {
  int64_t total = 0;
  for (const CheckpointTensor& t : tensors) {
    total = checked_add(total, t.nbytes, source.string(), "total bytes");
  }
  return total;
}

Checkpoint read_checkpoint_index(
    std::string_view index_text, const fs::path& index_path,
    const std::function<std::unique_ptr<ByteReader>(const fs::path&)>& open) {
  const std::string source = index_path.string();
  const json index = parse_strict_json(index_text, source, kMaxIndexDepth, "a safetensors index");
  SP_CHECK(index.is_object(), source, ": expected a JSON object with \"weight_map\"");
  for (const auto& [k, v] : index.items()) {
    SP_CHECK(k == "metadata" || k == "weight_map", source, ": unknown key ", quote_json(k),
             ", expected metadata, weight_map");
  }
  SP_CHECK(index.contains("weight_map") && index["weight_map"].is_object(), source,
           ": missing \"weight_map\" object {tensor name: file name}");

  // Tensor names per file, files in name order (model-00001-of-00030 sorts as written).
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : index["weight_map"].items()) {
    SP_CHECK(file.is_string(), source, ": weight_map[", quote_json(name), "] is a ",
             file.type_name(), ", expected a file name");
    check_shard_name(file.get_ref<const std::string&>(), name, source);
    by_file[file.get<std::string>()].push_back(name);
  }

  Checkpoint ck;
  ck.source = index_path;
  const fs::path folder = index_path.parent_path();
  for (auto& [file, names] : by_file) {
    const fs::path path = folder / file;
    std::unique_ptr<ByteReader> reader;
    try {
      reader = open(path);
    } catch (const Error& e) {
      SP_FAIL(source, ": weight_map names ", quote_json(file), " (for tensor ",
              quote_json(names.front()), "), which cannot be read: ", e.what());
    }
    SafetensorsHeader header = read_safetensors_header(*reader, path.string());
    // Both directions: every mapped tensor is in its file, every tensor of the file is mapped to
    // it.
    std::unordered_set<std::string_view> in_file;
    for (const SafetensorsEntry& e : header.tensors) in_file.insert(e.name);
    for (const std::string& name : names) {
      SP_CHECK(in_file.contains(name), source, ": weight_map maps tensor ", quote_json(name),
               " to ", quote_json(file), ", which has no such tensor");
    }
    std::sort(names.begin(), names.end());
    for (const SafetensorsEntry& e : header.tensors) {
      SP_CHECK(std::binary_search(names.begin(), names.end(), e.name), path.string(), ": tensor ",
               quote_json(e.name), " is not mapped to this file by ", source);
    }
    add_tensors(header, ck.files.size(), ck.tensors);
    ck.files.push_back({path, std::move(header)});
  }
  sort_by_name(ck.tensors);

  ck.index_metadata = index.value("metadata", json::object());
  SP_CHECK(ck.index_metadata.is_object(), source, ": \"metadata\" is a ",
           ck.index_metadata.type_name(), ", expected an object");
  if (ck.index_metadata.contains("total_size")) {
    const json& total = ck.index_metadata["total_size"];
    // Hugging Face writes the sum of the tensors' bytes (numel * element size).
    SP_CHECK(total.is_number_unsigned() || (total.is_number_integer() && total.get<int64_t>() >= 0),
             source, ": metadata.total_size is ", total.dump(),
             ", expected a non-negative integer");
    const int64_t bytes = ck.nbytes();
    SP_CHECK(total.get<uint64_t>() == static_cast<uint64_t>(bytes), source,
             ": metadata.total_size is ", total.dump(), " bytes, but the tensors hold ", bytes);
  }
  return ck;
}

Checkpoint read_checkpoint(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
      if (fs::exists(path / name, ec)) return read_checkpoint(path / name);
    }
    SP_FAIL("checkpoint folder '", path.string(),
            "' holds neither model.safetensors.index.json nor model.safetensors");
  }
  if (path.extension() == ".json") {
    return read_checkpoint_index(read_small_file(path, "safetensors index"), path,
                                 [](const fs::path& p) { return open_file_reader(p); });
  }
  Checkpoint ck;
  ck.source = path;
  ck.files.push_back({path, read_safetensors_header(path)});
  add_tensors(ck.files[0].header, 0, ck.tensors);
  sort_by_name(ck.tensors);
  ck.index_metadata = nullptr;
  return ck;
}

NamedTensors to_named_tensors(const Checkpoint& ck) {
  NamedTensors out;
  out.reserve(ck.tensors.size());
  for (const CheckpointTensor& t : ck.tensors) {
    out.emplace_back(t.name, empty(t.shape, {.dtype = t.dtype}));
  }
  return out;
}

// ---- JSON ----

void to_json(json& j, const Checkpoint& ck) {
  j = json::object();
  j["source"] = ck.source.string();
  j["files"] = json::array();
  for (const CheckpointFile& f : ck.files) {
    j["files"].push_back({{"path", f.path.string()},
                          {"header_bytes", f.header.header_bytes},
                          {"data_bytes", f.header.data_bytes},
                          {"metadata", f.header.metadata}});
  }
  j["tensors"] = json::array();
  for (const CheckpointTensor& t : ck.tensors) {
    j["tensors"].push_back({{"name", t.name},
                            {"dtype", safetensors_dtype_name(t.dtype)},
                            {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                            {"strides", std::vector<int64_t>(t.strides.begin(), t.strides.end())},
                            {"file", t.file},
                            {"offset", t.offset},
                            {"nbytes", t.nbytes}});
  }
  j["index_metadata"] = ck.index_metadata;
}

// For round trips of what to_json wrote: headers come back without their entries. Checked field by
// field all the same (JsonFields), so a hand-edited document is a named error.
void from_json(const json& j, Checkpoint& ck) {
  const std::string origin = "checkpoint";
  JsonFields f(j, origin);
  Checkpoint out;
  out.source = f.str("source");
  const json& files = f.array("files");
  for (size_t i = 0; i < files.size(); ++i) {
    JsonFields e(files[i], origin, f.join("files") + "[" + std::to_string(i) + "]");
    CheckpointFile file;
    file.path = e.str("path");
    file.header.header_bytes = e.integer("header_bytes", 0);
    file.header.data_bytes = e.integer("data_bytes", 0);
    JsonFields metadata = e.object("metadata");
    for (const auto& item : metadata.json().items()) {
      file.header.metadata[item.key()] = metadata.str(item.key());
    }
    metadata.done();
    e.done();
    out.files.push_back(std::move(file));
  }
  const json& tensors = f.array("tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    JsonFields e(tensors[i], origin, f.join("tensors") + "[" + std::to_string(i) + "]");
    CheckpointTensor t;
    t.name = e.str("name");
    t.dtype = e.parsed("dtype", parse_safetensors_dtype);
    t.shape = e.integers("shape", 0);
    t.strides = e.integers("strides", 0);
    const int64_t file = e.integer("file", 0);
    if (static_cast<uint64_t>(file) >= out.files.size()) {
      e.fail("file", std::to_string(file) + ", expected an index into files (" +
                         std::to_string(out.files.size()) + " of them)");
    }
    t.file = static_cast<size_t>(file);
    t.offset = e.integer("offset", 0);
    t.nbytes = e.integer("nbytes", 0);
    e.done();
    out.tensors.push_back(std::move(t));
  }
  out.index_metadata = f.get("index_metadata");
  f.done();
  ck = std::move(out);
}

}  // namespace shardplan::tensor
