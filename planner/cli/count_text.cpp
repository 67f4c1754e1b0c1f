#include "planner/cli/count_text.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "base/checked.h"

namespace shardplan::cli {
namespace {

// Digits, then at most one unit letter from `units` (each with its multiplier).
struct Unit {
  char letter;
  int64_t scale;
};

template <size_t N>
std::optional<int64_t> parse_with(std::string_view text, const Unit (&units)[N], bool fractions) {
  if (text.empty()) return std::nullopt;
  int64_t scale = 1;
  for (const Unit& u : units) {
    if (text.back() == u.letter) {
      scale = u.scale;
      text.remove_suffix(1);
      break;
    }
  }
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) {
    return std::nullopt;
  }
  int64_t whole = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, whole);
  if (ec != std::errc()) return std::nullopt;
  int64_t out = 0;
  if (ptr == end) {
    if (!mul_into(whole, scale, out)) return std::nullopt;
    return out;
  }
  // A fraction ("1.5B"): exact in decimal digits, whole once scaled.
  if (!fractions || *ptr != '.' || scale == 1) return std::nullopt;
  const std::string_view digits(ptr + 1, static_cast<size_t>(end - ptr - 1));
  if (digits.empty() || digits.size() > 12) return std::nullopt;
  int64_t frac = 0, denom = 1;
  for (const char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    frac = frac * 10 + (c - '0');
    denom *= 10;
  }
  int64_t head = 0, tail = 0;
  if (!mul_into(whole, scale, head) || !mul_into(frac, scale / std::min(scale, denom), tail)) {
    return std::nullopt;
  }
  if (denom > scale) {
    // More decimals than the unit has zeros: whole only when the extra digits are zeros.
    const int64_t extra = denom / scale;
    if (frac % extra != 0) return std::nullopt;
    tail = frac / extra;
  }
  if (!add_into(head, tail, out)) return std::nullopt;
  return out;
}

}  // namespace

std::optional<int64_t> parse_binary_count(std::string_view text) {
  static constexpr Unit kUnits[] = {{'k', int64_t{1} << 10}, {'K', int64_t{1} << 10},
                                    {'m', int64_t{1} << 20}, {'M', int64_t{1} << 20},
                                    {'g', int64_t{1} << 30}, {'G', int64_t{1} << 30}};
  return parse_with(text, kUnits, false);
}

std::optional<int64_t> parse_decimal_count(std::string_view text) {
  static constexpr Unit kUnits[] = {{'K', 1'000},         {'k', 1'000},
                                    {'M', 1'000'000},     {'B', 1'000'000'000},
                                    {'G', 1'000'000'000}, {'T', 1'000'000'000'000}};
  return parse_with(text, kUnits, true);
}

}  // namespace shardplan::cli
