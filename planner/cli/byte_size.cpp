#include "planner/cli/byte_size.h"

#include <cctype>
#include <charconv>
#include <utility>

#include "base/checked.h"
#include "base/error.h"

namespace shardplan::cli {
namespace {

constexpr int64_t kKi = 1024;
// Units are matched case-sensitively except for SI's k/K (both common); "Mb" (bits) is refused
// rather than guessed.
constexpr std::pair<std::string_view, int64_t> kUnits[] = {
    {"", 1},
    {"B", 1},
    {"kB", 1'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"KiB", kKi},
    {"MiB", kKi * kKi},
    {"GiB", kKi * kKi * kKi},
    {"TiB", kKi * kKi * kKi * kKi},
    {"K", kKi},
    {"M", kKi * kKi},
    {"G", kKi * kKi * kKi},
    {"T", kKi * kKi * kKi * kKi},
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
  const size_t dot = number.find('.');
  const std::string_view whole = number.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  SP_CHECK(t.empty() || t.front() != '-', option, " '", text, "': negative", expected);
  SP_CHECK(!whole.empty() || !fraction.empty(), option, " '", text, "': not a number", expected);
  SP_CHECK(fraction.find('.') == std::string_view::npos, option, " '", text, "': not a number",
           expected);
  int64_t scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  SP_CHECK(scale > 0, option, " '", text, "': unknown unit '", unit, "'", expected);
  // In integers, exactly: through a double "123111111110555096" became ...104 and "0.067GB"
  // 67000000.00000001 bytes. fraction * scale digit by digit from the right: `carry` ends as its
  // whole part (< scale), a non-zero digit left behind is a fraction of a byte.
  int64_t carry = 0;
  bool partial = false;
  for (size_t i = fraction.size(); i-- > 0;) {
    const int64_t v = (fraction[i] - '0') * scale + carry;
    partial = partial || v % 10 != 0;
    carry = v / 10;
  }
  int64_t w = 0;
  const auto [ptr, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), w);
  int64_t bytes = 0;
  SP_CHECK((whole.empty() || (ec == std::errc() && ptr == whole.data() + whole.size())) &&
               mul_into(w, scale, bytes) && add_into(bytes, carry, bytes),
           option, " '", text, "': more bytes than fit in 64 bits", expected);
  // Named, not printed: a double cannot show the part of a byte ("1.0000000000000000001GiB").
  SP_CHECK(!partial, option, " '", text, "' is ", number, " x ", scale,
           " bytes, a fraction of a byte over ", bytes, ", expected a whole number of bytes");
  return bytes;
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
