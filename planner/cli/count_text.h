// Counts on the command line with the suffixes people write them with:
//   parse_binary_count("4k")  == 4096        // sequence lengths, batch sizes, GPUs: k/K = 2^10,
//   parse_binary_count("1M")  == 1048576     //   m/M = 2^20, g/G = 2^30 (as "4k context" means)
//   parse_decimal_count("15T") == 15e12      // token budgets: K, M, B, T = 10^3 .. 10^12
//   parse_decimal_count("1.5B") == 1.5e9     // a fraction when the result is whole
// Both return nullopt for anything else (a sign, a unit they do not know, an overflow of int64).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardplan::cli {

std::optional<int64_t> parse_binary_count(std::string_view text);
std::optional<int64_t> parse_decimal_count(std::string_view text);

}  // namespace shardplan::cli
