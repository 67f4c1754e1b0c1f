// Random values keyed on the global element index. One Philox call gives 128 bits to a group of
// consecutive elements (4 of a float-compute fill, 2 of a float64 or integer one); each element
// takes its own words of its group's block, so any shard generated alone equals the same slice of
// the whole tensor generated at once.
//   Uint4x32 r = group_random_bits(seed, tensor_key, index / kFloatGroup);
//   float u = uniform01_f32(r, index % kFloatGroup);  float z = standard_normal_f32(r, index % 4);
#pragma once

#include <cstdint>

#include "kernels/det_math.h"
#include "kernels/fp_ops.h"
#include "kernels/host_device.h"
#include "kernels/philox.h"
#include "kernels/splitmix64.h"

// Note [Element random bits]
// Element i of a float-compute fill (float32, float16, bfloat16, fp8, complex64 parts) belongs to
// group g = i / 4 and is its lane j = i mod 4; float64 and integer fills, which take 64 bits per
// value, group by 2 (g = i / 2, j = i mod 2). A group's bits are philox4x32_10 with
// counter = {lo32(g), hi32(g), lo32(tensor_key), hi32(tensor_key)}, key = {lo32(seed),
// hi32(seed)}. Distinct groups of a tensor never share a counter and the lanes of a group take
// distinct words, so streams of different elements and tensors are disjoint rather than merely
// unlikely to overlap; the seed selects the permutation. An element's value is still a function
// of (seed, tensor key, its own global index) alone: a shard whose edge cuts a group computes
// that group's block and keeps its own lanes, as the neighbouring shard keeps the others.
// Why groups: Philox is most of a uniform value's arithmetic, and Box-Muller turns two uniforms
// into two normals (cos and sin of one angle, one log, one sqrt). Sharing both cuts the CUDA
// fill's arithmetic per element about threefold, which is what lets it run at the GPU's memory
// rate (docs/architecture.md §4.7). PyTorch's CUDA generator also draws four values per Philox
// call (curand_uniform4, curand_normal4).
//
// Note [Uniform and normal rules]
// Targets of float64 compute in double; every other floating target (float32, float16, bfloat16,
// fp8, complex64 parts) computes in float, then rounds to its storage format (as PyTorch does:
// its fills for half types compute in float). w0..w3 are the group's words, j the lane.
//  * uniform01 float:  (w_j >> 8) * 2^-24                               in [0, 1), 24 random bits
//  * uniform01 double: (((w_2j << 32) | w_2j+1) >> 11) * 2^-53          in [0, 1), 53 random bits
//  * uniform(low, high) = fma(high - low, u, low): [low, high) before rounding; rounding to
//    bf16/fp16/fp8 (or a float sum that rounds up) can yield high, as in PyTorch.
//  * normal: Box-Muller. float: lanes 2p and 2p + 1 share a pair, u1 = ((w_2p >> 8) + 1) * 2^-24
//    in (0, 1], angle n = w_2p+1 >> 8 turns / 2^24; double: lanes 0 and 1 share u1 =
//    ((((w0 << 32) | w1) >> 11) + 1) * 2^-53 and n = ((w2 << 32) | w3) >> 11 turns / 2^53.
//    r = sqrt(-2 log u1); the even lane is r cos(2 pi n / 2^bits), the odd lane r sin(...) (Note
//    [Polynomial log and cos]: sin is the same reduction, a quadrant on). value = fma(std, z,
//    mean). u1 > 0 keeps log finite; |z| is therefore at most 5.77 (float) or 8.57 (double), a
//    truncation of probability ~8e-9 (float) beyond the bound.
// Why Box-Muller and not an inverse CDF: one log, one sqrt and one cos, all on integers that make
// the range reduction exact (Note [Polynomial log and cos]); an inverse normal CDF needs a rational
// approximation with a tail branch and a log too, and is no more exact.
//
// Note [Truncated normal by per-element rejection]
// Attempt r draws the normal value of the same element with the seed seed_r = seed for r = 0 and
// seed ^ splitmix64(r) after; the first value inside [low, high] (compared in the compute
// precision) is kept. Rejection is reproducible here because every attempt is keyed on the
// element's own global index: no element's draws depend on another element's acceptance, unlike
// rejection from one sequential stream (an element that retries recomputes its group's block
// under seed_r and keeps its own lane). Attempt 0 is the plain normal fill, so bounds that reject
// nothing give exactly the normal fill. PyTorch's trunc_normal_ instead maps a uniform through
// erfinv; that needs erf and erfinv reproduced bit for bit, and loses tail accuracy in float. After
// kTruncatedNormalMaxAttempts rejections the last draw is clamped; check_fill_spec demands an
// acceptance of at least 0.2, so that happens with probability below 0.8^256 = 1.5e-25 per element.
// Expected attempts: 1 / acceptance (1.05 for +-2 std). Narrow storage (bf16, fp8) rounds after the
// bound check, so a stored value may round to just outside a bound that is not representable, as
// with clamp_.

