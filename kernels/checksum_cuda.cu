// CUDA checksum: per-thread wrapping sums, a warp shuffle reduction, one 64-bit atomicAdd per warp.
// Integer adds mod 2^64 commute, so the result is independent of scheduling and equals the CPU's.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "kernels/checksum.h"
#include "kernels/checksum_cuda.h"
#include "kernels/internal/cuda_check.h"
#include "kernels/internal/device_word.h"
#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 4096;

__global__ void checksum_kernel(const unsigned char* data, internal::CompactRegion region,
                                int element_bytes, unsigned long long* out) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  uint64_t sum = 0;
  for (int64_t local = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       local < region.numel; local += stride) {
    int64_t rest = local;
    int64_t offset = 0;
    int64_t global_index = region.global_offset;
    for (int k = region.ndim - 1; k >= 0; --k) {
      const int64_t i = rest % region.sizes[k];
      rest /= region.sizes[k];
      offset += i * region.dst_strides[k];
      global_index += i * region.global_strides[k];
    }
    const unsigned char* p = data + offset * element_bytes;
    uint64_t bits = 0;
    for (int b = 0; b < element_bytes; ++b) bits |= static_cast<uint64_t>(p[b]) << (8 * b);
    sum += mix64(static_cast<uint64_t>(global_index), bits);
  }
  for (int delta = 16; delta > 0; delta /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, delta);
  if ((threadIdx.x & 31u) == 0) atomicAdd(out, static_cast<unsigned long long>(sum));
}

}  // namespace

uint64_t checksum_cuda(const void* data_device, ElementType type, const FillRegion& region,
                       void* cuda_stream) {
  const internal::CompactRegion compact = internal::compact_region(region);
  if (compact.numel == 0) return 0;
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
  internal::DeviceWord sum;
  SHARDPLAN_CUDA_CHECK(cudaMemsetAsync(sum.get(), 0, sizeof(unsigned long long), stream));
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>((compact.numel + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks));
  checksum_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(
      static_cast<const unsigned char*>(data_device), compact, static_cast<int>(element_size(type)),
      sum.get());
  SHARDPLAN_CUDA_CHECK(cudaGetLastError());
  unsigned long long host = 0;
  SHARDPLAN_CUDA_CHECK(
      cudaMemcpyAsync(&host, sum.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
  SHARDPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<uint64_t>(host);
}

}  // namespace shardplan::kernels
