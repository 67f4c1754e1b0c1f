// CUDA init fill throughput, the GPU twin of init_fill_bench.cpp: fill_cuda of a 4 GiB float32 or
// bfloat16 buffer (normal, uniform, constant), timed with CUDA events, next to a device-to-device
// copy of the same buffer (bytes read + written, as nvbandwidth counts). Shapes: the whole buffer
// as one tensor (the contiguous path of Note [Group runs]), a column shard of a [rows, 8 * 4096]
// weight (tensor parallelism's Shard(1): rows of 4096 elements), and the transposed view (no
// contiguous run: one element per thread, the fallback). Bytes/s is bytes written; the console
// shows binary units (G/s = 2^30 B/s), --benchmark_format=csv gives B/s.
// scripts/bench_init_fill_cuda_torch.py times PyTorch's normal_/uniform_/fill_/copy_ on the same
// sizes; the figures are in docs/architecture.md §4.7.
//   build/bin/bench_init_fill_cuda_bench --benchmark_format=csv
// Before timing, each benchmark fills once and compares sampled elements, copied back, with the
// CPU's fill_one (a fast wrong fill would not count). Without a GPU every benchmark is skipped.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/element_type.h"
#include "kernels/fill_reference.h"
#include "kernels/init_fill.h"
#include "kernels/region.h"

#if SHARDPLAN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/device_memory.h"
#include "kernels/init_fill_cuda.h"
#endif

