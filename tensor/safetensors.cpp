// safetensors headers and sharded indexes as meta tensors. See Note [safetensors format] and
// Note [Untrusted safetensors headers] in safetensors.h.
#include "tensor/safetensors.h"

#include "tensor/base/checked.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tensor/base/error.h"
#include "tensor/base/file_io.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/base/strict_json.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Untrusted text in messages: quoted, escaped and cut short (tensor/base/strict_json.h).
std::string quote(std::string_view s) { return quote_json(s); }

int64_t checked_add(int64_t a, int64_t b, std::string_view source, std::string_view what) {
  int64_t out = 0;
  SP_CHECK(add_into(a, b, out), source, ": ", what, " overflows int64");
  return out;
}

// ---- dtype names (safetensors/src/tensor.rs, enum Dtype) ----

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr std::array<DTypeName, 13> kDTypeNames = {{
    {"BOOL", DType::kBool},
    {"U8", DType::kUInt8},
    {"I8", DType::kInt8},
    {"I16", DType::kInt16},
    {"I32", DType::kInt32},
    {"I64", DType::kInt64},
    {"F8_E4M3", DType::kFloat8E4M3FN},
    {"F8_E5M2", DType::kFloat8E5M2},
    {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},
    {"F32", DType::kFloat32},
    {"F64", DType::kFloat64},
    {"C64", DType::kComplex64},
}};
// In the format but without a shardplan element type: unsigned wider than a byte, and the
// sub-byte / exponent-only float formats of the OCP MX specification.
constexpr std::array<std::string_view, 7> kUnsupportedDTypeNames = {
    "U16", "U32", "U64", "F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"};

