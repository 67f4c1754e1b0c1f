// What the fills produce: values recomputed independently from Philox and the documented formulas
// (Note [Uniform and normal rules]), distribution sanity with wide written-out tolerances, stream
// separation by seed and tensor key, the complex64 rule, spec validation and name keys.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "kernels/init_fill.h"
#include "kernels/philox.h"
#include "kernels/splitmix64.h"
#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using testing::Box;

// Fills global elements [0, n) of a 1-d tensor.
template <class T>
std::vector<T> fill_vector(ElementType type, const FillSpec& spec, int64_t n) {
  std::vector<T> out(static_cast<size_t>(n));
  const Box box{{n}, {1}, {1}, 0};
  fill_cpu(out.data(), type, box.region(), spec);
  return out;
}

// The counter layout of Note [Element random bits], written out again here: the block of the
// group that holds element `index`, groups of `group` elements (4 for float compute, 2 for float64
// and integers).
Uint4x32 bits_for(uint64_t seed, uint64_t key, uint64_t index, uint64_t group) {
  const uint64_t g = index / group;
  const Uint4x32 counter{{static_cast<uint32_t>(g & 0xFFFFFFFFu), static_cast<uint32_t>(g >> 32),
                          static_cast<uint32_t>(key & 0xFFFFFFFFu),
                          static_cast<uint32_t>(key >> 32)}};
  return philox4x32_10(
      counter, {{static_cast<uint32_t>(seed & 0xFFFFFFFFu), static_cast<uint32_t>(seed >> 32)}});
}

constexpr uint64_t kSeed = 20240611;
constexpr uint64_t kKey = tensor_key_from_name("layers.3.mlp.up_proj.weight");

TEST(FillValues, UniformFloat32MatchesTheFormulaExactly) {
  // float32 uniform(low, high) = round_to_float(low + (high - low) * (w_j >> 8) / 2^24), j the
  // element's lane in its group of 4. The
  // product of two 24-bit significands and the sum fit in a double, so the double expression
  // below is the exact value and one rounding to float must give the same bits as the fill.
  const FillSpec spec{FillKind::kUniform, -0.75, 1.25, kSeed, kKey};
  const auto got = fill_vector<float>(ElementType::kFloat32, spec, 64);
  for (uint64_t i = 0; i < got.size(); ++i) {
    const double u =
        std::ldexp(static_cast<double>(bits_for(kSeed, kKey, i, 4).x[i % 4] >> 8), -24);
    const float expected = static_cast<float>(-0.75 + 2.0 * u);
    EXPECT_EQ(got[i], expected) << "index " << i;
  }
}

TEST(FillValues, UniformFloat64MatchesTheFormula) {
  const FillSpec spec{FillKind::kUniform, -3.0, 5.0, kSeed, kKey};
  const auto got = fill_vector<double>(ElementType::kFloat64, spec, 64);
  for (uint64_t i = 0; i < got.size(); ++i) {
    const Uint4x32 r = bits_for(kSeed, kKey, i, 2);
    const uint64_t j = i % 2;  // words 2j, 2j + 1
    const uint64_t x53 = ((static_cast<uint64_t>(r.x[2 * j]) << 32) | r.x[2 * j + 1]) >> 11;
    // 8 * x53 / 2^53 is exact; so is subtracting 3 from a value in [0, 8) at this scale.
    const double expected = -3.0 + std::ldexp(static_cast<double>(x53), -50);
    EXPECT_EQ(got[i], expected) << "index " << i;
  }
}

