// The CUDA twins of kernels/region_copy.h, and a device byte comparison: what `materialize
// --verify` needs to assemble a gathered tensor and compare it with the reference where the
// shards live, without copying either to the host (docs/launching.md "Verification"). Defined
// only when the build has CUDA (SHARDPLAN_HAVE_CUDA=1). Both run on `cuda_stream` (a cudaStream_t;
// nullptr = the legacy default stream), wait for it, and throw std::runtime_error on a CUDA error.
//   scatter_region_cuda(shard_device, whole_device, 2, region, nullptr);
//   int64_t at = first_difference_cuda(whole_device, reference_device, bytes, nullptr);
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/region.h"

namespace shardplan::kernels {

// scatter_region_cpu on device memory: the same element lands at the same place.
void scatter_region_cuda(const void* local_device, void* whole_device, size_t element_bytes,
                         const FillRegion& region, void* cuda_stream);

// The offset of the first byte at which the two device buffers differ, -1 when they are equal.
int64_t first_difference_cuda(const void* a_device, const void* b_device, size_t bytes,
                              void* cuda_stream);

}  // namespace shardplan::kernels
