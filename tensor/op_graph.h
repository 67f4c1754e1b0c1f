// The op graph of a forward pass: every op a traced Module forward ran on meta tensors, with the
// module it ran in, its FLOPs and bytes, and the tensors it read and wrote. The planner prices
// compute from it and (later) activation memory from what backward saves.
//   OpGraph g = trace_forward(*model, empty({2, 128, 512}));
//   g.totals().matmul_flops;  g.module_totals().at("layers.0.mlp").flops;
//
// Note [Op graph shape]
// A plain adjacency structure: nodes list tensor ids, tensors name their producer node. The next
// step moves it to a Boost.Graph (ops as vertices, tensors as edges) and adds backward: each
// OpNode then records the tensors it saves for backward (`saved`, the comment in OpNode marks the
// slot), which is what fixes activation memory, and backward nodes are appended with
// `is_backward`. Nothing here assumes the node list is forward-only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dim_vector.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "tensor/trace.h"

namespace shardplan::tensor {

class Module;

// What a tensor is to the traced computation.
enum class TensorRole : uint8_t {
  kInput,       // a model input given to trace_forward
  kParameter,   // a registered parameter of the traced module
  kBuffer,      // a registered buffer
  kActivation,  // produced by an op of the trace
  kOther,       // first seen as an op input without being any of the above (a free tensor)
};

struct GraphTensor {
  int64_t id = -1;  // index in OpGraph::tensors()
  DimVector sizes;
  DimVector strides;
  DType dtype = DType::kFloat32;
  int64_t nbytes = 0;      // numel * itemsize: the tensor's elements, not its storage
  int64_t storage_id = 0;  // StorageImpl::id(): equal ids alias
  int64_t producer = -1;   // node id that wrote it last; -1 if it came from outside the trace
  TensorRole role = TensorRole::kOther;
  std::string name;  // FQN for parameters and buffers, "input.N" for inputs, else empty
};

struct OpNode {
  int64_t id = -1;     // index in OpGraph::nodes()
  std::string op;      // PyTorch's op name: "linear", "gelu", "view", ...
  std::string module;  // FQN of the innermost module running ("" = root or outside modules)
  std::vector<int64_t> inputs;   // tensor ids
  std::vector<int64_t> outputs;  // tensor ids
  double flops = 0;
  double matmul_flops = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  bool is_view = false;
  // Backward (Note [Op graph shape]): std::vector<int64_t> saved; bool is_backward = false;
};

// Sums over nodes.
struct CostTotals {
  int64_t ops = 0;
  double flops = 0;
  double matmul_flops = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  void add(const OpNode& n);
};

// One call of a module during the trace: the nodes [first_node, end_node) ran inside it.
struct ModuleCall {
  std::string fqn;
  std::string type;
  int depth = 0;  // 0 for the outermost call
  int64_t first_node = 0;
  int64_t end_node = 0;
};

class OpGraph {
 public:
  const std::vector<OpNode>& nodes() const { return nodes_; }
  const std::vector<GraphTensor>& tensors() const { return tensors_; }
  const OpNode& node(int64_t id) const;
  const GraphTensor& tensor(int64_t id) const;
  // The id of a tensor the trace saw, if it did (identity: the same TensorImpl).
  std::optional<int64_t> id_of(const Tensor& t) const;
  // Nodes that read tensor `id`, in order.
  std::vector<int64_t> consumers(int64_t id) const;
  const std::vector<ModuleCall>& module_calls() const { return calls_; }

  CostTotals totals() const { return totals_; }
  // Inclusive per module FQN: a node counts toward its module and every enclosing one, so
  // module_totals().at("") (the root) equals totals() when the root was called.
  const std::map<std::string, CostTotals>& module_totals() const { return module_totals_; }

 private:
  friend class OpGraphRecorder;

  std::vector<OpNode> nodes_;
  std::vector<GraphTensor> tensors_;
  // Keeps every seen TensorImpl alive, so its address (the key of ids_) is never reused.
  std::vector<Tensor> held_;
  std::unordered_map<const TensorImpl*, int64_t> ids_;
  std::vector<ModuleCall> calls_;
  CostTotals totals_;
  std::map<std::string, CostTotals> module_totals_;
};

// A TraceSink that builds an OpGraph. Install it with TraceScope (trace_forward does).
class OpGraphRecorder : public TraceSink {
 public:
  void on_op(const OpEvent& event) override;
  void on_module_enter(std::string_view fqn, std::string_view type) override;
  void on_module_exit(std::string_view fqn) override;

  // Registers a tensor before the trace runs, so it carries a role and a name; returns its id.
  // A tensor registered twice keeps its first registration.
  int64_t add_tensor(const Tensor& t, TensorRole role, std::string name = {});
  // Registers the module's parameters and buffers (de-duplicated, by FQN).
  void add_module_tensors(const Module& root);

  const OpGraph& graph() const { return graph_; }
  OpGraph take_graph() { return std::move(graph_); }

 private:
  OpGraph graph_;
  std::vector<int64_t> open_calls_;  // indices into graph_.calls_, innermost last
};

// root.call(input) traced: the root's FQNs are assigned first (Note [Module FQNs at call time]),
// its parameters and buffers are registered under their FQNs and the input as "input.0".
OpGraph trace_forward(Module& root, const Tensor& input);
// The same for modules with several inputs: `inputs` are registered as "input.0", "input.1", ...,
// then run() is traced (it calls the root's own multi-input method).
OpGraph trace_forward(Module& root, std::span<const Tensor> inputs,
                      const std::function<void()>& run);

}  // namespace shardplan::tensor