TEST(FillValues, NormalMatchesBoxMullerWithLibm) {
  // Box-Muller with the C library's log/cos in long double; ours uses polynomials, so agreement is
  // to a few ulps, not bits (the bitwise contract is CPU == GPU, tested elsewhere).
  const FillSpec spec{FillKind::kNormal, 0.25, 1.5, kSeed, kKey};
  const auto f32 = fill_vector<float>(ElementType::kFloat32, spec, 256);
  const auto f64 = fill_vector<double>(ElementType::kFloat64, spec, 256);
  const long double two_pi = 6.283185307179586476925286766559L;
  // Lanes 2p and 2p + 1 of a group share one pair: the even lane takes cos, the odd one sin.
  for (uint64_t i = 0; i < f32.size(); ++i) {
    {
      const Uint4x32 r = bits_for(kSeed, kKey, i, 4);
      const uint64_t pair = (i % 4) / 2;
      const long double u1 = std::ldexp(static_cast<long double>((r.x[2 * pair] >> 8) + 1), -24);
      const long double u2 = std::ldexp(static_cast<long double>(r.x[2 * pair + 1] >> 8), -24);
      const long double radius = std::sqrt(-2 * std::log(u1));
      const long double z = radius * (i % 2 == 0 ? std::cos(two_pi * u2) : std::sin(two_pi * u2));
      EXPECT_NEAR(f32[i], 0.25L + 1.5L * z, 4e-6L * (1 + std::fabs(z))) << "index " << i;
    }
    {
      const Uint4x32 r = bits_for(kSeed, kKey, i, 2);
      const auto x = [&](int hi, int lo) {
        return ((static_cast<uint64_t>(r.x[hi]) << 32) | r.x[lo]) >> 11;
      };
      const long double u1 = std::ldexp(static_cast<long double>(x(0, 1) + 1), -53);
      const long double u2 = std::ldexp(static_cast<long double>(x(2, 3)), -53);
      const long double radius = std::sqrt(-2 * std::log(u1));
      const long double z = radius * (i % 2 == 0 ? std::cos(two_pi * u2) : std::sin(two_pi * u2));
      EXPECT_NEAR(f64[i], 0.25L + 1.5L * z, 1e-14L * (1 + std::fabs(z))) << "index " << i;
    }
  }
}

TEST(FillValues, NarrowFormatsAreTheFloatValueRounded) {
  const FillSpec spec{FillKind::kNormal, 0.0, 1.0, kSeed, kKey};
  const auto f32 = fill_vector<float>(ElementType::kFloat32, spec, 512);
  const auto bf16 = fill_vector<uint16_t>(ElementType::kBFloat16, spec, 512);
  const auto f16 = fill_vector<uint16_t>(ElementType::kFloat16, spec, 512);
  const auto e4m3 = fill_vector<uint8_t>(ElementType::kFloat8E4M3FN, spec, 512);
  const auto e5m2 = fill_vector<uint8_t>(ElementType::kFloat8E5M2, spec, 512);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(bf16[i], float_to_bf16_bits(f32[i]));
    EXPECT_EQ(f16[i], float_to_fp16_bits(f32[i]));
    EXPECT_EQ(e4m3[i], float_to_fp8e4m3fn_bits(f32[i]));
    EXPECT_EQ(e5m2[i], float_to_fp8e5m2_bits(f32[i]));
  }
}

TEST(FillValues, IntegerUniformIsLowPlusBitsModuloRange) {
  const FillSpec spec{FillKind::kUniform, -5.0, 7.0, kSeed, kKey};
  const auto got = fill_vector<int32_t>(ElementType::kInt32, spec, 64);
  for (uint64_t i = 0; i < got.size(); ++i) {
    const Uint4x32 r = bits_for(kSeed, kKey, i, 2);
    const uint64_t j = i % 2;
    const uint64_t x = (static_cast<uint64_t>(r.x[2 * j]) << 32) | r.x[2 * j + 1];
    EXPECT_EQ(got[i], -5 + static_cast<int32_t>(x % 12)) << "index " << i;
  }
}

