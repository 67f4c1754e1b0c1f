// checksum_cpu: the mixer against splitmix64's published outputs, and the properties verification
// relies on: shard sums add up, every bit and every position counts, layout does not.
#include "kernels/checksum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using testing::Box;

TEST(Checksum, SplitMix64MatchesTheReferenceGenerator) {
  // Vigna's splitmix64.c seeded with 0 outputs 0xE220A8397B1DCDAF, then 0x6E789E6AA1B965F4; our
  // splitmix64(x) is one step from state x, so the second output is splitmix64(golden increment).
  static_assert(splitmix64(0) == 0xE220A8397B1DCDAFu);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15u), 0x6E789E6AA1B965F4u);
}

std::vector<float> iota_floats(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 3.0f;
  return v;
}

uint64_t checksum_1d(const std::vector<float>& v, int64_t offset = 0) {
  const Box box{{static_cast<int64_t>(v.size())}, {1}, {1}, offset};
  return checksum_cpu(v.data(), ElementType::kFloat32, box.region());
}

TEST(Checksum, DisjointShardsAddUpToTheWhole) {
  const auto whole = iota_floats(100);
  const std::vector<float> a(whole.begin(), whole.begin() + 37);
  const std::vector<float> b(whole.begin() + 37, whole.end());
  EXPECT_EQ(checksum_1d(a) + checksum_1d(b, 37), checksum_1d(whole));
}

TEST(Checksum, SwappingTwoValuesChangesIt) {
  auto v = iota_floats(10);
  const uint64_t before = checksum_1d(v);
  std::swap(v[2], v[7]);
  EXPECT_NE(checksum_1d(v), before);
}

TEST(Checksum, SignOfZeroAndEveryBitCount) {
  std::vector<float> v = {0.0f, 1.0f};
  const uint64_t positive_zero = checksum_1d(v);
  v[0] = -0.0f;
  EXPECT_NE(checksum_1d(v), positive_zero);
  v = {0.0f, std::nextafter(1.0f, 2.0f)};  // last mantissa bit
  EXPECT_NE(checksum_1d(v), positive_zero);
}

TEST(Checksum, EmptyIsZeroAndLayoutDoesNotMatter) {
  const Box empty{{0, 4}, {4, 1}, {4, 1}, 0};
  EXPECT_EQ(checksum_cpu(nullptr, ElementType::kInt8, empty.region()), 0u);
  // A 2x3 int16 tensor stored column-major has the checksum of its row-major copy.
  const std::vector<int16_t> row_major = {1, 2, 3, 4, 5, 6};
  const std::vector<int16_t> col_major = {1, 4, 2, 5, 3, 6};
  const Box rows{{2, 3}, {3, 1}, {3, 1}, 0};
  const Box cols{{2, 3}, {1, 2}, {3, 1}, 0};
  EXPECT_EQ(checksum_cpu(row_major.data(), ElementType::kInt16, rows.region()),
            checksum_cpu(col_major.data(), ElementType::kInt16, cols.region()));
}

TEST(Checksum, ReadsWholeElementsLittleEndian) {
  // One complex64 element = 8 bytes, real part in the low word.
  const float parts[2] = {1.0f, -2.0f};
  const Box one{{}, {}, {}, 5};
  const uint64_t bits = (uint64_t{0xC0000000u} << 32) | 0x3F800000u;
  EXPECT_EQ(checksum_cpu(parts, ElementType::kComplex64, one.region()), mix64(5, bits));
}

}  // namespace
}  // namespace shardplan::kernels
