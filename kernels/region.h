// A box of a global tensor held in a local buffer: which local element is which global element.
//   int64_t sizes[2] = {3, 4}, dst[2] = {4, 1}, global[2] = {10, 1};
//   FillRegion rows_2_to_4{2, sizes, dst, global, /*global_offset=*/2 * 10 + 5};  // x[2:5, 5:9]
#pragma once

#include <cstdint>

namespace shardplan::kernels {

// The element with local multi-index (i_0 .. i_{n-1}), 0 <= i_k < sizes[k], lives at
// buffer + sum i_k * dst_strides[k] (in elements, not bytes) and has the global linear index
// global_offset + sum i_k * global_strides[k]. For a shard of a row-major global tensor of shape G,
// global_strides are G's contiguous strides and global_offset the linear index of the shard's first
// element; a transposed or otherwise permuted view just permutes sizes and global_strides.
// ndim == 0 is a single element. Preconditions: sizes >= 0; every global index >= 0; distinct local
// indices address distinct buffer elements (for fills). The arrays are borrowed, not owned.
struct FillRegion {
  int ndim;
  const int64_t* sizes;
  const int64_t* dst_strides;
  const int64_t* global_strides;
  int64_t global_offset;
};

}  // namespace shardplan::kernels
