// splitmix64's output step: a fast, well-mixed bijection on 64-bit integers. Used to spread
// checksum terms and to derive the retry keys of the truncated normal.
//   uint64_t h = splitmix64(x);   // splitmix64(0) == 0xE220A8397B1DCDAF
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace shardplan::kernels {

// Vigna's splitmix64 output function (the golden-ratio increment, then the "mix13"-style finaliser
// with constants 0xBF58476D1CE4E5B9 and 0x94D049BB133111EB), public domain, prng.di.unimi.it.
SHARDPLAN_HD SHARDPLAN_INLINE constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15u;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

}  // namespace shardplan::kernels