TEST(FillValues, ConstantsPerType) {
  const FillSpec spec{FillKind::kConstant, -0.1, 0.0, kSeed, kKey};
  EXPECT_EQ(fill_vector<double>(ElementType::kFloat64, spec, 3)[2], -0.1);
  EXPECT_EQ(fill_vector<float>(ElementType::kFloat32, spec, 3)[2], -0.1f);
  EXPECT_EQ(fill_vector<uint16_t>(ElementType::kBFloat16, spec, 3)[2], 0xBDCD);  // -0.10009765625
  EXPECT_EQ(fill_vector<uint16_t>(ElementType::kFloat16, spec, 3)[2], 0xAE66);   // -0.0999755859375
  std::vector<float> complex(6);                                                 // 3 elements
  const Box box{{3}, {1}, {1}, 0};
  fill_cpu(complex.data(), ElementType::kComplex64, box.region(), spec);
  EXPECT_EQ(complex[4], -0.1f);
  EXPECT_EQ(complex[5], 0.0f);
  const FillSpec seven{FillKind::kConstant, 7.0, 0.0, kSeed, kKey};
  EXPECT_EQ(fill_vector<int64_t>(ElementType::kInt64, seven, 2)[1], 7);
  EXPECT_EQ(fill_vector<uint8_t>(ElementType::kBool, seven, 2)[1], 1);  // nonzero -> true
}

// ---- Distribution sanity ------------------------------------------------------------------------
// With n = 1e5 draws the standard error of a mean of N(0,1) is 1/sqrt(n) = 0.0032 and of the
// sample standard deviation about 1/sqrt(2n) = 0.0022, so the 0.02 tolerances are > 6 sigma: a
// failure means a broken generator, not bad luck.
constexpr int64_t kDraws = 100000;

template <class T>
void mean_and_std(const std::vector<T>& v, double* mean, double* std) {
  double sum = 0, sum_sq = 0;
  for (const T x : v) sum += static_cast<double>(x);
  *mean = sum / static_cast<double>(v.size());
  for (const T x : v) sum_sq += (static_cast<double>(x) - *mean) * (static_cast<double>(x) - *mean);
  *std = std::sqrt(sum_sq / static_cast<double>(v.size() - 1));
}

TEST(FillStatistics, StandardNormalFloat32AndFloat64) {
  const FillSpec spec{FillKind::kNormal, 0.0, 1.0, kSeed, kKey};
  double mean = 0, std = 0;
  mean_and_std(fill_vector<float>(ElementType::kFloat32, spec, kDraws), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std, 1.0, 0.02);
  mean_and_std(fill_vector<double>(ElementType::kFloat64, spec, kDraws), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std, 1.0, 0.02);
}

// Pearson correlation of v[i] and v[i + 1] over even i: the two lanes of one Box-Muller pair
// (cos and sin of one angle, one radius) or of one uniform group.
template <class T, class F>
double pair_correlation(const std::vector<T>& v, F transform) {
  std::vector<double> a, b;
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    a.push_back(transform(static_cast<double>(v[i])));
    b.push_back(transform(static_cast<double>(v[i + 1])));
  }
  double ma = 0, sa = 0, mb = 0, sb = 0, cov = 0;
  mean_and_std(a, &ma, &sa);
  mean_and_std(b, &mb, &sb);
  for (size_t i = 0; i < a.size(); ++i) cov += (a[i] - ma) * (b[i] - mb);
  return cov / static_cast<double>(a.size() - 1) / (sa * sb);
}

TEST(FillStatistics, ThePairsOfAGroupAreIndependent) {
  // Box-Muller's cos and sin outputs of one (u1, u2) are independent N(0,1) (Box and Muller 1958),
  // so neither the values nor their squares correlate; neither do uniform lanes of one block.
  // 5e4 pairs: standard error of a correlation about 1/sqrt(5e4) = 0.0045 (squares: ~0.006), so
  // 0.03 is > 5 of them.
  const FillSpec normal{FillKind::kNormal, 0.0, 1.0, kSeed, kKey};
  const auto identity = [](double x) { return x; };
  const auto square = [](double x) { return x * x; };
  const auto f32 = fill_vector<float>(ElementType::kFloat32, normal, kDraws);
  const auto f64 = fill_vector<double>(ElementType::kFloat64, normal, kDraws);
  EXPECT_NEAR(pair_correlation(f32, identity), 0.0, 0.03);
  EXPECT_NEAR(pair_correlation(f32, square), 0.0, 0.03);
  EXPECT_NEAR(pair_correlation(f64, identity), 0.0, 0.03);
  EXPECT_NEAR(pair_correlation(f64, square), 0.0, 0.03);
  const FillSpec uniform{FillKind::kUniform, 0.0, 1.0, kSeed, kKey};
  EXPECT_NEAR(
      pair_correlation(fill_vector<float>(ElementType::kFloat32, uniform, kDraws), identity), 0.0,
      0.03);
}

