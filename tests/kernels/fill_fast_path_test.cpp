// The CPU fill's fast path (AVX2 and AVX-512 kernels, threads) gives exactly the bytes of the
// scalar reference fill_one, element by element (Note [Fast fill lanes] in
// kernels/internal/fill_lanes.h, Note [Threaded CPU fill] in kernels/init_fill_cpu.cpp): the
// branch-free lane functions against det:: and convert.h on every input that matters, then whole
// fills on every instruction set this CPU has against FillIsa::kScalar (fill_one per element, one
// thread) for every element type and fill kind, over block tails, odd offsets, a global index
// crossing 2^32, strided and transposed boxes, and a 3M-element box (0.6M in unoptimized builds)
// on 1, 2, 3 and 7 threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/det_math.h"
#include "kernels/init_fill.h"
#include "kernels/internal/fill_lanes.h"
#include "kernels/internal/fill_simd.h"
#include "kernels/philox.h"
#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using internal::FillIsa;
using testing::Box;
using testing::TypeAndKind;

// ---- Lane functions against the scalar steps ----------------------------------------------------

TEST(FillLanes, LogScaledEqualsDetForEveryDraw) {
  for (uint32_t m = 1; m <= (1u << 24); ++m) {
    const float fast = lanes::log_scaled_f32(m, -24);
    const float reference = det::log_scaled_f32(m, -24);
    ASSERT_EQ(fp::bits(fast), fp::bits(reference)) << "m = " << m;
  }
}

TEST(FillLanes, CosTurnsEqualsDetForEveryDraw) {
  for (uint32_t n = 0; n < (1u << 24); ++n) {
    ASSERT_EQ(fp::bits(lanes::cos_turns_f32(n)), fp::bits(det::cos_turns_f32(n))) << "n = " << n;
  }
}

TEST(FillLanes, SinTurnsEqualsDetForEveryDraw) {
  for (uint32_t n = 0; n < (1u << 24); ++n) {
    ASSERT_EQ(fp::bits(lanes::turns_f32(n, 3u)), fp::bits(det::sin_turns_f32(n))) << "n = " << n;
  }
}

// The group path's shared reduction: both values of every draw are the single functions' bits.
TEST(FillLanes, CosSinTogetherEqualDetForEveryDraw) {
  for (uint32_t n = 0; n < (1u << 24); ++n) {
    float c = 0.0f, s = 0.0f;
    lanes::cos_sin_turns_f32(n, &c, &s);
    ASSERT_EQ(fp::bits(c), fp::bits(det::cos_turns_f32(n))) << "n = " << n;
    ASSERT_EQ(fp::bits(s), fp::bits(det::sin_turns_f32(n))) << "n = " << n;
  }
}

TEST(FillLanes, Bf16RoundingEqualsConvert) {
  // Every high half (sign, exponent, top 7 mantissa bits: every bf16 code, NaNs, infinities and
  // subnormals included) with the low halves where rounding decides: 0, just above, just below,
  // at and above the halfway point 0x8000, and the largest.
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x1234u, 0x7FFFu, 0x8000u,
                           0x8001u, 0xC000u, 0xFFFEu, 0xFFFFu};
  for (uint32_t high = 0; high < 0x10000u; ++high) {
    for (const uint32_t low : lows) {
      const float f = fp::float_from_bits((high << 16) | low);
      ASSERT_EQ(lanes::float_to_bf16_bits(f), float_to_bf16_bits(f))
          << std::hex << "bits 0x" << ((high << 16) | low);
    }
  }
}

TEST(FillLanes, PhiloxEqualsThe4x32_10Reference) {
  uint64_t s = 7;
  for (int i = 0; i < 100000; ++i) {
    s = s * 6364136223846793005u + 1442695040888963407u;  // Knuth's MMIX LCG, for spread only
    const auto word = [&](int k) { return static_cast<uint32_t>(s >> (8 * k)) ^ (0x9E37u * k); };
    const Uint4x32 counter{{word(0), word(1), word(2), word(3)}};
    const Uint2x32 key{{word(4), static_cast<uint32_t>(s >> 32)}};
    const Uint4x32 expected = philox4x32_10(counter, key);
    const lanes::PhiloxOut got =
        lanes::philox(counter.x[0], counter.x[1], counter.x[2], counter.x[3], key.x[0], key.x[1]);
    ASSERT_EQ((Uint4x32{{got.w0, got.w1, got.w2, got.w3}}), expected) << "draw " << i;
  }
}

