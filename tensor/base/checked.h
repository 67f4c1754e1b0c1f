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

}  // namespace shardplan
