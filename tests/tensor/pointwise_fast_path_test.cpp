// The contiguous fast path of pointwise ops (tensor/ops/tensor_iterator.h contiguous_output_shape)
// must not change what the general path (PyTorch's TensorIterator) gives. Expected strides from
// PyTorch 1.13 on the meta device:
//   x = torch.empty_strided((64,1,128), (128,500,1), device='meta')   # contiguous (size-1 dim)
//   (x*2).stride() == (128, 8192, 1); (x+x).stride() == (128, 128, 1)
//   (x*torch.empty((), device='meta')).stride() == (128, 8192, 1)
//   y = torch.empty_strided((64,0,128), (1,500,64), device='meta')    # contiguous (numel 0)
//   (y*2).stride() == (1, 8192, 64)
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace {

TEST(PointwiseFastPath, ScalarTimesContiguousWithOddSizeOneStride) {
  const Tensor x = empty_strided({64, 1, 128}, {128, 500, 1});
  ASSERT_TRUE(x.is_contiguous());
  EXPECT_EQ(mul(x, Scalar(int64_t{2})).strides(), (DimVector{128, 8192, 1}));
  EXPECT_EQ(mul(x, empty({})).strides(), (DimVector{128, 8192, 1}));
  EXPECT_EQ(add(x, x).strides(),
            (DimVector{128, 128, 1}));  // same shape: TensorIterator's fast setup
}

TEST(PointwiseFastPath, ScalarTimesEmptyTensorKeepsItsOrder) {
  const Tensor y = empty_strided({64, 0, 128}, {1, 500, 64});
  ASSERT_TRUE(y.is_contiguous());
  EXPECT_EQ(mul(y, Scalar(int64_t{2})).strides(), (DimVector{1, 8192, 64}));
}

TEST(PointwiseFastPath, ScalarTimesPlainContiguous) {
  const Tensor x = empty({64, 128});
  EXPECT_EQ(mul(x, Scalar(2.0)).strides(), (DimVector{128, 1}));
  EXPECT_EQ(mul(x, Scalar(2.0)).dtype(), DType::kFloat32);
}

}  // namespace
}  // namespace shardplan::tensor
