// Type promotion checked against PyTorch's documented table (torch.promote_types and the
// "Type promotion" section of the torch docs), written out by hand; float8 rules from PyTorch >= 2.1
// (c10/core/ScalarType.cpp: float8 only promotes with itself), which torch 1.13 predates.
#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan::tensor {
namespace {

TEST(DType, ItemSizesMatchPyTorchElementSize) {
  EXPECT_EQ(itemsize(DType::kBool), 1);
  EXPECT_EQ(itemsize(DType::kFloat8E4M3FN), 1);
  EXPECT_EQ(itemsize(DType::kBFloat16), 2);
  EXPECT_EQ(itemsize(DType::kFloat16), 2);
  EXPECT_EQ(itemsize(DType::kInt32), 4);
  EXPECT_EQ(itemsize(DType::kComplex64), 8);
  EXPECT_EQ(itemsize(DType::kComplex128), 16);
}

TEST(DType, ParsesTorchNamesAndShortForms) {
  EXPECT_EQ(parse_dtype("torch.bfloat16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("half"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("long"), DType::kInt64);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::kFloat8E4M3FN);
  EXPECT_EQ(parse_dtype("fp8_e5m2"), DType::kFloat8E5M2);
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  }
}

TEST(DType, UnknownNameIsAnErrorNamingIt) {
  try {
    parse_dtype("float17");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'float17'"), std::string::npos) << e.what();
  }
}

TEST(PromoteTypes, FollowsPyTorchTable) {
  EXPECT_EQ(promote_types(DType::kUInt8, DType::kInt8), DType::kInt16);
  EXPECT_EQ(promote_types(DType::kUInt8, DType::kInt32), DType::kInt32);
  EXPECT_EQ(promote_types(DType::kBool, DType::kUInt8), DType::kUInt8);
  EXPECT_EQ(promote_types(DType::kInt64, DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(promote_types(DType::kFloat16, DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(promote_types(DType::kBFloat16, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(promote_types(DType::kComplex64, DType::kFloat64), DType::kComplex128);
  EXPECT_EQ(promote_types(DType::kComplex64, DType::kFloat16), DType::kComplex64);
  EXPECT_EQ(promote_types(DType::kInt64, DType::kComplex64), DType::kComplex64);
}

TEST(PromoteTypes, IsSymmetric) {
  for (int i = 0; i < kNumDTypes; ++i) {
    for (int j = 0; j < kNumDTypes; ++j) {
      const auto a = static_cast<DType>(i), b = static_cast<DType>(j);
      if (is_float8(a) || is_float8(b)) continue;
      EXPECT_EQ(promote_types(a, b), promote_types(b, a)) << a << " " << b;
    }
  }
}

TEST(PromoteTypes, Float8PromotesOnlyWithItself) {
  EXPECT_EQ(promote_types(DType::kFloat8E4M3FN, DType::kFloat8E4M3FN), DType::kFloat8E4M3FN);
  EXPECT_THROW(promote_types(DType::kFloat8E4M3FN, DType::kFloat32), Error);
  EXPECT_THROW(promote_types(DType::kFloat8E5M2, DType::kFloat8E4M3FN), Error);
  EXPECT_THROW(promote_types(DType::kBool, DType::kFloat8E5M2), Error);
}

// The torch docs' examples: dimensioned tensors outrank 0-dim tensors, which outrank numbers, unless
// the lower tier has a higher category.
TEST(ResultType, ScalarsOnlyMatterWhenOfHigherCategory) {
  ResultType int_plus_float;  // int tensor + 5.5 -> default float
  int_plus_float.add_tensor(DType::kInt32, false);
  int_plus_float.add_scalar(Scalar(5.5));
  EXPECT_EQ(int_plus_float.result(), DType::kFloat32);

  ResultType half_plus_double0d;  // float16 tensor + 0-dim float64 tensor -> float16
  half_plus_double0d.add_tensor(DType::kFloat16, false);
  half_plus_double0d.add_tensor(DType::kFloat64, true);
  EXPECT_EQ(half_plus_double0d.result(), DType::kFloat16);

  ResultType int_plus_double0d;  // int32 tensor + 0-dim float64 tensor -> float64 (higher category)
  int_plus_double0d.add_tensor(DType::kInt32, false);
  int_plus_double0d.add_tensor(DType::kFloat64, true);
  EXPECT_EQ(int_plus_double0d.result(), DType::kFloat64);

  ResultType uint8_plus_int;  // uint8 tensor + 1000 -> uint8 (same category: the tensor wins)
  uint8_plus_int.add_tensor(DType::kUInt8, false);
  uint8_plus_int.add_scalar(Scalar(int64_t{1000}));
  EXPECT_EQ(uint8_plus_int.result(), DType::kUInt8);

  ResultType bool_plus_int;  // bool tensor + 1 -> int64
  bool_plus_int.add_tensor(DType::kBool, false);
  bool_plus_int.add_scalar(Scalar(int64_t{1}));
  EXPECT_EQ(bool_plus_int.result(), DType::kInt64);

  ResultType float_plus_complex;  // float16 tensor + 1j -> complex of float16 is not supported
  float_plus_complex.add_tensor(DType::kFloat32, false);
  float_plus_complex.add_scalar(Scalar::complex(0, 1));
  EXPECT_EQ(float_plus_complex.result(), DType::kComplex64);

  ResultType double_plus_complex;  // float64 tensor + 1j -> complex128 (keeps the precision)
  double_plus_complex.add_tensor(DType::kFloat64, false);
  double_plus_complex.add_scalar(Scalar::complex(0, 1));
  EXPECT_EQ(double_plus_complex.result(), DType::kComplex128);
}

}  // namespace
}  // namespace shardplan::tensor
