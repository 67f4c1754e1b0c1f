// Narrow float conversions: exhaustive round trips, round-to-nearest-even checked at every midpoint
// (the definition of RNE, independent of the code), hand-computed values, and on x86 the F16C
// instruction as an independent float->fp16 oracle.
#include "kernels/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SHARDPLAN_TEST_F16C 1
#endif

namespace shardplan::kernels {
namespace {

float bits_to_float(uint32_t u) { return fp::float_from_bits(u); }

constexpr float kInfinity = std::numeric_limits<float>::infinity();

// A narrow format under test: encode from float, decode to float, number of bits.
struct Format {
  const char* name;
  int bits;
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);
  uint32_t nan_for_positive;  // canonical NaN code the encoder returns (positive sign)
  bool nan_keeps_sign;
};

const Format kFormats[] = {
    {"bfloat16", 16, [](float f) -> uint32_t { return float_to_bf16_bits(f); },
     [](uint32_t c) { return bf16_bits_to_float(static_cast<uint16_t>(c)); }, 0x7FC0, false},
    {"float16", 16, [](float f) -> uint32_t { return float_to_fp16_bits(f); },
     [](uint32_t c) { return fp16_bits_to_float(static_cast<uint16_t>(c)); }, 0x7E00, true},
    {"float8_e4m3fn", 8, [](float f) -> uint32_t { return float_to_fp8e4m3fn_bits(f); },
     [](uint32_t c) { return fp8e4m3fn_bits_to_float(static_cast<uint8_t>(c)); }, 0x7F, true},
    {"float8_e5m2", 8, [](float f) -> uint32_t { return float_to_fp8e5m2_bits(f); },
     [](uint32_t c) { return fp8e5m2_bits_to_float(static_cast<uint8_t>(c)); }, 0x7F, true},
};

class ConvertFormat : public ::testing::TestWithParam<Format> {};

TEST_P(ConvertFormat, EveryPatternRoundTrips) {
  const Format& fmt = GetParam();
  const uint32_t sign_bit = 1u << (fmt.bits - 1);
  for (uint32_t code = 0; code < (1u << fmt.bits); ++code) {
    const float f = fmt.decode(code);
    const uint32_t back = fmt.encode(f);
    if (std::isnan(f)) {
      const uint32_t sign = fmt.nan_keeps_sign ? (code & sign_bit) : 0;
      EXPECT_EQ(back, sign | fmt.nan_for_positive) << fmt.name << " NaN code " << code;
    } else {
      EXPECT_EQ(back, code) << fmt.name << " code " << code << " value " << f;
    }
  }
}

// Between two neighbouring finite values lo < hi the exact midpoint goes to the one with an even
// code, and the floats just below / above it go to lo / hi. This is RNE by definition.
TEST_P(ConvertFormat, MidpointsRoundToEven) {
  const Format& fmt = GetParam();
  const uint32_t sign_bit = 1u << (fmt.bits - 1);
  for (uint32_t lo = 0; lo + 1 < sign_bit; ++lo) {
    const uint32_t hi = lo + 1;
    const float flo = fmt.decode(lo);
    const float fhi = fmt.decode(hi);
    if (!std::isfinite(flo) || !std::isfinite(fhi)) continue;
    // Exact in float: narrow formats have few mantissa bits (the sum in double cannot overflow).
    const double mid_exact = (static_cast<double>(flo) + fhi) / 2;
    const float mid = static_cast<float>(mid_exact);
    ASSERT_EQ(static_cast<double>(mid), mid_exact) << fmt.name;
    EXPECT_EQ(fmt.encode(mid), (lo % 2 == 0) ? lo : hi) << fmt.name << " midpoint " << mid;
    EXPECT_EQ(fmt.encode(std::nextafter(mid, 0.0f)), lo) << fmt.name << " below " << mid;
    EXPECT_EQ(fmt.encode(std::nextafter(mid, kInfinity)), hi) << fmt.name << " above " << mid;
    // Negative values mirror positive ones.
    EXPECT_EQ(fmt.encode(-std::nextafter(mid, kInfinity)), sign_bit | hi) << fmt.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllNarrowFormats, ConvertFormat, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return std::string(info.param.name); });

constexpr float kInf = kInfinity;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(ConvertBFloat16, HandValues) {
  // 1/3 = 0x3EAAAAAB as float; dropping 16 bits leaves 0x3EAA with rest 0xAAAB > half: up.
  EXPECT_EQ(float_to_bf16_bits(1.0f / 3.0f), 0x3EAB);
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(kInf), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16_bits(kNaN), 0x7FC0);
  EXPECT_EQ(float_to_bf16_bits(-kNaN), 0x7FC0);  // c10 drops the NaN sign for bf16
  // Float subnormals: 0x00008000 is a tie between bf16 0x0000 and 0x0001 -> even 0x0000;
  // 0x00018000 ties between 0x0001 and 0x0002 -> even 0x0002.
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x80008001u)), 0x8001);
  EXPECT_EQ(bf16_bits_to_float(0x3EAB), 0.333984375f);
}

