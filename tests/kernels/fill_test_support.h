// Helpers for the fill tests: boxes that own their size/stride arrays, buffers, and the fill specs
// exercised for each element type.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/element_type.h"
#include "kernels/init_fill.h"
#include "kernels/region.h"

namespace shardplan::kernels::testing {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int k = static_cast<int>(sizes.size()) - 2; k >= 0; --k) {
    strides[k] = strides[k + 1] * sizes[k + 1];
  }
  return strides;
}

// A FillRegion whose arrays live as long as the Box.
struct Box {
  std::vector<int64_t> sizes;
  std::vector<int64_t> dst_strides;
  std::vector<int64_t> global_strides;
  int64_t global_offset = 0;

  FillRegion region() const {
    return FillRegion{static_cast<int>(sizes.size()), sizes.data(), dst_strides.data(),
                      global_strides.data(), global_offset};
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// The box [begin, begin + sizes) of a row-major global tensor, stored contiguously.
inline Box sub_box(const std::vector<int64_t>& global_sizes, const std::vector<int64_t>& begin,
                   const std::vector<int64_t>& sizes) {
  Box box{sizes, contiguous_strides(sizes), contiguous_strides(global_sizes), 0};
  for (size_t k = 0; k < begin.size(); ++k) box.global_offset += begin[k] * box.global_strides[k];
  return box;
}

inline std::vector<unsigned char> make_buffer(ElementType type, int64_t numel,
                                              unsigned char sentinel = 0xA5) {
  return std::vector<unsigned char>(static_cast<size_t>(numel) * element_size(type), sentinel);
}

// Raw bytes of element `offset` (in elements) of `buffer`, as an integer (little-endian).
inline uint64_t element_bits(const std::vector<unsigned char>& buffer, ElementType type,
                             int64_t offset) {
  uint64_t bits = 0;
  std::memcpy(&bits, buffer.data() + offset * element_size(type), element_size(type));
  return bits;
}

// The spec each (type, kind) pair is tested with; the parameters exercise rounding and signs.
inline FillSpec test_spec(ElementType type, FillKind kind, uint64_t seed = 0x5EEDu,
                          uint64_t key = tensor_key_from_name("layers.0.attn.q.weight")) {
  FillSpec spec{kind, 0.0, 0.0, seed, key};
  if (is_floating(type)) {
    switch (kind) {
      case FillKind::kConstant:
        spec.a = -0.3;
        break;
      case FillKind::kUniform:
        spec.a = -2.0, spec.b = 3.0;
        break;
      case FillKind::kNormal:
        spec.a = 0.5, spec.b = 2.0;
        break;
      case FillKind::kTruncatedNormal:
        // [-1, 3] is mean -0.75 std .. +1.25 std: a third of the draws are redrawn at least once.
        spec.a = 0.5, spec.b = 2.0, spec.low = -1.0, spec.high = 3.0;
        break;
      case FillKind::kLogIndex:
        spec.a = 3.0;  // log(3), log(4), ...: an offset other than the A_log init's 1
        break;
    }
    return spec;
  }
  if (kind == FillKind::kConstant) {
    spec.a = type == ElementType::kBool ? 1.0 : type == ElementType::kUInt8 ? 200.0 : -7.0;
    return spec;
  }
  switch (type) {
    case ElementType::kInt64:
      spec.a = -1e15, spec.b = 1e15;
      break;
    case ElementType::kInt32:
      spec.a = -2147483648.0, spec.b = 2147483648.0;
      break;
    case ElementType::kInt16:
      spec.a = -1000.0, spec.b = 1000.0;
      break;
    case ElementType::kInt8:
      spec.a = -100.0, spec.b = 100.0;
      break;
    case ElementType::kUInt8:
      spec.a = 0.0, spec.b = 256.0;
      break;
    default:
      spec.a = 0.0, spec.b = 2.0;
      break;  // bool
  }
  return spec;
}

struct TypeAndKind {
  ElementType type;
  FillKind kind;
};

// Every pair that check_fill_spec accepts: all kinds for floating types (truncated normal and log
// index except for complex64), constant and uniform for integers and bool.
inline std::vector<TypeAndKind> all_type_kind_pairs() {
  std::vector<TypeAndKind> pairs;
  for (ElementType type : kAllElementTypes) {
    pairs.push_back({type, FillKind::kConstant});
    pairs.push_back({type, FillKind::kUniform});
    if (is_floating(type)) pairs.push_back({type, FillKind::kNormal});
    if (is_floating(type) && type != ElementType::kComplex64) {
      pairs.push_back({type, FillKind::kTruncatedNormal});
      pairs.push_back({type, FillKind::kLogIndex});
    }
  }
  return pairs;
}

inline std::string pair_name(const TypeAndKind& p) {
  const char* kind = p.kind == FillKind::kConstant   ? "constant"
                     : p.kind == FillKind::kUniform  ? "uniform"
                     : p.kind == FillKind::kNormal   ? "normal"
                     : p.kind == FillKind::kLogIndex ? "log_index"
                                                     : "truncated_normal";
  return std::string(element_type_name(p.type)) + "_" + kind;
}

}  // namespace shardplan::kernels::testing