namespace shardplan::kernels {

// Elements per Philox block (Note [Element random bits]).
inline constexpr uint64_t kFloatGroup = 4;
inline constexpr uint64_t kWideGroup = 2;

SHARDPLAN_HD SHARDPLAN_INLINE Uint4x32 group_random_bits(uint64_t seed, uint64_t tensor_key,
                                                         uint64_t group) {
  return philox4x32_10(
      Uint4x32{{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                static_cast<uint32_t>(tensor_key), static_cast<uint32_t>(tensor_key >> 32)}},
      Uint2x32{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
}

SHARDPLAN_HD SHARDPLAN_INLINE uint64_t join64(uint32_t hi, uint32_t lo) {
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// The 64 random bits of lane `lane` (0 or 1) of a wide group.
SHARDPLAN_HD SHARDPLAN_INLINE uint64_t wide_lane_bits(Uint4x32 r, unsigned lane) {
  return join64(r.x[2 * lane], r.x[2 * lane + 1]);
}

SHARDPLAN_HD SHARDPLAN_INLINE float uniform01_f32(Uint4x32 r, unsigned lane) {
  return static_cast<float>(r.x[lane] >> 8) * 0x1p-24f;  // exact
}

SHARDPLAN_HD SHARDPLAN_INLINE double uniform01_f64(Uint4x32 r, unsigned lane) {
  return static_cast<double>(wide_lane_bits(r, lane) >> 11) * 0x1p-53;  // exact
}

// width = high - low, computed once by the caller.
SHARDPLAN_HD SHARDPLAN_INLINE float uniform_f32(Uint4x32 r, unsigned lane, float low, float width) {
  return fp::fma(width, uniform01_f32(r, lane), low);
}

SHARDPLAN_HD SHARDPLAN_INLINE double uniform_f64(Uint4x32 r, unsigned lane, double low,
                                                 double width) {
  return fp::fma(width, uniform01_f64(r, lane), low);
}

// sqrt(-2 log u1) of a float Box-Muller pair from its radius word.
SHARDPLAN_HD SHARDPLAN_INLINE float box_muller_radius_f32(uint32_t w_radius) {
  const float log_u1 = det::log_scaled_f32((w_radius >> 8) + 1u, -24);
  return fp::sqrt(-2.0f * log_u1);  // exact scaling by -2
}

SHARDPLAN_HD SHARDPLAN_INLINE double box_muller_radius_f64(uint64_t bits) {
  const double log_u1 = det::log_scaled_f64((bits >> 11) + 1u, -53);
  return fp::sqrt(-2.0 * log_u1);
}

// Both normals of the float pair (w_radius, w_angle): {cos side, sin side}, each bit for bit
// standard_normal_f32's value for its lane.
struct NormalPairF32 {
  float even;
  float odd;
};

SHARDPLAN_HD SHARDPLAN_INLINE NormalPairF32 standard_normal_pair_f32(uint32_t w_radius,
                                                                     uint32_t w_angle) {
  const float radius = box_muller_radius_f32(w_radius);
  const det::TurnsF32 t = det::reduce_turns_f32(w_angle >> 8);
  return NormalPairF32{radius * det::detail::by_quadrant(t.q, t.cos_f, t.sin_f),
                       radius * det::detail::by_quadrant(t.q + 3u, t.cos_f, t.sin_f)};
}

SHARDPLAN_HD SHARDPLAN_INLINE float standard_normal_f32(Uint4x32 r, unsigned lane) {
  const unsigned pair = lane >> 1;
  const float radius = box_muller_radius_f32(r.x[2 * pair]);
  const uint32_t angle = r.x[2 * pair + 1] >> 8;
  return radius * ((lane & 1u) != 0 ? det::sin_turns_f32(angle) : det::cos_turns_f32(angle));
}

SHARDPLAN_HD SHARDPLAN_INLINE double standard_normal_f64(Uint4x32 r, unsigned lane) {
  const double radius = box_muller_radius_f64(join64(r.x[0], r.x[1]));
  const uint64_t angle = join64(r.x[2], r.x[3]) >> 11;
  return radius * ((lane & 1u) != 0 ? det::sin_turns_f64(angle) : det::cos_turns_f64(angle));
}

SHARDPLAN_HD SHARDPLAN_INLINE float normal_f32(Uint4x32 r, unsigned lane, float mean, float std) {
  return fp::fma(std, standard_normal_f32(r, lane), mean);
}

SHARDPLAN_HD SHARDPLAN_INLINE double normal_f64(Uint4x32 r, unsigned lane, double mean,
                                                double std) {
  return fp::fma(std, standard_normal_f64(r, lane), mean);
}

inline constexpr int kTruncatedNormalMaxAttempts = 256;

SHARDPLAN_HD SHARDPLAN_INLINE constexpr uint64_t truncated_normal_attempt_seed(uint64_t seed,
                                                                               int attempt) {
  return attempt == 0 ? seed : seed ^ splitmix64(static_cast<uint64_t>(attempt));
}

// Attempts 1 onwards of element `index` of a truncated normal fill whose attempt 0 drew `first`
// outside [low, high] (the group path shares attempt 0's block with the other lanes).
SHARDPLAN_HD SHARDPLAN_INLINE float truncated_normal_retry_f32(float first, uint64_t seed,
                                                               uint64_t tensor_key, uint64_t index,
                                                               float mean, float std, float low,
                                                               float high) {
  float value = first;
  for (int attempt = 1; attempt < kTruncatedNormalMaxAttempts; ++attempt) {
    const uint64_t attempt_seed = truncated_normal_attempt_seed(seed, attempt);
    value = normal_f32(group_random_bits(attempt_seed, tensor_key, index / kFloatGroup),
                       static_cast<unsigned>(index % kFloatGroup), mean, std);
    if (value >= low && value <= high) return value;
  }
  return value < low ? low : high;
}

SHARDPLAN_HD SHARDPLAN_INLINE double truncated_normal_retry_f64(double first, uint64_t seed,
                                                                uint64_t tensor_key, uint64_t index,
                                                                double mean, double std, double low,
                                                                double high) {
  double value = first;
  for (int attempt = 1; attempt < kTruncatedNormalMaxAttempts; ++attempt) {
    const uint64_t attempt_seed = truncated_normal_attempt_seed(seed, attempt);
    value = normal_f64(group_random_bits(attempt_seed, tensor_key, index / kWideGroup),
                       static_cast<unsigned>(index % kWideGroup), mean, std);
    if (value >= low && value <= high) return value;
  }
  return value < low ? low : high;
}

SHARDPLAN_HD SHARDPLAN_INLINE float truncated_normal_f32(uint64_t seed, uint64_t tensor_key,
                                                         uint64_t index, float mean, float std,
                                                         float low, float high) {
  const float first = normal_f32(group_random_bits(seed, tensor_key, index / kFloatGroup),
                                 static_cast<unsigned>(index % kFloatGroup), mean, std);
  if (first >= low && first <= high) return first;
  return truncated_normal_retry_f32(first, seed, tensor_key, index, mean, std, low, high);
}

SHARDPLAN_HD SHARDPLAN_INLINE double truncated_normal_f64(uint64_t seed, uint64_t tensor_key,
                                                          uint64_t index, double mean, double std,
                                                          double low, double high) {
  const double first = normal_f64(group_random_bits(seed, tensor_key, index / kWideGroup),
                                  static_cast<unsigned>(index % kWideGroup), mean, std);
  if (first >= low && first <= high) return first;
  return truncated_normal_retry_f64(first, seed, tensor_key, index, mean, std, low, high);
}

}  // namespace shardplan::kernels