TEST(FillStatistics, NormalTailsLookGaussian) {
  // P(|z| > 2) = 0.0455 and P(|z| > 3) = 0.0027 for N(0,1); with 1e5 draws the counts' standard
  // deviations are about 66 and 16, tolerances below are > 6 of them.
  const FillSpec spec{FillKind::kNormal, 0.0, 1.0, kSeed + 1, kKey};
  const auto z = fill_vector<float>(ElementType::kFloat32, spec, kDraws);
  int beyond2 = 0, beyond3 = 0;
  for (const float x : z) beyond2 += std::fabs(x) > 2, beyond3 += std::fabs(x) > 3;
  EXPECT_NEAR(beyond2, 4550, 450);
  EXPECT_NEAR(beyond3, 270, 100);
}

TEST(FillStatistics, ScaledNormalInBFloat16) {
  // mean 3, std 0.5: bf16 rounding adds a uniform-ish error of at most 2^-7 relative, negligible.
  const FillSpec spec{FillKind::kNormal, 3.0, 0.5, kSeed, kKey};
  const auto bits = fill_vector<uint16_t>(ElementType::kBFloat16, spec, kDraws);
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = bf16_bits_to_float(bits[i]);
  double mean = 0, std = 0;
  mean_and_std(v, &mean, &std);
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(std, 0.5, 0.02);
}

TEST(FillStatistics, UniformMinusOneToOne) {
  // U(-1, 1): mean 0 (standard error sqrt(1/3)/sqrt(n) = 0.0018), variance 1/3.
  const FillSpec spec{FillKind::kUniform, -1.0, 1.0, kSeed, kKey};
  const auto v = fill_vector<float>(ElementType::kFloat32, spec, kDraws);
  for (const float x : v) ASSERT_TRUE(x >= -1.0f && x < 1.0f) << x;
  double mean = 0, std = 0;
  mean_and_std(v, &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std * std, 1.0 / 3.0, 0.01);
  const auto d = fill_vector<double>(ElementType::kFloat64, spec, kDraws);
  for (const double x : d) ASSERT_TRUE(x >= -1.0 && x < 1.0) << x;
}

TEST(FillStatistics, IntegerUniformHitsEveryValueEvenly) {
  // 12 values, 1e5 draws: expected 8333 each, standard deviation 87; tolerance 600.
  const FillSpec spec{FillKind::kUniform, -5.0, 7.0, kSeed, kKey};
  const auto v = fill_vector<int16_t>(ElementType::kInt16, spec, kDraws);
  std::vector<int> counts(12, 0);
  for (const int16_t x : v) {
    ASSERT_TRUE(x >= -5 && x < 7) << x;
    ++counts[x + 5];
  }
  for (int c : counts) EXPECT_NEAR(c, kDraws / 12.0, 600.0);
  const auto b =
      fill_vector<uint8_t>(ElementType::kBool, {FillKind::kUniform, 0, 2, kSeed, kKey}, kDraws);
  int ones = 0;
  for (const uint8_t x : b) {
    ASSERT_LE(x, 1);
    ones += x;
  }
  EXPECT_NEAR(ones, kDraws / 2.0, 1000.0);  // standard deviation 158
}

