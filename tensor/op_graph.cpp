#include "tensor/op_graph.h"

#include <algorithm>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/module.h"

namespace shardplan::tensor {

void CostTotals::add(const OpNode& n) {
  ops += 1;
  flops += n.flops;
  matmul_flops += n.matmul_flops;
  add_count(bytes_read, n.bytes_read, "bytes read by the traced forward");
  add_count(bytes_written, n.bytes_written, "bytes written by the traced forward");
}

const OpNode& OpGraph::node(int64_t id) const {
  SP_ASSERT(id >= 0 && id < static_cast<int64_t>(nodes_.size()), "node id ", id);
  return nodes_[static_cast<size_t>(id)];
}

const GraphTensor& OpGraph::tensor(int64_t id) const {
  SP_ASSERT(id >= 0 && id < static_cast<int64_t>(tensors_.size()), "tensor id ", id);
  return tensors_[static_cast<size_t>(id)];
}

std::optional<int64_t> OpGraph::id_of(const Tensor& t) const {
  if (!t.defined()) return std::nullopt;
  auto it = ids_.find(t.impl());
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> OpGraph::consumers(int64_t id) const {
  std::vector<int64_t> out;
  for (const OpNode& n : nodes_) {
    for (int64_t in : n.inputs) {
      if (in == id) {
        out.push_back(n.id);
        break;
      }
    }
  }
  return out;
}

int64_t OpGraphRecorder::add_tensor(const Tensor& t, TensorRole role, std::string name) {
  SP_ASSERT(t.defined());
  auto [it, inserted] = graph_.ids_.try_emplace(t.impl(), 0);
  if (!inserted) return it->second;
  const int64_t id = static_cast<int64_t>(graph_.tensors_.size());
  it->second = id;
  GraphTensor g;
  g.id = id;
  g.sizes = t.sizes();
  g.strides = t.strides();
  g.dtype = t.dtype();
  g.nbytes = t.nbytes();
  g.storage_id = t.storage()->id();
  g.role = role;
  g.name = std::move(name);
  graph_.tensors_.push_back(std::move(g));
  graph_.held_.push_back(t);
  return id;
}

void OpGraphRecorder::add_module_tensors(const Module& root) {
  for (const NamedTensor& p : root.named_parameters()) {
    add_tensor(p.tensor, TensorRole::kParameter, p.name);
  }
  for (const NamedTensor& b : root.named_buffers()) {
    add_tensor(b.tensor, TensorRole::kBuffer, b.name);
  }
}

void OpGraphRecorder::on_op(const OpEvent& e) {
  OpNode n;
  n.id = static_cast<int64_t>(graph_.nodes_.size());
  n.op = std::string(e.op);
  n.module = open_calls_.empty() ? std::string()
                                 : graph_.calls_[static_cast<size_t>(open_calls_.back())].fqn;
  n.flops = e.flops;
  n.matmul_flops = e.matmul_flops;
  n.bytes_read = e.bytes_read;
  n.bytes_written = e.bytes_written;
  n.is_view = e.is_view;
  for (const Tensor& t : e.inputs) {
    if (t.defined()) n.inputs.push_back(add_tensor(t, TensorRole::kOther));
  }
  for (const Tensor& t : e.outputs) {
    if (!t.defined()) continue;
    const int64_t id = add_tensor(t, TensorRole::kActivation);
    // An in-place op writes a tensor that already has an id: it becomes the latest producer.
    // (Backward will need versions here: the value read before the write is another tensor.)
    graph_.tensors_[static_cast<size_t>(id)].producer = n.id;
    n.outputs.push_back(id);
  }
  graph_.totals_.add(n);
  // Inclusive totals: every enclosing module gets the node once, even when it is open twice (a
  // shared module calling itself through another path).
  std::vector<std::string_view> counted;
  for (int64_t c : open_calls_) {
    const std::string& fqn = graph_.calls_[static_cast<size_t>(c)].fqn;
    if (std::find(counted.begin(), counted.end(), fqn) != counted.end()) continue;
    counted.push_back(fqn);
    graph_.module_totals_[fqn].add(n);
  }
  graph_.nodes_.push_back(std::move(n));
}

void OpGraphRecorder::on_module_enter(std::string_view fqn, std::string_view type) {
  ModuleCall c;
  c.fqn = std::string(fqn);
  c.type = std::string(type);
  c.depth = static_cast<int>(open_calls_.size());
  c.first_node = static_cast<int64_t>(graph_.nodes_.size());
  graph_.calls_.push_back(std::move(c));
  open_calls_.push_back(static_cast<int64_t>(graph_.calls_.size()) - 1);
}

void OpGraphRecorder::on_module_exit(std::string_view fqn) {
  SP_ASSERT(!open_calls_.empty(), "module exit '", fqn, "' without an enter");
  ModuleCall& c = graph_.calls_[static_cast<size_t>(open_calls_.back())];
  SP_ASSERT(c.fqn == fqn, "module exit '", fqn, "' while '", c.fqn, "' is the innermost call");
  c.end_node = static_cast<int64_t>(graph_.nodes_.size());
  open_calls_.pop_back();
}

OpGraph trace_forward(Module& root, std::span<const Tensor> inputs,
                      const std::function<void()>& run) {
  root.assign_fqns();
  OpGraphRecorder rec;
  for (size_t i = 0; i < inputs.size(); ++i) {
    rec.add_tensor(inputs[i], TensorRole::kInput, "input." + std::to_string(i));
  }
  rec.add_module_tensors(root);
  {
    TraceScope scope(&rec);
    run();
  }
  return rec.take_graph();
}

OpGraph trace_forward(Module& root, const Tensor& input) {
  return trace_forward(root, {&input, 1}, [&] { root.call(input); });
}

}  // namespace shardplan::tensor
