// Assembling a whole tensor from a shard: the box `region` of a local buffer copied to where its
// elements live in the whole (row-major) tensor. `materialize --verify` gathers each small
// tensor's shards and places them so (docs/launching.md "Verification"); the CUDA twin is in
// kernels/region_copy_cuda.h.
//   scatter_region_cpu(shard_bytes, whole_bytes, /*element_bytes=*/2, region);
#pragma once

#include <cstddef>

#include "kernels/region.h"

namespace shardplan::kernels {

// The element with local multi-index i moves from local + (sum i_k dst_strides[k]) * element_bytes
// to whole + (global_offset + sum i_k global_strides[k]) * element_bytes. Both buffers are host
// memory; element_bytes is 1, 2, 4 or 8 (any size works, copied byte by byte).
void scatter_region_cpu(const void* local, void* whole, size_t element_bytes,
                        const FillRegion& region);

}  // namespace shardplan::kernels
