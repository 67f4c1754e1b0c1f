// Checked integer arithmetic for shapes, element counts and byte counts, which come from users and
// files and must never wrap silently. The one place the compiler's overflow builtins are called.
//   int64_t bytes = 0;
//   SP_CHECK(mul_into(numel, itemsize, bytes), "shape ", shape, ": byte count overflows int64");
//   std::optional<int64_t> n = checked_product(sizes);   // nullopt when the product overflows
// The builtins compute in infinite precision and report whether the result fits `out`'s type, for
// any mix of integer types (so int64_t * size_t into int64_t is checked against int64_t's range).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "base/error.h"

namespace shardplan {

// out = a * b when the exact product fits in R; returns false (out unspecified) when it does not.
template <std::integral A, std::integral B, std::integral R>
[[nodiscard]] constexpr bool mul_into(A a, B b, R& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
// out = a + b when the exact sum fits in R; false otherwise.
template <std::integral A, std::integral B, std::integral R>
[[nodiscard]] constexpr bool add_into(A a, B b, R& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}
// out = a - b when the exact difference fits in R; false otherwise.
template <std::integral A, std::integral B, std::integral R>
[[nodiscard]] constexpr bool sub_into(A a, B b, R& out) noexcept {
  return !__builtin_sub_overflow(a, b, &out);
}

// Value-returning forms: nullopt on overflow.
template <std::integral T>
[[nodiscard]] constexpr std::optional<T> checked_mul(T a, T b) noexcept {
  T r{};
  return mul_into(a, b, r) ? std::optional<T>(r) : std::nullopt;
}
template <std::integral T>
[[nodiscard]] constexpr std::optional<T> checked_add(T a, T b) noexcept {
  T r{};
  return add_into(a, b, r) ? std::optional<T>(r) : std::nullopt;
}

// The product of `dims` (1 for none), nullopt when an intermediate product overflows int64.
[[nodiscard]] constexpr std::optional<int64_t> checked_product(
    std::span<const int64_t> dims) noexcept {
  int64_t n = 1;
  for (const int64_t d : dims) {
    if (!mul_into(n, d, n)) return std::nullopt;
  }
  return n;
}

// A count computed in floating point or unsigned (an estimate of bytes, a product of many terms)
// as int64: beyond int64's range it saturates to the largest int64 (more than any device holds,
// so it never "fits"), NaN too; never an undefined or wrapping conversion.
[[nodiscard]] constexpr int64_t saturating_int64(double x) noexcept {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63, exactly representable
  if (!(x < kLimit)) return INT64_MAX;              // also NaN
  if (x < -kLimit) return INT64_MIN;
  return static_cast<int64_t>(x);
}
[[nodiscard]] constexpr int64_t saturating_int64(uint64_t x) noexcept {
  return x > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(x);
}

// total += n for byte and element counts summed over many tensors (each of which fits int64,
// checked where it was made): a sum beyond int64 means the tensors were too large to count, which
// is bad input named by `what` ("bytes read by one op"), never a wrapped negative total.
inline void add_count(int64_t& total, int64_t n, std::string_view what) {
  SP_CHECK(add_into(total, n, total), what, " exceed 2^63 (int64), expected smaller tensors (a ",
           "smaller batch, sequence or model)");
}

}  // namespace shardplan