TEST(FillStatistics, ComplexNormalSplitsVarianceBetweenParts) {
  // torch's normal_ on complex: each part N(mean, std^2 / 2).
  const FillSpec spec{FillKind::kNormal, 0.0, 1.0, kSeed, kKey};
  std::vector<float> parts(2 * kDraws);
  const Box box{{kDraws}, {1}, {1}, 0};
  fill_cpu(parts.data(), ElementType::kComplex64, box.region(), spec);
  std::vector<float> re(kDraws), im(kDraws);
  for (int64_t i = 0; i < kDraws; ++i) re[i] = parts[2 * i], im[i] = parts[2 * i + 1];
  double mean = 0, std = 0;
  mean_and_std(re, &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std, std::sqrt(0.5), 0.02);
  mean_and_std(im, &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std, std::sqrt(0.5), 0.02);
}

// ---- Truncated normal -------------------------------------------------------------------------

TEST(TruncatedNormal, BoundsThatRejectNothingGiveTheNormalFill) {
  const FillSpec normal{FillKind::kNormal, 0.1, 0.02, kSeed, kKey};
  FillSpec truncated{FillKind::kTruncatedNormal, 0.1, 0.02, kSeed, kKey};
  truncated.low = -1.0;  // 55 std away: the normal fill never goes there (|z| <= 8.6)
  truncated.high = 1.2;
  EXPECT_EQ(fill_vector<float>(ElementType::kFloat32, truncated, 5000),
            fill_vector<float>(ElementType::kFloat32, normal, 5000));
  EXPECT_EQ(fill_vector<double>(ElementType::kFloat64, truncated, 5000),
            fill_vector<double>(ElementType::kFloat64, normal, 5000));
  EXPECT_EQ(fill_vector<uint16_t>(ElementType::kBFloat16, truncated, 5000),
            fill_vector<uint16_t>(ElementType::kBFloat16, normal, 5000));
}

TEST(TruncatedNormal, KeepsTheFirstDrawInsideTheBounds) {
  // Attempt r is the normal fill with seed ^ splitmix64(r) (r >= 1), the documented schedule.
  FillSpec truncated{FillKind::kTruncatedNormal, 0.0, 1.0, kSeed, kKey};
  truncated.low = -0.5;
  truncated.high = 1.5;  // mass 0.625: some elements need several attempts
  const int n = 2000;
  const auto got = fill_vector<float>(ElementType::kFloat32, truncated, n);
  std::vector<std::vector<float>> attempts;
  for (uint64_t r = 0; r < 40; ++r) {
    const uint64_t seed = r == 0 ? kSeed : kSeed ^ splitmix64(r);
    attempts.push_back(
        fill_vector<float>(ElementType::kFloat32, {FillKind::kNormal, 0.0, 1.0, seed, kKey}, n));
  }
  int redrawn = 0;
  for (int i = 0; i < n; ++i) {
    size_t r = 0;
    while (!(attempts[r][i] >= -0.5f && attempts[r][i] <= 1.5f)) ++r;  // 0.375^40: never runs out
    redrawn += r > 0;
    ASSERT_EQ(got[i], attempts[r][i]) << "element " << i << " attempt " << r;
  }
  EXPECT_NEAR(redrawn, 0.375 * n, 150);  // binomial, standard deviation 22
}

TEST(TruncatedNormal, MomentsMatchTheClosedForm) {
  // Standard normal truncated to [alpha, beta] = [-1, 2]: with Z = Phi(beta) - Phi(alpha),
  // mean = (phi(alpha) - phi(beta)) / Z and
  // var = 1 + (alpha phi(alpha) - beta phi(beta)) / Z - mean^2 (Johnson, Kotz, Balakrishnan).
  const double alpha = -1.0, beta = 2.0;
  const auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  const auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  const double z = cdf(beta) - cdf(alpha);
  const double mean = (phi(alpha) - phi(beta)) / z;
  const double var = 1 + (alpha * phi(alpha) - beta * phi(beta)) / z - mean * mean;
  FillSpec spec{FillKind::kTruncatedNormal, 0.0, 1.0, kSeed, kKey};
  spec.low = alpha;
  spec.high = beta;
  for (const ElementType type : {ElementType::kFloat32, ElementType::kFloat64}) {
    std::vector<double> v(kDraws);
    if (type == ElementType::kFloat32) {
      const auto f = fill_vector<float>(type, spec, kDraws);
      v.assign(f.begin(), f.end());
    } else {
      v = fill_vector<double>(type, spec, kDraws);
    }
    for (const double x : v) ASSERT_TRUE(x >= alpha && x <= beta) << x;
    double m = 0, s = 0;
    mean_and_std(v, &m, &s);
    EXPECT_NEAR(m, mean, 0.01);  // standard error 0.0024
    EXPECT_NEAR(s * s, var, 0.01);
  }
}

