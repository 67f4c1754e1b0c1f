// Per-element random values keyed on the global element index: one Philox call per element, so
// any shard generated alone equals the same slice of the whole tensor generated at once.
//   Uint4x32 r = element_random_bits(seed, tensor_key, global_index);
//   float u = uniform01_f32(r);  float z = standard_normal_f32(r);
#pragma once

#include <cstdint>

#include "kernels/det_math.h"
#include "kernels/fp_ops.h"
#include "kernels/host_device.h"
#include "kernels/philox.h"
#include "kernels/splitmix64.h"

// Note [Element random bits]
// counter = {lo32(index), hi32(index), lo32(tensor_key), hi32(tensor_key)}, key = {lo32(seed),
// hi32(seed)}. Distinct (tensor, element) pairs never share a counter, so streams of different
// tensors are disjoint rather than merely unlikely to overlap; the seed selects the permutation.
// Each element uses its own 128-bit block and nothing else, so no element's value depends on how
// many elements precede it in a shard.
//
// Note [Uniform and normal rules]
// Targets of float64 compute in double; every other floating target (float32, float16, bfloat16,
// fp8, complex64 parts) computes in float, then rounds to its storage format (as PyTorch does:
// its fills for half types compute in float).
//  * uniform01 float:  (w0 >> 8) * 2^-24                        in [0, 1), 24 random bits
//  * uniform01 double: (((w0 << 32) | w1) >> 11) * 2^-53       in [0, 1), 53 random bits
//  * uniform(low, high) = fma(high - low, u, low): [low, high) before rounding; rounding to
//    bf16/fp16/fp8 (or a float sum that rounds up) can yield high, as in PyTorch.
//  * normal: Box-Muller, one of its two outputs. float: u1 = ((w0 >> 8) + 1) * 2^-24 in (0, 1],
//    angle n = w1 >> 8 turns / 2^24; double: u1 = ((((w0 << 32) | w1) >> 11) + 1) * 2^-53,
//    angle n = ((w2 << 32) | w3) >> 11 turns / 2^53. z = sqrt(-2 log u1) cos(2 pi n / 2^bits),
//    value = fma(std, z, mean). u1 > 0 keeps log finite; |z| is therefore at most 5.77 (float)
//    or 8.57 (double), a truncation of probability ~8e-9 (float) beyond the bound.
// Why Box-Muller and not an inverse CDF: one log, one sqrt and one cos, all on integers that make
// the range reduction exact (Note [Polynomial log and cos]); an inverse normal CDF needs a rational
// approximation with a tail branch and a log too, and is no more exact.
//
// Note [Truncated normal by per-element rejection]
// Attempt r draws the normal value of the same element with the seed seed_r = seed for r = 0 and
// seed ^ splitmix64(r) after; the first value inside [low, high] (compared in the compute
// precision) is kept. Rejection is reproducible here because every attempt is keyed on the
// element's own global index: no element's draws depend on another element, unlike rejection from
// one sequential stream. Attempt 0 is the plain normal fill, so bounds that reject nothing give
// exactly the normal fill. PyTorch's trunc_normal_ instead maps a uniform through erfinv; that
// needs erf and erfinv reproduced bit for bit, and loses tail accuracy in float. After
// kTruncatedNormalMaxAttempts rejections the last draw is clamped; check_fill_spec demands an
// acceptance of at least 0.2, so that happens with probability below 0.8^256 = 1.5e-25 per element.
// Expected attempts: 1 / acceptance (1.05 for +-2 std). Narrow storage (bf16, fp8) rounds after the
// bound check, so a stored value may round to just outside a bound that is not representable, as
// with clamp_.

