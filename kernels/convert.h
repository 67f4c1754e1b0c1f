// Conversions between float and the narrow floating storage formats, round to nearest even, with
// PyTorch's (c10's) handling of NaN, infinity, overflow and subnormals.
//   uint16_t h = float_to_bf16_bits(1.0f / 3.0f);  // 0x3EAB
//   float back = bf16_bits_to_float(h);              // 0.333984375
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "kernels/fp_ops.h"
#include "kernels/host_device.h"

namespace shardplan::kernels {

namespace detail {

// Rounds a float magnitude (bits `a`, sign cleared, not NaN) to a binary format with kExpBits
// exponent bits, kManBits mantissa bits and the IEEE bias 2^(kExpBits-1) - 1. Returns the
// exponent:mantissa code, which may exceed the largest finite code: each format applies its own
// overflow rule. Integer arithmetic only, so it is exact and the same on every machine.
template <int kExpBits, int kManBits>
SHARDPLAN_HD SHARDPLAN_INLINE uint32_t round_magnitude_rne(uint32_t a) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr int kDrop = 23 - kManBits;  // float mantissa bits that do not fit
  const int float_exp = static_cast<int>(a >> 23);
  if (float_exp - 127 >= 1 - kBias) {
    // Normal in the target: re-bias the exponent, then round off kDrop bits. A carry out of the
    // mantissa correctly bumps the exponent (and may reach the infinity code).
    const uint32_t v = a - (static_cast<uint32_t>(127 - kBias) << 23);
    return (v + ((1u << (kDrop - 1)) - 1) + ((v >> kDrop) & 1u)) >> kDrop;
  }
  // Subnormal (or zero) in the target: count in units of its smallest subnormal 2^(1-bias-man).
  uint32_t m = a & 0x7FFFFFu;
  int e = float_exp;
  if (e != 0) {
    m |= 0x800000u;  // hidden bit
  } else {
    e = 1;  // float subnormal: same scale as exponent 1, no hidden bit
  }
  const int shift = kDrop + (1 - kBias) - (e - 127);  // >= 24 - kManBits >= 1
  if (shift > 24) return 0;                           // below half the smallest subnormal
  const uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
}

// Decodes a finite exponent:mantissa code (sign removed) of such a format to float, exactly.
template <int kExpBits, int kManBits>
SHARDPLAN_HD SHARDPLAN_INLINE float decode_finite_magnitude(uint32_t code) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  const uint32_t e = code >> kManBits;
  const uint32_t m = code & ((1u << kManBits) - 1u);
  if (e == 0) {
    // m * 2^(1-bias-man): both factors exact and the product a normal float for every format here
    // except bf16, which does not come through this path.
    constexpr uint32_t kScaleBits = static_cast<uint32_t>(127 + 1 - kBias - kManBits) << 23;
    return static_cast<float>(m) * fp::float_from_bits(kScaleBits);
  }
  return fp::float_from_bits(((e + 127 - kBias) << 23) | (m << (23 - kManBits)));
}

SHARDPLAN_HD SHARDPLAN_INLINE bool is_nan_bits(uint32_t magnitude) {
  return magnitude > 0x7F800000u;
}

}  // namespace detail

// bfloat16. NaN -> 0x7FC0 (c10::detail::round_to_nearest_even drops the sign too); overflow
// rounds to infinity like any IEEE format; float subnormals map onto bf16 subnormals.
SHARDPLAN_HD SHARDPLAN_INLINE uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = fp::bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (detail::is_nan_bits(a)) return 0x7FC0u;
  const uint32_t code = detail::round_magnitude_rne<8, 7>(a);
  return static_cast<uint16_t>(((u >> 16) & 0x8000u) | code);
}

// float_to_bf16_bits in one formula, for the fills' hot loops (a GPU warp diverges on branches
// that depend on random data). bf16 has float's exponent range, so a float subnormal is a bf16
// subnormal of the same scale and the normal case's rounding, (a + 0x7FFF + bit 16 of a) >> 16,
// is round-to-nearest-even for it too; NaN is selected as in float_to_bf16_bits. Equal for every
// input (tests/kernels/fill_fast_path_test.cpp, FillLanes.Bf16RoundingEqualsConvert).
SHARDPLAN_HD SHARDPLAN_INLINE uint16_t float_to_bf16_bits_branch_free(float f) {
  const uint32_t u = fp::bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t rounded = (a + 0x7FFFu + ((a >> 16) & 1u)) >> 16;
  const uint32_t code = a > 0x7F800000u ? 0x7FC0u : (((u >> 16) & 0x8000u) | rounded);
  return static_cast<uint16_t>(code);
}

// Note [Paired narrow conversions on the GPU]
// The fills' group path converts its floats two at a time. On the GPU one instruction
// (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32, sm_80 on; the intrinsics emulate it before) rounds both
// values to nearest even, with subnormal inputs and results kept and overflow to infinity: the
// rule of float_to_bf16_bits and float_to_fp16_bits. Only NaN differs (the instruction gives the
// canonical 0x7FFF), so a NaN input is selected back to c10's code. The integer formula it
// replaces costs about ten integer instructions per element, which is what made bfloat16 fills
// slower per element than float32 ones on an H200 (docs/architecture.md §4.7). The host, and a
// device build of a host-only translation unit, take the scalar functions.
// Both results packed in one word, `a` in the low half: the order of out[0], out[1] in memory.
SHARDPLAN_HD SHARDPLAN_INLINE uint32_t floats_to_bf16_pair(float a, float b) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // .x = a, .y = b
  const uint32_t lo = a != a ? 0x7FC0u : static_cast<uint32_t>(__bfloat16_as_ushort(h.x));
  const uint32_t hi = b != b ? 0x7FC0u : static_cast<uint32_t>(__bfloat16_as_ushort(h.y));
  return lo | (hi << 16);
