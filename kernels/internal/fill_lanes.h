// Branch-free twins of the float fill's per-element steps, written so that a loop over elements
// ("lanes") vectorizes: Philox with its rounds unrolled, log and cos with selects instead of
// branches, and bfloat16 rounding with one formula. Each performs the same IEEE operations in the
// same order as the scalar reference (fill_one, kernels/fill_element.h), so it gives the same bits
// (Note [Fast fill lanes]). Used by the CPU fast path only (kernels/init_fill_simd.cpp):
//   PhiloxOut w = lanes::philox(lo32(index / 4), hi32(index / 4), key_lo, key_hi, seed_lo,
//   seed_hi); float v = lanes::normal_f32(pair_radius_word(w, j), pair_angle_word(w, j), j & 1,
//   mean, std);
#pragma once

#include <cstdint>

#include "kernels/det_math.h"
#include "kernels/fill_element.h"
#include "kernels/fp_ops.h"
#include "kernels/philox.h"

// Note [Fast fill lanes]
// The CPU fast path computes 8 or 16 elements at once in vector registers. It must give the bits of
// fill_one, which stays the reference (CUDA runs it, and materialization's --verify recomputes
// sampled elements with it). Every step below is the scalar step with a branch replaced by a
// select of values both sides already computed, which changes nothing:
//  * Philox: the same rounds; the 32x32->64 products are uint64 products, which the vectorizer
//    maps to vpmuludq.
//  * log_scaled_f32: m <= 2^24 is converted through int32 (exact either way; x86 has a vector
//    int32->float conversion but no uint32 one before AVX-512). Both candidate mantissas s in
//    [1, 2) and [0.707, 1) are built from the same bits and one is selected by the same compare.
//  * cos_turns_f32 / sin_turns_f32 (turns_f32): the quadrant is centred by a select on r and moved
//    by 3 for sin; by_quadrant's switch becomes "take sin for odd q, negate for q = 1, 2 (mod 4)",
//    the same values it returns case by case (selected and negated on the bits: negation is
//    exactly a flip of the sign bit).
//  * the group's words: on a contiguous run each lane is one group (Note [Group lanes]): it runs
//    the group's Philox block once and computes its four values, a normal pair's log and sqrt
//    once for both (normal_pair_f32) and the cos and sin from one reduction (cos_sin_turns_f32),
//    as fill_group does on the GPU. Strided runs keep one element per lane: each lane runs its
//    group's block itself and selects its words.
//  * bfloat16: round_magnitude_rne<8, 7> has a branch for targets' subnormals. bf16 has float's
//    exponent range, so a float subnormal (exponent field 0) is a bf16 subnormal with the same
//    scale, and the normal branch's formula (a + 0x7FFF + bit 16 of a) >> 16 rounds its mantissa
//    to nearest even exactly as the subnormal branch does (shift 16, halfway 0x8000). NaN is
//    handled as in float_to_bf16_bits.
// The float operations are +, -, *, /, sqrt and fma (fp::fma, a vector fma on AVX2 and AVX-512):
// correctly rounded in every lane, and no product is left for the compiler to contract (Note
// [Bit-exact floating point on CPU and CUDA] in kernels/fp_ops.h). tests/kernels/
// fill_fast_path_test.cpp compares these with det:: on every input and the fast fill with fill_one.

// Forced inline: the lanes must melt into the caller's vector loop, whose target attribute
// (AVX2 or AVX-512) they then compile under; a call in the loop body would stop vectorization.
#define SHARDPLAN_LANE inline __attribute__((always_inline))

namespace shardplan::kernels::lanes {

// The four output words of philox4x32_10 for counter {lo, hi, key_lo, key_hi} and key {k0, k1}.
struct PhiloxOut {
  uint32_t w0, w1, w2, w3;
};

SHARDPLAN_LANE PhiloxOut philox(uint32_t lo, uint32_t hi, uint32_t key_lo, uint32_t key_hi,
                                uint32_t k0, uint32_t k1) {
  uint32_t c0 = lo, c1 = hi, c2 = key_lo, c3 = key_hi;
#pragma GCC unroll 10
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(p1);
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(p0);
    k0 += kPhiloxW0;  // the bump after the last round is unused
    k1 += kPhiloxW1;
  }
  return PhiloxOut{c0, c1, c2, c3};
}

// det::log_scaled_f32(m, pow2), branch-free.
SHARDPLAN_LANE float log_scaled_f32(uint32_t m, int pow2) {
  const uint32_t b = fp::bits(static_cast<float>(static_cast<int32_t>(m)));
  const uint32_t mantissa = b & 0x7FFFFFu;
  const float s_high = fp::float_from_bits(mantissa | 0x3F800000u);  // [1, 2)
  const bool above_sqrt2 = s_high > 0x1.6a09e6p+0f;
  const float s = above_sqrt2 ? fp::float_from_bits(mantissa | 0x3F000000u) : s_high;
  const int e = static_cast<int>(b >> 23) - 127 + (above_sqrt2 ? 1 : 0);
  return det::log_reduced_f32(s, e, pow2);
}

