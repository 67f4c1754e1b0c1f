// Deterministic log and cos for the normal fill: fixed polynomials evaluated with correctly
// rounded operations only, so the CPU and CUDA give the same bits (Note [Bit-exact floating
// point on CPU and CUDA] in kernels/fp_ops.h). Inputs are the integers a random draw produces:
//   float l = det::log_scaled_f32(m, -24);   // log(m * 2^-24), 1 <= m <= 2^24
//   float c = det::cos_turns_f32(n);         // cos(2 pi n / 2^24), n < 2^24
//   float s = det::sin_turns_f32(n);         // sin(2 pi n / 2^24)
#pragma once

#include <cstdint>

#include "kernels/fp_ops.h"
#include "kernels/host_device.h"

// Note [Polynomial log and cos]
// Accuracy target: about 1 ulp, not correct rounding; tests compare against libm.
// log(m * 2^p): m is converted to floating point exactly, split as s * 2^e with s in
// [sqrt(1/2), sqrt(2)) by editing the exponent bits (no rounding), and
// log(s) = 2 atanh(z) = 2 (z + z^3/3 + z^5/5 + ...), z = (s-1)/(s+1), |z| <= 0.1716. The series is
// truncated where the next term is below 1e-9 (float) or 1e-19 (double) relative. Then
// log = (e + p) * ln2 + log(s) with ln2 split into a rounded value and its residual (two fmas).
// cos(2 pi n / 2^bits): the angle is in whole turns, so the reduction to a quadrant q and an offset
// f in [-1/2, 1/2] quarter-turns is integer arithmetic on n and exact; cos and sin of (pi/2) f are
// Taylor series in f (coefficients (pi/2)^k / k!, alternating), truncated where the next term is
// below 3e-9 (float) or 1e-20 (double) relative. sin is cos a quarter turn earlier: the same
// reduction with the quadrant moved, so a Box-Muller pair shares one reduction and two series.
// Coefficients are hex literals (exact bits), computed with 300-bit mpmath and rounded to nearest;
// never computed at compile time, so nvcc's front end and GCC cannot disagree about them.

