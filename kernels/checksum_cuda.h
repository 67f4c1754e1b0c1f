// The CUDA twin of checksum_cpu: same sum of mix64(global index, element bits), computed where the
// shard lives, so verifying a GPU materialisation needs no copy to the host. Defined only when the
// build has CUDA (SHARDPLAN_HAVE_CUDA=1).
//   uint64_t mine = checksum_cuda(param_device_ptr, ElementType::kBFloat16, region, stream);
#pragma once

#include <cstdint>

#include "kernels/element_type.h"
#include "kernels/region.h"

namespace shardplan::kernels {

// Runs on `cuda_stream` (a cudaStream_t; nullptr = legacy default stream) and waits for it. The
// result equals checksum_cpu of the same bytes: a wrapping sum is associative and commutative,
// so the atomics' order does not matter. Throws std::runtime_error on a CUDA error.
uint64_t checksum_cuda(const void* data_device, ElementType type, const FillRegion& region,
                       void* cuda_stream);

}  // namespace shardplan::kernels
