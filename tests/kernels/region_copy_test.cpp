// scatter_region_cpu against positions written out by hand, and the CUDA twins (scatter and first
// difference) against the CPU where a GPU is visible (skipped elsewhere).
#include "kernels/region_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#if SHARDPLAN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/region_copy_cuda.h"
#endif

namespace shardplan::kernels {
namespace {

// A 2 x 3 shard of a 4 x 5 int16 tensor, rows 1..2 and columns 2..4: shard element (i, j) is
// 10 * i + j + 1 and lands at whole[(1 + i) * 5 + 2 + j].
TEST(ScatterRegion, ABoxLandsAtItsRowsAndColumns) {
  const std::vector<int16_t> shard = {1, 2, 3, 11, 12, 13};
  std::vector<int16_t> whole(20, -1);
  const int64_t sizes[2] = {2, 3}, local[2] = {3, 1}, global[2] = {5, 1};
  scatter_region_cpu(shard.data(), whole.data(), 2, FillRegion{2, sizes, local, global, 1 * 5 + 2});
  const std::vector<int16_t> want = {-1, -1, -1, -1, -1,  //
                                     -1, -1, 1,  2,  3,   //
                                     -1, -1, 11, 12, 13,  //
                                     -1, -1, -1, -1, -1};
  EXPECT_EQ(whole, want);
}

// The transpose of a 3 x 2 column block: local (i, j) is global (j, i) of a 2 x 3 tensor, so the
// local row-major order 0..5 lands at global 0, 3, 1, 4, 2, 5.
TEST(ScatterRegion, APermutedViewLandsTransposed) {
  const std::vector<uint8_t> shard = {0, 1, 2, 3, 4, 5};
  std::vector<uint8_t> whole(6, 0xFF);
  const int64_t sizes[2] = {3, 2}, local[2] = {2, 1}, global[2] = {1, 3};
  scatter_region_cpu(shard.data(), whole.data(), 1, FillRegion{2, sizes, local, global, 0});
  EXPECT_EQ(whole, (std::vector<uint8_t>{0, 2, 4, 1, 3, 5}));
}

TEST(ScatterRegion, AScalarAndAnEmptyBox) {
  const double one = 1.5;
  std::vector<double> whole(4, 0.0);
  scatter_region_cpu(&one, whole.data(), 8, FillRegion{0, nullptr, nullptr, nullptr, 3});
  EXPECT_EQ(whole, (std::vector<double>{0, 0, 0, 1.5}));
  const int64_t zero = 0, unit = 1;
  scatter_region_cpu(&one, whole.data(), 8, FillRegion{1, &zero, &unit, &unit, 0});
  EXPECT_EQ(whole[0], 0.0);
}

#if SHARDPLAN_HAVE_CUDA
bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

template <class T>
T* to_device(const std::vector<T>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T) + 16), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// A 3-d box with a gap in the local buffer (local strides 12, 4, 1 over sizes 2, 3, 3), in a
// 4 x 5 x 6 float tensor: the GPU places every element where the CPU does.
TEST(ScatterRegionCuda, EqualsTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> shard(24);
  for (size_t i = 0; i < shard.size(); ++i) shard[i] = static_cast<float>(i) + 0.25f;
  const int64_t sizes[3] = {2, 3, 3}, local[3] = {12, 4, 1}, global[3] = {30, 6, 1};
  const FillRegion region{3, sizes, local, global, 30 + 6 + 2};
  std::vector<float> cpu(120, -1.0f);
  scatter_region_cpu(shard.data(), cpu.data(), 4, region);
  float* d_shard = to_device(shard);
  float* d_whole = to_device(std::vector<float>(120, -1.0f));
  scatter_region_cuda(d_shard, d_whole, 4, region, nullptr);
  EXPECT_EQ(to_host(d_whole, 120), cpu);
  cudaFree(d_shard);
  cudaFree(d_whole);
}

// One differing byte planted at the start, inside a word, in the unaligned tail and at the end,
// on aligned and unaligned buffers: the first difference is where it was planted.
TEST(FirstDifferenceCuda, FindsThePlantedByte) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 1000 + 5;
  std::vector<uint8_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<uint8_t>(i * 7);
  uint8_t* d_a = to_device(a);
  EXPECT_EQ(first_difference_cuda(d_a, d_a, n, nullptr), -1);
  for (const size_t at : {size_t{0}, size_t{13}, size_t{1001}, n - 1}) {
    std::vector<uint8_t> b = a;
    b[at] ^= 0x40;
    if (at + 1 < n) b[n - 1] ^= 0x01;  // a later difference must not win
    uint8_t* d_b = to_device(b);
    EXPECT_EQ(first_difference_cuda(d_a, d_b, n, nullptr), static_cast<int64_t>(at));
    if (at > 0) {  // one byte in: neither buffer is 8-byte aligned
      EXPECT_EQ(first_difference_cuda(d_a + 1, d_b + 1, n - 1, nullptr),
                static_cast<int64_t>(at) - 1);
    }
    cudaFree(d_b);
  }
  cudaFree(d_a);
}
#endif

}  // namespace
}  // namespace shardplan::kernels