// ---- Streams ----------------------------------------------------------------------------------

int count_equal(const std::vector<float>& a, const std::vector<float>& b) {
  int equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == b[i];
  return equal;
}

TEST(FillStreams, DifferentKeysAndSeedsGiveDifferentValues) {
  // Two independent 24-bit uniforms agree with probability 2^-24; over 1000 elements, expect 0.
  const auto base =
      fill_vector<float>(ElementType::kFloat32, {FillKind::kUniform, 0, 1, 1, 10}, 1000);
  const auto other_key =
      fill_vector<float>(ElementType::kFloat32, {FillKind::kUniform, 0, 1, 1, 11}, 1000);
  const auto other_seed =
      fill_vector<float>(ElementType::kFloat32, {FillKind::kUniform, 0, 1, 2, 10}, 1000);
  const auto same =
      fill_vector<float>(ElementType::kFloat32, {FillKind::kUniform, 0, 1, 1, 10}, 1000);
  EXPECT_LE(count_equal(base, other_key), 1);
  EXPECT_LE(count_equal(base, other_seed), 1);
  EXPECT_EQ(count_equal(base, same), 1000);
  // Neighbouring elements are not shifted copies of each other's streams.
  std::vector<float> shifted(base.begin() + 1, base.end());
  shifted.push_back(0);
  EXPECT_LE(count_equal(base, shifted), 1);
}

TEST(FillStreams, ComplexIsTheRealViewOfTheSameKey) {
  // complex64 element g = (float fill at 2g, float fill at 2g + 1): a complex [3, 4] tensor equals
  // a float [3, 4, 2] tensor with the same seed and key (torch.view_as_real layout).
  const FillSpec spec{FillKind::kUniform, -1, 1, kSeed, kKey};
  std::vector<float> complex(24), real(24);  // 3 * 4 * 2 floats
  const Box c{{3, 4}, {4, 1}, {4, 1}, 0};
  const Box r{{3, 4, 2}, {8, 2, 1}, {8, 2, 1}, 0};
  fill_cpu(complex.data(), ElementType::kComplex64, c.region(), spec);
  fill_cpu(real.data(), ElementType::kFloat32, r.region(), spec);
  EXPECT_EQ(complex, real);
}

// A regression pin, not an oracle: these sums of the first 4096 values fix the exact streams. A
// change here changes every initialised model (and its checkpoints' reproducibility), so it must be
// a deliberate format change (the last: Philox groups of 4 float / 2 wide elements and paired
// Box-Muller, Note [Element random bits]). It also fails if a compiler or flag (-ffp-contract,
// -march, -O0) changes any bit, which is the point of Note [Bit-exact floating point on CPU and
// CUDA].
uint64_t bit_sum(const std::vector<unsigned char>& bytes) {
  uint64_t h = 1469598103934665603u;
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211u;
  return h;
}

