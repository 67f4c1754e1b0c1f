// The sharding-invariance property of fill_cpu for every element type and fill kind: a 7x5x6 tensor
// filled whole equals, element for element and bit for bit, the same tensor filled as uneven boxes,
// into strided buffers, through a transposed view, or one scalar at a time.
#include "kernels/init_fill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/checksum.h"
#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using testing::Box;
using testing::TypeAndKind;

const std::vector<int64_t> kShape = {7, 5, 6};
const std::vector<int64_t> kStrides = testing::contiguous_strides(kShape);  // {30, 6, 1}
constexpr int64_t kNumel = int64_t{7} * 5 * 6;

class FillShards : public ::testing::TestWithParam<TypeAndKind> {
 protected:
  void SetUp() override {
    type_ = GetParam().type;
    spec_ = testing::test_spec(type_, GetParam().kind);
    ASSERT_FALSE(check_fill_spec(type_, spec_).has_value()) << *check_fill_spec(type_, spec_);
    whole_ = testing::make_buffer(type_, kNumel);
    const Box box{kShape, kStrides, kStrides, 0};
    fill_cpu(whole_.data(), type_, box.region(), spec_);
  }

  // Expected bits of global element (i, j, k).
  uint64_t whole_at(int64_t i, int64_t j, int64_t k) const {
    return testing::element_bits(whole_, type_, i * kStrides[0] + j * kStrides[1] + k);
  }

  ElementType type_{};
  FillSpec spec_{};
  std::vector<unsigned char> whole_;
};

TEST_P(FillShards, UnevenBoxesEqualTheWhole) {
  // torch.chunk-like uneven splits along every dimension: 7 -> 3,3,1; 5 -> 2,3; 6 -> 1,3,2.
  const std::vector<std::vector<int64_t>> cuts = {{0, 3, 6, 7}, {0, 2, 5}, {0, 1, 4, 6}};
  uint64_t checksum_sum = 0;
  for (size_t a = 0; a + 1 < cuts[0].size(); ++a) {
    for (size_t b = 0; b + 1 < cuts[1].size(); ++b) {
      for (size_t c = 0; c + 1 < cuts[2].size(); ++c) {
        const std::vector<int64_t> begin = {cuts[0][a], cuts[1][b], cuts[2][c]};
        const std::vector<int64_t> sizes = {cuts[0][a + 1] - begin[0], cuts[1][b + 1] - begin[1],
                                            cuts[2][c + 1] - begin[2]};
        const Box box = testing::sub_box(kShape, begin, sizes);
        auto local = testing::make_buffer(type_, box.numel());
        fill_cpu(local.data(), type_, box.region(), spec_);
        for (int64_t i = 0; i < sizes[0]; ++i) {
          for (int64_t j = 0; j < sizes[1]; ++j) {
            for (int64_t k = 0; k < sizes[2]; ++k) {
              const int64_t offset = (i * sizes[1] + j) * sizes[2] + k;
              ASSERT_EQ(testing::element_bits(local, type_, offset),
                        whole_at(begin[0] + i, begin[1] + j, begin[2] + k))
                  << "box at " << begin[0] << "," << begin[1] << "," << begin[2] << " element " << i
                  << "," << j << "," << k;
            }
          }
        }
        checksum_sum += checksum_cpu(local.data(), type_, box.region());
      }
    }
  }
  const Box whole_box{kShape, kStrides, kStrides, 0};
  EXPECT_EQ(checksum_sum, checksum_cpu(whole_.data(), type_, whole_box.region()));
}

TEST_P(FillShards, NonContiguousDestinationLeavesGapsUntouched) {
  // Box [2:6, 1:4, 3:6] written into a padded buffer with strides {40, 12, 3}.
  Box box = testing::sub_box(kShape, {2, 1, 3}, {4, 3, 3});
  box.dst_strides = {40, 12, 3};
  constexpr int64_t kBufferElements = 4 * int64_t{40};
  auto buffer = testing::make_buffer(type_, kBufferElements, 0xA5);
  fill_cpu(buffer.data(), type_, box.region(), spec_);
  std::vector<bool> written(kBufferElements, false);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t offset = i * 40 + j * 12 + k * 3;
        written[offset] = true;
        ASSERT_EQ(testing::element_bits(buffer, type_, offset), whole_at(2 + i, 1 + j, 3 + k));
      }
    }
  }
  for (size_t byte = 0; byte < buffer.size(); ++byte) {
    if (!written[byte / element_size(type_)]) {
      ASSERT_EQ(buffer[byte], 0xA5) << "byte " << byte;
    }
  }
}

