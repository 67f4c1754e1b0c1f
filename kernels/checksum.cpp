// CPU checksum: walk the region, read each element's raw bytes, add mix64(index, bits).
#include "kernels/checksum.h"

#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {

uint64_t checksum_cpu(const void* data, ElementType type, const FillRegion& region) {
  const internal::CompactRegion compact = internal::compact_region(region);
  const auto* base = static_cast<const unsigned char*>(data);
  const std::size_t size = element_size(type);
  uint64_t sum = 0;
  internal::for_each_element(compact, [&](int64_t offset, int64_t global_index) {
    const unsigned char* p = base + offset * static_cast<int64_t>(size);
    uint64_t bits = 0;
    for (std::size_t i = 0; i < size; ++i) bits |= static_cast<uint64_t>(p[i]) << (8 * i);
    sum += mix64(static_cast<uint64_t>(global_index), bits);
  });
  return sum;
}

}  // namespace shardplan::kernels