namespace shardplan::kernels::det {

// log(s * 2^(e + pow2)) for s in [0.707, 1.414] (the reduced mantissa): the series and the
// recombination shared by log_scaled_f32 and the vector fill's branch-free reduction
// (kernels/internal/fill_lanes.h), so both round the same way by construction.
SHARDPLAN_HD SHARDPLAN_INLINE float log_reduced_f32(float s, int e, int pow2) {
  const float z = fp::div(s - 1.0f, s + 1.0f);  // s - 1 is exact (Sterbenz)
  const float z2 = z * z;
  // 2/(2k+1) for k = 5 .. 1.
  float p = 0x1.745d18p-3f;
  p = fp::fma(p, z2, 0x1.c71c72p-3f);
  p = fp::fma(p, z2, 0x1.24924ap-2f);
  p = fp::fma(p, z2, 0x1.99999ap-2f);
  p = fp::fma(p, z2, 0x1.555556p-1f);
  const float log_s = fp::fma(z, z2 * p, z + z);
  const float k = static_cast<float>(e + pow2);
  return fp::fma(k, 0x1.62e430p-1f, fp::fma(k, -0x1.05c610p-29f, log_s));
}

// log(m * 2^pow2) for 1 <= m <= 2^24, in float.
// Selects, not branches: m is random, and a GPU warp would run both sides of a branch on it.
SHARDPLAN_HD SHARDPLAN_INLINE float log_scaled_f32(uint32_t m, int pow2) {
  const uint32_t b = fp::bits(static_cast<float>(m));  // exact for m <= 2^24
  const uint32_t mantissa = b & 0x7FFFFFu;
  const float s_high = fp::float_from_bits(mantissa | 0x3F800000u);  // [1, 2)
  const bool above_sqrt2 = s_high > 0x1.6a09e6p+0f;                  // float(sqrt 2)
  const float s = above_sqrt2 ? fp::float_from_bits(mantissa | 0x3F000000u) : s_high;  // [0.707, 1)
  const int e = static_cast<int>(b >> 23) - 127 + (above_sqrt2 ? 1 : 0);
  return log_reduced_f32(s, e, pow2);
}

// log(m * 2^pow2) for 1 <= m <= 2^53, in double.
SHARDPLAN_HD SHARDPLAN_INLINE double log_scaled_f64(uint64_t m, int pow2) {
  const uint64_t b = fp::bits(static_cast<double>(m));  // exact for m <= 2^53
  constexpr uint64_t kMantissa = (uint64_t{1} << 52) - 1;
  int e = static_cast<int>(b >> 52) - 1023;
  double s = fp::double_from_bits((b & kMantissa) | 0x3FF0000000000000u);
  if (s > 0x1.6a09e667f3bcdp+0) {
    s = fp::double_from_bits((b & kMantissa) | 0x3FE0000000000000u);
    e += 1;
  }
  const double z = fp::div(s - 1.0, s + 1.0);
  const double z2 = z * z;
  // 2/(2k+1) for k = 10 .. 1.
  double p = 0x1.8618618618618p-4;
  p = fp::fma(p, z2, 0x1.af286bca1af28p-4);
  p = fp::fma(p, z2, 0x1.e1e1e1e1e1e1ep-4);
  p = fp::fma(p, z2, 0x1.1111111111111p-3);
  p = fp::fma(p, z2, 0x1.3b13b13b13b14p-3);
  p = fp::fma(p, z2, 0x1.745d1745d1746p-3);
  p = fp::fma(p, z2, 0x1.c71c71c71c71cp-3);
  p = fp::fma(p, z2, 0x1.2492492492492p-2);
  p = fp::fma(p, z2, 0x1.999999999999ap-2);
  p = fp::fma(p, z2, 0x1.5555555555555p-1);
  const double log_s = fp::fma(z, z2 * p, z + z);
  const double k = static_cast<double>(e + pow2);
  return fp::fma(k, 0x1.62e42fefa39efp-1, fp::fma(k, 0x1.abc9e3b39803fp-56, log_s));
}

namespace detail {

// cos((pi/2) f) and sin((pi/2) f) for |f| <= 1/2, f2 = f * f.
SHARDPLAN_HD SHARDPLAN_INLINE float cos_quarter_f32(float f2) {
  float p = -0x1.a6d1f2p-16f;
  p = fp::fma(p, f2, 0x1.e1f506p-11f);
  p = fp::fma(p, f2, -0x1.55d3c8p-6f);
  p = fp::fma(p, f2, 0x1.03c1f0p-2f);
  p = fp::fma(p, f2, -0x1.3bd3ccp+0f);
  return fp::fma(p, f2, 1.0f);
}

SHARDPLAN_HD SHARDPLAN_INLINE float sin_quarter_f32(float f, float f2) {
  float p = -0x1.e30750p-19f;
  p = fp::fma(p, f2, 0x1.507834p-13f);
  p = fp::fma(p, f2, -0x1.32d2ccp-8f);
  p = fp::fma(p, f2, 0x1.466bc6p-4f);
  p = fp::fma(p, f2, -0x1.4abbcep-1f);
  p = fp::fma(p, f2, 0x1.921fb6p+0f);
  return f * p;
}

SHARDPLAN_HD SHARDPLAN_INLINE double cos_quarter_f64(double f2) {
  double p = -0x1.2a0c591af8314p-41;
  p = fp::fma(p, f2, 0x1.20c62c2f2d7f5p-34);
  p = fp::fma(p, f2, -0x1.b6e24f44b128fp-28);
  p = fp::fma(p, f2, 0x1.f9d38a3763cc3p-22);
  p = fp::fma(p, f2, -0x1.a6d1f2a204a8cp-16);
  p = fp::fma(p, f2, 0x1.e1f506891babbp-11);
  p = fp::fma(p, f2, -0x1.55d3c7e3cbffap-6);
  p = fp::fma(p, f2, 0x1.03c1f081b5ac4p-2);
  p = fp::fma(p, f2, -0x1.3bd3cc9be45dep+0);
  return fp::fma(p, f2, 1.0);
}

SHARDPLAN_HD SHARDPLAN_INLINE double sin_quarter_f64(double f, double f2) {
  double p = -0x1.8a404211f9547p-45;
  p = fp::fma(p, f2, 0x1.aaec32af93359p-38);
  p = fp::fma(p, f2, -0x1.6fadb9f155744p-31);
  p = fp::fma(p, f2, 0x1.e8f434d018d63p-25);
  p = fp::fma(p, f2, -0x1.e3074fde8871fp-19);
  p = fp::fma(p, f2, 0x1.50783487ee782p-13);
  p = fp::fma(p, f2, -0x1.32d2cce62bd86p-8);
  p = fp::fma(p, f2, 0x1.466bc6775aae2p-4);
  p = fp::fma(p, f2, -0x1.4abbce625be53p-1);
  p = fp::fma(p, f2, 0x1.921fb54442d18p+0);
  return f * p;
}

// cos((pi/2) (q + f)) from cos and sin of (pi/2) f, by quadrant: sin for odd q, negated for
// q = 1, 2 (mod 4). Selects rather than a switch: q is random (see log_scaled_f32).
template <class T>
SHARDPLAN_HD SHARDPLAN_INLINE T by_quadrant(unsigned q, T cos_f, T sin_f) {
  const T v = (q & 1u) != 0 ? sin_f : cos_f;
  return ((q + 1u) & 2u) != 0 ? -v : v;
}

}  // namespace detail

// The exact part of cos and sin of 2 pi n / 2^24: the quadrant q and the polynomials at the
// centred offset, from which cos_turns_f32 and sin_turns_f32 pick their values.
struct TurnsF32 {
  unsigned q;
  float cos_f;
  float sin_f;
};

SHARDPLAN_HD SHARDPLAN_INLINE TurnsF32 reduce_turns_f32(uint32_t n) {
  // n / 2^24 turns = n / 2^22 quarter turns: q whole quarters plus r / 2^22 (exact integer split),
  // the offset centred (f in [-1/2, 1/2)) by selects, as log_scaled_f32.
  const int32_t r_low = static_cast<int32_t>(n & 0x3FFFFFu);
  const bool centre = r_low >= 0x200000;
  const int32_t r = centre ? r_low - 0x400000 : r_low;
  const unsigned q = (n >> 22) + (centre ? 1u : 0u);
  const float f = static_cast<float>(r) * 0x1p-22f;  // exact
  const float f2 = f * f;
  return TurnsF32{q, detail::cos_quarter_f32(f2), detail::sin_quarter_f32(f, f2)};
}

// cos(2 pi n / 2^24) for 0 <= n < 2^24, in float.
SHARDPLAN_HD SHARDPLAN_INLINE float cos_turns_f32(uint32_t n) {
  const TurnsF32 t = reduce_turns_f32(n);
  return detail::by_quadrant(t.q, t.cos_f, t.sin_f);
}

// sin(2 pi n / 2^24) = cos of the angle a quarter turn earlier: the same polynomials, the quadrant
// moved by 3 (mod 4), so sin_turns_f32(n) == cos_turns_f32((n + 3 * 2^22) mod 2^24) bit for bit.
SHARDPLAN_HD SHARDPLAN_INLINE float sin_turns_f32(uint32_t n) {
  const TurnsF32 t = reduce_turns_f32(n);
  return detail::by_quadrant(t.q + 3u, t.cos_f, t.sin_f);
}

struct TurnsF64 {
  unsigned q;
  double cos_f;
  double sin_f;
};

SHARDPLAN_HD SHARDPLAN_INLINE TurnsF64 reduce_turns_f64(uint64_t n) {
  unsigned q = static_cast<unsigned>(n >> 51);
  int64_t r = static_cast<int64_t>(n & ((uint64_t{1} << 51) - 1));
  if (r >= (int64_t{1} << 50)) {
    r -= int64_t{1} << 51;
    q += 1;
  }
  const double f = static_cast<double>(r) * 0x1p-51;  // exact
  const double f2 = f * f;
  return TurnsF64{q, detail::cos_quarter_f64(f2), detail::sin_quarter_f64(f, f2)};
}

// cos(2 pi n / 2^53) for 0 <= n < 2^53, in double.
SHARDPLAN_HD SHARDPLAN_INLINE double cos_turns_f64(uint64_t n) {
  const TurnsF64 t = reduce_turns_f64(n);
  return detail::by_quadrant(t.q, t.cos_f, t.sin_f);
}

// sin(2 pi n / 2^53), as sin_turns_f32.
SHARDPLAN_HD SHARDPLAN_INLINE double sin_turns_f64(uint64_t n) {
  const TurnsF64 t = reduce_turns_f64(n);
  return detail::by_quadrant(t.q + 3u, t.cos_f, t.sin_f);
}

}  // namespace shardplan::kernels::det
