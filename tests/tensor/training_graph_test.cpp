// The training step as a Boost.Graph: one vertex per op plus "outside", one edge per (tensor,
// reader), a DAG in forward order, saved edges matching the ops' saved lists.
#if __has_include(<boost/graph/adjacency_list.hpp>)
#include "tensor/layers.h"
#include "tensor/training_graph.h"

#include <gtest/gtest.h>

#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <vector>

#include "tests/tensor/test_models.h"

namespace shardplan::tensor {
namespace {

TEST(TrainingGraph, MlpVerticesEdgesAndSavedFlags) {
  // Sequential(Linear(16, 64), GELU, Linear(64, 16)), float32 input [2, 4, 16], no loss:
  // ops linear, gelu, linear; edges: fc1 <- x, W1, b1 (outside); gelu <- h; fc2 <- g, W2, b2.
  auto mlp = test::make_mlp(16, 64, 16);
  TraceOptions o;
  o.input = empty({2, 4, 16});
  o.loss = false;
  const TrainingStep st = trace_training_step(*mlp, o);
  const TrainingGraph g = training_graph(st);
  ASSERT_EQ(boost::num_vertices(g), 4u);
  EXPECT_EQ(boost::num_edges(g), 7u);
  EXPECT_EQ(boost::in_degree(1, g), 3u);
  EXPECT_EQ(boost::in_degree(2, g), 1u);
  EXPECT_EQ(boost::out_degree(0, g), 5u);  // x, W1, b1, W2, b2 come from outside
  EXPECT_EQ(g[2].name, "gelu");
  // gelu's input edge comes from fc1 and is saved (GeluBackward needs its input), 2*4*64*4 bytes.
  auto [e, end] = boost::in_edges(2, g);
  ASSERT_NE(e, end);
  EXPECT_EQ(boost::source(*e, g), 1u);
  EXPECT_TRUE(g[*e].saved);
  EXPECT_EQ(g[*e].bytes, 2 * 4 * 64 * 4);
  // fc2's bias edge is not saved (the bias gradient is a sum of the output gradient).
  for (auto [it, it_end] = boost::in_edges(3, g); it != it_end; ++it) {
    const StepTensor& t = st.tensors[static_cast<size_t>(g[*it].tensor)];
    if (t.sizes.size() == 1) {
      EXPECT_FALSE(g[*it].saved);
    }
  }
}

TEST(TrainingGraph, TransformerIsADagInForwardOrder) {
  test::TinyLM lm;
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(lm, o);
  const TrainingGraph g = training_graph(st);
  size_t edges = 0, saved = 0, saved_flags = 0;
  for (const TrainingOp& op : st.ops) {
    edges += op.inputs.size();
    for (const SavedTensor& s : op.saved) saved += s.tensor >= 0 ? 1 : 0;
  }
  EXPECT_EQ(boost::num_edges(g), edges);
  for (auto [it, end] = boost::edges(g); it != end; ++it) {
    EXPECT_LT(boost::source(*it, g), boost::target(*it, g));  // producers come first
    saved_flags += g[*it].saved ? 1 : 0;
  }
  EXPECT_LE(saved_flags, saved);  // an op may save one tensor twice (x * x): one edge each
  EXPECT_GT(saved_flags, 0u);
  std::vector<size_t> order;
  boost::topological_sort(g, std::back_inserter(order));  // throws not_a_dag on a cycle
  EXPECT_EQ(order.size(), st.ops.size() + 1);
}

}  // namespace
}  // namespace shardplan::tensor
#endif
