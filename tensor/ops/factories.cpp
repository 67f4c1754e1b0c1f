// Factories: new tensors on any device (meta by default). On cpu/cuda the memory is real:
// empty* leave it uninitialized (as PyTorch), zeros/ones/full fill it through tensor/init.h.
#include "tensor/init.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace {

Tensor new_tensor(const DimVector& size, const DimVector* stride, DType dtype,
                  const TensorOptions& opts, const char* op) {
  if (stride == nullptr) {
    Tensor out = make_fresh_contiguous(size, dtype, opts.device, op);
    if (opts.requires_grad) out.set_requires_grad(true);
    return out;
  }
  checked_numel(size, op);
  DimVector strides;
  if (stride != nullptr) {
    SP_CHECK(stride->size() == size.size(), op, ": mismatch in length of strides and shape (", size,
             " vs ", *stride, ")");
    for (int64_t s : *stride) {
      SP_CHECK(s >= 0, op, ": negative strides are not supported, got strides ", *stride);
    }
    strides = *stride;
  } else {
    strides = contiguous_strides(size);
  }
  Tensor out = make_fresh(size, std::move(strides), dtype, opts.device, op);
  if (opts.requires_grad) out.set_requires_grad(true);
  return out;
}

DType inferred_dtype(const Scalar& v) {
  switch (v.kind) {
    case Scalar::Kind::kBool:
      return DType::kBool;
    case Scalar::Kind::kInt:
      return DType::kInt64;
    case Scalar::Kind::kFloat:
      return kDefaultFloat;
    case Scalar::Kind::kComplex:
      return kDefaultComplex;
  }
  return kDefaultFloat;
}

}  // namespace

Tensor empty(const DimVector& size, const TensorOptions& opts, MemoryFormat format) {
  SP_CHECK(format != MemoryFormat::kPreserve,
           "empty: memory format preserve is only valid for "
           "*_like factories");
  if (format == MemoryFormat::kChannelsLast) {
    checked_numel(size, "empty");
    const DimVector strides = channels_last_strides(size);
    return new_tensor(size, &strides, opts.dtype.value_or(kDefaultFloat), opts, "empty");
  }
  return new_tensor(size, nullptr, opts.dtype.value_or(kDefaultFloat), opts, "empty");
}

Tensor empty_strided(const DimVector& size, const DimVector& stride, const TensorOptions& opts) {
  return new_tensor(size, &stride, opts.dtype.value_or(kDefaultFloat), opts, "empty_strided");
}

Tensor full(const DimVector& size, Scalar value, const TensorOptions& opts) {
  const DType dtype = opts.dtype.value_or(inferred_dtype(value));
  Tensor out = new_tensor(size, nullptr, dtype, opts, "full");
  if (!out.is_meta()) fill_constant(out, value);
  return out;
}

Tensor zeros(const DimVector& size, const TensorOptions& opts) {
  return full(size, Scalar(int64_t{0}),
              TensorOptions{opts.dtype.value_or(kDefaultFloat), opts.device, opts.requires_grad});
}

Tensor ones(const DimVector& size, const TensorOptions& opts) {
  return full(size, Scalar(int64_t{1}),
              TensorOptions{opts.dtype.value_or(kDefaultFloat), opts.device, opts.requires_grad});
}

Tensor randn(const DimVector& size, const TensorOptions& opts) {
  const DType dtype = opts.dtype.value_or(kDefaultFloat);
  SP_CHECK(is_floating(dtype) || is_complex(dtype),
           "randn: expected a floating point or complex dtype, got ", dtype);
  // Values on real devices come from init_normal with an explicit seed and key, never from a
  // hidden global generator (docs/architecture.md §5: init is keyed on the global element index).
  SP_CHECK(opts.device.is_meta(), "randn: only meta tensors are created here; on ", opts.device,
           " use empty + init_normal(tensor, seed, key)");
  return new_tensor(size, nullptr, dtype, opts, "randn");
}

Tensor empty_like(const Tensor& t, std::optional<DType> dtype, std::optional<Device> device,
                  MemoryFormat format) {
  // preserve_format: keep the strides of a dense tensor; else dense strides in its memory order.
  DimVector strides;
  if (format == MemoryFormat::kContiguous) {
    strides = contiguous_strides(t.sizes());
  } else if (format == MemoryFormat::kChannelsLast) {
    strides = channels_last_strides(t.sizes());
  } else {
    strides = compute_non_overlapping_and_dense(t.sizes(), t.strides())
                  ? t.strides()
                  : infer_dense_strides(t.sizes(), t.strides());
  }
  TensorOptions opts{dtype.value_or(t.dtype()), device.value_or(t.device()), false};
  return new_tensor(t.sizes(), &strides, *opts.dtype, opts, "empty_like");
}

Tensor zeros_like(const Tensor& t, std::optional<DType> dtype) {
  Tensor out = empty_like(t, dtype);
  if (!out.is_meta()) fill_constant(out, Scalar(int64_t{0}));
  return out;
}

Tensor ones_like(const Tensor& t, std::optional<DType> dtype) {
  Tensor out = empty_like(t, dtype);
  if (!out.is_meta()) fill_constant(out, Scalar(int64_t{1}));
  return out;
}

}  // namespace shardplan::tensor
