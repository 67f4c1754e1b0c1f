// The storage formats kernels/ can fill, convert and checksum, and their sizes in bytes.
//   std::vector<std::byte> buf(numel * element_size(ElementType::kBFloat16));
// The tensor layer maps its own dtype onto this enum; the two are kept apart so kernels/ has no
// project dependencies.
#pragma once

#include <cstddef>
#include <string_view>

#include "kernels/host_device.h"

namespace shardplan::kernels {

enum class ElementType {
  kFloat64,
  kFloat32,
  kFloat16,       // IEEE binary16
  kBFloat16,      // bfloat16: the top half of a binary32
  kFloat8E4M3FN,  // OCP FP8 E4M3, "FN": finite only (no inf), one NaN per sign (S.1111.111)
  kFloat8E5M2,    // OCP FP8 E5M2, IEEE-like: has inf and NaNs
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,       // one byte, 0 or 1
  kComplex64,  // two float32: real then imaginary
};

// Every value of the enum, for tests and table-driven code.
inline constexpr ElementType kAllElementTypes[] = {
    ElementType::kFloat64,  ElementType::kFloat32,      ElementType::kFloat16,
    ElementType::kBFloat16, ElementType::kFloat8E4M3FN, ElementType::kFloat8E5M2,
    ElementType::kInt64,    ElementType::kInt32,        ElementType::kInt16,
    ElementType::kInt8,     ElementType::kUInt8,        ElementType::kBool,
    ElementType::kComplex64};

SHARDPLAN_HD SHARDPLAN_INLINE constexpr std::size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kFloat64:
    case ElementType::kInt64:
    case ElementType::kComplex64:
      return 8;
    case ElementType::kFloat32:
    case ElementType::kInt32:
      return 4;
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
    case ElementType::kInt16:
      return 2;
    case ElementType::kFloat8E4M3FN:
    case ElementType::kFloat8E5M2:
    case ElementType::kInt8:
    case ElementType::kUInt8:
    case ElementType::kBool:
      return 1;
  }
  return 0;
}

// Floating formats (complex included) take normal fills; integer and bool formats do not.
SHARDPLAN_HD SHARDPLAN_INLINE constexpr bool is_floating(ElementType type) {
  switch (type) {
    case ElementType::kFloat64:
    case ElementType::kFloat32:
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
    case ElementType::kFloat8E4M3FN:
    case ElementType::kFloat8E5M2:
    case ElementType::kComplex64:
      return true;
    default:
      return false;
  }
}

// PyTorch's dtype names, for messages: "float32", "bfloat16", "float8_e4m3fn", ...
constexpr std::string_view element_type_name(ElementType type) {
  switch (type) {
    case ElementType::kFloat64:
      return "float64";
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kFloat16:
      return "float16";
    case ElementType::kBFloat16:
      return "bfloat16";
    case ElementType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case ElementType::kFloat8E5M2:
      return "float8_e5m2";
    case ElementType::kInt64:
      return "int64";
    case ElementType::kInt32:
      return "int32";
    case ElementType::kInt16:
      return "int16";
    case ElementType::kInt8:
      return "int8";
    case ElementType::kUInt8:
      return "uint8";
    case ElementType::kBool:
      return "bool";
    case ElementType::kComplex64:
      return "complex64";
  }
  return "unknown";
}

}  // namespace shardplan::kernels