std::string supported_dtype_list() {
  std::string out;
  for (const DTypeName& d : kDTypeNames) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

// ---- The header's SAX handler ----

// Builds SafetensorsHeader straight from parser events, checking the schema as it goes: see Note
// [Untrusted safetensors headers]. Every failure throws shardplan::Error prefixed with `source`;
// exceptions pass through nlohmann's parser unchanged.
class HeaderHandler {
 public:
  HeaderHandler(std::string_view source, SafetensorsHeader& out) : source_(source), out_(out) {}

  bool null() { return wrong("null"); }
  bool boolean(bool) { return wrong("a boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (v < 0) return number_error(std::to_string(v), "a non-negative integer");
    return integer(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return number_error(std::to_string(v), "an integer below 2^63");
    }
    return integer(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t, const std::string& text) {
    return number_error(text, "an integer");
  }
  bool binary(json::binary_t&) { return wrong("binary"); }

  bool string(std::string& s) {
    if (depth_ == 2 && where_ == Where::kMetadata) {
      out_.metadata[key_] = std::move(s);
      return true;
    }
    if (depth_ == 2 && where_ == Where::kEntry && field_ == Field::kDType) {
      entry_.dtype = entry_dtype(s);
      return true;
    }
    return wrong(quote(s).insert(0, "the string "));
  }

  bool start_object(std::size_t) {
    check_depth("an object");
    if (depth_ == 1) {
      if (key_ == "__metadata__") {
        SP_CHECK(!saw_metadata_, source_, ": duplicate key \"__metadata__\" in the header");
        saw_metadata_ = true;
        where_ = Where::kMetadata;
      } else {
        SP_CHECK(!key_.empty(), source_, ": a tensor has the empty name \"\", expected a name");
        where_ = Where::kEntry;
        entry_ = SafetensorsEntry{};
        entry_.name = key_;
        fields_seen_ = 0;
      }
    } else if (depth_ > 1) {
      wrong("an object");  // a value inside an entry or __metadata__
    }
    ++depth_;
    return true;
  }

  bool key(std::string& k) {
    if (depth_ == 1) {
      key_ = std::move(k);
    } else if (where_ == Where::kMetadata) {
      SP_CHECK(!out_.metadata.contains(k), source_, ": duplicate key ", quote(k),
               " in __metadata__");
      key_ = std::move(k);
    } else {
      field_ = entry_field(k);
    }
    return true;
  }

  bool end_object() {
    if (depth_ == 2 && where_ == Where::kEntry) finish_entry();
    --depth_;
    where_ = Where::kTop;
    return true;
  }

  bool start_array(std::size_t) {
    check_depth("an array");
    const bool shape = field_ == Field::kShape;
    if (depth_ != 2 || where_ != Where::kEntry || !(shape || field_ == Field::kOffsets)) {
      wrong("an array");
    }
    where_ = shape ? Where::kShape : Where::kOffsets;
    ++depth_;
    return true;
  }

  bool end_array() {
    if (where_ == Where::kOffsets) {
      SP_CHECK(offsets_seen_ == 2, source_, ": tensor ", quote(entry_.name), ": data_offsets has ",
               offsets_seen_, " entries, expected 2 [begin, end]");
    }
    --depth_;
    where_ = Where::kEntry;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    SP_FAIL(source_, ": header is not valid JSON (at byte ", position,
            "): ", json_parser_message(e));
  }

 private:
  enum class Where { kTop, kMetadata, kEntry, kShape, kOffsets };
  enum class Field { kDType, kShape, kOffsets };

  // Depth is checked before anything is built: the format has 3 levels, so a 4th is an error
  // whatever follows (a megabyte of '[' costs one event, and nothing deep is ever allocated).
  void check_depth(const char* kind) const {
    SP_CHECK(depth_ < kSafetensorsHeaderDepth, context(), " is ", kind,
             ": the header nests deeper than the format's ", kSafetensorsHeaderDepth,
             " levels, expected ", expected_here());
  }

  // Where the parser is, for messages: "f.safetensors: tensor "w": shape entry 2".
  std::string context() const {
    std::string out(source_);
    if (depth_ == 0) return out + ": header";
    if (depth_ == 1)
      return out + ": " + (key_ == "__metadata__" ? "__metadata__" : "tensor " + quote(key_));
    if (where_ == Where::kMetadata) return out + ": __metadata__ value of " + quote(key_);
    out += ": tensor " + quote(entry_.name) + ": ";
    switch (where_) {
      case Where::kShape:
        return out + "shape entry " + std::to_string(entry_.shape.size());
      case Where::kOffsets:
        return out + "data_offsets entry " + std::to_string(offsets_seen_);
      default:
        return out + field_name(field_);
    }
  }
  std::string expected_here() const {
    if (depth_ == 0) return "a JSON object";
    if (depth_ == 1) {
      return key_ == "__metadata__" ? "an object of strings"
                                    : "an object {\"dtype\", \"shape\", \"data_offsets\"}";
    }
    if (where_ == Where::kMetadata) return "a string";
    if (where_ == Where::kShape || where_ == Where::kOffsets) return "a non-negative integer";
    switch (field_) {
      case Field::kDType:
        return "a dtype name (" + supported_dtype_list() + ")";
      case Field::kShape:
        return "a list of non-negative integers";
      case Field::kOffsets:
        return "[begin, end]";
    }
    return "";
  }
  static const char* field_name(Field f) {
    switch (f) {
      case Field::kDType:
        return "dtype";
      case Field::kShape:
        return "shape";
      case Field::kOffsets:
        return "data_offsets";
    }
    return "";
  }

  [[noreturn]] bool wrong(const std::string& what) {
    SP_FAIL(context(), " is ", what, ", expected ", expected_here());
  }
  [[noreturn]] bool number_error(const std::string& text, const char* expected) {
    const bool in_list = where_ == Where::kShape || where_ == Where::kOffsets;
    SP_FAIL(context(), " is ", printable(text), ", expected ",
            in_list ? expected : expected_here());
  }

  bool integer(int64_t v) {
    if (where_ == Where::kShape) {
      entry_.shape.push_back(v);
    } else if (where_ == Where::kOffsets) {
      SP_CHECK(offsets_seen_ < 2, source_, ": tensor ", quote(entry_.name),
               ": data_offsets has more than 2 entries, expected [begin, end]");
      (offsets_seen_ == 0 ? entry_.begin : entry_.end) = v;
      ++offsets_seen_;
    } else {
      wrong("the number " + std::to_string(v));
    }
    return true;
  }

  Field entry_field(const std::string& k) {
    Field f;
    if (k == "dtype") {
      f = Field::kDType;
    } else if (k == "shape") {
      f = Field::kShape;
    } else if (k == "data_offsets") {
      f = Field::kOffsets;
      offsets_seen_ = 0;
    } else {
      SP_FAIL(source_, ": tensor ", quote(entry_.name), ": unknown field ", quote(k),
              ", expected dtype, shape, data_offsets");
    }
    const unsigned bit = 1u << static_cast<unsigned>(f);
    SP_CHECK(!(fields_seen_ & bit), source_, ": tensor ", quote(entry_.name), ": duplicate key ",
             quote(k));
    fields_seen_ |= bit;
    return f;
  }

  DType entry_dtype(const std::string& s) const {
    for (const DTypeName& d : kDTypeNames) {
      if (d.name == s) return d.dtype;
    }
    const bool known = std::find(kUnsupportedDTypeNames.begin(), kUnsupportedDTypeNames.end(), s) !=
                       kUnsupportedDTypeNames.end();
    SP_FAIL(source_, ": tensor ", quote(entry_.name), ": dtype ", quote(s),
            known ? " is a safetensors dtype shardplan has no element type for, expected one of "
                  : " is not a safetensors dtype, expected one of ",
            supported_dtype_list());
  }

  // An entry is complete: all fields there, and its byte count matches its shape.
  void finish_entry() {
    const std::string name = quote(entry_.name);
    for (Field f : {Field::kDType, Field::kShape, Field::kOffsets}) {
      SP_CHECK(fields_seen_ & (1u << static_cast<unsigned>(f)), source_, ": tensor ", name,
               ": missing field \"", field_name(f), "\"");
    }
    SP_CHECK(entry_.begin <= entry_.end, source_, ": tensor ", name, ": data_offsets [",
             entry_.begin, ", ", entry_.end, "] has begin after end");
    // numel * itemsize with every step checked: a hostile shape must not wrap around to a
    // plausible byte count.
    int64_t bytes = itemsize(entry_.dtype);
    for (const int64_t d : entry_.shape) {
      SP_CHECK(mul_into(bytes, d, bytes), source_, ": tensor ", name, ": shape ",
               entry_.shape, " of ", safetensors_dtype_name(entry_.dtype),
               " holds more than 2^63 bytes");
    }
    // A zero size makes 0 bytes of anything, but the strides are products of the other sizes
    // (tensor/tensor.h checked_numel bounds them the same way): [0, 2^62, 2^62] is refused.
    int64_t nonzero = 1;
    for (const int64_t d : entry_.shape) {
      SP_CHECK(d == 0 || mul_into(nonzero, d, nonzero), source_, ": tensor ", name, ": shape ",
               entry_.shape, " has non-zero sizes whose product overflows int64, expected "
               "strides that int64 can hold");
    }
    SP_CHECK(entry_.end - entry_.begin == bytes, source_, ": tensor ", name, ": data_offsets [",
             entry_.begin, ", ", entry_.end, "] span ", entry_.end - entry_.begin,
             " bytes, expected ", bytes, " (shape ", entry_.shape, " of ",
             safetensors_dtype_name(entry_.dtype), ")");
    out_.tensors.push_back(std::move(entry_));
  }

  std::string_view source_;
  SafetensorsHeader& out_;
  int depth_ = 0;  // containers open
  Where where_ = Where::kTop;
  std::string key_;  // the last key at depth 1 (tensor name), or in __metadata__
  Field field_ = Field::kDType;
  unsigned fields_seen_ = 0;  // bit per Field in the current entry
  int offsets_seen_ = 0;
  bool saw_metadata_ = false;
  SafetensorsEntry entry_;
};

// Tensors sorted by offset must tile [0, data_bytes) exactly: see Note [Untrusted safetensors
// headers]. Also catches duplicate names (nlohmann reports every key, the handler keeps them all).
void check_layout(const SafetensorsHeader& h, std::string_view source) {
  std::vector<const SafetensorsEntry*> by_name(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) by_name[i] = &h.tensors[i];
  std::sort(by_name.begin(), by_name.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  for (size_t i = 1; i < by_name.size(); ++i) {
    SP_CHECK(by_name[i]->name != by_name[i - 1]->name, source, ": duplicate tensor ",
             quote(by_name[i]->name), " in the header");
  }
  std::vector<const SafetensorsEntry*> by_offset = std::move(by_name);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t cursor = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    SP_CHECK(e->end <= h.data_bytes, source, ": tensor ", quote(e->name), ": data_offsets [",
             e->begin, ", ", e->end, "] end beyond the data buffer of ", h.data_bytes,
             " bytes (file size - 8 - header length)");
    SP_CHECK(e->begin >= cursor, source, ": tensor ", quote(e->name), ": data_offsets [", e->begin,
             ", ", e->end, "] overlap tensor ", quote(previous ? previous->name : ""), " [",
             previous ? previous->begin : 0, ", ", cursor, "]");
    SP_CHECK(e->begin == cursor, source, ": tensor ", quote(e->name), ": data_offsets [", e->begin,
             ", ", e->end, "] leave a hole of ", e->begin - cursor, " bytes after ",
             previous ? "tensor " + quote(previous->name) : std::string("the header"),
             ", expected tensors to cover the data buffer contiguously");
    cursor = e->end;
    previous = e;
  }
  SP_CHECK(cursor == h.data_bytes, source, ": the data buffer has ", h.data_bytes - cursor,
           " bytes after the last tensor", previous ? " (" + quote(previous->name) + ")" : "",
           ", expected tensors to cover it exactly");
}

// ---- Readers ----

// A checkpoint file read through tensor/base/file_io.h: a bad path is bad input, an OS read error
// a RuntimeFailure (exit 1), a file shorter than its header says is bad input (truncated).
class FileReader final : public ByteReader {
 public:
  explicit FileReader(const fs::path& path) : file_(path, "safetensors file") {}
  int64_t size() const override { return file_.size(); }
  void read_at(int64_t offset, std::span<char> out) const override { file_.read_at(offset, out); }

 private:
  ReadOnlyFile file_;
};

class MemoryReader final : public ByteReader {
 public:
  explicit MemoryReader(std::string_view bytes) : bytes_(bytes) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void read_at(int64_t offset, std::span<char> out) const override {
    SP_ASSERT(offset >= 0 && offset + static_cast<int64_t>(out.size()) <= size());
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
  }

 private:
  std::string_view bytes_;
};

// ---- Checkpoints ----

// The tensors of one file as CheckpointTensors with absolute offsets.
void add_tensors(const SafetensorsHeader& h, size_t file, std::vector<CheckpointTensor>& out) {
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
  SP_CHECK(!escapes, source, ": weight_map[", quote(tensor), "] is ", quote(file),
           ", expected a file name in the index's folder");
}

}  // namespace

// ---- dtype names ----

DType parse_safetensors_dtype(std::string_view name) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.name == name) return d.dtype;
  }
  const bool known = std::find(kUnsupportedDTypeNames.begin(), kUnsupportedDTypeNames.end(),
                               name) != kUnsupportedDTypeNames.end();
  SP_FAIL("dtype ", quote(name),
          known ? " is a safetensors dtype shardplan has no element type for, expected one of "
                : " is not a safetensors dtype, expected one of ",
          supported_dtype_list());
}

