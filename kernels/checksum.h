// Order-independent checksum of a box of a global tensor: the wrapping sum over elements of
// mix64(global index, raw element bits). Disjoint shards' checksums add up (mod 2^64) to the
// checksum of the whole, so ranks can verify sharded == unsharded without gathering data.
//   uint64_t mine = checksum_cpu(local_data, ElementType::kBFloat16, region);
//   // allreduce-sum `mine` over one replica group, compare with checksum of the reference fill.
#pragma once

#include <cstdint>

#include "kernels/element_type.h"
#include "kernels/host_device.h"
#include "kernels/region.h"
#include "kernels/splitmix64.h"

namespace shardplan::kernels {

// Nonlinear in both arguments, so moving a value to another index, or swapping two values, changes
// the sum (a plain sum of bits would not notice a permutation).
SHARDPLAN_HD SHARDPLAN_INLINE constexpr uint64_t mix64(uint64_t global_index, uint64_t bits) {
  return splitmix64(splitmix64(global_index) ^ bits);
}

// `data` is host memory laid out by region.dst_strides. Element bits are the element's bytes read
// little-endian and zero-extended (complex64: real in the low word), so +0/-0 and NaN payloads
// count.
uint64_t checksum_cpu(const void* data, ElementType type, const FillRegion& region);

}  // namespace shardplan::kernels