TEST(ConvertFloat16, HandValues) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7BFF);                        // largest finite
  EXPECT_EQ(float_to_fp16_bits(std::nextafter(65520.0f, 0.0f)), 0x7BFF);  // below the tie
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7C00);  // tie between 65504 (odd) and 2^16 -> inf
  EXPECT_EQ(float_to_fp16_bits(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_fp16_bits(kInf), 0x7C00);
  EXPECT_EQ(float_to_fp16_bits(kNaN), 0x7E00);
  EXPECT_EQ(float_to_fp16_bits(-kNaN), 0xFE00);
  EXPECT_EQ(float_to_fp16_bits(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_fp16_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(0x1p-25f), 0x0000);  // tie -> even 0
  EXPECT_EQ(float_to_fp16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16_bits(0x1.8p-24f), 0x0002);          // tie 1|2 -> 2
  EXPECT_EQ(float_to_fp16_bits(-bits_to_float(1u)), 0x8000);  // sign kept
  EXPECT_EQ(fp16_bits_to_float(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_bits_to_float(0x0001), 0x1p-24f);
}

TEST(ConvertFloat8E4M3FN, HandValues) {
  EXPECT_EQ(float_to_fp8e4m3fn_bits(1.0f), 0x38);    // exponent 7 = bias
  EXPECT_EQ(float_to_fp8e4m3fn_bits(448.0f), 0x7E);  // largest finite: 1.75 * 2^8
  EXPECT_EQ(float_to_fp8e4m3fn_bits(-448.0f), 0xFE);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(464.0f), 0x7E);  // tie 448 (even) | 480 (no such value)
  // No saturation (PyTorch's rule): past the tie, and infinities, become NaN.
  EXPECT_EQ(float_to_fp8e4m3fn_bits(std::nextafter(464.0f, 1e30f)), 0x7F);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(500.0f), 0x7F);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(-500.0f), 0xFF);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(kInf), 0x7F);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(-kInf), 0xFF);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(kNaN), 0x7F);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(0x1p-6f), 0x08);   // smallest normal
  EXPECT_EQ(float_to_fp8e4m3fn_bits(0x1p-9f), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_fp8e4m3fn_bits(0x1p-10f), 0x00);  // tie -> even 0
  EXPECT_EQ(float_to_fp8e4m3fn_bits(0x1.8p-10f), 0x01);
  EXPECT_EQ(float_to_fp8e4m3fn_bits(0.3f), 0x2A);  // 0.3 ~ 1.2 * 2^-2 -> 1.25 * 2^-2 = 0.3125
  EXPECT_EQ(fp8e4m3fn_bits_to_float(0x2A), 0.3125f);
  EXPECT_TRUE(std::isnan(fp8e4m3fn_bits_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8e4m3fn_bits_to_float(0xFF)));
  EXPECT_EQ(fp8e4m3fn_bits_to_float(0x78), 256.0f);  // exponent 15 is finite in the FN format
}