// ---- Whole fills: each instruction set against the scalar reference -----------------------------

// The instruction sets to compare with the reference: those this CPU has. On a CPU without
// AVX2+FMA (or off x86-64) fill_cpu is the scalar loop; threads are still compared there.
std::vector<FillIsa> fast_isas() {
  std::vector<FillIsa> isas;
  for (const FillIsa isa : {FillIsa::kAvx2, FillIsa::kAvx512}) {
    if (internal::float_run_kernels(isa) != nullptr) isas.push_back(isa);
  }
  if (isas.empty()) isas.push_back(FillIsa::kScalar);
  return isas;
}

const char* isa_name(FillIsa isa) {
  return isa == FillIsa::kAvx512 ? "avx512" : isa == FillIsa::kAvx2 ? "avx2" : "scalar";
}

// Buffer size for `box`: one past the largest destination offset (strides are >= 0 here).
int64_t buffer_numel(const Box& box) {
  int64_t last = 0;
  for (size_t k = 0; k < box.sizes.size(); ++k) last += (box.sizes[k] - 1) * box.dst_strides[k];
  return last + 1;
}

// Fills `box` with fill_cpu_on(isa, threads) into a sentinel buffer, so untouched gaps compare too.
std::vector<unsigned char> fill_with(FillIsa isa, int threads, ElementType type, const Box& box,
                                     const FillSpec& spec) {
  auto buffer = testing::make_buffer(type, buffer_numel(box));
  internal::fill_cpu_on(isa, threads, buffer.data(), type, box.region(), spec);
  return buffer;
}

// First differing element, for the failure message.
std::string first_difference(const std::vector<unsigned char>& got,
                             const std::vector<unsigned char>& expected, ElementType type) {
  const size_t size = element_size(type);
  for (size_t i = 0; i < got.size(); i += size) {
    if (std::memcmp(got.data() + i, expected.data() + i, size) != 0) {
      return "element " + std::to_string(i / size) + ": got bits " +
             std::to_string(testing::element_bits(got, type, static_cast<int64_t>(i / size))) +
             ", expected " +
             std::to_string(testing::element_bits(expected, type, static_cast<int64_t>(i / size)));
    }
  }
  return "sizes differ";
}

void expect_same_as_scalar(ElementType type, const FillSpec& spec, const Box& box,
                           const std::string& what, const std::vector<int>& threads = {1}) {
  const std::vector<unsigned char> reference = fill_with(FillIsa::kScalar, 1, type, box, spec);
  for (const FillIsa isa : fast_isas()) {
    for (const int t : threads) {
      const std::vector<unsigned char> got = fill_with(isa, t, type, box, spec);
      ASSERT_TRUE(got == reference) << what << " on " << isa_name(isa) << ", " << t
                                    << " threads: " << first_difference(got, reference, type);
    }
  }
}

Box contiguous_1d(int64_t n, int64_t global_offset) { return Box{{n}, {1}, {1}, global_offset}; }

class FastPathFill : public ::testing::TestWithParam<TypeAndKind> {
 protected:
  ElementType type() const { return GetParam().type; }
  FillSpec spec() const { return testing::test_spec(GetParam().type, GetParam().kind); }
};

TEST_P(FastPathFill, ContiguousRunsOfEveryLengthAroundTheBlocks) {
  // Block tails: lengths around the vectors, the 64-element block and the 256-element block of
  // 64 groups (contiguous runs go by whole groups, Note [Group lanes]), starts inside a group.
  for (const int64_t n : {1,  2,  7,  8,   9,   15,  16,  17,  31,  32,  33,  47,
                          63, 64, 65, 100, 255, 256, 257, 511, 512, 513, 1031}) {
    for (const int64_t offset : {0, 1, 13, 4099}) {
      expect_same_as_scalar(type(), spec(), contiguous_1d(n, offset),
                            "n=" + std::to_string(n) + " offset=" + std::to_string(offset));
    }
  }
}

