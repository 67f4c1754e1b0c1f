// safetensors header parser: the dtype names of the format and the validated header of one file.
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
#include "base/strict_json.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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
    return wrong(quote_json(s).insert(0, "the string "));
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
      SP_CHECK(!out_.metadata.contains(k), source_, ": duplicate key ", quote_json(k),
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
      SP_CHECK(offsets_seen_ == 2, source_, ": tensor ", quote_json(entry_.name),
               ": data_offsets has ", offsets_seen_, " entries, expected 2 [begin, end]");
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
      return out + ": " + (key_ == "__metadata__" ? "__metadata__" : "tensor " + quote_json(key_));
    if (where_ == Where::kMetadata) return out + ": __metadata__ value of " + quote_json(key_);
    out += ": tensor " + quote_json(entry_.name) + ": ";
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
      SP_CHECK(offsets_seen_ < 2, source_, ": tensor ", quote_json(entry_.name),
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
      SP_FAIL(source_, ": tensor ", quote_json(entry_.name), ": unknown field ", quote_json(k),
              ", expected dtype, shape, data_offsets");
    }
    const unsigned bit = 1u << static_cast<unsigned>(f);
    SP_CHECK(!(fields_seen_ & bit), source_, ": tensor ", quote_json(entry_.name),
             ": duplicate key ", quote_json(k));
    fields_seen_ |= bit;
    return f;
  }

  DType entry_dtype(const std::string& s) const {
    for (const DTypeName& d : kDTypeNames) {
      if (d.name == s) return d.dtype;
    }
    const bool known = std::find(kUnsupportedDTypeNames.begin(), kUnsupportedDTypeNames.end(), s) !=
                       kUnsupportedDTypeNames.end();
    SP_FAIL(source_, ": tensor ", quote_json(entry_.name), ": dtype ", quote_json(s),
            known ? " is a safetensors dtype shardplan has no element type for, expected one of "
                  : " is not a safetensors dtype, expected one of ",
            supported_dtype_list());
  }

  // An entry is complete: all fields there, and its byte count matches its shape.
  void finish_entry() {
    const std::string name = quote_json(entry_.name);
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
      SP_CHECK(mul_into(bytes, d, bytes), source_, ": tensor ", name, ": shape ", entry_.shape,
               " of ", safetensors_dtype_name(entry_.dtype), " holds more than 2^63 bytes");
    }
    // A zero size makes 0 bytes of anything, but the strides are products of the other sizes
    // (tensor/tensor.h checked_numel bounds them the same way): [0, 2^62, 2^62] is refused.
    int64_t nonzero = 1;
    for (const int64_t d : entry_.shape) {
      SP_CHECK(d == 0 || mul_into(nonzero, d, nonzero), source_, ": tensor ", name, ": shape ",
               entry_.shape,
               " has non-zero sizes whose product overflows int64, expected "
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
             quote_json(by_name[i]->name), " in the header");
  }
  std::vector<const SafetensorsEntry*> by_offset = std::move(by_name);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t cursor = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : by_offset) {
    SP_CHECK(e->end <= h.data_bytes, source, ": tensor ", quote_json(e->name), ": data_offsets [",
             e->begin, ", ", e->end, "] end beyond the data buffer of ", h.data_bytes,
             " bytes (file size - 8 - header length)");
    SP_CHECK(e->begin >= cursor, source, ": tensor ", quote_json(e->name), ": data_offsets [",
             e->begin, ", ", e->end, "] overlap tensor ",
             quote_json(previous ? previous->name : ""), " [", previous ? previous->begin : 0, ", ",
             cursor, "]");
    SP_CHECK(e->begin == cursor, source, ": tensor ", quote_json(e->name), ": data_offsets [",
             e->begin, ", ", e->end, "] leave a hole of ", e->begin - cursor, " bytes after ",
             previous ? "tensor " + quote_json(previous->name) : std::string("the header"),
             ", expected tensors to cover the data buffer contiguously");
    cursor = e->end;
    previous = e;
  }
  SP_CHECK(cursor == h.data_bytes, source, ": the data buffer has ", h.data_bytes - cursor,
           " bytes after the last tensor", previous ? " (" + quote_json(previous->name) + ")" : "",
           ", expected tensors to cover it exactly");
}

}  // namespace

// ---- dtype names ----

DType parse_safetensors_dtype(std::string_view name) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.name == name) return d.dtype;
  }
  const bool known = std::find(kUnsupportedDTypeNames.begin(), kUnsupportedDTypeNames.end(),
                               name) != kUnsupportedDTypeNames.end();
  SP_FAIL("dtype ", quote_json(name),
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

}  // namespace shardplan::tensor