std::string_view safetensors_dtype_name(DType t) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == t) return d.name;
  }
  SP_FAIL("dtype ", dtype_name(t), " has no safetensors name");
}

// ---- Readers ----

std::unique_ptr<ByteReader> open_file_reader(const fs::path& path) {
  return std::make_unique<FileReader>(path);
}

std::unique_ptr<ByteReader> memory_reader(std::string_view bytes) {
  return std::make_unique<MemoryReader>(bytes);
}

// ---- One file ----

SafetensorsHeader parse_safetensors_header(std::string_view json_text, int64_t data_bytes,
                                           std::string_view source) {
  SafetensorsHeader h;
  h.header_bytes = static_cast<int64_t>(json_text.size());
  h.data_bytes = data_bytes;
  HeaderHandler handler(source, h);
  // strict: nothing but whitespace may follow the object (the format pads with spaces).
  json::sax_parse(json_text.begin(), json_text.end(), &handler, json::input_format_t::json,
                  /*strict=*/true);
  check_layout(h, source);
  return h;
}

SafetensorsHeader read_safetensors_header(const ByteReader& reader, std::string_view source) {
  const int64_t size = reader.size();
  SP_CHECK(size >= 8, source, ": file has ", size,
           " bytes, expected at least 8 (the header length)");
  std::array<char, 8> prefix{};
  reader.read_at(0, prefix);
  uint64_t n = 0;  // little-endian, whatever the host's byte order
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<size_t>(i)]);
  SP_CHECK(n >= 2, source, ": header length ", n, " is too small, expected at least 2 (\"{}\")");
  SP_CHECK(n <= static_cast<uint64_t>(kMaxSafetensorsHeaderBytes), source, ": header length ", n,
           " exceeds the limit of ", kMaxSafetensorsHeaderBytes, " bytes");
  const auto header_bytes = static_cast<int64_t>(n);
  SP_CHECK(header_bytes <= size - 8, source, ": header length ", n,
           " runs past the end of the file (", size, " bytes)");
  std::string text(static_cast<size_t>(header_bytes), '\0');
  reader.read_at(8, text);
  return parse_safetensors_header(text, size - 8 - header_bytes, source);
}

