// The traced training step as a Boost.Graph, for graph algorithms over it (topological orders,
// critical paths, cuts for pipeline stages): ops are vertices, tensors are edges.
//   TrainingGraph g = training_graph(trace_training_step(*model, {.batch = 1, .seq = 4096}));
//   boost::num_vertices(g) == step.ops.size() + 1;   // vertex 0 is "outside the trace"
//
// Note [Ops as vertices, tensors as edges]
// A tensor read by k ops is k edges, each from its producer's vertex to a reader's vertex, all
// carrying the same tensor id; that keeps the graph a plain DAG of data dependencies (what
// scheduling and stage cuts need) without a vertex per tensor. Tensors that no op produced
// (inputs, parameters, buffers, position tables) come from vertex 0. Each edge says whether its
// reader saves the tensor for backward, so the saved-activation edges of a cut are a filter
// away. Vertex i + 1 is TrainingStep::ops[i]. Header-only: only code that wants the graph pulls
// in Boost.Graph (tensor/CMakeLists.txt links Boost::headers when it is installed).
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <string_view>

#include "tensor/training.h"

namespace shardplan::tensor {

struct OpVertex {
  int64_t op = -1;        // index into TrainingStep::ops; -1 for vertex 0 (outside the trace)
  std::string_view name;  // the op's name (a view into the TrainingStep; valid while it lives)
  int block = -1;
  double flops = 0;  // forward
  double backward_flops = 0;
  bool recomputed = false;
};

struct TensorEdge {
  int64_t tensor = -1;  // index into TrainingStep::tensors
  int64_t bytes = 0;    // the tensor's elements in bytes
  bool saved = false;   // the reading op saves it for backward
};

using TrainingGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, OpVertex, TensorEdge>;

// Builds the graph of Note [Ops as vertices, tensors as edges]. View ops and skipped dropouts are
// vertices like the others (zero FLOPs), so every tensor's producer has a vertex.
inline TrainingGraph training_graph(const TrainingStep& step) {
  TrainingGraph g(step.ops.size() + 1);
  g[0].name = "outside";
  for (size_t i = 0; i < step.ops.size(); ++i) {
    const TrainingOp& op = step.ops[i];
    OpVertex& v = g[i + 1];
    v.op = static_cast<int64_t>(i);
    v.name = op.op;
    v.block = op.block;
    v.flops = op.flops;
    v.backward_flops = op.backward_flops;
    v.recomputed = op.recomputed;
    for (int64_t t : op.inputs) {
      const StepTensor& st = step.tensors[static_cast<size_t>(t)];
      // The producer recorded on the tensor is its latest writer; one written later than this
      // reader (an in-place op) was read before the write, as the value from outside.
      const int64_t p =
          st.producer >= 0 && st.producer < static_cast<int64_t>(i) ? st.producer : -1;
      bool saved = false;
      for (const SavedTensor& s : op.saved) saved = saved || s.tensor == t;
      boost::add_edge(static_cast<size_t>(p + 1), i + 1, TensorEdge{t, st.nbytes, saved}, g);
    }
  }
  return g;
}

}  // namespace shardplan::tensor
