// Number and shape formatting shared by the verbs' human-readable output.
//   with_commas(70553706496) == "70,553,706,496"
//   human_bytes(141107412992.0) == "131.4 GiB"
//   dims(json::array({3, 5})) == "[3, 5]"
//   bracketed({2, 4}) == "[2, 4]"
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

namespace shardplan::cli {

std::string with_commas(int64_t n);
// Binary units, one decimal above bytes; printed beside an exact count, so rounding is fine.
std::string human_bytes(double bytes);
// A JSON array of numbers as "[a, b, c]".
std::string dims(const nlohmann::json& list);
// Integers as "[a, b, c]".
std::string bracketed(std::span<const int64_t> v);

}  // namespace shardplan::cli