SafetensorsHeader read_safetensors_header(const fs::path& path) {
  const std::unique_ptr<ByteReader> reader = open_file_reader(path);
  return read_safetensors_header(*reader, path.string());
}

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
    SP_CHECK(k == "metadata" || k == "weight_map", source, ": unknown key ", quote(k),
             ", expected metadata, weight_map");
  }
  SP_CHECK(index.contains("weight_map") && index["weight_map"].is_object(), source,
           ": missing \"weight_map\" object {tensor name: file name}");

  // Tensor names per file, files in name order (model-00001-of-00030 sorts as written).
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : index["weight_map"].items()) {
    SP_CHECK(file.is_string(), source, ": weight_map[", quote(name), "] is a ", file.type_name(),
             ", expected a file name");
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
      SP_FAIL(source, ": weight_map names ", quote(file), " (for tensor ", quote(names.front()),
              "), which cannot be read: ", e.what());
    }
    SafetensorsHeader header = read_safetensors_header(*reader, path.string());
    // Both directions: every mapped tensor is in its file, every tensor of the file is mapped to
    // it.
    std::unordered_set<std::string_view> in_file;
    for (const SafetensorsEntry& e : header.tensors) in_file.insert(e.name);
    for (const std::string& name : names) {
      SP_CHECK(in_file.contains(name), source, ": weight_map maps tensor ", quote(name), " to ",
               quote(file), ", which has no such tensor");
    }
    std::sort(names.begin(), names.end());
    for (const SafetensorsEntry& e : header.tensors) {
      SP_CHECK(std::binary_search(names.begin(), names.end(), e.name), path.string(), ": tensor ",
               quote(e.name), " is not mapped to this file by ", source);
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

// For round trips of what to_json wrote (trusted): headers come back without their entries.
void from_json(const json& j, Checkpoint& ck) {
  ck = Checkpoint{};
  ck.source = j.at("source").get<std::string>();
  for (const json& f : j.at("files")) {
    CheckpointFile file;
    file.path = f.at("path").get<std::string>();
    file.header.header_bytes = f.at("header_bytes").get<int64_t>();
    file.header.data_bytes = f.at("data_bytes").get<int64_t>();
    file.header.metadata = f.at("metadata").get<std::map<std::string, std::string>>();
    ck.files.push_back(std::move(file));
  }
  for (const json& e : j.at("tensors")) {
    CheckpointTensor t;
    t.name = e.at("name").get<std::string>();
    t.dtype = parse_safetensors_dtype(e.at("dtype").get<std::string>());
    t.shape = e.at("shape").get<std::vector<int64_t>>();
    t.strides = e.at("strides").get<std::vector<int64_t>>();
    t.file = e.at("file").get<size_t>();
    t.offset = e.at("offset").get<int64_t>();
    t.nbytes = e.at("nbytes").get<int64_t>();
    ck.tensors.push_back(std::move(t));
  }
  ck.index_metadata = j.at("index_metadata");
}

// ---- Checkpoint vs model ----

CheckpointReport check_checkpoint(const Checkpoint& ck, const Module& model) {
  // state_dict's names: every name of a tied tensor, persistent buffers only.
  std::vector<NamedTensor> expected = model.named_parameters({.remove_duplicate = false});
  for (NamedTensor& b : model.named_buffers({.remove_duplicate = false, .persistent_only = true})) {
    expected.push_back(std::move(b));
  }

  CheckpointReport r;
  // A base-model checkpoint (GPT-2's "h.0...") for a model with a head ("transformer.h.0..."):
  // Hugging Face strips base_model_prefix when the checkpoint has no key under it. We infer the
  // prefix: a first path component none of the checkpoint's names start with, whose stripped
  // names the checkpoint holds.
  std::map<std::string, int64_t> strip_hits;
  for (const NamedTensor& e : expected) {
    const size_t dot = e.name.find('.');
    if (dot == std::string::npos || ck.find(e.name)) continue;
    if (ck.find(std::string_view(e.name).substr(dot + 1))) ++strip_hits[e.name.substr(0, dot + 1)];
  }
  int64_t best = 0;
  // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz preset).
  for (const auto& hit : strip_hits) {
    const std::string& prefix = hit.first;
    const int64_t hits = hit.second;
    const bool ck_has_prefix =
        std::any_of(ck.tensors.begin(), ck.tensors.end(),
                    [&](const auto& t) { return t.name.starts_with(prefix); });
    if (!ck_has_prefix && hits > best) {
      best = hits;
      r.stripped_prefix = prefix;
    }
  }
  auto ck_name = [&](const std::string& name) {
    return !r.stripped_prefix.empty() && name.starts_with(r.stripped_prefix)
               ? name.substr(r.stripped_prefix.size())
               : name;
  };

  // Model tensors by checkpoint name; ties grouped by TensorImpl.
  std::unordered_map<std::string, const NamedTensor*> by_name;
  std::unordered_map<const TensorImpl*, std::vector<const NamedTensor*>> ties;
  for (const NamedTensor& e : expected) {
    by_name.emplace(ck_name(e.name), &e);
    ties[e.tensor.impl()].push_back(&e);
  }
  for (const auto& [impl, names] : ties) {
    const bool any_present = std::any_of(names.begin(), names.end(), [&](const NamedTensor* e) {
      return ck.find(ck_name(e->name)) != nullptr;
    });
    for (const NamedTensor* e : names) {
      if (ck.find(ck_name(e->name))) continue;
      (any_present ? r.tied_omitted : r.missing).push_back(e->name);
    }
  }

  for (const CheckpointTensor& t : ck.tensors) {
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      r.unexpected.push_back(t.name);
      continue;
    }
    const Tensor& want = it->second->tensor;
    CheckpointReport::Mismatch m{t.name, want.sizes(), t.shape, want.dtype(), t.dtype};
    if (want.sizes() != t.shape) {
      r.shape_mismatches.push_back(std::move(m));
      continue;
    }
    ++r.matched;
    if (want.dtype() != t.dtype) r.dtype_mismatches.push_back(std::move(m));
  }
  std::sort(r.missing.begin(), r.missing.end());
  std::sort(r.tied_omitted.begin(), r.tied_omitted.end());
  return r;  // unexpected and mismatches follow ck.tensors: sorted already
}

