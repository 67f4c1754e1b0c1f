// Core tensor invariants: sizes overflow, storage bounds, views and aliasing, contiguity rules.
// Expected values are hand computations written out in each test.
#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include <limits>

#include "base/error.h"
#include "tensor/ops.h"
#include "tensor/trace.h"

namespace shardplan::tensor {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tensor, MetaTensorHasStorageSizeButNoData) {
  Tensor x = empty({4, 6}, {DType::kBFloat16});
  EXPECT_TRUE(x.is_meta());
  EXPECT_EQ(x.storage()->nbytes(), 4 * 6 * 2);
  EXPECT_EQ(x.data_ptr(), nullptr);
  EXPECT_EQ(x.nbytes(), 48);
}

TEST(Tensor, NumelOverflowIsAnErrorNamingTheShape) {
  const int64_t big = int64_t{1} << 32;
  const std::string msg = error_of([&] { empty({big, big, 4}); });
  EXPECT_NE(msg.find("[4294967296, 4294967296, 4]"), std::string::npos) << msg;
}

TEST(Tensor, ByteCountOverflowIsAnError) {
  // 2^62 elements fit int64 but 2^62 * 8 bytes do not.
  const std::string msg = error_of([] { empty({int64_t{1} << 62}, {DType::kFloat64}); });
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
}

TEST(Tensor, NegativeSizeIsAnError) {
  const std::string msg = error_of([] { empty({2, -1}); });
  EXPECT_NE(msg.find("negative dimension -1"), std::string::npos) << msg;
}

TEST(Tensor, ZeroSizeNeedsNoStorage) {
  Tensor x = empty_strided({0, 5}, {100, 1});
  EXPECT_EQ(x.storage()->nbytes(), 0);
  EXPECT_TRUE(x.is_contiguous());
}

TEST(Tensor, AsStridedBeyondStorageIsAnError) {
  Tensor x = empty({12});  // 48 bytes
  // [4,4] with strides [1,4] needs offset 0 + 3*1 + 3*4 + 1 = 16 elements = 64 bytes.
  const std::string msg = error_of([&] { as_strided(x, {4, 4}, {1, 4}); });
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("48"), std::string::npos) << msg;
}

TEST(Tensor, ViewsShareStorageAndRecordTheRootBase) {
  Tensor x = empty({4, 6});
  Tensor y = transpose(x, 0, 1);
  Tensor z = slice(y, 0, 1, 5, 2);  // rows 1 and 3 of y = columns 1 and 3 of x
  EXPECT_TRUE(z.is_view());
  EXPECT_TRUE(z.base().is_same(x));  // PyTorch's ._base is the root, not y
  EXPECT_TRUE(z.shares_storage(x));
  EXPECT_EQ(z.sizes(), DimVector({2, 4}));
  EXPECT_EQ(z.strides(), DimVector({2, 6}));  // y's stride 1 times step 2; x's row stride 6
  EXPECT_EQ(z.storage_offset(), 1);
}

TEST(Tensor, ContiguityIgnoresSizeOneDims) {
  // c10's rule: size-1 dims may have any stride.
  EXPECT_TRUE(compute_contiguous(DimVector{2, 1, 3}, DimVector{3, 99, 1}));
  EXPECT_FALSE(compute_contiguous(DimVector{2, 3}, DimVector{1, 2}));
  EXPECT_TRUE(compute_non_overlapping_and_dense(DimVector{2, 3}, DimVector{1, 2}));
  EXPECT_FALSE(compute_non_overlapping_and_dense(DimVector{2, 3}, DimVector{0, 1}));
}

TEST(Tensor, InferDenseStridesKeepsMemoryOrder) {
  // Sizes [2,3,4] laid out with dim 1 fastest, then dim 2, then dim 0 (a sliced permuted tensor):
  // dense strides in that order: dim1 -> 1, dim2 -> 3, dim0 -> 12.
  EXPECT_EQ(infer_dense_strides(DimVector{2, 3, 4}, DimVector{100, 2, 10}), DimVector({12, 1, 3}));
}

TEST(Tensor, WrapDimNamesTheRange) {
  EXPECT_EQ(wrap_dim(-1, 3, "op"), 2);
  EXPECT_EQ(wrap_dim(0, 0, "op"), 0);  // scalars accept -1 and 0
  const std::string msg = error_of([] { wrap_dim(3, 3, "op"); });
  EXPECT_NE(msg.find("[-3, 2], but got 3"), std::string::npos) << msg;
}

TEST(Tensor, RequiresGradOnlyForFloatingTypes) {
  Tensor x = empty({2}, {DType::kInt64});
  EXPECT_THROW(x.set_requires_grad(true), Error);
  Tensor w = empty({2, 3}, {DType::kFloat32, Device::meta(), true});
  EXPECT_TRUE(w.requires_grad());
  Tensor v = transpose(w, 0, 1);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(v.is_leaf());
}

