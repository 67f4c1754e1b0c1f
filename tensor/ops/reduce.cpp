// Reductions: output shapes with keepdim, PyTorch's result dtypes and errors. Outputs are
// contiguous (PyTorch's resize_reduction). One FLOP per input element (var: Note in var()).

#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace {

struct Reduced {
  DimVector shape;
  std::vector<bool> reduced;  // per input dim
};

// Wraps `dims` (empty = every dim), rejects repeats, and gives the output shape.
Reduced reduce_shape(const Tensor& x, const DimVector& dims, bool keepdim, const char* op) {
  const int64_t n = x.dim();
  Reduced r;
  r.reduced.assign(std::max<int64_t>(n, 1), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, n, op);
    SP_CHECK(!r.reduced[w], op, ": dim ", w, " appears multiple times in the list of dims");
    r.reduced[w] = true;
  }
  for (int64_t d = 0; d < n; ++d) {
    if (!r.reduced[d]) {
      r.shape.push_back(x.sizes()[d]);
    } else if (keepdim) {
      r.shape.push_back(1);
    }
  }
  return r;
}

Tensor reduction_out(const Tensor& x, const Reduced& r, DType dtype, const char* op,
                     double flops_per_element) {
  detail::require_meta(x, op);
  Tensor out = detail::new_contiguous(r.shape, dtype, x.device(), op);
  detail::propagate_grad(out, {&x});
  detail::trace_op(op, {x}, out, flops_per_element * static_cast<double>(x.numel()));
  return out;
}

// amax/amin/argmax cannot reduce an empty dim: there is no identity element.
void require_nonempty_reduced(const Tensor& x, const Reduced& r, const char* op) {
  for (int64_t d = 0; d < x.dim(); ++d) {
    SP_CHECK(!r.reduced[d] || x.sizes()[d] != 0, op, "(): Expected reduction dim ", d,
             " to have non-zero size.");
  }
}

}  // namespace

Tensor sum(const Tensor& x, const DimVector& dims, bool keepdim, std::optional<DType> dtype) {
  const Reduced r = reduce_shape(x, dims, keepdim, "sum");
  // Integer and bool sums accumulate in int64, as PyTorch.
  const DType out = dtype.value_or(is_integral(x.dtype(), true) ? DType::kInt64 : x.dtype());
  return reduction_out(x, r, out, "sum", 1);
}

Tensor mean(const Tensor& x, const DimVector& dims, bool keepdim, std::optional<DType> dtype) {
  if (dtype) {
    SP_CHECK(is_floating(*dtype) || is_complex(*dtype), "mean(): could not infer output dtype. "
             "Optional dtype must be either a floating point or complex dtype. Got: ", *dtype);
  } else {
    SP_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), "mean(): could not infer output "
             "dtype. Input dtype must be either a floating point or complex dtype. Got: ",
             x.dtype());
  }
  const Reduced r = reduce_shape(x, dims, keepdim, "mean");
  return reduction_out(x, r, dtype.value_or(x.dtype()), "mean", 1);
}

Tensor amax(const Tensor& x, const DimVector& dims, bool keepdim) {
  SP_CHECK(!is_complex(x.dtype()), "amax: not implemented for complex tensors (got ", x.dtype(),
           ")");
  const Reduced r = reduce_shape(x, dims, keepdim, "amax");
  require_nonempty_reduced(x, r, "amax");
  return reduction_out(x, r, x.dtype(), "amax", 1);
}

Tensor amin(const Tensor& x, const DimVector& dims, bool keepdim) {
  SP_CHECK(!is_complex(x.dtype()), "amin: not implemented for complex tensors (got ", x.dtype(),
           ")");
  const Reduced r = reduce_shape(x, dims, keepdim, "amin");
  require_nonempty_reduced(x, r, "amin");
  return reduction_out(x, r, x.dtype(), "amin", 1);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  SP_CHECK(!is_complex(x.dtype()), "argmax: not implemented for complex tensors (got ", x.dtype(),
           ")");
  if (!dim) {
    SP_CHECK(x.numel() != 0, "argmax(): Expected reduction dim to be specified for "
             "input.numel() == 0.");
  }
  const Reduced r = reduce_shape(x, dim ? DimVector{*dim} : DimVector{}, keepdim, "argmax");
  require_nonempty_reduced(x, r, "argmax");
  return reduction_out(x, r, DType::kInt64, "argmax", 1);
}

Tensor var(const Tensor& x, std::optional<DimVector> dims, double correction, bool keepdim) {
  SP_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), "var: std and var only support "
           "floating point and complex dtypes, got ", x.dtype());
  const Reduced r = reduce_shape(x, dims.value_or(DimVector{}), keepdim, "var");
  // Welford's update per element: a subtraction, a division and two multiply-adds, about 4 FLOPs.
  constexpr double kVarFlopsPerElement = 4;
  (void)correction;  // a value choice, not a shape one
  return reduction_out(x, r, to_real(x.dtype()), "var", kVarFlopsPerElement);
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, std::optional<DimVector> dims,
                                   double correction, bool keepdim) {
  Tensor v = var(x, dims, correction, keepdim);
  const Reduced r = reduce_shape(x, dims.value_or(DimVector{}), keepdim, "var_mean");
  // The mean keeps the input's dtype (complex stays complex); var is real.
  Tensor m = detail::new_contiguous(r.shape, x.dtype(), x.device(), "var_mean");
  detail::propagate_grad(m, {&x});
  return {v, m};
}

}  // namespace shardplan::tensor