TEST_P(FillShards, TransposedGlobalLayoutFollowsGlobalStrides) {
  // The view x.permute(2, 1, 0): sizes {6, 5, 7}, global strides {1, 6, 30}; element (k, j, i) of
  // the view is global element (i, j, k).
  const Box view{{6, 5, 7}, testing::contiguous_strides({6, 5, 7}), {1, 6, 30}, 0};
  auto out = testing::make_buffer(type_, kNumel);
  fill_cpu(out.data(), type_, view.region(), spec_);
  for (int64_t k = 0; k < 6; ++k) {
    for (int64_t j = 0; j < 5; ++j) {
      for (int64_t i = 0; i < 7; ++i) {
        ASSERT_EQ(testing::element_bits(out, type_, (k * 5 + j) * 7 + i), whole_at(i, j, k));
      }
    }
  }
  // A box of the transposed view: view[2:5, 1:3, 3:7] = x[3:7, 1:3, 2:5] transposed.
  const Box sub{{3, 2, 4}, {8, 4, 1}, {1, 6, 30}, 2 * 1 + 1 * 6 + 3 * 30};
  auto local = testing::make_buffer(type_, sub.numel());
  fill_cpu(local.data(), type_, sub.region(), spec_);
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < 4; ++i) {
        ASSERT_EQ(testing::element_bits(local, type_, k * 8 + j * 4 + i),
                  whole_at(3 + i, 1 + j, 2 + k));
      }
    }
  }
  // Same elements, same checksum, whatever the layout.
  const Box whole_box{kShape, kStrides, kStrides, 0};
  EXPECT_EQ(checksum_cpu(out.data(), type_, view.region()),
            checksum_cpu(whole_.data(), type_, whole_box.region()));
}

TEST_P(FillShards, ColumnMajorDestinationHoldsTheSameValues) {
  const Box box{kShape, {1, 7, 35}, kStrides, 0};
  auto out = testing::make_buffer(type_, kNumel);
  fill_cpu(out.data(), type_, box.region(), spec_);
  for (int64_t i = 0; i < 7; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      for (int64_t k = 0; k < 6; ++k) {
        ASSERT_EQ(testing::element_bits(out, type_, i + 7 * j + 35 * k), whole_at(i, j, k));
      }
    }
  }
}

TEST_P(FillShards, OneElementAtATimeAndEmptyBoxes) {
  for (int64_t g = 0; g < kNumel; ++g) {
    const Box scalar{{}, {}, {}, g};  // ndim 0: one element at global index g
    auto one = testing::make_buffer(type_, 1);
    fill_cpu(one.data(), type_, scalar.region(), spec_);
    ASSERT_EQ(testing::element_bits(one, type_, 0), testing::element_bits(whole_, type_, g));
  }
  const Box empty = testing::sub_box(kShape, {0, 0, 0}, {3, 0, 6});
  auto untouched = testing::make_buffer(type_, 1, 0x5A);
  fill_cpu(untouched.data(), type_, empty.region(), spec_);
  for (unsigned char byte : untouched) EXPECT_EQ(byte, 0x5A);
}

TEST_P(FillShards, SizeOneDimensionsAndMergeableDimsChangeNothing) {
  // x viewed as [7, 1, 30] with the middle dim of size 1 carrying a bogus stride.
  const Box box{{7, 1, 30}, {30, 999, 1}, {30, -5, 1}, 0};
  auto out = testing::make_buffer(type_, kNumel);
  fill_cpu(out.data(), type_, box.region(), spec_);
  EXPECT_EQ(out, whole_);
}

