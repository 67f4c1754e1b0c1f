// Philox4x32-10, the counter-based random number generator of Salmon, Moraes, Dror and Shaw,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC11). The output is a pure function of the
// counter and the key:
//   Uint4x32 r = philox4x32_10({{i_lo, i_hi, tensor_lo, tensor_hi}}, {{seed_lo, seed_hi}});
// No state, so any element can be generated alone, on any rank, CPU or GPU.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace shardplan::kernels {

struct Uint4x32 {
  uint32_t x[4];
  friend constexpr bool operator==(const Uint4x32&, const Uint4x32&) = default;
};

struct Uint2x32 {
  uint32_t x[2];
  friend constexpr bool operator==(const Uint2x32&, const Uint2x32&) = default;
};

// Round multipliers and Weyl key increments from the paper (Section 4.2; the same values as
// Random123's PHILOX_M4x32_0/1 and PHILOX_W32_0/1). The increments are the golden ratio and
// sqrt(3) - 1 as 32-bit fractions.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

namespace detail {

// One Philox S-box round: two 32x32->64 multiplies; the high halves are xored with the other
// counter words and the round key, the low halves pass through, and the words are permuted.
// On the GPU the halves come from __umulhi and a 32-bit multiply: written as one uint64 product,
// nvcc emitted 64-bit multiplies and xors (PTX mul.lo.s64 / xor.b64), several times the
// instructions of the 32-bit pair. Same values either way.
SHARDPLAN_HD SHARDPLAN_INLINE constexpr Uint4x32 philox_round(Uint4x32 c, Uint2x32 k) {
#if defined(__CUDA_ARCH__)
  const uint32_t hi0 = __umulhi(kPhiloxM0, c.x[0]), lo0 = kPhiloxM0 * c.x[0];
  const uint32_t hi1 = __umulhi(kPhiloxM1, c.x[2]), lo1 = kPhiloxM1 * c.x[2];
#else
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c.x[0];
  const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c.x[2];
  const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
#endif
  return Uint4x32{{hi1 ^ c.x[1] ^ k.x[0], lo1, hi0 ^ c.x[3] ^ k.x[1], lo0}};
}

}  // namespace detail

// Ten rounds; the key is bumped by the Weyl increments between rounds (not before the first).
SHARDPLAN_HD SHARDPLAN_INLINE constexpr Uint4x32 philox4x32_10(Uint4x32 counter, Uint2x32 key) {
  counter = detail::philox_round(counter, key);
  for (int round = 1; round < kPhiloxRounds; ++round) {
    key.x[0] += kPhiloxW0;
    key.x[1] += kPhiloxW1;
    counter = detail::philox_round(counter, key);
  }
  return counter;
}

}  // namespace shardplan::kernels
