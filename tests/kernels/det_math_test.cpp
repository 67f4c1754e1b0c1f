// The polynomial log and cos against the C library in long double (an independent source): the
// error stays within a couple of ulps of the exact value over the whole input range.
#include "kernels/det_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace shardplan::kernels::det {
namespace {

const long double kHalfPi = 1.570796326794896619231321691639751442L;

// cos(2 pi n / 2^bits) in long double. The exact identity cos(pi/2 (q + f)) = {cos, -sin, -cos,
// sin}(pi/2 f) with q the whole quarter turns keeps the libm argument small, so the reference is
// accurate to ~1e-19 relative even next to the zeros of cos (cosl(2 pi t) directly is not).
// (This is the same identity the code uses; what is independent is the polynomial vs libm.)
long double cos_turns_reference(uint64_t n, int bits) {
  const uint64_t quarter = uint64_t{1} << (bits - 2);
  uint64_t q = n / quarter;
  long double f = std::ldexp(static_cast<long double>(n % quarter), 2 - bits);  // [0, 1)
  if (f > 0.5L) {  // the nearer quarter: |x| <= pi/4, far from the zeros of cos x
    f -= 1;
    q += 1;
  }
  const long double x = kHalfPi * f;
  switch (q & 3) {
    case 0:
      return std::cos(x);
    case 1:
      return -std::sin(x);
    case 2:
      return -std::cos(x);
    default:
      return std::sin(x);
  }
}

// |got - exact| in units of the ulp of `exact` in the target type (float or double).
template <class T>
double ulp_error(T got, long double exact) {
  if (exact == 0) return got == 0 ? 0.0 : 1e30;
  int e = 0;
  std::frexp(exact, &e);
  const long double ulp = std::ldexp(1.0L, e - std::numeric_limits<T>::digits);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

TEST(DetMath, LogF32WithinTwoUlpsForEveryDraw) {
  // The values Box-Muller feeds: m * 2^-24, m in [1, 2^24]; all m below 4096, then every 7th.
  double worst = 0;
  for (uint32_t m = 1; m <= (1u << 24); m += (m < 4096 ? 1 : 7)) {
    if (m == (1u << 24)) continue;
    worst = std::max(worst, ulp_error(log_scaled_f32(m, -24), std::log(std::ldexp(1.0L * m, -24))));
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(log_scaled_f32(1u << 24, -24), 0.0f);  // u1 = 1
  EXPECT_EQ(log_scaled_f32(1, 0), 0.0f);
}

TEST(DetMath, LogF64WithinThreeUlps) {
  double worst = 0;
  uint64_t m = 1;
  for (int i = 0; i < 2000000; ++i) {
    m = m * 6364136223846793005u + 1442695040888963407u;  // Knuth's MMIX LCG, for spread only
    const uint64_t x = (m >> 11) + 1;                     // [1, 2^53]
    worst = std::max(worst, ulp_error(log_scaled_f64(x, -53), std::log(std::ldexp(1.0L * x, -53))));
  }
  for (uint64_t x = 1; x < 100000; ++x) {
    worst = std::max(worst, ulp_error(log_scaled_f64(x, -53), std::log(std::ldexp(1.0L * x, -53))));
  }
  EXPECT_LE(worst, 3.0);  // measured 2.002 (the division and the ln2 product each round)
  EXPECT_EQ(log_scaled_f64(uint64_t{1} << 53, -53), 0.0);
}

TEST(DetMath, CosTurnsF32WithinTwoUlpsForEveryDraw) {
  // Relative error holds even next to the zeros of cos: the quadrant reduction is exact.
  double worst = 0;
  for (uint32_t n = 0; n < (1u << 24); n += (n < 4096 ? 1 : 7)) {
    worst = std::max(worst, ulp_error(cos_turns_f32(n), cos_turns_reference(n, 24)));
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(cos_turns_f32(0), 1.0f);
  EXPECT_EQ(cos_turns_f32(1u << 22), 0.0f);   // quarter turn: exactly 0 (sin poly times f = 0)
  EXPECT_EQ(cos_turns_f32(1u << 23), -1.0f);  // half turn
}

TEST(DetMath, SinTurnsIsCosAQuarterTurnEarlier) {
  // sin(x) = cos(x - pi/2): bit for bit the cos of n - 2^22 (mod 2^24), and within two ulps of
  // the long double reference of that angle (libm's sinl/cosl near the argument's quadrant).
  double worst = 0;
  for (uint32_t n = 0; n < (1u << 24); n += 7) {
    const uint32_t earlier = (n + (3u << 22)) & 0xFFFFFFu;
    ASSERT_EQ(fp::bits(sin_turns_f32(n)), fp::bits(cos_turns_f32(earlier))) << "n = " << n;
    worst = std::max(worst, ulp_error(sin_turns_f32(n), cos_turns_reference(earlier, 24)));
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(sin_turns_f32(1u << 22), 1.0f);
  EXPECT_EQ(sin_turns_f64(uint64_t{1} << 51), 1.0);
  for (uint64_t n = 12345; n < (uint64_t{1} << 53); n += uint64_t{1} << 45) {
    ASSERT_EQ(fp::bits(sin_turns_f64(n)),
              fp::bits(cos_turns_f64((n + (uint64_t{3} << 51)) & ((uint64_t{1} << 53) - 1))));
  }
}

TEST(DetMath, CosTurnsF64WithinTwoUlps) {
  double worst = 0;
  uint64_t s = 12345;
  for (int i = 0; i < 2000000; ++i) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    const uint64_t n = s >> 11;  // [0, 2^53)
    worst = std::max(worst, ulp_error(cos_turns_f64(n), cos_turns_reference(n, 53)));
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(cos_turns_f64(0), 1.0);
  EXPECT_EQ(cos_turns_f64(uint64_t{1} << 52), -1.0);
}

}  // namespace
}  // namespace shardplan::kernels::det