namespace shardplan::kernels {

SHARDPLAN_HD SHARDPLAN_INLINE Uint4x32 element_random_bits(uint64_t seed, uint64_t tensor_key,
                                                           uint64_t index) {
  return philox4x32_10(
      Uint4x32{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                static_cast<uint32_t>(tensor_key), static_cast<uint32_t>(tensor_key >> 32)}},
      Uint2x32{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
}

SHARDPLAN_HD SHARDPLAN_INLINE uint64_t join64(uint32_t hi, uint32_t lo) {
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

SHARDPLAN_HD SHARDPLAN_INLINE float uniform01_f32(Uint4x32 r) {
  return static_cast<float>(r.x[0] >> 8) * 0x1p-24f;  // exact
}

SHARDPLAN_HD SHARDPLAN_INLINE double uniform01_f64(Uint4x32 r) {
  return static_cast<double>(join64(r.x[0], r.x[1]) >> 11) * 0x1p-53;  // exact
}

// width = high - low, computed once by the caller.
SHARDPLAN_HD SHARDPLAN_INLINE float uniform_f32(Uint4x32 r, float low, float width) {
  return fp::fma(width, uniform01_f32(r), low);
}

SHARDPLAN_HD SHARDPLAN_INLINE double uniform_f64(Uint4x32 r, double low, double width) {
  return fp::fma(width, uniform01_f64(r), low);
}

SHARDPLAN_HD SHARDPLAN_INLINE float standard_normal_f32(Uint4x32 r) {
  const float log_u1 = det::log_scaled_f32((r.x[0] >> 8) + 1u, -24);
  const float radius = fp::sqrt(-2.0f * log_u1);  // exact scaling by -2
  return radius * det::cos_turns_f32(r.x[1] >> 8);
}

SHARDPLAN_HD SHARDPLAN_INLINE double standard_normal_f64(Uint4x32 r) {
  const double log_u1 = det::log_scaled_f64((join64(r.x[0], r.x[1]) >> 11) + 1u, -53);
  const double radius = fp::sqrt(-2.0 * log_u1);
  return radius * det::cos_turns_f64(join64(r.x[2], r.x[3]) >> 11);
}

SHARDPLAN_HD SHARDPLAN_INLINE float normal_f32(Uint4x32 r, float mean, float std) {
  return fp::fma(std, standard_normal_f32(r), mean);
}

SHARDPLAN_HD SHARDPLAN_INLINE double normal_f64(Uint4x32 r, double mean, double std) {
  return fp::fma(std, standard_normal_f64(r), mean);
}

inline constexpr int kTruncatedNormalMaxAttempts = 256;

SHARDPLAN_HD SHARDPLAN_INLINE constexpr uint64_t truncated_normal_attempt_seed(uint64_t seed,
                                                                               int attempt) {
  return attempt == 0 ? seed : seed ^ splitmix64(static_cast<uint64_t>(attempt));
}

SHARDPLAN_HD SHARDPLAN_INLINE float truncated_normal_f32(uint64_t seed, uint64_t tensor_key,
                                                         uint64_t index, float mean, float std,
                                                         float low, float high) {
  float value = mean;
  for (int attempt = 0; attempt < kTruncatedNormalMaxAttempts; ++attempt) {
    const uint64_t attempt_seed = truncated_normal_attempt_seed(seed, attempt);
    value = normal_f32(element_random_bits(attempt_seed, tensor_key, index), mean, std);
    if (value >= low && value <= high) return value;
  }
  return value < low ? low : high;
}

SHARDPLAN_HD SHARDPLAN_INLINE double truncated_normal_f64(uint64_t seed, uint64_t tensor_key,
                                                          uint64_t index, double mean, double std,
                                                          double low, double high) {
  double value = mean;
  for (int attempt = 0; attempt < kTruncatedNormalMaxAttempts; ++attempt) {
    const uint64_t attempt_seed = truncated_normal_attempt_seed(seed, attempt);
    value = normal_f64(element_random_bits(attempt_seed, tensor_key, index), mean, std);
    if (value >= low && value <= high) return value;
  }
  return value < low ? low : high;
}

}  // namespace shardplan::kernels
