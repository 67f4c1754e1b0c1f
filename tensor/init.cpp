#include "tensor/init.h"

#include "base/error.h"
#include "kernels/init_fill.h"

namespace shardplan::tensor {

kernels::ElementType kernel_element_type(DType t) {
  switch (t) {
    case DType::kBool: return kernels::ElementType::kBool;
    case DType::kUInt8: return kernels::ElementType::kUInt8;
    case DType::kInt8: return kernels::ElementType::kInt8;
    case DType::kInt16: return kernels::ElementType::kInt16;
    case DType::kInt32: return kernels::ElementType::kInt32;
    case DType::kInt64: return kernels::ElementType::kInt64;
    case DType::kFloat8E4M3FN: return kernels::ElementType::kFloat8E4M3FN;
    case DType::kFloat8E5M2: return kernels::ElementType::kFloat8E5M2;
    case DType::kFloat16: return kernels::ElementType::kFloat16;
    case DType::kBFloat16: return kernels::ElementType::kBFloat16;
    case DType::kFloat32: return kernels::ElementType::kFloat32;
    case DType::kFloat64: return kernels::ElementType::kFloat64;
    case DType::kComplex64: return kernels::ElementType::kComplex64;
    case DType::kComplex128: break;
  }
  SP_FAIL("init: no fill kernel for ", t, " tensors");
}

namespace {

void fill(const Tensor& t, const kernels::FillSpec& spec, const GlobalBox* box, const char* op) {
  SP_CHECK(t.defined(), op, ": undefined tensor");
  SP_CHECK(t.device().is_cpu(), op, ": expected a cpu tensor, got one on ", t.device(),
           " (meta tensors hold no memory; cuda fills go through the materialization layer)");
  const kernels::ElementType et = kernel_element_type(t.dtype());
  if (auto why = kernels::check_fill_spec(et, spec)) SP_FAIL(op, ": ", *why);
  const int64_t n = t.dim();
  DimVector global_strides;
  int64_t global_offset = 0;
  if (box == nullptr) {
    global_strides = contiguous_strides(t.sizes());
  } else {
    SP_CHECK(static_cast<int64_t>(box->global_sizes.size()) == n &&
                 static_cast<int64_t>(box->global_offset.size()) == n,
             op, ": global box of rank ", box->global_sizes.size(), " for a ", n, "-d tensor");
    checked_numel(box->global_sizes, op);
    global_strides = contiguous_strides(box->global_sizes);
    for (int64_t d = 0; d < n; ++d) {
      SP_CHECK(box->global_offset[d] >= 0 &&
                   box->global_offset[d] + t.sizes()[d] <= box->global_sizes[d],
               op, ": local shape ", t.sizes(), " at offset ", box->global_offset,
               " does not fit in the global shape ", box->global_sizes);
      global_offset += box->global_offset[d] * global_strides[d];
    }
  }
  const kernels::FillRegion region{static_cast<int>(n), t.sizes().data(), t.strides().data(),
                                   global_strides.data(), global_offset};
  kernels::fill_cpu(t.data_ptr(), et, region, spec);
}

}  // namespace

void fill_constant(const Tensor& t, Scalar value) {
  SP_CHECK(value.kind != Scalar::Kind::kComplex || value.imag == 0,
           "fill_constant: complex constants with an imaginary part are not supported");
  const double v = value.kind == Scalar::Kind::kInt ? static_cast<double>(value.i) : value.real;
  fill(t, {kernels::FillKind::kConstant, v, 0, 0, 0}, nullptr, "fill_constant");
}

void init_normal(const Tensor& t, InitKey key, double mean, double std, const GlobalBox* box) {
  fill(t, {kernels::FillKind::kNormal, mean, std, key.seed, kernels::tensor_key_from_name(key.name)},
       box, "init_normal");
}

void init_uniform(const Tensor& t, InitKey key, double low, double high, const GlobalBox* box) {
  fill(t, {kernels::FillKind::kUniform, low, high, key.seed,
           kernels::tensor_key_from_name(key.name)},
       box, "init_uniform");
}

}  // namespace shardplan::tensor
