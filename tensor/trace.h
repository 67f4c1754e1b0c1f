// Hook through which every op reports itself while a trace is active, so that running a Module
// forward on meta inputs records an op graph (tensor/op_graph.h builds it) with FLOPs and bytes.
// Cost when no trace is active: one thread-local load per op.
//   OpGraphRecorder rec;  { TraceScope scope(&rec);  model.forward(x); }  rec.graph()
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tensor/tensor.h"

namespace shardplan::tensor {

// What one op did. FLOPs follow the convention of Note [FLOP counting] in ops/flops.h: a
// multiply-add is 2 FLOPs; pointwise and reduction ops count per element with named constants.
struct OpEvent {
  std::string_view op;              // PyTorch's name: "mm", "add", "view", ...
  std::span<const Tensor> inputs;   // tensor operands (scalars are not listed)
  std::span<const Tensor> outputs;
  double flops = 0;                 // everything the op computes, matmul_flops included
  double matmul_flops = 0;          // the matrix-product part: what Megatron-style formulas count
  bool is_view = false;             // aliases an input: no memory traffic, no new activation
  int64_t bytes_read = 0;           // input elements touched, each counted once
  int64_t bytes_written = 0;        // output elements produced
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_op(const OpEvent& event) = 0;
  // Module boundaries, with the module's fully qualified name ("layers.3.attn").
  virtual void on_module_enter(std::string_view /*fqn*/, std::string_view /*type*/) {}
  virtual void on_module_exit(std::string_view /*fqn*/) {}
};

namespace detail {
extern thread_local TraceSink* g_trace_sink;
extern thread_local bool g_no_grad;
}

inline TraceSink* active_trace_sink() { return detail::g_trace_sink; }

// Note [No-grad regions]
// torch.no_grad(): the ops run inside one record no autograd graph. Their outputs do not require
// grad (propagate_grad, tensor/ops/common.h), the training step gives them no saved tensors, no
// backward and no recomputation (TrainingOp::no_grad, tensor/training.h), and a later op reading
// one of their outputs computes no gradient for it (a product's backward counts only the operands
// that require grad). Parameters keep requires_grad: an op inside the region that reads a weight
// still has no backward. A model opens a region where its transformers code does (HRM-Text's
// early low-level cycles, tensor/models/family_hrm_text.cpp; the rotary tables it computes under
// @torch.no_grad()); outside one, grad mode is on, as it always was here.
inline bool grad_enabled() { return !detail::g_no_grad; }

// Turns grad mode off for the current thread for the scope's lifetime; nests (restores the
// previous mode), as torch.no_grad() does.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(detail::g_no_grad) { detail::g_no_grad = true; }
  ~NoGradGuard() { detail::g_no_grad = prev_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Installs a sink for the current thread for the scope's lifetime; nests (restores the previous).
class TraceScope {
 public:
  explicit TraceScope(TraceSink* sink) : prev_(detail::g_trace_sink) { detail::g_trace_sink = sink; }
  ~TraceScope() { detail::g_trace_sink = prev_; }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceSink* prev_;
};

}  // namespace shardplan::tensor