TEST(Tensor, MaterializedFactoryHasRealMemory) {
  Tensor x = zeros({3, 5}, {DType::kFloat32, Device::cpu()});
  ASSERT_NE(x.data_ptr(), nullptr);
  const float* p = static_cast<const float*>(x.data_ptr());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(p[i], 0.0f);
  Tensor y = full({2}, Scalar(2.5), {DType::kBFloat16, Device::cpu()});
  // 2.5 in bfloat16 is 0x4020 (sign 0, exponent 128, mantissa 0b0100000).
  const uint16_t* q = static_cast<const uint16_t*>(y.data_ptr());
  EXPECT_EQ(q[0], 0x4020);
  EXPECT_EQ(q[1], 0x4020);
}

TEST(MetaSemantics, DataDependentOpsFailClearly) {
  Tensor x = empty({4});
  EXPECT_NE(error_of([&] { nonzero(x); }).find("data-dependent"), std::string::npos);
  EXPECT_NE(error_of([&] { item(empty({})); }).find("data-dependent"), std::string::npos);
  EXPECT_NE(error_of([&] { index_with_mask(x, empty({4}, {DType::kBool})); }).find("data-dependent"),
            std::string::npos);
  EXPECT_NE(error_of([&] { to_device(x, Device::cpu()); })
                .find("Cannot copy out of meta tensor; no data!"),
            std::string::npos);
}

TEST(MetaSemantics, EmptyLikeIsTheWayToRealMemory) {
  Tensor x = transpose(empty({3, 4}, {DType::kFloat16}), 0, 1);
  Tensor y = empty_like(x, {}, Device::cpu());
  EXPECT_TRUE(y.device().is_cpu());
  EXPECT_EQ(y.strides(), x.strides());  // dense: strides preserved
  EXPECT_NE(y.data_ptr(), nullptr);
}

TEST(MetaSemantics, ComputeOpsRejectMaterializedTensors) {
  Tensor x = empty({2, 2}, {DType::kFloat32, Device::cpu()});
  EXPECT_NE(error_of([&] { add(x, x); }).find("expected a meta tensor"), std::string::npos);
  // Views are metadata only and work on any device.
  EXPECT_EQ(transpose(x, 0, 1).data_ptr(), x.data_ptr());
}

TEST(SetStorage, RepointsInPlaceKeepingIdentityAndSizes) {
  Tensor w = empty({3, 4}, {DType::kFloat16});
  const TensorImpl* before = w.impl();
  // 3x4 fp16 transposed-layout strides (1, 3) at offset 2 need 2 + 1 + 2*1 + 3*3 = 14 elements,
  // 28 bytes: a 28-byte storage is exactly enough.
  set_storage(w, make_storage(28, Device::cpu()), DimVector{1, 3}, 2);
  EXPECT_EQ(w.impl(), before);
  EXPECT_EQ(w.sizes(), (DimVector{3, 4}));
  EXPECT_EQ(w.strides(), (DimVector{1, 3}));
  EXPECT_EQ(w.storage_offset(), 2);
  EXPECT_FALSE(w.is_contiguous());
  EXPECT_TRUE(w.device().is_cpu());
}

TEST(SetStorage, RejectsAStorageTooSmallForTheLayout) {
  Tensor w = empty({3, 4}, {DType::kFloat16});
  // 12 elements * 2 bytes = 24 bytes needed, 23 offered.
  EXPECT_NE(error_of([&] { set_storage(w, make_storage(23, Device::meta()), DimVector{4, 1}, 0); })
                .find("needs 12 elements of float16 but the storage holds 23 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_storage(w, make_storage(24, Device::meta()), DimVector{1}, 0); })
                .find("1 strides for a tensor of shape [3, 4]"),
            std::string::npos);
}

// Counts what the trace reports for one op.
struct LastOp : TraceSink {
  int64_t bytes_read = -1, bytes_written = -1;
  void on_op(const OpEvent& e) override {
    bytes_read = e.bytes_read;
    bytes_written = e.bytes_written;
  }
};

TEST(TraceBytes, EmbeddingReadsOnlyTheGatheredRows) {
  const Tensor table = empty({50000, 64}, {DType::kBFloat16});
  const Tensor ids = empty({2, 8}, {DType::kInt64});
  LastOp sink;
  {
    TraceScope scope(&sink);
    embedding(table, ids);
  }
  // 16 tokens x 64 bf16 = 2048 bytes of rows, plus 16 int64 ids = 128 bytes; not the 6.4 MB table.
  EXPECT_EQ(sink.bytes_read, 2048 + 128);
  EXPECT_EQ(sink.bytes_written, 2048);
}

}  // namespace
}  // namespace shardplan::tensor
