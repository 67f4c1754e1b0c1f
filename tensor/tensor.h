// Tensor: a shared handle to TensorImpl, PyTorch's tensor metadata without data on meta.
// Views share the StorageImpl of their base; ops in tensor/ops.h build new handles.
//   Tensor x = empty({4, 8}, {DType::kBFloat16});          // meta by default
//   Tensor y = transpose(x, 0, 1);  y.is_view() && y.base().is_same(x)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/dim_vector.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace shardplan::tensor {

struct TensorImpl {
  DimVector sizes;             // INVARIANT: every size >= 0
  DimVector strides;           // INVARIANT: same length as sizes; in elements
  int64_t storage_offset = 0;  // in elements
  int64_t numel = 1;           // INVARIANT: product of sizes, checked against overflow
  StoragePtr storage;          // INVARIANT: non-null, large enough for sizes/strides/offset
  std::shared_ptr<TensorImpl> view_base;  // the root non-view tensor (PyTorch's ._base), or null
  DType dtype = DType::kFloat32;
  bool is_contiguous = true;  // cached by refresh_metadata()
  bool requires_grad = false;
  bool is_leaf = true;
  bool is_parameter = false;

  // Recomputes numel and contiguity after sizes/strides change (the one place they are derived).
  void refresh_metadata();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(impl_->sizes.size()); }
  const DimVector& sizes() const { return impl_->sizes; }
  const DimVector& strides() const { return impl_->strides; }
  // `d` may be negative (counted from the end), as in PyTorch.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return impl_->numel; }
  int64_t storage_offset() const { return impl_->storage_offset; }
  DType dtype() const { return impl_->dtype; }
  int64_t itemsize() const { return tensor::itemsize(impl_->dtype); }
  // numel * itemsize: the bytes this tensor's elements occupy (not its storage's size).
  int64_t nbytes() const;
  const Device& device() const { return impl_->storage->device(); }
  const StoragePtr& storage() const { return impl_->storage; }
  bool is_meta() const { return device().is_meta(); }
  bool is_contiguous() const { return impl_->is_contiguous; }
  bool is_view() const { return impl_->view_base != nullptr; }
  // The root tensor this is a view of, or an undefined Tensor.
  Tensor base() const { return Tensor(impl_->view_base); }
  bool requires_grad() const { return impl_->requires_grad; }
  bool is_leaf() const { return impl_->is_leaf; }
  bool is_parameter() const { return impl_->is_parameter; }
  void set_requires_grad(bool r);
  void set_is_parameter(bool p) { impl_->is_parameter = p; }
  // First element's address, or nullptr on meta.
  void* data_ptr() const;
  // Same TensorImpl (PyTorch's `a is b`).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // Share a storage (views of one another or of one base).
  bool shares_storage(const Tensor& o) const { return impl_->storage == o.impl_->storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// "Tensor(sizes=[2, 3], strides=[3, 1], offset=0, dtype=float32, device=meta)"
std::string describe(const Tensor& t);

// ---- Layout helpers shared by the ops (c10 names in comments) ----

// Row-major strides; size-0/1 dims get the stride they would have with size 1 (c10 contiguous).
DimVector contiguous_strides(std::span<const int64_t> sizes);
// Product of sizes, throwing shardplan::Error naming `op` and the shape on int64 overflow or a
// negative size.
int64_t checked_numel(std::span<const int64_t> sizes, const char* op);
// Elements a storage needs to back this view: 0 if numel == 0, else offset + 1 + sum
// (size-1)*stride; overflow-checked. Negative strides are rejected by the callers that create
// views.
int64_t required_storage_elements(std::span<const int64_t> sizes, std::span<const int64_t> strides,
                                  int64_t offset, const char* op);
bool compute_contiguous(std::span<const int64_t> sizes, std::span<const int64_t> strides);
bool compute_non_overlapping_and_dense(std::span<const int64_t> sizes,
                                       std::span<const int64_t> strides);
// NHWC strides of a 4-d shape (c10's get_channels_last_strides_2d).
DimVector channels_last_strides(std::span<const int64_t> sizes);
bool compute_channels_last_contiguous_2d(std::span<const int64_t> sizes,
                                         std::span<const int64_t> strides);
// Dense strides that keep the memory order of `strides` (c10's infer_dense_strides, used by
// empty_like(preserve_format) and pointwise ops).
DimVector infer_dense_strides(std::span<const int64_t> sizes, std::span<const int64_t> strides);
// Wraps a possibly negative dim into [0, ndim); a 0-dim tensor accepts -1 and 0, as in PyTorch.
// Throws "op: Dimension out of range (expected to be in range of [lo, hi], but got d)".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// ---- Construction (for ops and loaders) ----

// A new tensor viewing `storage`; records `base` as the view base (its own base if it has one).
Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t offset);
Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t offset,
                 DType dtype);
// A new non-view tensor with its own storage of exactly the bytes its layout needs.
Tensor make_fresh(DimVector sizes, DimVector strides, DType dtype, Device device, const char* op);
// make_fresh with row-major strides (the common case, without re-deriving what it knows).
Tensor make_fresh_contiguous(DimVector sizes, DType dtype, Device device, const char* op);
// Points `t` at new memory in place, keeping its identity, sizes, dtype and flags (c10's set_data;
// to_empty uses it so that ties and module references stay valid). The storage must hold the
// layout; throws shardplan::Error naming it otherwise.
void set_storage(Tensor& t, StoragePtr storage, DimVector strides, int64_t offset);
// Wraps an existing storage without making a view (loaders, to_empty).
Tensor make_on_storage(StoragePtr storage, DimVector sizes, DimVector strides, int64_t offset,
                       DType dtype, const char* op);

}  // namespace shardplan::tensor
