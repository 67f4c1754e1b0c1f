// The float32 normal fill looks like N(0, 1) at 10^7 samples: its first four moments within a few
// standard errors, and a Kolmogorov-Smirnov test against the standard normal CDF. Complements the
// 1e5-draw sanity checks of random_fill_test.cpp (FillStatistics) with a sample large enough to
// see a biased polynomial or a broken lane in the fast path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/init_fill.h"

namespace shardplan::kernels {
namespace {

constexpr int64_t kSamples = 10000000;

std::vector<float> standard_normal_sample() {
  std::vector<float> z(static_cast<size_t>(kSamples));
  const int64_t sizes[1] = {kSamples}, strides[1] = {1};
  const FillRegion region{1, sizes, strides, strides, 0};
  const FillSpec spec{FillKind::kNormal, 0.0, 1.0, 0x5EED0001u,
                      tensor_key_from_name("layers.7.mlp.down_proj.weight")};
  fill_cpu(z.data(), ElementType::kFloat32, region, spec);
  return z;
}

// Note [Moment tolerances]
// For n independent N(0, 1) draws the sample statistics are asymptotically normal with standard
// errors (Kendall & Stuart; e.g. the large-sample variances of g1 and g2 in D'Agostino & Pearson):
//   mean          m = sum x / n                      SE = sqrt(1 / n)   = 3.2e-4
//   variance      s2 = sum (x - m)^2 / (n - 1)       SE = sqrt(2 / n)   = 4.5e-4  (Var = 2
//   sigma^4/(n-1)) skewness      g1 = m3 / m2^(3/2)                 SE = sqrt(6 / n)   = 7.7e-4 ex.
//   kurtosis  g2 = m4 / m2^2 - 3                 SE = sqrt(24 / n)  = 1.5e-3
// (m_k the central sample moments), n = 10^7. The tolerance is 5 SE: a correct generator lands
// outside with probability 5.7e-7 per statistic; the seed is fixed, so the test is deterministic
// anyway, and a failure means a real bias. The fill's own departures are far smaller: u1 and the
// angle have 24 bits, so |z| <= sqrt(-2 ln 2^-24) = 5.77, which drops a mass of ~8e-9 and changes
// E z^4 by ~1e-6; log and cos are within 2 ulps (det_math_test.cpp).
TEST(NormalFillStatistics, MomentsOfTenMillionFloat32Draws) {
  const std::vector<float> z = standard_normal_sample();
  const double n = static_cast<double>(z.size());
  double sum = 0;
  for (const float x : z) sum += x;
  const double mean = sum / n;
  double m2 = 0, m3 = 0, m4 = 0;
  for (const float x : z) {
    const double d = static_cast<double>(x) - mean;
    const double d2 = d * d;
    m2 += d2;
    m3 += d2 * d;
    m4 += d2 * d2;
  }
  const double variance = m2 / (n - 1);
  m2 /= n, m3 /= n, m4 /= n;
  const double skewness = m3 / std::pow(m2, 1.5);
  const double excess_kurtosis = m4 / (m2 * m2) - 3.0;
  const double se_mean = std::sqrt(1.0 / n);
  const double se_variance = std::sqrt(2.0 / n);
  const double se_skewness = std::sqrt(6.0 / n);
  const double se_kurtosis = std::sqrt(24.0 / n);
  EXPECT_NEAR(mean, 0.0, 5 * se_mean);
  EXPECT_NEAR(variance, 1.0, 5 * se_variance);
  EXPECT_NEAR(skewness, 0.0, 5 * se_skewness);
  EXPECT_NEAR(excess_kurtosis, 0.0, 5 * se_kurtosis);
}

// Kolmogorov-Smirnov: D = sup_x |F_n(x) - Phi(x)| over the sorted sample, F_n the empirical CDF.
// With i the 0-based rank, D = max_i max((i + 1) / n - Phi(x_i), Phi(x_i) - i / n); ties (float
// values repeat at n = 10^7) need no special case, since the largest of the gaps at a tied value
// is the one at the last copy (above) or the first (below). Under H0, sqrt(n) D follows the
// Kolmogorov distribution for large n, whose 0.001 upper quantile is 1.9495 (P(K > 1.95) =
// 2 sum_k (-1)^(k-1) exp(-2 k^2 1.95^2) = 0.00100).
TEST(NormalFillStatistics, KolmogorovSmirnovAgainstTheStandardNormal) {
  std::vector<float> z = standard_normal_sample();
  std::sort(z.begin(), z.end());
  const double n = static_cast<double>(z.size());
  double d = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double phi = 0.5 * std::erfc(-static_cast<double>(z[i]) / std::sqrt(2.0));
    d = std::max({d, static_cast<double>(i + 1) / n - phi, phi - static_cast<double>(i) / n});
  }
  EXPECT_LT(d * std::sqrt(n), 1.95) << "D = " << d;
}

}  // namespace
}  // namespace shardplan::kernels