void to_json(json& j, const CheckpointReport& r) {
  auto mismatches = [](const std::vector<CheckpointReport::Mismatch>& list) {
    json out = json::array();
    for (const auto& m : list) {
      out.push_back(
          {{"name", m.name},
           {"expected_shape",
            std::vector<int64_t>(m.expected_shape.begin(), m.expected_shape.end())},
           {"actual_shape", std::vector<int64_t>(m.actual_shape.begin(), m.actual_shape.end())},
           {"expected_dtype", dtype_name(m.expected_dtype)},
           {"actual_dtype", dtype_name(m.actual_dtype)}});
    }
    return out;
  };
  j = json{{"loadable", r.loadable()},
           {"matched", r.matched},
           {"missing", r.missing},
           {"unexpected", r.unexpected},
           {"shape_mismatches", mismatches(r.shape_mismatches)},
           {"dtype_mismatches", mismatches(r.dtype_mismatches)},
           {"tied_omitted", r.tied_omitted},
           {"stripped_prefix", r.stripped_prefix}};
}

void from_json(const json& j, CheckpointReport& r) {
  auto mismatches = [](const json& list) {
    std::vector<CheckpointReport::Mismatch> out;
    for (const json& m : list) {
      out.push_back({m.at("name").get<std::string>(),
                     m.at("expected_shape").get<std::vector<int64_t>>(),
                     m.at("actual_shape").get<std::vector<int64_t>>(),
                     parse_dtype(m.at("expected_dtype").get<std::string>()),
                     parse_dtype(m.at("actual_dtype").get<std::string>())});
    }
    return out;
  };
  r = CheckpointReport{};
  r.matched = j.at("matched").get<int64_t>();
  r.missing = j.at("missing").get<std::vector<std::string>>();
  r.unexpected = j.at("unexpected").get<std::vector<std::string>>();
  r.shape_mismatches = mismatches(j.at("shape_mismatches"));
  r.dtype_mismatches = mismatches(j.at("dtype_mismatches"));
  r.tied_omitted = j.at("tied_omitted").get<std::vector<std::string>>();
  r.stripped_prefix = j.at("stripped_prefix").get<std::string>();
}

}  // namespace shardplan::tensor
