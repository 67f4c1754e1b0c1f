// Number and shape formatting shared by the verbs' human-readable output.
//   with_commas(70553706496) == "70,553,706,496"
//   human_bytes(141107412992.0) == "131.4 GiB"
//   dims(json::array({3, 5})) == "[3, 5]"
//   bracketed({2, 4}) == "[2, 4]"
//   print_table({"rank", "bytes"}, rows, {true, true});   // aligned columns on stdout
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace shardplan::cli {

std::string with_commas(int64_t n);
// Binary units, one decimal above bytes; printed beside an exact count, so rounding is fine.
std::string human_bytes(double bytes);
// A JSON array of numbers as "[a, b, c]".
std::string dims(const nlohmann::json& list);
// Integers as "[a, b, c]".
std::string bracketed(std::span<const int64_t> v);
// A header and rows as columns two spaces apart, each as wide as its widest cell, right-aligned
// where `right_aligned` says (numbers) and left-aligned otherwise, on stdout.
void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right_aligned);
// The same with row i made by `row(i)`, twice (for the widths, then to print), so a table of
// millions of rows is never held whole.
void print_table(const std::vector<std::string>& header, size_t rows,
                 const std::function<std::vector<std::string>(size_t)>& row,
                 const std::vector<bool>& right_aligned);

}  // namespace shardplan::cli