TEST(ConvertFloat8E5M2, HandValues) {
  EXPECT_EQ(float_to_fp8e5m2_bits(1.0f), 0x3C);
  EXPECT_EQ(float_to_fp8e5m2_bits(57344.0f), 0x7B);  // largest finite: 1.75 * 2^15
  EXPECT_EQ(float_to_fp8e5m2_bits(std::nextafter(61440.0f, 0.0f)), 0x7B);
  EXPECT_EQ(float_to_fp8e5m2_bits(61440.0f), 0x7C);  // tie 57344 (odd) | 65536 -> inf
  EXPECT_EQ(float_to_fp8e5m2_bits(-1e9f), 0xFC);
  EXPECT_EQ(float_to_fp8e5m2_bits(kInf), 0x7C);
  EXPECT_EQ(float_to_fp8e5m2_bits(kNaN), 0x7F);
  EXPECT_EQ(float_to_fp8e5m2_bits(-kNaN), 0xFF);
  EXPECT_EQ(float_to_fp8e5m2_bits(0x1p-16f), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_fp8e5m2_bits(0x1p-17f), 0x00);  // tie -> even 0
  EXPECT_EQ(fp8e5m2_bits_to_float(0x7C), kInf);
  EXPECT_TRUE(std::isnan(fp8e5m2_bits_to_float(0x7D)));
}

// Decoding against the textbook formula (-1)^s 2^(e - bias) (1 + m / 2^M), or 2^(1 - bias) m / 2^M.
TEST(ConvertDecode, MatchesFieldFormula) {
  struct Layout {
    int exp_bits, man_bits;
    float (*decode)(uint32_t);
    bool fn;  // e4m3fn: the top exponent is finite
  };
  const Layout layouts[] = {
      {5, 10, [](uint32_t c) { return fp16_bits_to_float(static_cast<uint16_t>(c)); }, false},
      {8, 7, [](uint32_t c) { return bf16_bits_to_float(static_cast<uint16_t>(c)); }, false},
      {4, 3, [](uint32_t c) { return fp8e4m3fn_bits_to_float(static_cast<uint8_t>(c)); }, true},
      {5, 2, [](uint32_t c) { return fp8e5m2_bits_to_float(static_cast<uint8_t>(c)); }, false},
  };
  for (const Layout& l : layouts) {
    const int bias = (1 << (l.exp_bits - 1)) - 1;
    const uint32_t max_exp = (1u << l.exp_bits) - 1;
    for (uint32_t code = 0; code < (1u << (1 + l.exp_bits + l.man_bits)); ++code) {
      const uint32_t m = code & ((1u << l.man_bits) - 1);
      const uint32_t e = (code >> l.man_bits) & max_exp;
      const double sign = (code >> (l.exp_bits + l.man_bits)) ? -1.0 : 1.0;
      if (e == max_exp && (!l.fn || m == (1u << l.man_bits) - 1)) continue;  // inf/NaN
      const double expected =
          e == 0 ? sign * std::ldexp(static_cast<double>(m), 1 - bias - l.man_bits)
                 : sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -l.man_bits),
                                     static_cast<int>(e) - bias);
      EXPECT_EQ(static_cast<double>(l.decode(code)), expected) << "code " << code;
    }
  }
}

#if defined(SHARDPLAN_TEST_F16C)
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;  // CPUID.1:ECX.F16C
}

__attribute__((target("f16c"))) uint16_t f16c_convert(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// The hardware conversion is IEEE RNE: compare on every 251st float pattern plus every float in the
// fp16 subnormal/normal boundary region (about 50 million values in all).
TEST(ConvertFloat16, MatchesF16CHardware) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  uint64_t mismatches = 0;
  auto check = [&](uint32_t u) {
    const float f = bits_to_float(u);
    if (std::isnan(f)) return;
    if (float_to_fp16_bits(f) != f16c_convert(f) && ++mismatches < 10) {
      ADD_FAILURE() << "float bits 0x" << std::hex << u;
    }
  };
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) check(static_cast<uint32_t>(u));
  for (uint32_t u = 0x32800000u; u < 0x39000000u; u += 3) check(u), check(u | 0x80000000u);
  EXPECT_EQ(mismatches, 0u);
}
#endif

}  // namespace
}  // namespace shardplan::kernels
