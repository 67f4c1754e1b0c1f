// The CUDA twin of fill_cpu: the same per-element function (kernels/fill_element.h) run by a
// grid-stride kernel, so a GPU shard is bit-for-bit the CPU shard. Defined only when the build has
// CUDA (SHARDPLAN_HAVE_CUDA=1); the declaration is always visible.
//   fill_cuda(param_device_ptr, ElementType::kBFloat16, region, spec, stream);  // asynchronous
#pragma once

#include "kernels/element_type.h"
#include "kernels/init_fill.h"
#include "kernels/region.h"

namespace shardplan::kernels {

// Enqueues the fill of `region` into device memory `dst_device` on `cuda_stream` (a cudaStream_t;
// nullptr is the legacy default stream) and returns without waiting. The region's arrays are read
// before returning and may be freed then. `spec` must pass check_fill_spec (else abort, as
// fill_cpu). At most 8 dimensions after size-1 dims are dropped and contiguous runs merged.
// Throws std::runtime_error naming the CUDA call, its error string and file:line on a CUDA error.
void fill_cuda(void* dst_device, ElementType type, const FillRegion& region, const FillSpec& spec,
               void* cuda_stream);

}  // namespace shardplan::kernels
