// Element types of meta tensors and PyTorch's type-promotion rules.
//   DType t = promote_types(DType::kFloat16, DType::kBFloat16);   // kFloat32
//   DType u = parse_dtype("bf16");                                  // kBFloat16 (throws on unknown)
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace shardplan::tensor {

// Order is irrelevant to promotion (that is explicit in promote_types); keep it stable for JSON.
enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};
inline constexpr int kNumDTypes = 14;

// Size of one element in bytes.
constexpr int64_t itemsize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return 1;
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

constexpr bool is_complex(DType t) { return t == DType::kComplex64 || t == DType::kComplex128; }
constexpr bool is_float8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }
// Floating point, not complex (PyTorch's isFloatingType).
constexpr bool is_floating(DType t) {
  return is_float8(t) || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}
// Integral, bool included only when asked (PyTorch's isIntegralType(t, includeBool)).
constexpr bool is_integral(DType t, bool include_bool) {
  return (include_bool && t == DType::kBool) || t == DType::kUInt8 || t == DType::kInt8 ||
         t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}

// The canonical PyTorch name without "torch.": "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType t);
// Accepts PyTorch names and their aliases (float, half, double, long, int, ...) and the short forms
// users type (fp32, bf16, fp16, f32, i64, fp8_e4m3, ...). Throws shardplan::Error naming the value.
DType parse_dtype(std::string_view name);
// Same, without throwing.
bool try_parse_dtype(std::string_view name, DType* out);
std::ostream& operator<<(std::ostream& os, DType t);

// PyTorch's promoteTypes (c10/core/ScalarType.h). float8 promotes only with itself (an error
// otherwise, as in PyTorch); complex64 with float64 gives complex128.
DType promote_types(DType a, DType b);
// The complex type whose parts are `t` (float32 -> complex64); throws for types with none here.
DType to_complex(DType t);
// The real type of a complex type (complex64 -> float32); identity otherwise.
DType to_real(DType t);

// The default dtype for Python floats, as in PyTorch (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::kFloat32;
inline constexpr DType kDefaultComplex = DType::kComplex64;

// A Python-number argument of an op ("wrapped number"): it joins type promotion with the lowest
// priority, as in PyTorch: int tensor + 2.5 -> float32; float16 tensor + 2.5 -> float16.
struct Scalar {
  enum class Kind : uint8_t { kBool, kInt, kFloat, kComplex };
  Kind kind = Kind::kInt;
  double real = 0;  // value for kFloat/kComplex/kBool(0/1); int kept exactly in `i`
  double imag = 0;
  int64_t i = 0;

  Scalar() = default;
  Scalar(bool b) : kind(Kind::kBool), real(b), i(b) {}  // NOLINT: implicit like a Python number
  Scalar(int v) : kind(Kind::kInt), real(v), i(v) {}  // NOLINT
  Scalar(int64_t v) : kind(Kind::kInt), real(static_cast<double>(v)), i(v) {}  // NOLINT
  Scalar(double v) : kind(Kind::kFloat), real(v) {}  // NOLINT
  static Scalar complex(double re, double im) {
    Scalar s(re);
    s.kind = Kind::kComplex;
    s.imag = im;
    return s;
  }
  // The dtype a wrapped number of this kind contributes to promotion.
  DType wrapped_dtype() const;
};

// PyTorch's ResultTypeState: dimensioned tensors outrank 0-dim tensors, which outrank wrapped
// numbers; a lower tier only matters when it is of a higher category (bool < int < float < complex).
class ResultType {
 public:
  void add_tensor(DType t, bool zero_dim);
  void add_scalar(const Scalar& s);
  DType result() const;

 private:
  // kNoType marks "undefined" (no operand of that tier yet).
  static constexpr int kNoType = -1;
  int dim_ = kNoType, zero_ = kNoType, wrapped_ = kNoType;
};

}  // namespace shardplan::tensor
