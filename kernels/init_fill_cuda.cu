// CUDA fill: one thread per local element in a grid-stride loop, each decomposing its local linear
// index into the multi-index and calling the shared fill_one. Compile without --use_fast_math
// (Note [Bit-exact floating point on CPU and CUDA]); --fmad does not matter.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>

#include "kernels/fill_element.h"
#include "kernels/init_fill_cuda.h"
#include "kernels/internal/check.h"
#include "kernels/internal/cuda_check.h"
#include "kernels/internal/dispatch.h"
#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {
namespace {

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill any current GPU several times over; the grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 8192;

// Local linear index -> (buffer offset, global index), last dimension fastest, as the CPU walk.
template <ElementType T>
__global__ void fill_kernel(char* dst, internal::CompactRegion region, FillParams params) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t local = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       local < region.numel; local += stride) {
    int64_t rest = local;
    int64_t dst_offset = 0;
    int64_t global_index = region.global_offset;
    for (int k = region.ndim - 1; k >= 0; --k) {
      const int64_t i = rest % region.sizes[k];
      rest /= region.sizes[k];
      dst_offset += i * region.dst_strides[k];
      global_index += i * region.global_strides[k];
    }
    fill_one<T>(dst + dst_offset * static_cast<int64_t>(element_size(T)), params,
                static_cast<uint64_t>(global_index));
  }
}

}  // namespace

void fill_cuda(void* dst_device, ElementType type, const FillRegion& region, const FillSpec& spec,
               void* cuda_stream) {
  const std::optional<std::string> error = check_fill_spec(type, spec);
  SHARDPLAN_KERNELS_CHECK(!error, error->c_str());
  const internal::CompactRegion compact = internal::compact_region(region);
  if (compact.numel == 0) return;
  const FillParams params = make_fill_params(type, spec);
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>((compact.numel + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks));
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
  char* dst = static_cast<char*>(dst_device);
  internal::dispatch_element_type(type, [&](auto tag) {
    fill_kernel<decltype(tag)::value>
        <<<blocks, kThreadsPerBlock, 0, stream>>>(dst, compact, params);
  });
  SHARDPLAN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace shardplan::kernels
