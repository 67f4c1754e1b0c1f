#include "kernels/region_copy.h"

#include <cstring>

#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {

void scatter_region_cpu(const void* local, void* whole, size_t element_bytes,
                        const FillRegion& region) {
  const internal::CompactRegion r = internal::compact_region(region);
  const auto* from = static_cast<const unsigned char*>(local);
  auto* to = static_cast<unsigned char*>(whole);
  internal::for_each_run(r, 0, r.numel, [&](int64_t dst, int64_t global, int64_t count) {
    const int64_t ds = r.ndim == 0 ? 1 : r.dst_strides[r.ndim - 1];
    const int64_t gs = r.ndim == 0 ? 1 : r.global_strides[r.ndim - 1];
    if (ds == 1 && gs == 1) {
      std::memcpy(to + static_cast<size_t>(global) * element_bytes,
                  from + static_cast<size_t>(dst) * element_bytes,
                  static_cast<size_t>(count) * element_bytes);
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(to + static_cast<size_t>(global + i * gs) * element_bytes,
                  from + static_cast<size_t>(dst + i * ds) * element_bytes, element_bytes);
    }
  });
}

}  // namespace shardplan::kernels
