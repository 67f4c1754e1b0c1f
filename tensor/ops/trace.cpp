#include "base/checked.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace detail {

thread_local TraceSink* g_trace_sink = nullptr;
thread_local bool g_no_grad = false;  // Note [No-grad regions] in tensor/trace.h

void emit_op(std::string_view op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
             double flops, double matmul_flops, bool is_view, int64_t bytes_read) {
  OpEvent e;
  e.op = op;
  e.inputs = inputs;
  e.outputs = outputs;
  e.flops = flops;
  e.matmul_flops = matmul_flops;
  e.is_view = is_view;
  if (!is_view) {
    if (bytes_read >= 0) {
      e.bytes_read = bytes_read;
    } else {
      for (const Tensor& t : inputs) add_count(e.bytes_read, t.nbytes(), "bytes read by one op");
    }
    for (const Tensor& t : outputs)
      add_count(e.bytes_written, t.nbytes(), "bytes written by one op");
  }
  g_trace_sink->on_op(e);
}

}  // namespace detail
}  // namespace shardplan::tensor