namespace shardplan::kernels {
namespace {

#if SHARDPLAN_HAVE_CUDA

constexpr int64_t kBufferBytes = int64_t{4} << 30;
constexpr int64_t kColumns = 4096;                // a shard's row
constexpr int64_t kGlobalColumns = 8 * kColumns;  // the whole weight's row (tp 8)

enum Shape : int64_t { kWhole = 0, kColumnShard = 1, kTransposed = 2 };

// The box of each shape over n elements; arrays owned here.
struct BenchBox {
  int ndim = 1;
  int64_t sizes[2] = {};
  int64_t dst[2] = {};
  int64_t global[2] = {};
  int64_t offset = 0;
  FillRegion region() const { return FillRegion{ndim, sizes, dst, global, offset}; }
};

BenchBox make_box(Shape shape, int64_t n) {
  BenchBox b;
  const int64_t rows = n / kColumns;
  switch (shape) {
    case kWhole:
      b.sizes[0] = n, b.dst[0] = 1, b.global[0] = 1;
      break;
    case kColumnShard:  // columns [3 * 4096, 4 * 4096) of a [rows, 32768] weight
      b.ndim = 2;
      b.sizes[0] = rows, b.sizes[1] = kColumns;
      b.dst[0] = kColumns, b.dst[1] = 1;
      b.global[0] = kGlobalColumns, b.global[1] = 1;
      b.offset = 3 * kColumns;
      break;
    case kTransposed:  // a [4096, rows] view of a contiguous [rows, 4096] tensor
      b.ndim = 2;
      b.sizes[0] = kColumns, b.sizes[1] = rows;
      b.dst[0] = rows, b.dst[1] = 1;
      b.global[0] = 1, b.global[1] = kColumns;
      break;
  }
  return b;
}

// The buffer's elements at `sample` local offsets against fill_one on the CPU.
bool sampled_elements_match(const void* device, ElementType type, const BenchBox& box,
                            const FillSpec& spec) {
  const auto elem = static_cast<int64_t>(element_size(type));
  const int64_t inner = box.sizes[box.ndim - 1];
  for (int64_t local = 0; local < box.sizes[0] * (box.ndim == 2 ? inner : 1); local += 1000003) {
    const int64_t i0 = box.ndim == 2 ? local / inner : local;
    const int64_t i1 = box.ndim == 2 ? local % inner : 0;
    const int64_t dst = i0 * box.dst[0] + (box.ndim == 2 ? i1 * box.dst[1] : 0);
    const int64_t global =
        box.offset + i0 * box.global[0] + (box.ndim == 2 ? i1 * box.global[1] : 0);
    uint64_t got = 0;  // little-endian, zero-extended, as fill_reference_bits
    std::string error;
    if (!cuda_copy(&got, static_cast<const char*>(device) + dst * elem, static_cast<size_t>(elem),
                   false, -1, &error)) {
      return false;
    }
    if (got != fill_reference_bits(type, spec, static_cast<uint64_t>(global))) return false;
  }
  return true;
}

// Each benchmark iteration: `enqueue` between two CUDA events on the legacy stream, its time the
// iteration's (UseManualTime).
template <class Enqueue>
void time_with_events(benchmark::State& state, Enqueue enqueue) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    enqueue();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// args: element type (0 float32, 1 bfloat16), kind (FillKind), shape (Shape).
void BM_CudaFill(benchmark::State& state) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const ElementType type = state.range(0) == 0 ? ElementType::kFloat32 : ElementType::kBFloat16;
  const auto kind = static_cast<FillKind>(state.range(1));
  const auto shape = static_cast<Shape>(state.range(2));
  const int64_t n = kBufferBytes / static_cast<int64_t>(element_size(type));
  const BenchBox box = make_box(shape, n);
  const FillSpec spec{kind, kind == FillKind::kUniform ? -0.1 : 0.0,
                      kind == FillKind::kUniform ? 0.1 : 0.02, 1234,
                      tensor_key_from_name("layers.0.mlp.up_proj.weight")};
  void* buffer = nullptr;
  std::string error;
  if (!cuda_allocate(static_cast<size_t>(kBufferBytes), -1, &buffer, &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  fill_cuda(buffer, type, box.region(), spec, nullptr);
  if (!cuda_synchronize(-1, &error) || !sampled_elements_match(buffer, type, box, spec)) {
    state.SkipWithError("the CUDA fill differs from fill_one");
    cuda_free(buffer, -1);
    return;
  }
  time_with_events(state, [&] { fill_cuda(buffer, type, box.region(), spec, nullptr); });
  cuda_free(buffer, -1);
  state.SetBytesProcessed(state.iterations() * kBufferBytes);
  const char* kinds[] = {"constant", "uniform", "normal", "truncated"};
  const char* shapes[] = {"whole", "column-shard", "transposed"};
  state.SetLabel(std::string(type == ElementType::kFloat32 ? "float32 " : "bfloat16 ") +
                 kinds[state.range(1)] + " " + shapes[state.range(2)]);
}

BENCHMARK(BM_CudaFill)
    ->ArgNames({"bf16", "kind", "shape"})
    ->ArgsProduct({{0, 1},
                   {static_cast<int64_t>(FillKind::kNormal),
                    static_cast<int64_t>(FillKind::kUniform),
                    static_cast<int64_t>(FillKind::kConstant)},
                   {kWhole}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK(BM_CudaFill)
    ->ArgNames({"bf16", "kind", "shape"})
    ->ArgsProduct({{1}, {static_cast<int64_t>(FillKind::kNormal)}, {kColumnShard, kTransposed}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// The ceiling: a device-to-device copy of the same 4 GiB (bytes read + written).
void BM_CudaCopy(benchmark::State& state) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  void *a = nullptr, *b = nullptr;
  std::string error;
  if (!cuda_allocate(static_cast<size_t>(kBufferBytes), -1, &a, &error) ||
      !cuda_allocate(static_cast<size_t>(kBufferBytes), -1, &b, &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  cudaMemcpy(b, a, static_cast<size_t>(kBufferBytes), cudaMemcpyDeviceToDevice);  // warm-up
  time_with_events(state, [&] {
    cudaMemcpyAsync(b, a, static_cast<size_t>(kBufferBytes), cudaMemcpyDeviceToDevice, nullptr);
  });
  cuda_free(a, -1);
  cuda_free(b, -1);
  state.SetBytesProcessed(state.iterations() * 2 * kBufferBytes);
}
BENCHMARK(BM_CudaCopy)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);

#else

void BM_CudaFill(benchmark::State& state) { state.SkipWithError("built without CUDA"); }
BENCHMARK(BM_CudaFill);

#endif

}  // namespace
}  // namespace shardplan::kernels