// det::cos_turns_f32(n) for quarter_shift 0, det::sin_turns_f32(n) for 3: branch-free.
SHARDPLAN_LANE float turns_f32(uint32_t n, uint32_t quarter_shift) {
  const int32_t r_low = static_cast<int32_t>(n & 0x3FFFFFu);
  const bool centre = r_low >= 0x200000;
  const int32_t r = centre ? r_low - 0x400000 : r_low;
  const uint32_t q = (n >> 22) + (centre ? 1u : 0u) + quarter_shift;
  const float f = static_cast<float>(r) * 0x1p-22f;
  const float f2 = f * f;
  const float cos_f = det::detail::cos_quarter_f32(f2);
  const float sin_f = det::detail::sin_quarter_f32(f, f2);
  // Selected on the bits: a float ?: lets GCC move sin's product into a branch, and on AVX2 (no
  // masked float ops) a product that could trap there stops if-conversion and vectorization.
  const uint32_t take_sin = 0u - (q & 1u);
  const uint32_t v = (fp::bits(sin_f) & take_sin) | (fp::bits(cos_f) & ~take_sin);
  const uint32_t negate = ((q + 1u) & 2u) << 30;  // sign bit: -x flips exactly that bit
  return fp::float_from_bits(v ^ negate);
}

SHARDPLAN_LANE float cos_turns_f32(uint32_t n) { return turns_f32(n, 0u); }

// turns_f32(n, 0) and turns_f32(n, 3) at once: the reduction and both polynomials are shared, as
// each call computes them from n alone.
SHARDPLAN_LANE void cos_sin_turns_f32(uint32_t n, float* cos_out, float* sin_out) {
  const int32_t r_low = static_cast<int32_t>(n & 0x3FFFFFu);
  const bool centre = r_low >= 0x200000;
  const int32_t r = centre ? r_low - 0x400000 : r_low;
  const uint32_t q = (n >> 22) + (centre ? 1u : 0u);
  const float f = static_cast<float>(r) * 0x1p-22f;
  const float f2 = f * f;
  const uint32_t cos_bits = fp::bits(det::detail::cos_quarter_f32(f2));
  const uint32_t sin_bits = fp::bits(det::detail::sin_quarter_f32(f, f2));
  const auto pick = [&](uint32_t quadrant) {
    const uint32_t take_sin = 0u - (quadrant & 1u);
    const uint32_t v = (sin_bits & take_sin) | (cos_bits & ~take_sin);
    return fp::float_from_bits(v ^ (((quadrant + 1u) & 2u) << 30));
  };
  *cos_out = pick(q);
  *sin_out = pick(q + 3u);
}

// The Box-Muller pair of one group (lanes 2p and 2p + 1, Note [Element random bits]) from its
// radius and angle words: one log and one sqrt for both, the cos to the even lane and the sin to
// the odd one, each the value normal_f32 gives that lane.
SHARDPLAN_LANE void normal_pair_f32(uint32_t w_radius, uint32_t w_angle, float mean, float std,
                                    float* even, float* odd) {
  const float log_u1 = log_scaled_f32((w_radius >> 8) + 1u, -24);
  const float radius = fp::sqrt(-2.0f * log_u1);
  float c = 0.0f, s = 0.0f;
  cos_sin_turns_f32(w_angle >> 8, &c, &s);
  *even = fp::fma(std, radius * c, mean);
  *odd = fp::fma(std, radius * s, mean);
}

// The words of the group's block that lane j = index mod 4 reads (Note [Element random bits]):
// its own word for uniform, its Box-Muller pair's radius and angle words for normal.
SHARDPLAN_LANE uint32_t lane_word(const PhiloxOut& w, uint32_t j) {
  const uint32_t low = (j & 1u) != 0 ? w.w1 : w.w0;
  const uint32_t high = (j & 1u) != 0 ? w.w3 : w.w2;
  return (j & 2u) != 0 ? high : low;
}

SHARDPLAN_LANE uint32_t pair_radius_word(const PhiloxOut& w, uint32_t j) {
  return (j & 2u) != 0 ? w.w2 : w.w0;
}

SHARDPLAN_LANE uint32_t pair_angle_word(const PhiloxOut& w, uint32_t j) {
  return (j & 2u) != 0 ? w.w3 : w.w1;
}

// normal_f32(group bits, lane, mean, std) from the pair's words; `odd`: the lane takes sin.
SHARDPLAN_LANE float normal_f32(uint32_t w_radius, uint32_t w_angle, uint32_t odd, float mean,
                                float std) {
  const float log_u1 = log_scaled_f32((w_radius >> 8) + 1u, -24);
  const float radius = fp::sqrt(-2.0f * log_u1);
  return fp::fma(std, radius * turns_f32(w_angle >> 8, 3u & (0u - (odd & 1u))), mean);
}

// uniform_f32(group bits, lane, low, width) from the lane's word.
SHARDPLAN_LANE float uniform_f32(uint32_t w0, float low, float width) {
  return fp::fma(width, static_cast<float>(static_cast<int32_t>(w0 >> 8)) * 0x1p-24f, low);
}

// float_to_bf16_bits(f), branch-free (convert.h's formula).
SHARDPLAN_LANE uint16_t float_to_bf16_bits(float f) {
  return kernels::float_to_bf16_bits_branch_free(f);
}

}  // namespace shardplan::kernels::lanes
