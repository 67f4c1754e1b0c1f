// The few floating-point operations kernels/ relies on to give the same bits on a CPU and a GPU:
// bit casts and correctly rounded fma, div and sqrt.
//   float y = fp::fma(a, b, c);   // a*b+c rounded once, on every host and device
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

// Note [Bit-exact floating point on CPU and CUDA]
// IEEE 754 fixes the result of +, -, *, /, sqrt and fma (round to nearest even) but not of log,
// cos or sin: glibc and CUDA's libdevice may differ by an ulp. So the random fills use only the
// fixed operations; log and cos are our own polynomials (kernels/det_math.h). Two more things can
// change bits and are ruled out here:
//  * Contraction: a compiler may fuse `a * b + c` into one fma (nvcc does by default, --fmad=true;
//    GCC does with -ffp-contract=fast whenever the target has FMA, e.g. -march=native or aarch64),
//    which rounds once instead of twice. Our rule: every product that feeds a sum is written as
//    fp::fma(). A product that only feeds another product, a sqrt or a store cannot be contracted.
//    So the results do not depend on --fmad or -ffp-contract. Checked: FillStreams.StreamsArePinned
//    (tests/kernels/random_fill_test.cpp) pins the bits and passes with GCC and Clang at -O0, -O2
//    and -O3 -march=native -ffp-contract=fast; nvcc emits the same instruction mix (no extra fma)
//    with --fmad=true and --fmad=false.
//  * Device flags: --use_fast_math turns on approximate division and sqrt and flushes subnormals.
//    On the device we call the explicitly rounded intrinsics (__fdiv_rn, __fsqrt_rn, __fmaf_rn,
//    and double forms), which ignore -prec-div/-prec-sqrt; flush-to-zero still cannot be undone,
//    so kernels/*.cu must not be built with --use_fast_math or -ftz=true.
// On the host std::fma is exact everywhere: glibc uses the FMA instruction when the CPU has one
// (runtime dispatch) and a correctly rounded software routine otherwise, only slower.
// x86-64 evaluates float in float (FLT_EVAL_METHOD 0); 32-bit x87 builds are not supported.

namespace shardplan::kernels::fp {

SHARDPLAN_HD SHARDPLAN_INLINE uint32_t bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE uint64_t bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  return std::bit_cast<uint64_t>(d);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float float_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE double double_from_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  return std::bit_cast<double>(u);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE double fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

SHARDPLAN_HD SHARDPLAN_INLINE double sqrt(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace shardplan::kernels::fp
