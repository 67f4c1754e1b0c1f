// Counts with suffixes (planner/cli/count_text.h): binary for sizes people write as 4k (a 4,096-
// token context), decimal for token budgets (15T = 15 x 10^12); and the sweep's cost arithmetic.
// Values checked by hand.
#include "planner/cli/count_text.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "planner/cli/compare_sweep.h"

namespace shardplan::cli {
namespace {

TEST(CountText, BinarySuffixesArePowersOfTwo) {
  EXPECT_EQ(parse_binary_count("4096"), 4096);
  EXPECT_EQ(parse_binary_count("4k"), 4096);
  EXPECT_EQ(parse_binary_count("128K"), 131072);
  EXPECT_EQ(parse_binary_count("4M"), 4194304);
  EXPECT_EQ(parse_binary_count("1g"), 1073741824);
  EXPECT_EQ(parse_binary_count("16k"), 16384);
  for (const char* bad : {"", "k", "4x", "-4k", "4.5k", " 4k", "4kk", "0x10"}) {
    EXPECT_EQ(parse_binary_count(bad), std::nullopt) << bad;
  }
  // 2^53 k overflows int64 (2^63): refused, not wrapped.
  EXPECT_EQ(parse_binary_count("9007199254740992k"), std::nullopt);
}

TEST(CountText, DecimalSuffixesArePowersOfTen) {
  EXPECT_EQ(parse_decimal_count("15T"), int64_t{15'000'000'000'000});
  EXPECT_EQ(parse_decimal_count("2.5B"), int64_t{2'500'000'000});
  EXPECT_EQ(parse_decimal_count("300M"), int64_t{300'000'000});
  EXPECT_EQ(parse_decimal_count("1.5K"), 1500);
  EXPECT_EQ(parse_decimal_count("1.500K"), 1500);
  EXPECT_EQ(parse_decimal_count("42"), 42);
  // Not whole once scaled, a fraction without a unit, a unit of another kind.
  for (const char* bad : {"1.0005K", "1.5", "15P", "1e12", "T", ".5T"}) {
    EXPECT_EQ(parse_decimal_count(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(parse_decimal_count("9300000T"), std::nullopt);  // beyond int64
}

// $3.60 per GPU-hour is $0.001 per GPU-second; one GPU at 1,000 tokens/s buys a million tokens in
// 1,000 s: $1. 64 GPUs at the same total rate cost 64 times as much.
TEST(CompareSweep, CostPerMillionTokensByHand) {
  EXPECT_DOUBLE_EQ(cost_per_million_tokens(3.6, 1, 1000), 1.0);
  EXPECT_DOUBLE_EQ(cost_per_million_tokens(3.6, 64, 1000), 64.0);
}

}  // namespace
}  // namespace shardplan::cli
