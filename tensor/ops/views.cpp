// View ops: new sizes/strides/offset over the input's storage (PyTorch's TensorShape.cpp rules).
#include <algorithm>
#include <limits>

#include "base/checked.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace {

// Resolves one -1 in `shape` against `numel` (PyTorch's infer_size).
DimVector infer_size(const DimVector& shape, int64_t numel, const char* op) {
  DimVector out = shape;
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SP_CHECK(infer_at < 0, op, ": only one dimension can be inferred in shape ", shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      SP_CHECK(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ", shape);
      SP_CHECK(mul_into(known, shape[i], known), op, ": shape ", shape,
               " overflows int64");
    }
  }
  if (infer_at >= 0) {
    SP_CHECK(known != 0, op, ": cannot reshape tensor of ", numel,
             " elements into shape ", shape, " because the unspecified dimension size -1 can be "
             "any value and is ambiguous");
    SP_CHECK(numel % known == 0, op, ": shape '", shape, "' is invalid for input of size ", numel);
    out[infer_at] = numel / known;
  } else {
    SP_CHECK(known == numel, op, ": shape '", shape, "' is invalid for input of size ", numel);
  }
  return out;
}

// PyTorch's computeStride: strides that view `oldshape/oldstride` as `newshape` without copying,
// or false when some new dim would span two non-mergeable chunks of the old layout.
bool compute_view_strides(const DimVector& oldshape, const DimVector& oldstride,
                          const DimVector& newshape, DimVector* newstride) {
  newstride->resize(newshape.size());
  if (oldshape.empty()) {
    std::fill(newstride->begin(), newstride->end(), 1);
    return true;
  }
  int64_t numel = 1;
  for (int64_t s : oldshape) numel *= s;
  if (numel == 0 && oldshape == newshape) {
    *newstride = oldstride;
    return true;
  }
  const int64_t nnew = static_cast<int64_t>(newshape.size());
  if (numel == 0) {
    for (int64_t d = nnew - 1; d >= 0; --d) {
      (*newstride)[d] = d == nnew - 1 ? 1 : std::max<int64_t>(newshape[d + 1], 1) * (*newstride)[d + 1];
    }
    return true;
  }
  int64_t view_d = nnew - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= oldshape[tensor_d];
    // End of a chunk of old dims that are mutually contiguous: the new dims must tile it exactly.
    if (tensor_d == 0 || (oldshape[tensor_d - 1] != 1 &&
                          oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        (*newstride)[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor alias(const Tensor& t) {
  return make_view(t, t.sizes(), t.strides(), t.storage_offset());
}

}  // namespace

Tensor view(const Tensor& t, const DimVector& size) {
  DimVector shape = infer_size(size, t.numel(), "view");
  DimVector strides;
  SP_CHECK(compute_view_strides(t.sizes(), t.strides(), shape, &strides),
           "view: view size is not compatible with input tensor's size and stride (at least one "
           "dimension spans across two contiguous subspaces). Use .reshape(...) instead. (sizes ",
           t.sizes(), ", strides ", t.strides(), ", requested ", size, ")");
  Tensor out = make_view(t, std::move(shape), std::move(strides), t.storage_offset());
  detail::trace_view("view", t, out);
  return out;
}

Tensor reshape(const Tensor& t, const DimVector& size) {
  DimVector shape = infer_size(size, t.numel(), "reshape");
  DimVector strides;
  if (compute_view_strides(t.sizes(), t.strides(), shape, &strides)) {
    Tensor out = make_view(t, std::move(shape), std::move(strides), t.storage_offset());
    detail::trace_view("reshape", t, out);
    return out;
  }
  // Not viewable: PyTorch copies to a contiguous tensor, then views that (not a view of `t`).
  detail::require_meta(t, "reshape");
  Tensor out = detail::new_contiguous(shape, t.dtype(), t.device(), "reshape");
  detail::propagate_grad(out, {&t});
  detail::trace_op("reshape", {t}, out, 0);
  return out;
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  const int64_t n = t.dim();
  dim0 = wrap_dim(dim0, n, "transpose");
  dim1 = wrap_dim(dim1, n, "transpose");
  if (n == 0 || dim0 == dim1) return alias(t);
  DimVector sizes = t.sizes(), strides = t.strides();
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("transpose", t, out);
  return out;
}

Tensor t(const Tensor& x) {
  SP_CHECK(x.dim() <= 2, "t: t() expects a tensor with <= 2 dimensions, but self is ", x.dim(),
           "D");
  return x.dim() < 2 ? transpose(x, 0, 0) : transpose(x, 0, 1);
}

Tensor permute(const Tensor& t, const DimVector& dims) {
  const int64_t n = t.dim();
  SP_CHECK(static_cast<int64_t>(dims.size()) == n,
           "permute: number of dimensions in the tensor input does not match the length of the "
           "desired ordering of dimensions i.e. input.dim() = ", n, " is not equal to len(dims) = ",
           dims.size());
  DimVector sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = wrap_dim(dims[i], n, "permute");
    SP_CHECK(!seen[d], "permute: duplicate dims are not allowed (dims ", dims, ")");
    seen[d] = true;
    sizes[i] = t.sizes()[d];
    strides[i] = t.strides()[d];
  }
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("permute", t, out);
  return out;
}

Tensor expand(const Tensor& t, const DimVector& size) {
  const int64_t n = static_cast<int64_t>(size.size());
  const int64_t tn = t.dim();
  SP_CHECK(n >= tn, "expand: the number of sizes provided (", n, ") must be greater or equal to "
           "the number of dimensions in the tensor (", tn, "); sizes ", size, ", tensor ",
           t.sizes());
  DimVector sizes(n), strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t d = tn - n + i;  // the tensor's dim aligned with output dim i, < 0 for new dims
    int64_t s = d >= 0 ? t.sizes()[d] : 1;
    int64_t st = d >= 0 ? t.strides()[d] : (i == n - 1 ? 1 : sizes[i + 1] * strides[i + 1]);
    int64_t target = size[i];
    if (target == -1) {
      SP_CHECK(d >= 0, "expand: The expanded size of the tensor (-1) isn't allowed in a leading, "
               "non-existing dimension ", i);
      target = s;
    }
    SP_CHECK(target >= 0, "expand: Trying to create tensor with negative dimension ", target, ": ",
             size);
    if (s != target) {
      SP_CHECK(s == 1, "expand: The expanded size of the tensor (", target,
               ") must match the existing size (", s, ") at non-singleton dimension ", i,
               ".  Target sizes: ", size, ".  Tensor sizes: ", t.sizes());
      s = target;
      st = 0;
    }
    sizes[i] = s;
    strides[i] = st;
  }
  checked_numel(sizes, "expand");
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("expand", t, out);
  return out;
}

Tensor expand_as(const Tensor& t, const Tensor& other) { return expand(t, other.sizes()); }

Tensor squeeze(const Tensor& t) {
  DimVector sizes, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] == 1) continue;
    sizes.push_back(t.sizes()[d]);
    strides.push_back(t.strides()[d]);
  }
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("squeeze", t, out);
  return out;
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  const int64_t d = wrap_dim(dim, t.dim(), "squeeze");
  if (t.dim() == 0 || t.sizes()[d] != 1) return alias(t);
  DimVector sizes = t.sizes(), strides = t.strides();
  sizes.erase(d);
  strides.erase(d);
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("squeeze", t, out);
  return out;
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  const int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  DimVector sizes = t.sizes(), strides = t.strides();
  const int64_t stride = d >= t.dim() ? 1 : sizes[d] * strides[d];
  sizes.insert(d, 1);
  strides.insert(d, stride);
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset());
  detail::trace_view("unsqueeze", t, out);
  return out;
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  const int64_t s = wrap_dim(start_dim, t.dim(), "flatten");
  const int64_t e = wrap_dim(end_dim, t.dim(), "flatten");
  SP_CHECK(s <= e, "flatten: flatten() has invalid args: start_dim (", start_dim,
           ") cannot come after end_dim (", end_dim, ")");
  if (t.dim() == 0) return reshape(t, {1});
  if (s == e) return t;  // PyTorch returns the input itself
  DimVector shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(t.sizes()[d]);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= t.sizes()[d];
  shape.push_back(merged);
  for (int64_t d = e + 1; d < t.dim(); ++d) shape.push_back(t.sizes()[d]);
  return reshape(t, shape);
}