// The log-index fill against libm: element i of a fill with first argument a is log(a + i)
// rounded once to float32 (libm's double log, correctly rounded but for the rarest ties, then
// rounded to float), stored as float32, or widened as float64. Offsets up to 2^20 and a shard
// starting at 10^9 (the global index, not the shard's).
TEST(LogIndexFill, IsTheLogOfTheGlobalIndexRoundedOnceToFloat32) {
  for (const double a : {1.0, 7.0}) {
    for (const int64_t start : {int64_t{0}, int64_t{1'000'000'000}}) {
      const int64_t n = 1 << 20;
      const Box box{{n}, {1}, {1}, start};
      const FillSpec spec{FillKind::kLogIndex, a, 0.0, 1, 2};
      ASSERT_FALSE(check_fill_spec(ElementType::kFloat32, spec).has_value());
      std::vector<float> f32(static_cast<size_t>(n));
      std::vector<double> f64(static_cast<size_t>(n));
      fill_cpu(f32.data(), ElementType::kFloat32, box.region(), spec);
      fill_cpu(f64.data(), ElementType::kFloat64, box.region(), spec);
      int64_t differ = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto want =
            static_cast<float>(std::log(a + static_cast<double>(start) + static_cast<double>(i)));
        differ += f32[static_cast<size_t>(i)] != want;
        differ += f64[static_cast<size_t>(i)] != static_cast<double>(want);
      }
      EXPECT_EQ(differ, 0) << "a " << a << " start " << start;
    }
  }
}

TEST(LogIndexFill, APeriodRestartsTheIndexEveryRow) {
  // Mamba-1's A_log [d_inner, N] (Jamba): every row log(1), ..., log(N), here 6 rows of N = 16;
  // the box of rows 2..4 alone (global offset 32) holds those rows' values.
  const int64_t rows = 6, n = 16;
  const FillSpec spec{FillKind::kLogIndex, 1.0, static_cast<double>(n), 3, 4};
  ASSERT_FALSE(check_fill_spec(ElementType::kFloat32, spec).has_value());
  std::vector<float> whole(static_cast<size_t>(rows * n));
  fill_cpu(whole.data(), ElementType::kFloat32,
           testing::sub_box({rows, n}, {0, 0}, {rows, n}).region(), spec);
  std::vector<float> part(static_cast<size_t>(3 * n));
  fill_cpu(part.data(), ElementType::kFloat32, testing::sub_box({rows, n}, {2, 0}, {3, n}).region(),
           spec);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < n; ++k) {
      const auto want = static_cast<float>(std::log(1.0 + static_cast<double>(k)));
      EXPECT_EQ(whole[static_cast<size_t>(r * n + k)], want) << "row " << r << " state " << k;
      if (r >= 2 && r < 5) {
        EXPECT_EQ(part[static_cast<size_t>((r - 2) * n + k)], want);
      }
    }
  }
  EXPECT_EQ(check_fill_spec(ElementType::kFloat32, FillSpec{FillKind::kLogIndex, 1.0, 2.5, 0, 0})
                .value_or(""),
            "log index fill of float32 (a=1, b=2.5): expected a period b, an integer in [0, "
            "2^52] (0: none)");
}

TEST(LogIndexFill, RefusesWhatItCannotFill) {
  auto why = [](ElementType t, double a) {
    return check_fill_spec(t, FillSpec{FillKind::kLogIndex, a, 0.0, 0, 0});
  };
  EXPECT_FALSE(why(ElementType::kBFloat16, 1.0).has_value());
  EXPECT_EQ(why(ElementType::kFloat32, 0.0).value_or(""),
            "log index fill of float32 (a=0, b=0): expected an integer a in [1, 2^52]");
  EXPECT_TRUE(why(ElementType::kFloat32, 1.5).has_value());
  EXPECT_TRUE(why(ElementType::kFloat32, 0x1p53).has_value());
  EXPECT_EQ(why(ElementType::kComplex64, 1.0).value_or(""),
            "log index fill of complex64 (a=1, b=0): log index needs a real floating element type");
  EXPECT_EQ(why(ElementType::kInt32, 1.0).value_or(""),
            "log index fill of int32 (a=1, b=0): log index needs a floating element type");
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndKinds, FillShards,
                         ::testing::ValuesIn(testing::all_type_kind_pairs()),
                         [](const auto& info) { return testing::pair_name(info.param); });

}  // namespace
}  // namespace shardplan::kernels
