// Ops whose output shape or value depends on tensor data: on meta there is none, so they fail
// with a clear "data-dependent" error (PyTorch raises NotImplementedError for them on meta).
#include "tensor/ops/common.h"

namespace shardplan::tensor {

Tensor nonzero(const Tensor& t) {
  SP_FAIL("nonzero: data-dependent output shape; a ", t.device(), " tensor of shape ", t.sizes(),
          " has no data to count its non-zero elements (shardplan computes shapes only)");
}

Scalar item(const Tensor& t) {
  SP_CHECK(t.numel() == 1, "item: a Tensor with ", t.numel(),
           " elements cannot be converted to Scalar");
  SP_FAIL("item: data-dependent; cannot read the value of a ", t.device(),
          " tensor (shardplan holds no values)");
}

Tensor index_with_mask(const Tensor& t, const Tensor& mask) {
  SP_CHECK(mask.dtype() == DType::kBool || mask.dtype() == DType::kUInt8,
           "index_with_mask: expected a bool mask, got ", mask.dtype());
  SP_FAIL("index_with_mask: data-dependent output shape; boolean-mask indexing of a tensor of "
          "shape ", t.sizes(), " needs the mask's values");
}

Tensor to_device(const Tensor& t, Device device) {
  if (device == t.device()) return t;
  SP_CHECK(!t.is_meta(), "to_device: Cannot copy out of meta tensor; no data!");
  // Real -> meta keeps only the metadata, as t.to('meta') does.
  SP_CHECK(device.is_meta(), "to_device: copies between ", t.device(), " and ", device,
           " are done by the materialization layer, not by tensor ops");
  return empty_like(t, {}, device);
}

}  // namespace shardplan::tensor