#else
  return static_cast<uint32_t>(float_to_bf16_bits_branch_free(a)) |
         (static_cast<uint32_t>(float_to_bf16_bits_branch_free(b)) << 16);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float bf16_bits_to_float(uint16_t h) {
  return fp::float_from_bits(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16. NaN -> sign | 0x7E00 (as c10's fp16_ieee_from_fp32_value); |x| >= 65520 (the
// largest finite 65504 plus half an ulp, ties to even) -> infinity.
SHARDPLAN_HD SHARDPLAN_INLINE uint16_t float_to_fp16_bits(float f) {
  const uint32_t u = fp::bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (detail::is_nan_bits(a)) return static_cast<uint16_t>(sign | 0x7E00u);
  uint32_t code = detail::round_magnitude_rne<5, 10>(a);
  if (code > 0x7C00u) code = 0x7C00u;
  return static_cast<uint16_t>(sign | code);
}

// float_to_fp16_bits of two floats, packed as floats_to_bf16_pair (Note [Paired narrow
// conversions on the GPU]); NaN is sign | 0x7E00 as there.
SHARDPLAN_HD SHARDPLAN_INLINE uint32_t floats_to_fp16_pair(float a, float b) {
#if defined(__CUDA_ARCH__)
  const __half2 h = __floats2half2_rn(a, b);  // .x = a, .y = b
  const uint32_t a_nan = ((fp::bits(a) >> 16) & 0x8000u) | 0x7E00u;
  const uint32_t b_nan = ((fp::bits(b) >> 16) & 0x8000u) | 0x7E00u;
  const uint32_t lo = a != a ? a_nan : static_cast<uint32_t>(__half_as_ushort(h.x));
  const uint32_t hi = b != b ? b_nan : static_cast<uint32_t>(__half_as_ushort(h.y));
  return lo | (hi << 16);
#else
  return static_cast<uint32_t>(float_to_fp16_bits(a)) |
         (static_cast<uint32_t>(float_to_fp16_bits(b)) << 16);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t code = h & 0x7FFFu;
  if (code >= 0x7C00u) {  // infinity, or NaN with its payload kept (and made quiet)
    const uint32_t payload = (code & 0x3FFu) << 13;
    return fp::float_from_bits(sign | 0x7F800000u | (payload != 0 ? 0x400000u | payload : 0u));
  }
  return fp::float_from_bits(sign | fp::bits(detail::decode_finite_magnitude<5, 10>(code)));
}

// OCP FP8 E4M3FN: bias 7, largest finite 448 (S.1111.110), no infinity, NaN = S.1111.111.
// Follows c10::detail::fp8e4m3fn_from_fp32_value (PyTorch's .to(torch.float8_e4m3fn)): it does
// NOT saturate. Rounding that lands beyond 448, i.e. |x| > 464 (448 plus half an ulp; 464 itself
// ties to the even 448), and infinities give NaN, sign kept.
SHARDPLAN_HD SHARDPLAN_INLINE uint8_t float_to_fp8e4m3fn_bits(float f) {
  const uint32_t u = fp::bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (detail::is_nan_bits(a)) return static_cast<uint8_t>(sign | 0x7Fu);
  uint32_t code = detail::round_magnitude_rne<4, 3>(a);
  if (code > 0x7Eu) code = 0x7Fu;
  return static_cast<uint8_t>(sign | code);
}

SHARDPLAN_HD SHARDPLAN_INLINE float fp8e4m3fn_bits_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t code = b & 0x7Fu;
  if (code == 0x7Fu) return fp::float_from_bits(sign | 0x7FC00000u);
  return fp::float_from_bits(sign | fp::bits(detail::decode_finite_magnitude<4, 3>(code)));
}

// OCP FP8 E5M2: bias 15, largest finite 57344, IEEE specials. NaN -> sign | 0x7F (as c10);
// |x| >= 61440 (57344 plus half an ulp, ties to even) -> infinity.
SHARDPLAN_HD SHARDPLAN_INLINE uint8_t float_to_fp8e5m2_bits(float f) {
  const uint32_t u = fp::bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (detail::is_nan_bits(a)) return static_cast<uint8_t>(sign | 0x7Fu);
  uint32_t code = detail::round_magnitude_rne<5, 2>(a);
  if (code > 0x7Cu) code = 0x7Cu;
  return static_cast<uint8_t>(sign | code);
}

SHARDPLAN_HD SHARDPLAN_INLINE float fp8e5m2_bits_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t code = b & 0x7Fu;
  if (code >= 0x7Cu) {
    const uint32_t payload = (code & 0x3u) << 21;
    return fp::float_from_bits(sign | 0x7F800000u | (payload != 0 ? 0x400000u | payload : 0u));
  }
  return fp::float_from_bits(sign | fp::bits(detail::decode_finite_magnitude<5, 2>(code)));
}

}  // namespace shardplan::kernels
