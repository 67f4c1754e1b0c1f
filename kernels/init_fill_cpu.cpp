// CPU fill and spec validation. The per-element work is fill_one (kernels/fill_element.h), shared
// with CUDA; this file only validates and walks the region.
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "kernels/fill_element.h"
#include "kernels/init_fill.h"
#include "kernels/internal/check.h"
#include "kernels/internal/dispatch.h"
#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {
namespace {

std::string describe(ElementType type, const FillSpec& spec) {
  const char* kind = spec.kind == FillKind::kConstant  ? "constant"
                     : spec.kind == FillKind::kUniform ? "uniform"
                     : spec.kind == FillKind::kNormal  ? "normal"
                                                       : "truncated normal";
  char buf[200];
  const int n = std::snprintf(buf, sizeof buf, "%s fill of %.*s (a=%.17g, b=%.17g", kind,
                              static_cast<int>(element_type_name(type).size()),
                              element_type_name(type).data(), spec.a, spec.b);
  if (spec.kind == FillKind::kTruncatedNormal && n > 0 && n < static_cast<int>(sizeof buf)) {
    std::snprintf(buf + n, sizeof buf - n, ", low=%.17g, high=%.17g", spec.low, spec.high);
  }
  return std::string(buf) + ")";
}

// Inclusive range of the integer types, as doubles (exact: all are powers of two or 0/1 apart).
struct IntRange {
  double min;
  double max;
};

IntRange int_range(ElementType type) {
  switch (type) {
    case ElementType::kInt64:
      return {-0x1p63, 0x1p63 - 1024.0};  // largest double below 2^63
    case ElementType::kInt32:
      return {-0x1p31, 0x1p31 - 1.0};
    case ElementType::kInt16:
      return {-32768.0, 32767.0};
    case ElementType::kInt8:
      return {-128.0, 127.0};
    case ElementType::kUInt8:
      return {0.0, 255.0};
    default:
      return {0.0, 1.0};  // bool
  }
}

bool is_integral(double x) { return std::isfinite(x) && std::trunc(x) == x; }

// Share of N(mean, std) inside [low, high]: Phi(beta) - Phi(alpha), Phi(x) = erfc(-x / sqrt 2) / 2.
// libm is fine here: this only decides whether the FillSpec is accepted, it never feeds a value.
double normal_mass_between(double mean, double std, double low, double high) {
  const auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  return phi((high - mean) / std) - phi((low - mean) / std);
}

// Rejection sampling needs enough acceptance to make the clamp fallback negligible (Note
// [Truncated normal by per-element rejection]).
constexpr double kMinTruncatedNormalAcceptance = 0.2;

std::optional<std::string> check_truncated_normal(ElementType type, const FillSpec& spec,
                                                  double mean, double std) {
  if (type == ElementType::kComplex64) {
    return describe(type, spec) + ": truncated normal needs a real floating element type";
  }
  if (!std::isfinite(mean) || !std::isfinite(std) || !(std > 0.0)) {
    return describe(type, spec) + ": expected finite mean a and finite std b > 0";
  }
  const bool in_double = type == ElementType::kFloat64;
  const double low = in_double ? spec.low : static_cast<double>(static_cast<float>(spec.low));
  const double high = in_double ? spec.high : static_cast<double>(static_cast<float>(spec.high));
  if (!(low < high)) return describe(type, spec) + ": expected low < high";
  const double acceptance = normal_mass_between(mean, std, low, high);
  if (!(acceptance >= kMinTruncatedNormalAcceptance)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": only %.3g of the normal's mass lies in [low, high]",
                  acceptance);
    return describe(type, spec) + buf + ", at least 0.2 is supported";
  }
  return std::nullopt;
}

std::optional<std::string> check_floating(ElementType type, const FillSpec& spec) {
  const bool in_double = type == ElementType::kFloat64;
  // The same rounding make_fill_params applies: parameters are cast to the compute precision.
  const double a = in_double ? spec.a : static_cast<double>(static_cast<float>(spec.a));
  const double b = in_double ? spec.b : static_cast<double>(static_cast<float>(spec.b));
  switch (spec.kind) {
    case FillKind::kConstant:
      return std::nullopt;  // NaN and infinities are legitimate constants
    case FillKind::kUniform: {
      if (!std::isfinite(a) || !std::isfinite(b) || !(a <= b)) {
        return describe(type, spec) + ": expected finite a <= b";
      }
      const double width =
          in_double ? b - a : static_cast<double>(static_cast<float>(b) - static_cast<float>(a));
      if (!std::isfinite(width)) return describe(type, spec) + ": b - a overflows";
      return std::nullopt;
    }
    case FillKind::kNormal:
      if (!std::isfinite(a) || !std::isfinite(b) || !(b >= 0.0)) {
        return describe(type, spec) + ": expected finite mean a and finite std b >= 0";
      }
      return std::nullopt;
    case FillKind::kTruncatedNormal:
      return check_truncated_normal(type, spec, a, b);
  }
  return describe(type, spec) + ": unknown FillKind";
}

std::optional<std::string> check_integer(ElementType type, const FillSpec& spec) {
  const IntRange range = int_range(type);
  switch (spec.kind) {
    case FillKind::kConstant:
      if (type == ElementType::kBool) {
        if (std::isnan(spec.a)) return describe(type, spec) + ": expected a number";
        return std::nullopt;  // a != 0 -> true
      }
      if (!is_integral(spec.a) || spec.a < range.min || spec.a > range.max) {
        return describe(type, spec) + ": expected an integer a within the type's range";
      }
      return std::nullopt;
    case FillKind::kUniform:
      if (!is_integral(spec.a) || !is_integral(spec.b) || !(spec.a < spec.b) ||
          spec.a < range.min || spec.b - 1.0 > range.max) {
        return describe(type, spec) +
               ": expected integers a < b with a and b - 1 within the type's range";
      }
      return std::nullopt;
    case FillKind::kNormal:
    case FillKind::kTruncatedNormal:
      return describe(type, spec) + ": normal needs a floating element type";
  }
  return describe(type, spec) + ": unknown FillKind";
}

}  // namespace

std::optional<std::string> check_fill_spec(ElementType type, const FillSpec& spec) {
  return is_floating(type) ? check_floating(type, spec) : check_integer(type, spec);
}

void fill_cpu(void* dst, ElementType type, const FillRegion& region, const FillSpec& spec) {
  const std::optional<std::string> error = check_fill_spec(type, spec);
  SHARDPLAN_KERNELS_CHECK(!error, error->c_str());
  const internal::CompactRegion compact = internal::compact_region(region);
  const FillParams params = make_fill_params(type, spec);
  char* const base = static_cast<char*>(dst);
  internal::dispatch_element_type(type, [&](auto tag) {
    constexpr ElementType kType = decltype(tag)::value;
    constexpr int64_t kSize = static_cast<int64_t>(element_size(kType));
    internal::for_each_element(compact, [&](int64_t dst_offset, int64_t global_index) {
      fill_one<kType>(base + dst_offset * kSize, params, static_cast<uint64_t>(global_index));
    });
  });
}

}  // namespace shardplan::kernels
