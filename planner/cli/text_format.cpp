#include "planner/cli/text_format.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>

namespace shardplan::cli {

std::string with_commas(int64_t n) {
  // Appended digit by digit (GCC 12 misreads an in-place insert as an overlapping memcpy).
  const std::string digits = std::to_string(n);
  const size_t sign = digits[0] == '-' ? 1 : 0;
  std::string out = digits.substr(0, sign);
  for (size_t i = sign; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string human_bytes(double bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
  return buf;
}

std::string dims(const nlohmann::json& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i].dump();
  return out + "]";
}

std::string bracketed(std::span<const int64_t> v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right_aligned) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool last = c + 1 == row.size();
      line += (c ? "  " : "") + (right_aligned[c] ? pad + row[c] : row[c] + (last ? "" : pad));
    }
    std::cout << line << '\n';
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

}  // namespace shardplan::cli
