#include "tensor/ops/tensor_iterator.h"

#include <array>
#include <vector>

#include "tensor/ops/common.h"

namespace shardplan::tensor {

DimVector broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  DimVector out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SP_CHECK(da == db || da == 1 || db == 1, op, ": The size of tensor a (", da,
             ") must match the size of tensor b (", db, ") at non-singleton dimension ", i,
             " (shapes ", a, " and ", b, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace detail {

const DimVector* contiguous_output_shape(std::span<const IterOperand> ops) {
  const DimVector* shape = nullptr;
  bool zero_dim = false;
  for (const auto& o : ops) {
    if (!o.contiguous) return nullptr;
    if (o.sizes->empty()) {
      zero_dim = true;
    } else if (shape == nullptr) {
      shape = o.sizes;
    } else if (!(*o.sizes == *shape)) {
      return nullptr;
    }
  }
  if (shape == nullptr) return ops.front().sizes;  // all 0-dim
  if (zero_dim) {
    // TensorIterator takes its general path here (a 0-dim operand is "not the same shape"): dims
    // are sorted by the n-dim operands' strides, the 0-dim ones having stride 0 everywhere and so
    // never deciding. A contiguous operand orders dims row-major unless a dim of size 0 or 1
    // carries an arbitrary stride, so only without such dims is the answer surely contiguous.
    for (int64_t size : *shape) {
      if (size <= 1) return nullptr;
    }
  }
  return shape;
}

DimVector broadcast_all(std::span<const IterOperand> ops, const char* op) {
  // The common case, operands of one shape (0-dim ones broadcast to anything), needs no merging.
  const DimVector* first = nullptr;
  bool same = true;
  for (const auto& o : ops) {
    if (o.sizes->empty()) continue;
    if (first == nullptr) {
      first = o.sizes;
    } else {
      same &= *o.sizes == *first;
    }
  }
  if (first == nullptr) return {};
  if (same) return *first;
  DimVector shape = *first;
  for (const auto& o : ops) {
    if (o.sizes != first && !o.sizes->empty()) shape = broadcast_shapes(shape, *o.sizes, op);
  }
  return shape;
}

DimVector pointwise_output_strides(const DimVector& shape, std::span<const IterOperand> ops) {
  const size_t n = shape.size();
  if (n == 0) return {};
  // Fast paths (Note [Pointwise output strides], 1). As in TensorIterator's compute_shape, a mix
  // of 0-dim and n-dim operands is not "same shape": it takes the general path.
  bool same_shape = true, contiguous = true;
  for (const auto& o : ops) {
    same_shape &= (*o.sizes == shape);
    contiguous &= o.contiguous;
  }
  if (same_shape && contiguous) return contiguous_strides(shape);
  if (same_shape) {
    bool channels_last = n == 4, dense = true;
    for (const auto& o : ops) {
      channels_last = channels_last && compute_channels_last_contiguous_2d(*o.sizes, *o.strides);
      dense = dense && compute_non_overlapping_and_dense(*o.sizes, *o.strides);
    }
    if (channels_last) return channels_last_strides(shape);
    if (dense) {
      bool equal = true;
      for (const auto& o : ops) equal &= (*o.strides == *ops.back().strides);
      if (equal) return *ops.back().strides;
    }
  }
  // General path (Note [Pointwise output strides], 2): strides on the broadcast shape, operand k's
  // at bstrides[k * n ...]. Operands are few (where() has three) and shapes short, so they
  // nearly always fit a buffer on the stack.
  const size_t k_ops = ops.size();
  std::array<int64_t, 32> stack_buffer;
  std::vector<int64_t> heap_buffer;
  int64_t* bstrides = stack_buffer.data();
  if (k_ops * n > stack_buffer.size()) {
    heap_buffer.resize(k_ops * n);
    bstrides = heap_buffer.data();
  }
  for (size_t k = 0; k < k_ops; ++k) {
    const IterOperand& o = ops[k];
    int64_t* s = bstrides + k * n;
    const size_t off = n - o.sizes->size();
    for (size_t i = 0; i < off; ++i) s[i] = 0;
    for (size_t i = 0; i < o.sizes->size(); ++i) {
      const bool broadcast = (*o.sizes)[i] == 1 && shape[off + i] != 1;
      s[off + i] = broadcast ? 0 : (*o.strides)[i];
    }
  }
  std::array<int64_t, 16> stack_perm;
  std::vector<int64_t> heap_perm;
  int64_t* perm = stack_perm.data();
  if (n > stack_perm.size()) {
    heap_perm.resize(n);
    perm = heap_perm.data();
  }
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(n - 1 - i);
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (size_t k = 0; k < k_ops; ++k) {
      const int64_t* s = bstrides + k * n;
      const int64_t s0 = s[d0], s1 = s[d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (size_t i = 1; i < n; ++i) {
    size_t d1 = i;
    for (size_t d0 = i; d0-- > 0;) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool inverted = true;
  for (size_t i = 0; i < n; ++i) inverted &= perm[i] == static_cast<int64_t>(n - 1 - i);
  if (inverted) return contiguous_strides(shape);
  // Dense in perm order; like PyTorch, a 0-size dim zeroes the strides of slower dims.
  DimVector out(n);
  int64_t* out_data = out.data();
  int64_t next = 1;
  for (size_t i = 0; i < n; ++i) {
    out_data[perm[i]] = next;
    next *= shape[perm[i]];
  }
  return out;
}

}  // namespace detail
}  // namespace shardplan::tensor
