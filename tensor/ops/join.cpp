// cat and stack: PyTorch's shape rules, including the legacy skip of 1-d empty tensors in cat.
#include "base/checked.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  SP_CHECK(!tensors.empty(), "cat: torch.cat(): expected a non-empty list of Tensors");
  ResultType rt;
  const Tensor* ref = nullptr;  // the first tensor that is not a legacy 1-d empty one
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    SP_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (at position ", i,
             ") cannot be concatenated");
    detail::require_meta(t, "cat");
    if (i > 0) detail::require_same_device(tensors[0], t, "cat");
    rt.add_tensor(t.dtype(), false);
    // Legacy rule: a tensor of shape [0] joins any cat and contributes nothing.
    const bool skip = t.dim() == 1 && t.sizes()[0] == 0;
    if (!skip && ref == nullptr) ref = &t;
  }
  const DType dtype = rt.result();
  if (ref == nullptr) {
    Tensor out = detail::new_contiguous({0}, dtype, tensors[0].device(), "cat");
    return out;
  }
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  DimVector shape = ref->sizes();
  shape[d] = 0;
  bool all_channels_last = true;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.sizes()[0] == 0) continue;
    SP_CHECK(t.dim() == ref->dim(), "cat: Tensors must have same number of dimensions: got ",
             ref->dim(), " and ", t.dim());
    for (int64_t j = 0; j < t.dim(); ++j) {
      if (j == d) continue;
      SP_CHECK(t.sizes()[j] == ref->sizes()[j], "cat: Sizes of tensors must match except in "
               "dimension ", d, ". Expected size ", ref->sizes()[j], " but got size ",
               t.sizes()[j], " for tensor number ", i, " in the list.");
    }
    SP_CHECK(add_into(shape[d], t.sizes()[d], shape[d]), "cat: size along dim ",
             d, " overflows int64");
    all_channels_last &= compute_channels_last_contiguous_2d(t.sizes(), t.strides()) &&
                         !t.is_contiguous();
  }
  checked_numel(shape, "cat");
  // Output memory format: channels-last only when every input is; else contiguous.
  DimVector strides = contiguous_strides(shape);
  if (all_channels_last && shape.size() == 4) strides = channels_last_strides(shape);
  Tensor out = make_fresh(shape, std::move(strides), dtype, ref->device(), "cat");
  for (const Tensor& t : tensors) detail::propagate_grad(out, {&t});
  if (active_trace_sink() != nullptr) detail::emit_op("cat", tensors, {&out, 1}, 0, 0, false);
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  SP_CHECK(!tensors.empty(), "stack: stack expects a non-empty TensorList");
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  for (size_t i = 0; i < tensors.size(); ++i) {
    SP_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: stack expects each tensor to be "
             "equal size, but got ", tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(),
             " at entry ", i);
  }
  if (d < tensors[0].dim()) {
    // PyTorch cats along an existing dim and splits it: the output keeps cat's memory format
    // (channels-last inputs give a channels-last-like result) and is not a view.
    const Tensor joined = cat(tensors, d);
    Tensor split_view = unflatten(joined, d, {static_cast<int64_t>(tensors.size()), -1});
    Tensor out = make_on_storage(joined.storage(), split_view.sizes(), split_view.strides(), 0,
                                 joined.dtype(), "stack");
    detail::propagate_grad(out, {&joined});
    return out;
  }
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

}  // namespace shardplan::tensor
