#include "tensor/dtype.h"

#include <array>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "base/enum_names.h"
#include "base/error.h"
#include "base/nearest_name.h"

namespace shardplan::tensor {
namespace {

constexpr std::array<std::string_view, kNumDTypes> kNames = {
    "bool",    "uint8",    "int8",    "int16",   "int32",   "int64",     "float8_e4m3fn",
    "float8_e5m2", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"};

// Aliases: PyTorch's own (torch.float == torch.float32, torch.half, torch.long, ...) and the short
// forms common in configs and on command lines (bf16, fp32, ...).
constexpr std::pair<std::string_view, DType> kAliases[] = {
    {"float", DType::kFloat32},      {"fp32", DType::kFloat32},       {"f32", DType::kFloat32},
    {"double", DType::kFloat64},     {"fp64", DType::kFloat64},       {"f64", DType::kFloat64},
    {"half", DType::kFloat16},       {"fp16", DType::kFloat16},       {"f16", DType::kFloat16},
    {"bf16", DType::kBFloat16},      {"long", DType::kInt64},         {"i64", DType::kInt64},
    {"int", DType::kInt32},          {"i32", DType::kInt32},          {"short", DType::kInt16},
    {"i16", DType::kInt16},          {"i8", DType::kInt8},            {"u8", DType::kUInt8},
    {"cfloat", DType::kComplex64},   {"c64", DType::kComplex64},      {"cdouble", DType::kComplex128},
    {"c128", DType::kComplex128},    {"fp8_e4m3", DType::kFloat8E4M3FN}, {"fp8_e4m3fn", DType::kFloat8E4M3FN},
    {"e4m3", DType::kFloat8E4M3FN},  {"fp8_e5m2", DType::kFloat8E5M2}, {"e5m2", DType::kFloat8E5M2},
};

// Rank of a real floating type for promotion; fp16 and bf16 share a rank (they promote to fp32).
int float_rank(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 1;
    case DType::kFloat32:
      return 2;
    case DType::kFloat64:
      return 3;
    default:
      return 0;
  }
}

int int_bits(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
      return 8;
    case DType::kInt16:
      return 16;
    case DType::kInt32:
      return 32;
    case DType::kInt64:
      return 64;
    default:
      return 0;
  }
}

// c10's promote_skip_undefined on our int encoding.
int promote_skip(int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return static_cast<int>(promote_types(static_cast<DType>(a), static_cast<DType>(b)));
}

// c10's combine_categories: `higher` is the higher-priority tier's result.
int combine_categories(int higher, int lower) {
  if (higher >= 0 && is_complex(static_cast<DType>(higher))) return higher;
  if (lower >= 0 && is_complex(static_cast<DType>(lower))) {
    // An integral higher tier takes the complex type as it is; a floating one keeps its precision.
    if (higher >= 0 && is_floating(static_cast<DType>(higher)))
      return static_cast<int>(to_complex(static_cast<DType>(higher)));
    return lower;
  }
  if (higher >= 0 && is_floating(static_cast<DType>(higher))) return higher;
  if (higher == static_cast<int>(DType::kBool) ||
      (lower >= 0 && is_floating(static_cast<DType>(lower))))
    return promote_skip(higher, lower);
  if (higher >= 0) return higher;
  return lower;
}

}  // namespace

std::string_view dtype_name(DType t) { return kNames[static_cast<size_t>(t)]; }

bool try_parse_dtype(std::string_view name, DType* out) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kNames[i] == name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  for (const auto& [alias, t] : kAliases) {
    if (alias == name) {
      *out = t;
      return true;
    }
  }
  // Users write BF16 and Float32 as often as bf16: a second, case-insensitive pass (the exact one
  // above stays the fast path of the timed parsers).
  for (int i = 0; i < kNumDTypes; ++i) {
    if (detail::names_equal(kNames[i], name, NameCase::kInsensitive)) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  for (const auto& [alias, t] : kAliases) {
    if (detail::names_equal(alias, name, NameCase::kInsensitive)) {
      *out = t;
      return true;
    }
  }
  return false;
}

DType parse_dtype(std::string_view name) {
  DType t;
  if (try_parse_dtype(name, &t)) return t;
  std::vector<std::string> names(std::begin(kNames), std::end(kNames));
  for (const auto& alias : kAliases) names.emplace_back(alias.first);
  SP_FAIL("unknown dtype '", name, "'", did_you_mean(name, names),
          "; expected one of bool, uint8, int8, int16, int32, int64, float8_e4m3fn, "
          "float8_e5m2, float16, bfloat16, float32, float64, complex64, complex128 "
          "(or an alias such as bf16, fp16, fp32)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  SP_CHECK(!is_float8(a) && !is_float8(b), "Promotion for Float8 Types is not supported, attempted "
                                           "to promote ", a, " and ", b);
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  if (is_complex(a) || is_complex(b)) {
    // complex64 holds float32 parts: any float64 (or complex128) operand needs complex128.
    if (a == DType::kComplex128 || b == DType::kComplex128 || a == DType::kFloat64 ||
        b == DType::kFloat64)
      return DType::kComplex128;
    return DType::kComplex64;
  }
  const int fa = float_rank(a), fb = float_rank(b);
  if (fa || fb) {
    if (fa == fb) return DType::kFloat32;  // float16 with bfloat16: neither holds the other
    return fa > fb ? a : b;
  }
  // Both integral. uint8 with a signed type needs one more bit than int8 has.
  const int ba = int_bits(a), bb = int_bits(b);
  if (a == DType::kUInt8 || b == DType::kUInt8) {
    const DType other = a == DType::kUInt8 ? b : a;
    return int_bits(other) == 8 ? DType::kInt16 : other;
  }
  return ba > bb ? a : b;
}

DType to_complex(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kComplex64:
      return DType::kComplex64;
    case DType::kFloat64:
    case DType::kComplex128:
      return DType::kComplex128;
    default:
      SP_FAIL("no complex type with ", t, " parts is supported (complex32 is not)");
  }
}

DType to_real(DType t) {
  if (t == DType::kComplex64) return DType::kFloat32;
  if (t == DType::kComplex128) return DType::kFloat64;
  return t;
}

DType Scalar::wrapped_dtype() const {
  switch (kind) {
    case Kind::kBool:
      return DType::kBool;
    case Kind::kInt:
      return DType::kInt64;
    case Kind::kFloat:
      return kDefaultFloat;
    case Kind::kComplex:
      return kDefaultComplex;
  }
  return DType::kInt64;
}

void ResultType::add_tensor(DType t, bool zero_dim) {
  int& slot = zero_dim ? zero_ : dim_;
  slot = promote_skip(slot, static_cast<int>(t));
}

void ResultType::add_scalar(const Scalar& s) {
  wrapped_ = promote_skip(wrapped_, static_cast<int>(s.wrapped_dtype()));
}

DType ResultType::result() const {
  const int r = combine_categories(dim_, combine_categories(zero_, wrapped_));
  SP_ASSERT(r >= 0, "result type of no operands");
  return static_cast<DType>(r);
}

}  // namespace shardplan::tensor
