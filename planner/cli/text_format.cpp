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

void print_table(const std::vector<std::string>& header, size_t rows,
                 const std::function<std::vector<std::string>(size_t)>& row,
                 const std::vector<bool>& right_aligned) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (size_t i = 0; i < rows; ++i) {
    const std::vector<std::string> cells = row(i);
    for (size_t c = 0; c < header.size(); ++c) width[c] = std::max(width[c], cells[c].size());
  }
  std::string line;
  auto print_row = [&](const std::vector<std::string>& cells) {
    line.clear();
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool last = c + 1 == cells.size();
      line += (c ? "  " : "") + (right_aligned[c] ? pad + cells[c] : cells[c] + (last ? "" : pad));
    }
    line += '\n';
    std::cout << line;
  };
  print_row(header);
  for (size_t i = 0; i < rows; ++i) print_row(row(i));
}

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right_aligned) {
  print_table(
      header, rows.size(), [&](size_t i) { return rows[i]; }, right_aligned);
}

}  // namespace shardplan::cli
