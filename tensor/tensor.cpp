#include "tensor/tensor.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/free_list_allocator.h"

namespace shardplan::tensor {

void TensorImpl::refresh_metadata() {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;  // callers validated with checked_numel before building
  numel = n;
  is_contiguous = compute_contiguous(sizes, strides);
}

int64_t Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }

int64_t Tensor::nbytes() const {
  // Cannot overflow: storages are created with a checked byte count covering every element.
  return impl_->numel * itemsize();
}

void Tensor::set_requires_grad(bool r) {
  SP_CHECK(!r || is_floating(dtype()) || is_complex(dtype()),
           "only Tensors of floating point and complex dtype can require gradients, got ", dtype());
  impl_->requires_grad = r;
}

void* Tensor::data_ptr() const {
  void* d = impl_->storage->data();
  if (d == nullptr) return nullptr;
  return static_cast<char*>(d) + impl_->storage_offset * itemsize();
}

std::string describe(const Tensor& t) {
  std::ostringstream os;
  if (!t.defined()) return "Tensor(undefined)";
  os << "Tensor(sizes=" << t.sizes() << ", strides=" << t.strides()
     << ", offset=" << t.storage_offset() << ", dtype=" << t.dtype() << ", device=" << t.device()
     << ")";
  return os.str();
}

DimVector contiguous_strides(std::span<const int64_t> sizes) {
  DimVector strides(sizes.size());
  int64_t* out = strides.data();  // one inline-or-heap branch, not one per element
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    out[i] = s;
    // Cannot overflow for validated shapes: the product of max(size, 1) is <= numel or a 0-size
    // tensor's product of the non-zero sizes, which checked_numel bounds separately.
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t checked_numel(std::span<const int64_t> sizes, const char* op) {
  int64_t n = 1;
  bool overflow = false;
  int64_t nonzero_product = 1;  // also bound the product of non-zero sizes: strides are built on it
  for (int64_t s : sizes) {
    SP_CHECK(s >= 0, op, ": Trying to create tensor with negative dimension ", s, ": ", sizes);
    if (s != 0) overflow |= !mul_into(nonzero_product, s, nonzero_product);
    n = s == 0 ? 0 : n;
  }
  SP_CHECK(!overflow, op, ": shape ", sizes, " has more elements than int64 can count");
  return n == 0 ? 0 : nonzero_product;
}

int64_t required_storage_elements(std::span<const int64_t> sizes, std::span<const int64_t> strides,
                                  int64_t offset, const char* op) {
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
  }
  bool overflow = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t term = 0;
    overflow |= !mul_into(sizes[i] - 1, strides[i], term);
    overflow |= !add_into(extent, term, extent);
  }
  overflow |= !add_into(extent, offset, extent);
  SP_CHECK(!overflow, op, ": sizes ", sizes, " with strides ", strides, " and offset ", offset,
           " address more elements than int64 can count");
  return extent;
}

bool compute_contiguous(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
  }
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool compute_non_overlapping_and_dense(std::span<const int64_t> sizes,
                                       std::span<const int64_t> strides) {
  const size_t n = sizes.size();
  if (n == 1) return sizes[0] < 2 || strides[0] == 1;
  DimVector perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  // Size-0/1 dims sort last: they do not constrain the layout.
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t required = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = sizes[perm[i]];
    if (s < 2) return true;
    if (strides[perm[i]] != required) return false;
    required *= s;
  }
  return true;
}

DimVector channels_last_strides(std::span<const int64_t> sizes) {
  SP_CHECK(sizes.size() == 4, "required rank 4 tensor to use channels_last format, got shape ",
           sizes);
  DimVector s(4);
  s[1] = 1;
  s[3] = sizes[1];
  s[2] = s[3] * sizes[3];
  s[0] = s[2] * sizes[2];
  return s;
}

