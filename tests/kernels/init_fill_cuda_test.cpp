// fill_cuda and checksum_cuda against their CPU twins, byte for byte, for every element type and
// fill kind over several region shapes. Built only with CUDA (SHARDPLAN_HAVE_CUDA=1, set by the
// kernels library); skipped at run time on a machine without a GPU.
#ifndef SHARDPLAN_HAVE_CUDA
#define SHARDPLAN_HAVE_CUDA 0
#endif

#if SHARDPLAN_HAVE_CUDA

#include "kernels/init_fill_cuda.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/checksum.h"
#include "kernels/checksum_cuda.h"
#include "kernels/init_fill.h"
#include "tests/kernels/fill_test_support.h"

namespace shardplan::kernels {
namespace {

using testing::Box;
using testing::TypeAndKind;

#define ASSERT_CUDA(expr) \
  ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

// Device bytes freed on scope exit.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t n) : size_(n) {
    if (cudaMalloc(&ptr_, n) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_;
};

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The regions compared: they cover uneven boxes, gaps in the destination, a transposed view, a
// scalar, and a long 1-d run whose global indices pass 2^32 (the counter's high word).
struct Case {
  const char* name;
  Box box;
  int64_t buffer_elements;  // destination buffer size, gaps included
};

std::vector<Case> cases() {
  const std::vector<int64_t> shape = {7, 5, 6};
  std::vector<Case> out;
  out.push_back({"whole", Box{shape, {30, 6, 1}, {30, 6, 1}, 0}, 210});
  out.push_back({"uneven_box", testing::sub_box(shape, {6, 2, 1}, {1, 3, 5}), 15});
  Box padded = testing::sub_box(shape, {2, 1, 3}, {4, 3, 3});
  padded.dst_strides = {40, 12, 3};
  out.push_back({"strided_destination", padded, 160});
  out.push_back({"transposed_view", Box{{6, 5, 7}, {35, 7, 1}, {1, 6, 30}, 0}, 210});
  out.push_back({"scalar", Box{{}, {}, {}, 123}, 1});
  out.push_back(
      {"long_run_past_2_to_32", Box{{(1 << 20) + 3}, {1}, {1}, 5'000'000'000}, (1 << 20) + 3});
  return out;
}

class CudaFill : public ::testing::TestWithParam<TypeAndKind> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Fills `box` on the CPU and the GPU and compares the bytes and the checksums.
void expect_gpu_equals_cpu(ElementType type, const Box& box, int64_t buffer_elements,
                           const FillSpec& spec, cudaStream_t stream) {
  auto expected = testing::make_buffer(type, buffer_elements, 0xA5);
  fill_cpu(expected.data(), type, box.region(), spec);

  DeviceBytes device(expected.size());
  ASSERT_CUDA(cudaMemset(device.get(), 0xA5, device.size()));
  fill_cuda(device.get(), type, box.region(), spec, stream);
  std::vector<unsigned char> got(expected.size());
  ASSERT_CUDA(
      cudaMemcpyAsync(got.data(), device.get(), got.size(), cudaMemcpyDeviceToHost, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  size_t first_difference = got.size();
  for (size_t i = 0; i < got.size() && first_difference == got.size(); ++i) {
    if (got[i] != expected[i]) first_difference = i;
  }
  EXPECT_EQ(first_difference, got.size())
      << "first differing byte " << first_difference << " (element "
      << first_difference / element_size(type) << ")";
  EXPECT_EQ(checksum_cuda(device.get(), type, box.region(), stream),
            checksum_cpu(expected.data(), type, box.region()));
}

TEST_P(CudaFill, BytesAndChecksumsEqualTheCpu) {
  const ElementType type = GetParam().type;
  const FillSpec spec = testing::test_spec(type, GetParam().kind);
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    expect_gpu_equals_cpu(type, c.box, c.buffer_elements, spec, stream);
  }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

// The group path converts bfloat16 and float16 two at a time with the GPU's paired conversion
// (Note [Paired narrow conversions on the GPU], kernels/convert.h), the CPU with integer rounding.
// The values that could tell them apart: NaN of either sign, infinities, signed zero, float
// subnormals, float16 subnormals and its overflow tie (65520), ties at bfloat16's rounding bit.
// Constants over several rows take the group path (one row would take the memset kernel); normal
// and uniform fills scaled into the subnormal and overflow ranges produce such values by the
// thousand.
TEST(CudaFillNarrow, PairedConversionsEqualTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<double> constants = {nan,          -nan,    inf,     -inf,     -0.0, 0.0,
                                         1e-40,  // float subnormal
                                         -3e-8,  // float16 subnormal
                                         65504.0,      65519.0, 65520.0, -70000.0, 3e38,
                                         1.0 + 0x1p-8,  // bfloat16 tie, to even (1.0)
                                         1.0 + 0x3p-8,  // bfloat16 tie, to even (up)
                                         1.0 / 3.0};
  struct Random {
    FillKind kind;
    double a, b;
  };
  const std::vector<Random> randoms = {{FillKind::kNormal, 0.0, 1e-39},
                                       {FillKind::kNormal, 0.0, 1e-6},
                                       {FillKind::kNormal, 0.0, 4e4},
                                       {FillKind::kUniform, -7e4, 7e4},
                                       {FillKind::kUniform, -1e-38, 1e-38}};
  // 64 rows of 40 columns out of 48: every row cuts a Philox group at both ends.
  const Box box = testing::sub_box({64, 48}, {0, 2}, {64, 40});
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  for (ElementType type : {ElementType::kBFloat16, ElementType::kFloat16}) {
    SCOPED_TRACE(element_type_name(type));
    for (double value : constants) {
      SCOPED_TRACE(value);
      FillSpec spec = testing::test_spec(type, FillKind::kConstant);
      spec.a = value;
      expect_gpu_equals_cpu(type, box, box.numel(), spec, stream);
    }
    for (const Random& r : randoms) {
      SCOPED_TRACE(r.b);
      FillSpec spec = testing::test_spec(type, r.kind);
      spec.a = r.a, spec.b = r.b;
      expect_gpu_equals_cpu(type, box, box.numel(), spec, stream);
    }
  }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndKinds, CudaFill,
                         ::testing::ValuesIn(testing::all_type_kind_pairs()),
                         [](const auto& info) { return testing::pair_name(info.param); });

}  // namespace
}  // namespace shardplan::kernels

#endif  // SHARDPLAN_HAVE_CUDA
