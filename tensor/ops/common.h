// Internal helpers shared by the op implementations: tracing, autograd flags, device checks.
// Not part of the public API (included only by tensor/ops/*.cpp).
//
// Note [Ops compute metadata only]
// shardplan plans; it never runs a model. Views and factories are valid on every device (they
// only describe memory), but an op that would compute values (add, matmul, ...) on a cpu or cuda
// tensor would return uninitialized memory dressed as a result, so those accept meta tensors only.
// Real values come from kernels/ fills after to_empty, never from op execution.
#pragma once

#include <initializer_list>
#include <string_view>

#include "base/error.h"
#include "tensor/ops.h"
#include "tensor/trace.h"

namespace shardplan::tensor::detail {

// Reports an op to the active trace sink (if any). Call after the outputs exist.
// `bytes_read` < 0 means "every input element once"; ops that touch less (embedding gathers rows)
// pass their own count.
void emit_op(std::string_view op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
             double flops, double matmul_flops, bool is_view, int64_t bytes_read = -1);

inline void trace_view(std::string_view op, const Tensor& in, const Tensor& out) {
  if (active_trace_sink() == nullptr) [[likely]]
    return;
  emit_op(op, {&in, 1}, {&out, 1}, 0, 0, true);
}

inline void trace_op(std::string_view op, std::initializer_list<Tensor> inputs, const Tensor& out,
                     double flops, double matmul_flops = 0) {
  if (active_trace_sink() == nullptr) [[likely]]
    return;
  emit_op(op, {inputs.begin(), inputs.size()}, {&out, 1}, flops, matmul_flops, false);
}

// Outputs of a differentiable op require grad when any input does, in grad mode (outside a
// NoGradGuard: Note [No-grad regions] in tensor/trace.h).
inline void propagate_grad(Tensor& out, std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad() &&
        (is_floating(out.dtype()) || is_complex(out.dtype()))) {
      out.impl()->requires_grad = true;
      out.impl()->is_leaf = false;
      return;
    }
  }
}

// Note [Ops compute metadata only]: ops that compute values accept meta tensors only.
inline void require_meta(const Tensor& t, const char* op) {
  SP_CHECK(t.is_meta(), op,
           ": shardplan computes shapes, not values; expected a meta tensor, got "
           "one on ",
           t.device(), " (materialize with to_empty and kernels/ fills)");
}

// All tensor operands on one device, as PyTorch requires.
inline void require_same_device(const Tensor& a, const Tensor& b, const char* op) {
  SP_CHECK(a.device() == b.device(), op,
           ": Expected all tensors to be on the same device, but "
           "found at least two devices, ",
           a.device(), " and ", b.device(), "!");
}

// A fresh contiguous output.
inline Tensor new_contiguous(const DimVector& sizes, DType dtype, const Device& device,
                             const char* op) {
  return make_fresh_contiguous(sizes, dtype, device, op);
}

}  // namespace shardplan::tensor::detail
