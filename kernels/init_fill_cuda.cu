// CUDA fill. A constant over one contiguous run is a pattern of 16-byte stores. Regions whose
// innermost dim is contiguous (whole tensors, row and column shards) run one thread per Philox
// group (Note [Group runs] in kernels/internal/group_runs.h): one block and
// one Box-Muller log per pair for 2 or 4 elements, stored with one vector store. Other regions
// run one thread per element in a grid-stride loop, decomposing its local linear index into the
// multi-index and calling fill_one. Both give fill_one's bits (kernels/fill_element.h). Compile
// without --use_fast_math (Note [Bit-exact floating point on CPU and CUDA]); --fmad does not
// matter.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/fill_element.h"
#include "kernels/init_fill_cuda.h"
#include "kernels/internal/check.h"
#include "kernels/internal/cuda_check.h"
#include "kernels/internal/dispatch.h"
#include "kernels/internal/group_runs.h"
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

// One task (a group's lanes inside one row) per iteration. A whole, aligned group is one vector
// store (8 bytes of bfloat16, 16 of float32); the lane loop is unrolled so that the values stay in
// registers.
template <ElementType T>
__global__ void fill_groups_kernel(char* dst, internal::GroupRuns runs, FillParams params) {
  using S = typename detail::Storage<T>::type;
  constexpr int kLanes = kGroupSize<T>;
  struct alignas(sizeof(S) * kLanes) Vec {
    S v[kLanes];
  };
  S* const out_base = reinterpret_cast<S*>(dst);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < runs.tasks;
       t += stride) {
    internal::GroupTask task;
    if (!internal::group_task<kLanes>(runs, t, &task)) continue;
    Vec values;
    fill_group<T>(values.v, params, task.group);
    S* out = out_base + task.dst_offset;
    if (task.first_lane == 0 && task.end_lane == kLanes &&
        reinterpret_cast<uintptr_t>(out) % sizeof(Vec) == 0) {
      *reinterpret_cast<Vec*>(out) = values;
      continue;
    }
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) {
      if (lane >= task.first_lane && lane < task.end_lane)
        out[lane - task.first_lane] = values.v[lane];
    }
  }
}

// A constant over one contiguous run: 16-byte stores of the value repeated (memset's pattern),
// the elements before the first 16-byte boundary and after the last one stored singly.
template <class S>
__global__ void fill_constant_kernel(S* dst, int64_t n, S value) {
  constexpr int64_t kPerVector = 16 / static_cast<int64_t>(sizeof(S));
  const auto misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % 16);
  int64_t head = misaligned == 0 ? 0 : (16 - misaligned) / static_cast<int64_t>(sizeof(S));
  head = head < n ? head : n;
  const int64_t vectors = (n - head) / kPerVector;
  const int64_t tail = head + vectors * kPerVector;
  union {
    S elements[kPerVector];
    uint4 bits;
  } pattern;
#pragma unroll
  for (int64_t i = 0; i < kPerVector; ++i) pattern.elements[i] = value;
  uint4* const body = reinterpret_cast<uint4*>(dst + head);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = first; i < vectors; i += stride) body[i] = pattern.bits;
  if (first < head) dst[first] = value;
  if (first < n - tail) dst[tail + first] = value;
}

unsigned blocks_for(int64_t work) {
  return static_cast<unsigned>(
      std::min<int64_t>((work + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks));
}

}  // namespace

void fill_cuda(void* dst_device, ElementType type, const FillRegion& region, const FillSpec& spec,
               void* cuda_stream) {
  const std::optional<std::string> error = check_fill_spec(type, spec);
  SHARDPLAN_KERNELS_CHECK(!error, error->c_str());
  const internal::CompactRegion compact = internal::compact_region(region);
  if (compact.numel == 0) return;
  const FillParams params = make_fill_params(type, spec);
  auto* stream = static_cast<cudaStream_t>(cuda_stream);
  char* dst = static_cast<char*>(dst_device);
  internal::dispatch_element_type(type, [&](auto tag) {
    constexpr ElementType kType = decltype(tag)::value;
    if constexpr (kGroupFillable<kType>) {
      if (const std::optional<internal::GroupRuns> runs =
              internal::group_runs(compact, kGroupSize<kType>)) {
        using S = typename detail::Storage<kType>::type;
        if (spec.kind == FillKind::kConstant && runs->rows == 1) {
          S value;
          fill_one<kType>(&value, params, 0);  // a constant's bits, whatever the index
          // One row whose innermost dim has buffer stride 1: elements dst[0, numel).
          fill_constant_kernel<S>
              <<<blocks_for(compact.numel / static_cast<int64_t>(16 / sizeof(S)) + 1),
                 kThreadsPerBlock, 0, stream>>>(reinterpret_cast<S*>(dst), compact.numel, value);
          return;
        }
        fill_groups_kernel<kType>
            <<<blocks_for(runs->tasks), kThreadsPerBlock, 0, stream>>>(dst, *runs, params);
        return;
      }
    }
    fill_kernel<kType>
        <<<blocks_for(compact.numel), kThreadsPerBlock, 0, stream>>>(dst, compact, params);
  });
  SHARDPLAN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace shardplan::kernels
