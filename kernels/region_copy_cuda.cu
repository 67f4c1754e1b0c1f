// CUDA region scatter (one thread per element, the index decomposed as in the checksum kernel)
// and a first-difference search (grid-stride over 8-byte words; the smallest differing offset
// wins through atomicMin, so the answer does not depend on scheduling).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "kernels/internal/cuda_check.h"
#include "kernels/internal/device_word.h"
#include "kernels/internal/region_walk.h"
#include "kernels/region_copy_cuda.h"

namespace shardplan::kernels {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 4096;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(
      1, std::min<int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks)));
}

__global__ void scatter_kernel(const unsigned char* local, unsigned char* whole,
                               internal::CompactRegion region, int64_t element_bytes) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < region.numel;
       i += stride) {
    int64_t rest = i;
    int64_t from = 0;
    int64_t to = region.global_offset;
    for (int k = region.ndim - 1; k >= 0; --k) {
      const int64_t index = rest % region.sizes[k];
      rest /= region.sizes[k];
      from += index * region.dst_strides[k];
      to += index * region.global_strides[k];
    }
    for (int64_t b = 0; b < element_bytes; ++b) {
      whole[to * element_bytes + b] = local[from * element_bytes + b];
    }
  }
}

// `words` words of 8 bytes (0 when a buffer is not 8-byte aligned), then the rest byte by byte; the
// first differing byte of a differing word is found by comparing its bytes.
__global__ void first_difference_kernel(const unsigned char* a, const unsigned char* b,
                                        int64_t bytes, int64_t words, unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const auto* wa = reinterpret_cast<const unsigned long long*>(a);
  const auto* wb = reinterpret_cast<const unsigned long long*>(b);
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += stride) {
    if (wa[w] == wb[w]) continue;
    for (int64_t k = 8 * w; k < 8 * w + 8; ++k) {
      if (a[k] != b[k]) {
        atomicMin(first, static_cast<unsigned long long>(k));
        break;
      }
    }
  }
  for (int64_t k = 8 * words + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       k < bytes; k += stride) {
    if (a[k] != b[k]) atomicMin(first, static_cast<unsigned long long>(k));
  }
}

}  // namespace

void scatter_region_cuda(const void* local_device, void* whole_device, size_t element_bytes,
                         const FillRegion& region, void* cuda_stream) {
  const internal::CompactRegion compact = internal::compact_region(region);
  if (compact.numel == 0) return;
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
  scatter_kernel<<<blocks_for(compact.numel), kThreadsPerBlock, 0, stream>>>(
      static_cast<const unsigned char*>(local_device), static_cast<unsigned char*>(whole_device),
      compact, static_cast<int64_t>(element_bytes));
  SHARDPLAN_CUDA_CHECK(cudaGetLastError());
  SHARDPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

int64_t first_difference_cuda(const void* a_device, const void* b_device, size_t bytes,
                              void* cuda_stream) {
  if (bytes == 0) return -1;
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
  internal::DeviceWord first;
  // All ones: no difference found (atomicMin only lowers it).
  SHARDPLAN_CUDA_CHECK(cudaMemsetAsync(first.get(), 0xFF, sizeof(unsigned long long), stream));
  const auto n = static_cast<int64_t>(bytes);
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(a_device) | reinterpret_cast<uintptr_t>(b_device)) & 7u) == 0;
  const int64_t words = aligned ? n / 8 : 0;
  first_difference_kernel<<<blocks_for(std::max<int64_t>(words, n - 8 * words)), kThreadsPerBlock,
                            0, stream>>>(static_cast<const unsigned char*>(a_device),
                                         static_cast<const unsigned char*>(b_device), n, words,
                                         first.get());
  SHARDPLAN_CUDA_CHECK(cudaGetLastError());
  unsigned long long host = 0;
  SHARDPLAN_CUDA_CHECK(
      cudaMemcpyAsync(&host, first.get(), sizeof host, cudaMemcpyDeviceToHost, stream));
  SHARDPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host == ~0ULL ? -1 : static_cast<int64_t>(host);
}

}  // namespace shardplan::kernels
