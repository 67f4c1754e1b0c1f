#include "tensor/ops/tensor_iterator.h"

#include <array>

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

bool same_shape_contiguous(std::span<const IterOperand> ops) {
  for (const auto& o : ops) {
    if (!o.contiguous || !(*o.sizes == *ops.front().sizes)) return false;
  }
  return true;
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
  DimVector shape;
  for (const auto& o : ops) shape = broadcast_shapes(shape, *o.sizes, op);
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
  // General path (Note [Pointwise output strides], 2): strides on the broadcast shape.
  // Operands are few (where() has three), so their strides live on the stack.
  constexpr size_t kMaxOperands = 4;
  SP_ASSERT(ops.size() <= kMaxOperands);
  std::array<DimVector, kMaxOperands> bstrides_storage;
  const std::span<DimVector> bstrides(bstrides_storage.data(), ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    const IterOperand& o = ops[k];
    DimVector& s = bstrides[k];
    s.resize(n, 0);
    const size_t off = n - o.sizes->size();
    for (size_t i = 0; i < o.sizes->size(); ++i) {
      const bool broadcast = (*o.sizes)[i] == 1 && shape[off + i] != 1;
      s[off + i] = broadcast ? 0 : (*o.strides)[i];
    }
  }
  DimVector perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(n - 1 - i);
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const auto& s : bstrides) {
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
  int64_t next = 1;
  for (size_t i = 0; i < n; ++i) {
    out[perm[i]] = next;
    next *= shape[perm[i]];
  }
  return out;
}

}  // namespace detail
}  // namespace shardplan::tensor
