#include "planner/cli/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "tensor/base/error.h"

namespace shardplan::cli {
namespace {

constexpr double kKi = 1024.0;
// Units are matched case-sensitively except for SI's k/K (both common); "Mb" (bits) is refused
// rather than guessed.
constexpr std::pair<std::string_view, double> kUnits[] = {
    {"", 1},
    {"B", 1},
    {"kB", 1e3},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"KiB", kKi},
    {"MiB", kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
    {"K", kKi},
    {"M", kKi* kKi},
    {"G", kKi* kKi* kKi},
    {"T", kKi* kKi* kKi* kKi},
};

}  // namespace

int64_t parse_byte_size(std::string_view text, std::string_view option) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  size_t digits = 0;
  while (digits < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[digits])) || t[digits] == '.')) {
    ++digits;
  }
  std::string_view unit = t.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  const std::string_view number = t.substr(0, digits);
  const char* expected = ", expected a byte count like 123, 512MB, 64KiB or 1GiB";
  double value = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  SP_CHECK(!number.empty() && ec == std::errc() && ptr == number.data() + number.size(), option,
           " '", text, "': not a number", expected);
  double scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  SP_CHECK(scale > 0, option, " '", text, "': unknown unit '", unit, "'", expected);
  const double bytes = value * scale;
  // 2^63 is exactly representable; anything at or above it does not fit an int64.
  SP_CHECK(bytes < 9223372036854775808.0, option, " '", text, "': more bytes than fit in 64 bits",
           expected);
  SP_CHECK(bytes == std::floor(bytes), option, " '", text, "' is ", bytes,
           " bytes, expected a whole number of bytes");
  return static_cast<int64_t>(bytes);
}

std::string format_byte_size(int64_t bytes) {
  constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  int64_t v = bytes;
  while (v != 0 && v % 1024 == 0 && unit < 6) {
    v /= 1024;
    ++unit;
  }
  return std::to_string(v) + " " + kNames[unit];
}

}  // namespace shardplan::cli