TEST(FillStreams, StreamsArePinned) {
  const FillSpec normal{FillKind::kNormal, 0.1, 0.02, 42, tensor_key_from_name("w")};
  const FillSpec uniform{FillKind::kUniform, -0.3, 0.7, 42, tensor_key_from_name("w")};
  auto bytes = [](ElementType type, const FillSpec& spec) {
    auto buffer = testing::make_buffer(type, 4096);
    const Box box{{4096}, {1}, {1}, 0};
    fill_cpu(buffer.data(), type, box.region(), spec);
    return bit_sum(buffer);
  };
  EXPECT_EQ(bytes(ElementType::kFloat32, normal), 12512032426765993927u);
  EXPECT_EQ(bytes(ElementType::kFloat64, normal), 12806700197794623524u);
  EXPECT_EQ(bytes(ElementType::kBFloat16, normal), 9389293046237999847u);
  EXPECT_EQ(bytes(ElementType::kFloat32, uniform), 1833014488886520850u);
  EXPECT_EQ(bytes(ElementType::kFloat64, uniform), 6792875871678731601u);
  FillSpec truncated{FillKind::kTruncatedNormal, 0.1, 0.02, 42, tensor_key_from_name("w")};
  truncated.low = 0.08;
  truncated.high = 0.15;
  EXPECT_EQ(bytes(ElementType::kFloat32, truncated), 1156556627552325341u);
  EXPECT_EQ(bytes(ElementType::kFloat64, truncated), 7862355855265536940u);
}

// ---- Validation and keys ----------------------------------------------------------------------

TEST(FillSpecCheck, RejectsWhatPyTorchRejects) {
  EXPECT_FALSE(check_fill_spec(ElementType::kFloat32, {FillKind::kUniform, 0, 1, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, {FillKind::kUniform, 2, 1, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, {FillKind::kUniform, -1e39, 1, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, {FillKind::kNormal, 0, -1, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat64, {FillKind::kNormal, NAN, 1, 0, 0}));
  EXPECT_FALSE(check_fill_spec(ElementType::kFloat16, {FillKind::kConstant, INFINITY, 0, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kInt32, {FillKind::kNormal, 0, 1, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kInt8, {FillKind::kConstant, 128, 0, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kInt8, {FillKind::kConstant, 1.5, 0, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kUInt8, {FillKind::kUniform, 0, 257, 0, 0}));
  EXPECT_FALSE(check_fill_spec(ElementType::kUInt8, {FillKind::kUniform, 0, 256, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kInt64, {FillKind::kUniform, 3, 3, 0, 0}));
  EXPECT_TRUE(check_fill_spec(ElementType::kBool, {FillKind::kUniform, 0, 3, 0, 0}));
  const auto truncated = [](double mean, double std, double low, double high) {
    FillSpec spec{FillKind::kTruncatedNormal, mean, std, 0, 0};
    spec.low = low;
    spec.high = high;
    return spec;
  };
  EXPECT_FALSE(check_fill_spec(ElementType::kFloat32, truncated(0, 1, -2, 2)));
  EXPECT_FALSE(check_fill_spec(ElementType::kFloat32, truncated(0, 1, 0, INFINITY)));  // half
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, truncated(0, 1, 2, 3)));          // mass 0.021
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, truncated(0, 1, 1, 1)));
  EXPECT_TRUE(check_fill_spec(ElementType::kFloat32, truncated(0, 0, -1, 1)));
  EXPECT_TRUE(check_fill_spec(ElementType::kComplex64, truncated(0, 1, -2, 2)));
  EXPECT_TRUE(check_fill_spec(ElementType::kInt32, truncated(0, 1, -2, 2)));
  const auto message = check_fill_spec(ElementType::kBFloat16, {FillKind::kUniform, 5, 1, 0, 0});
  ASSERT_TRUE(message);
  EXPECT_NE(message->find("bfloat16"), std::string::npos) << *message;
  EXPECT_NE(message->find("a=5"), std::string::npos) << *message;
}

TEST(TensorKey, IsFnv1a64OfTheName) {
  // FNV-1a 64 reference values: "" is the offset basis; "a" and "foobar" from the FNV test suite.
  static_assert(tensor_key_from_name("") == 0xCBF29CE484222325u);
  EXPECT_EQ(tensor_key_from_name("a"), 0xAF63DC4C8601EC8Cu);
  EXPECT_EQ(tensor_key_from_name("foobar"), 0x85944171F73967E8u);
  EXPECT_NE(tensor_key_from_name("layers.0.attn.q.weight"),
            tensor_key_from_name("layers.1.attn.q.weight"));
}

}  // namespace
}  // namespace shardplan::kernels
