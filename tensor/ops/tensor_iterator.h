// Output geometry of pointwise ops, the way PyTorch's TensorIterator computes it: broadcast shape,
// then output strides that follow the inputs' memory layout.
//
// Note [Pointwise output strides]
// 1. Fast paths when every operand has the broadcast shape: all contiguous -> contiguous; all
//    channels-last (4-d) -> channels-last; all non-overlapping-and-dense with equal strides ->
//    those strides.
// 2. Otherwise each input's strides are taken on the broadcast shape (broadcast dims get stride 0),
//    dims are insertion-sorted from fastest to slowest by the first input whose strides tell two
//    dims apart (stride 0 says nothing; equal strides put the smaller dim first), and the output is
//    dense in that order. The identity order gives plain contiguous strides.
// This matters for sharding: a transposed activation stays transposed through pointwise ops, and
// the strides decide which later views are free.
#pragma once

#include <span>

#include "tensor/tensor.h"

namespace shardplan::tensor::detail {

struct IterOperand {
  const DimVector* sizes;
  const DimVector* strides;
  bool contiguous;  // the tensor's cached flag (saves recomputing it per op)
};

// The shape of a pointwise output that is surely contiguous (Note [Pointwise output strides], 1),
// or nullptr to take the general path: every operand contiguous and of one shape, 0-dim operands
// (wrapped scalars) broadcasting to it when no dim of the shape has size 0 or 1.
const DimVector* contiguous_output_shape(std::span<const IterOperand> ops);

// Broadcast shape of all operands (an error naming `op` and the shapes if they do not broadcast).
DimVector broadcast_all(std::span<const IterOperand> ops, const char* op);

// Strides of a new output of `shape` for inputs `ops` (wrapped scalars are 0-dim operands).
DimVector pointwise_output_strides(const DimVector& shape, std::span<const IterOperand> ops);

}  // namespace shardplan::tensor::detail