bool compute_channels_last_contiguous_2d(std::span<const int64_t> sizes,
                                         std::span<const int64_t> strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

DimVector infer_dense_strides(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  const size_t n = sizes.size();
  if (n == 0) return {};
  if (n == 1) return {1};
  // perm[0] is the fastest-moving dim; start from row-major (n-1, ..., 0) and insertion-sort by
  // stride, leaving stride-0 dims where they are: the rule TensorIterator uses, so pointwise ops
  // and empty_like agree (Note [Pointwise output strides] in ops/pointwise.cpp).
  DimVector perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(n - 1 - i);
  auto should_swap = [&](int64_t d0, int64_t d1) {
    const int64_t s0 = strides[d0], s1 = strides[d1];
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    return sizes[d0] > sizes[d1] ? 1 : 0;
  };
  for (size_t i = 1; i < n; ++i) {
    size_t d1 = i;
    for (size_t j = 1; j <= i; ++j) {
      const size_t d0 = i - j;
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  DimVector out(n);
  int64_t cur = 1;
  for (size_t i = 0; i < n; ++i) {
    out[perm[i]] = cur;
    if (sizes[perm[i]] > 1) cur *= sizes[perm[i]];
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // a scalar accepts dims -1 and 0
  SP_CHECK(dim >= -n && dim < n, op, ": Dimension out of range (expected to be in range of [", -n,
           ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

namespace {

std::shared_ptr<TensorImpl> new_impl(StoragePtr storage, DimVector&& sizes, DimVector&& strides,
                                     int64_t offset, DType dtype) {
  auto impl = std::allocate_shared<TensorImpl>(FreeListAllocator<TensorImpl>{});
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->storage_offset = offset;
  impl->storage = std::move(storage);
  impl->dtype = dtype;
  impl->refresh_metadata();
  return impl;
}

// A fresh tensor whose numel and contiguity the caller already computed (they are what
// refresh_metadata would derive; asserted in debug builds).
Tensor fresh_tensor(DimVector&& sizes, DimVector&& strides, DType dtype, Device device,
                    int64_t numel, bool contiguous, const char* op) {
  const int64_t elems = numel == 0   ? 0
                        : contiguous ? numel
                                     : required_storage_elements(sizes, strides, 0, op);
  int64_t bytes = 0;
  SP_CHECK(mul_into(elems, itemsize(dtype), bytes), op, ": ", elems,
           " elements of ", dtype, " overflow int64 bytes");
  auto impl = std::allocate_shared<TensorImpl>(FreeListAllocator<TensorImpl>{});
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->storage = make_storage(bytes, device);
  impl->dtype = dtype;
  impl->numel = numel;
  impl->is_contiguous = contiguous;
#ifndef NDEBUG
  const int64_t cached_numel = impl->numel;
  impl->refresh_metadata();
  SP_ASSERT(impl->numel == cached_numel && impl->is_contiguous == contiguous);
#endif
  return Tensor(std::move(impl));
}

}  // namespace

Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t offset) {
  return make_view(base, std::move(sizes), std::move(strides), offset, base.dtype());
}

Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t offset,
                 DType dtype) {
  auto impl = new_impl(base.storage(), std::move(sizes), std::move(strides), offset, dtype);
  impl->view_base = base.is_view() ? base.impl()->view_base : base.impl_ptr();
  impl->requires_grad = base.requires_grad();
  impl->is_leaf = !impl->requires_grad;
  return Tensor(std::move(impl));
}

Tensor make_fresh(DimVector sizes, DimVector strides, DType dtype, Device device, const char* op) {
  const int64_t numel = checked_numel(sizes, op);
  const bool contiguous = compute_contiguous(sizes, strides);
  return fresh_tensor(std::move(sizes), std::move(strides), dtype, device, numel, contiguous, op);
}

Tensor make_fresh_contiguous(DimVector sizes, DType dtype, Device device, const char* op) {
  const int64_t numel = checked_numel(sizes, op);  // first: contiguous_strides relies on it
  DimVector strides = contiguous_strides(sizes);
  return fresh_tensor(std::move(sizes), std::move(strides), dtype, device, numel, true, op);
}

Tensor make_on_storage(StoragePtr storage, DimVector sizes, DimVector strides, int64_t offset,
                       DType dtype, const char* op) {
  checked_numel(sizes, op);
  SP_CHECK(offset >= 0, op, ": storage offset must be non-negative, got ", offset);
  const int64_t elems = required_storage_elements(sizes, strides, offset, op);
  int64_t bytes = 0;
  SP_CHECK(mul_into(elems, itemsize(dtype), bytes) && bytes <= storage->nbytes(),
           op, ": sizes ", sizes, ", strides ", strides, ", offset ", offset, " of ", dtype,
           " need ", elems, " elements but the storage holds ", storage->nbytes(), " bytes");
  return Tensor(new_impl(std::move(storage), std::move(sizes), std::move(strides), offset, dtype));
}

void set_storage(Tensor& t, StoragePtr storage, DimVector strides, int64_t offset) {
  SP_CHECK(storage != nullptr, "set_storage: null storage");
  SP_CHECK(strides.size() == t.sizes().size(), "set_storage: ", strides.size(),
           " strides for a tensor of shape ", t.sizes());
  SP_CHECK(offset >= 0, "set_storage: storage offset must be non-negative, got ", offset);
  const int64_t elems = required_storage_elements(t.sizes(), strides, offset, "set_storage");
  int64_t bytes = 0;
  SP_CHECK(mul_into(elems, t.itemsize(), bytes) && bytes <= storage->nbytes(),
           "set_storage: shape ", t.sizes(), " with strides ", strides, " and offset ", offset,
           " needs ", elems, " elements of ", t.dtype(), " but the storage holds ",
           storage->nbytes(), " bytes");
  TensorImpl& impl = *t.impl();
  impl.storage = std::move(storage);
  impl.strides = std::move(strides);
  impl.storage_offset = offset;
  impl.refresh_metadata();
}

}  // namespace shardplan::tensor