TEST_P(FastPathFill, GlobalIndexCrossingTwoToThe32) {
  // The counter's high word changes inside a block.
  const int64_t start = (int64_t{1} << 32) - 21;
  expect_same_as_scalar(type(), spec(), contiguous_1d(77, start), "across 2^32");
  expect_same_as_scalar(type(), spec(), contiguous_1d(40, (int64_t{5} << 32) + 3), "above 2^32");
}

TEST_P(FastPathFill, SubBoxesStridesAndTransposes) {
  // A [37, 53] tensor: an interior box (runs of 41 at odd global offsets), the same box into a
  // padded buffer (row stride 50) and with every other element (inner stride 2), a transposed
  // global layout (inner global stride 53), and a column-major destination.
  const std::vector<int64_t> shape = {37, 53};
  const Box interior = testing::sub_box(shape, {3, 5}, {20, 41});
  expect_same_as_scalar(type(), spec(), interior, "interior box");
  Box padded = interior;
  padded.dst_strides = {50, 1};
  expect_same_as_scalar(type(), spec(), padded, "padded rows");
  Box spaced = interior;
  spaced.dst_strides = {90, 2};
  expect_same_as_scalar(type(), spec(), spaced, "inner destination stride 2");
  // x.t()[5:46, 3:23]: local (i, j) is global (3 + j, 5 + i).
  const Box transposed{{41, 20}, {20, 1}, {1, 53}, 3 * 53 + 5};
  expect_same_as_scalar(type(), spec(), transposed, "transposed global");
  Box column_major = interior;
  column_major.dst_strides = {1, 20};
  expect_same_as_scalar(type(), spec(), column_major, "column-major destination");
  const Box scalar{{}, {}, {}, 1234567};
  expect_same_as_scalar(type(), spec(), scalar, "0-d");
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndKinds, FastPathFill,
                         ::testing::ValuesIn(testing::all_type_kind_pairs()),
                         [](const auto& info) { return testing::pair_name(info.param); });

// Rows of the threaded box: 1733 x 1731 = 3.0M elements; 347 rows (0.6M elements, still up to
// four threads of at least 128K) in unoptimized builds, where the ASan + UBSan preset would
// otherwise spend half a minute here.
#if defined(__OPTIMIZE__)
constexpr int64_t kThreadTestRows = 1733;
#else
constexpr int64_t kThreadTestRows = 347;
#endif

TEST(FastPathFillThreads, MillionsOfElementsOnAnyThreadCount) {
  // A [rows, 1731] box of a [2000, 1800] tensor: rows do not line up with the threads' ranges,
  // so cuts fall inside runs. Every byte is compared.
  const Box box = testing::sub_box({2000, 1800}, {101, 37}, {kThreadTestRows, 1731});
  // The two vector stores, the complex run of twice the length, and the scalar loop (int32).
  // (Every pair is compared at small sizes above; this one is about the threads' cuts.)
  const std::vector<TypeAndKind> cases = {{ElementType::kFloat32, FillKind::kNormal},
                                          {ElementType::kBFloat16, FillKind::kNormal},
                                          {ElementType::kComplex64, FillKind::kUniform},
                                          {ElementType::kInt32, FillKind::kUniform}};
  for (const TypeAndKind& c : cases) {
    expect_same_as_scalar(c.type, testing::test_spec(c.type, c.kind), box, testing::pair_name(c),
                          {1, 2, 3, 7});
  }
}

TEST(FastPathFillThreads, PublicFillCpuEqualsTheReference) {
  // fill_cpu itself (best instruction set, default threads) on float32 and bfloat16 normals.
  const Box box = contiguous_1d(kThreadTestRows * 1731 + 17, 12345);
  for (const ElementType type : {ElementType::kFloat32, ElementType::kBFloat16}) {
    const FillSpec spec = testing::test_spec(type, FillKind::kNormal);
    auto got = testing::make_buffer(type, box.numel());
    fill_cpu(got.data(), type, box.region(), spec);
    const auto reference = fill_with(FillIsa::kScalar, 1, type, box, spec);
    ASSERT_TRUE(got == reference) << element_type_name(type) << ": "
                                  << first_difference(got, reference, type);
  }
}

}  // namespace
}  // namespace shardplan::kernels