Tensor unflatten(const Tensor& t, int64_t dim, const DimVector& sizes) {
  const int64_t d = wrap_dim(dim, t.dim(), "unflatten");
  SP_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      SP_CHECK(infer_at < 0, "unflatten: only one dimension can be inferred in sizes ", sizes);
      infer_at = static_cast<int64_t>(i);
    } else {
      SP_CHECK(sizes[i] >= 0, "unflatten: invalid size ", sizes[i], " in ", sizes);
      known *= sizes[i];
    }
  }
  const int64_t dim_size = t.sizes()[d];
  DimVector resolved = sizes;
  if (infer_at >= 0) {
    SP_CHECK(known != 0 && dim_size % known == 0, "unflatten: Provided sizes ", sizes,
             " don't multiply up to the size of dim ", dim, " (", dim_size, ") in the input tensor");
    resolved[infer_at] = dim_size / known;
  } else {
    SP_CHECK(known == dim_size, "unflatten: Provided sizes ", sizes,
             " don't multiply up to the size of dim ", dim, " (", dim_size, ") in the input tensor");
  }
  DimVector shape;
  for (int64_t i = 0; i < d; ++i) shape.push_back(t.sizes()[i]);
  for (int64_t s : resolved) shape.push_back(s);
  for (int64_t i = d + 1; i < t.dim(); ++i) shape.push_back(t.sizes()[i]);
  return view(t, shape);
}

Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start_opt,
             std::optional<int64_t> end_opt, int64_t step) {
  SP_CHECK(t.dim() > 0, "slice: slice() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, t.dim(), "slice");
  SP_CHECK(step > 0, "slice: slice step must be positive, got ", step);
  const int64_t size = t.sizes()[d];
  int64_t start = start_opt.value_or(0);
  int64_t end = end_opt.value_or(std::numeric_limits<int64_t>::max());
  // Python slice clamping.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  DimVector sizes = t.sizes(), strides = t.strides();
  sizes[d] = (end - start + step - 1) / step;
  const int64_t offset = t.storage_offset() + start * strides[d];
  strides[d] *= step;
  Tensor out = make_view(t, std::move(sizes), std::move(strides), offset);
  detail::trace_view("slice", t, out);
  return out;
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  SP_CHECK(t.dim() > 0, "narrow: narrow() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, t.dim(), "narrow");
  const int64_t size = t.sizes()[d];
  if (start != size) start = wrap_dim(start, size, "narrow");  // start == size is a valid empty end
  SP_CHECK(length >= 0 && start <= size - length, "narrow: start (", start, ") + length (", length,
           ") exceeds dimension size (", size, ").");
  return slice(t, d, start, start + length, 1);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  SP_CHECK(t.dim() > 0, "select: select() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, t.dim(), "select");
  const int64_t size = t.sizes()[d];
  SP_CHECK(index >= -size && index < size, "select: index ", index,
           " out of range for tensor of size ", t.sizes(), " at dimension ", dim);
  if (index < 0) index += size;
  DimVector sizes = t.sizes(), strides = t.strides();
  const int64_t offset = t.storage_offset() + index * strides[d];
  sizes.erase(d);
  strides.erase(d);
  Tensor out = make_view(t, std::move(sizes), std::move(strides), offset);
  detail::trace_view("select", t, out);
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  SP_CHECK(t.dim() != 0, "split: split expects at least a 1-dimensional tensor");
  SP_CHECK(split_size >= 0, "split: split expects split_size be non-negative, but got split_size=",
           split_size);
  const int64_t d = wrap_dim(dim, t.dim(), "split");
  const int64_t size = t.sizes()[d];
  SP_CHECK(split_size > 0 || size == 0, "split: split_size can only be 0 if dimension size is 0, "
           "but got dimension size of ", size);
  // At least one split even when split_size > size (PyTorch keeps this for compatibility).
  const int64_t num = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  const int64_t last = split_size - (split_size * num - size);
  std::vector<Tensor> out;
  out.reserve(num);
  for (int64_t i = 0; i < num; ++i) {
    out.push_back(narrow(t, d, i * split_size, i < num - 1 ? split_size : last));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& t, const DimVector& sizes, int64_t dim) {
  SP_CHECK(t.dim() != 0, "split_with_sizes: split expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, t.dim(), "split_with_sizes");
  const int64_t size = t.sizes()[d];
  int64_t total = 0;
  for (int64_t s : sizes) {
    SP_CHECK(s >= 0, "split_with_sizes: split_with_sizes expects split_sizes have only "
             "non-negative entries, but got split_sizes=", sizes);
    total += s;
  }
  SP_CHECK(total == size, "split_with_sizes: split_with_sizes expects split_sizes to sum exactly to ",
           size, " (input tensor's size at dimension ", d, "), but got split_sizes=", sizes);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(t, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  SP_CHECK(t.dim() > 0, "chunk: chunk expects at least a 1-dimensional tensor");
  SP_CHECK(chunks > 0, "chunk: chunk expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t d = wrap_dim(dim, t.dim(), "chunk");
  const int64_t size = t.sizes()[d];
  const int64_t split_size = (size + chunks - 1) / chunks;
  // A zero-size dim keeps the requested number of (empty) chunks, as PyTorch.
  if (split_size == 0 && size == 0) return split_with_sizes(t, DimVector(chunks, 0), d);
  return split(t, split_size, d);
}

std::vector<Tensor> unbind(const Tensor& t, int64_t dim) {
  SP_CHECK(t.dim() > 0, "unbind: Dimension specified as ", dim, " but tensor has no dimensions");
  const int64_t d = wrap_dim(dim, t.dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(t.sizes()[d]);
  for (int64_t i = 0; i < t.sizes()[d]; ++i) out.push_back(select(t, d, i));
  return out;
}

Tensor as_strided(const Tensor& t, const DimVector& size, const DimVector& stride,
                  std::optional<int64_t> storage_offset) {
  SP_CHECK(size.size() == stride.size(), "as_strided: mismatch in length of strides and shape (",
           size, " vs ", stride, ")");
  for (int64_t s : stride) {
    SP_CHECK(s >= 0, "as_strided: Negative strides are not supported at the moment, got strides: ",
             stride);
  }
  const int64_t offset = storage_offset.value_or(t.storage_offset());
  SP_CHECK(offset >= 0, "as_strided: Tensor: invalid storage offset ", offset);
  checked_numel(size, "as_strided");
  const int64_t need = required_storage_elements(size, stride, offset, "as_strided");
  int64_t need_bytes = 0;
  SP_CHECK(mul_into(need, t.itemsize(), need_bytes) &&
               need_bytes <= t.storage()->nbytes(),
           "as_strided: setStorage: sizes ", size, ", strides ", stride, ", storage offset ", offset,
           ", and itemsize ", t.itemsize(), " requiring a storage size of ", need_bytes,
           " are out of bounds for storage of size ", t.storage()->nbytes());
  Tensor out = make_view(t, size, stride, offset);
  detail::trace_view("as_strided", t, out);
  return out;
}

Tensor contiguous(const Tensor& t, MemoryFormat format) {
  SP_CHECK(format != MemoryFormat::kPreserve, "contiguous: preserve memory format is unsupported "
           "by the contiguous operator");
  if (format == MemoryFormat::kChannelsLast) {
    const DimVector strides = channels_last_strides(t.sizes());
    if (compute_channels_last_contiguous_2d(t.sizes(), t.strides())) return t;
    detail::require_meta(t, "contiguous");
    Tensor out = make_fresh(t.sizes(), strides, t.dtype(), t.device(), "contiguous");
    detail::propagate_grad(out, {&t});
    detail::trace_op("contiguous", {t}, out, 0);
    return out;
  }
  if (t.is_contiguous()) return t;
  detail::require_meta(t, "contiguous");
  Tensor out = detail::new_contiguous(t.sizes(), t.dtype(), t.device(), "contiguous");
  detail::propagate_grad(out, {&t});
  detail::trace_op("contiguous", {t}, out, 0);
  return out;
}

Tensor view_as_real(const Tensor& t) {
  SP_CHECK(is_complex(t.dtype()), "view_as_real: view_as_real is only supported for complex "
           "tensors, got ", t.dtype());
  DimVector sizes = t.sizes(), strides = t.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset() * 2,
                         to_real(t.dtype()));
  detail::trace_view("view_as_real", t, out);
  return out;
}

Tensor view_as_complex(const Tensor& t) {
  SP_CHECK(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64,
           "view_as_complex: view_as_complex is only supported for float and double tensors, but "
           "got a tensor of scalar type: ", t.dtype());
  SP_CHECK(t.dim() > 0 && t.sizes().back() == 2, "view_as_complex: Tensor must have a last "
           "dimension of size 2, got sizes ", t.sizes());
  SP_CHECK(t.strides().back() == 1, "view_as_complex: Tensor must have a last dimension with "
           "stride 1, got strides ", t.strides());
  DimVector sizes = t.sizes(), strides = t.strides();
  sizes.pop_back();
  strides.pop_back();
  for (auto& s : strides) {
    SP_CHECK(s % 2 == 0, "view_as_complex: Tensor must have a stride divisible by 2 for all but "
             "last dimension, got strides ", t.strides());
    s /= 2;
  }
  SP_CHECK(t.storage_offset() % 2 == 0, "view_as_complex: Tensor must have a storage_offset "
           "divisible by 2, got ", t.storage_offset());
  Tensor out = make_view(t, std::move(sizes), std::move(strides), t.storage_offset() / 2,
                         to_complex(t.dtype()));
  detail::trace_view("view_as_complex", t, out);
  return out;
}

}  // namespace shardplan::tensor
