// CPU init fill throughput: normal (and uniform) fill of a 64 MiB float32 and bfloat16 buffer (16M
// and 32M elements) on 1 and 2 threads, on each instruction set the fast path has (Note [Fast fill
// lanes] in kernels/internal/fill_lanes.h) and the scalar fill_one loop, next to memset of the same
// 64 MiB on the same number of threads (the store bandwidth a fill cannot beat). Bytes/s is bytes
// written; the console shows it in binary units (G/s = 2^30 B/s), --benchmark_format=csv in B/s.
// scripts/bench_init_fill_torch.py times PyTorch's normal_() on the same sizes; the numbers are
// in docs/architecture.md §4.7.
//   build/bin/bench_init_fill_bench --benchmark_repetitions=3 --benchmark_format=csv
// Before timing, each benchmark fills the buffer once and compares sampled elements with fill_one;
// a mismatch stops the benchmark with an error (a fast wrong fill would not count).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/element_type.h"
#include "kernels/fill_element.h"
#include "kernels/init_fill.h"
#include "kernels/internal/fill_simd.h"

namespace shardplan::kernels {
namespace {

using internal::FillIsa;

constexpr int64_t kBufferBytes = int64_t{64} << 20;

// args: element type (0 float32, 1 bfloat16), instruction set (FillIsa), threads.
template <FillKind kKind>
void BM_Fill(benchmark::State& state) {
  const ElementType type = state.range(0) == 0 ? ElementType::kFloat32 : ElementType::kBFloat16;
  const auto isa = static_cast<FillIsa>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  if (!internal::fill_isa_supported(isa)) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  const auto elem = static_cast<int64_t>(element_size(type));
  const int64_t n = kBufferBytes / elem;
  std::vector<unsigned char> buffer(static_cast<size_t>(kBufferBytes));
  const int64_t sizes[1] = {n}, strides[1] = {1};
  const FillRegion region{1, sizes, strides, strides, 0};
  const FillSpec spec{kKind, kKind == FillKind::kNormal ? 0.0 : -0.02, 0.02, 1234,
                      tensor_key_from_name("layers.0.mlp.up_proj.weight")};
  internal::fill_cpu_on(isa, threads, buffer.data(), type, region, spec);
  const FillParams params = make_fill_params(type, spec);
  for (int64_t i = 0; i < n; i += 9973) {
    unsigned char expected[4] = {};
    if (type == ElementType::kFloat32) {
      fill_one<ElementType::kFloat32>(expected, params, static_cast<uint64_t>(i));
    } else {
      fill_one<ElementType::kBFloat16>(expected, params, static_cast<uint64_t>(i));
    }
    if (std::memcmp(expected, buffer.data() + i * elem, static_cast<size_t>(elem)) != 0) {
      state.SkipWithError("fill differs from fill_one");
      return;
    }
  }
  for (auto _ : state) {
    internal::fill_cpu_on(isa, threads, buffer.data(), type, region, spec);
    benchmark::DoNotOptimize(buffer.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBufferBytes);
  state.SetLabel(type == ElementType::kFloat32 ? "float32" : "bfloat16");
}

void BM_NormalFill(benchmark::State& state) { BM_Fill<FillKind::kNormal>(state); }
void BM_UniformFill(benchmark::State& state) { BM_Fill<FillKind::kUniform>(state); }

// The fast paths (AVX-512, AVX2) on 1 and 2 threads.
void fast_paths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "isa", "threads"})
      ->ArgsProduct({{0, 1},
                     {static_cast<int64_t>(FillIsa::kAvx512), static_cast<int64_t>(FillIsa::kAvx2)},
                     {1, 2}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

BENCHMARK(BM_NormalFill)->Apply(fast_paths);
// The scalar loop is ~0.05 GB/s: two iterations of 64 MiB already take seconds.
BENCHMARK(BM_NormalFill)
    ->ArgNames({"bf16", "isa", "threads"})
    ->ArgsProduct({{0, 1}, {static_cast<int64_t>(FillIsa::kScalar)}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();
BENCHMARK(BM_UniformFill)->Apply(fast_paths);

// memset of the same 64 MiB, split over `threads` the way the fill splits its range.
void BM_Memset(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<unsigned char> buffer(static_cast<size_t>(kBufferBytes));
  const int64_t per = kBufferBytes / threads;
  for (auto _ : state) {
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) {
      workers.emplace_back(
          [&buffer, t, per] { std::memset(buffer.data() + t * per, t, static_cast<size_t>(per)); });
    }
    std::memset(buffer.data(), 0, static_cast<size_t>(per));
    for (std::thread& w : workers) w.join();
    benchmark::DoNotOptimize(buffer.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBufferBytes);
}
BENCHMARK(BM_Memset)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace shardplan::kernels
