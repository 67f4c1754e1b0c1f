// Checked arithmetic (base/checked.h) at the edges of int64, with mixed operand types.
#include "base/checked.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace shardplan {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(Checked, MultiplyAtTheEdgeOfInt64) {
  int64_t r = 0;
  EXPECT_TRUE(mul_into(int64_t{3037000499}, int64_t{3037000499}, r));  // floor(sqrt(2^63 - 1))^2
  EXPECT_EQ(r, int64_t{9223372030926249001});
  EXPECT_FALSE(mul_into(int64_t{3037000500}, int64_t{3037000500}, r));  // 9.22...e18 + 1 > max
  EXPECT_FALSE(mul_into(kMin, int64_t{-1}, r));                         // -min does not fit
  EXPECT_TRUE(mul_into(kMax, int64_t{1}, r));
  EXPECT_EQ(r, kMax);
}

TEST(Checked, MixedTypesAreCheckedAgainstTheResultType) {
  // numel (int64) * itemsize (size_t) into int64: 2^62 * 2 = 2^63 does not fit int64.
  int64_t bytes = 0;
  EXPECT_FALSE(mul_into(int64_t{1} << 62, size_t{2}, bytes));
  EXPECT_TRUE(mul_into(int64_t{1} << 61, size_t{2}, bytes));
  EXPECT_EQ(bytes, int64_t{1} << 62);
  // A negative operand into an unsigned result is an overflow, not a wrap.
  uint64_t u = 0;
  EXPECT_FALSE(mul_into(int64_t{-2}, int64_t{3}, u));
}

TEST(Checked, AddSubAndOptionalForms) {
  int64_t r = 0;
  EXPECT_FALSE(add_into(kMax, int64_t{1}, r));
  EXPECT_TRUE(add_into(kMax, int64_t{-1}, r));
  EXPECT_EQ(r, kMax - 1);
  EXPECT_FALSE(sub_into(kMin, int64_t{1}, r));
  EXPECT_EQ(checked_mul<int64_t>(6, 7), 42);
  EXPECT_EQ(checked_mul<int64_t>(kMax, 2), std::nullopt);
  EXPECT_EQ(checked_add<int64_t>(kMax, 1), std::nullopt);
}

TEST(Checked, ProductOfDims) {
  EXPECT_EQ(checked_product({}), 1);
  const std::vector<int64_t> llama_qkv = {8192, 10240};
  EXPECT_EQ(checked_product(llama_qkv), int64_t{83886080});
  const std::vector<int64_t> zero = {0, kMax, 2};  // 0 * max * 2 = 0: a zero dim ends the product
  EXPECT_EQ(checked_product(zero), 0);
  const std::vector<int64_t> huge = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_EQ(checked_product(huge), std::nullopt);
}

}  // namespace
}  // namespace shardplan
