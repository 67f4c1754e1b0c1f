// Forward tracing into an op graph: node order, FLOPs and bytes computed by hand, module FQN
// attribution, tensor identities and producers.
#include "tensor/op_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tests/tensor/test_models.h"

namespace shardplan::tensor {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> ops(const OpGraph& g) {
  std::vector<std::string> out;
  for (const OpNode& n : g.nodes()) out.push_back(n.op);
  return out;
}

// B=2, S=4, in=16, hidden=64, out=16, float32.
constexpr int64_t B = 2, S = 4, kIn = 16, kHidden = 64, kOut = 16;

TEST(OpGraph, MlpNodesInOrder) {
  auto mlp = test::make_mlp(kIn, kHidden, kOut);
  OpGraph g = trace_forward(*mlp, empty({B, S, kIn}));
  EXPECT_THAT(ops(g), ElementsAre("linear", "gelu", "linear"));
  std::vector<std::string> modules;
  for (const OpNode& n : g.nodes()) modules.push_back(n.module);
  EXPECT_THAT(modules, ElementsAre("0", "1", "2"));
}

TEST(OpGraph, MlpFlopsByHand) {
  auto mlp = test::make_mlp(kIn, kHidden, kOut);
  OpGraph g = trace_forward(*mlp, empty({B, S, kIn}));
  ASSERT_EQ(g.nodes().size(), 3u);
  // Linear: 2*B*S*in*out matmul FLOPs; the bias adds one FLOP per output element.
  //   fc1: 2*2*4*16*64 = 16384 (+ 2*4*64 = 512 for the bias)
  //   fc2: 2*2*4*64*16 = 16384 (+ 2*4*16 = 128)
  EXPECT_EQ(g.node(0).matmul_flops, 16384);
  EXPECT_EQ(g.node(0).flops, 16384 + 512);
  EXPECT_EQ(g.node(2).matmul_flops, 16384);
  EXPECT_EQ(g.node(2).flops, 16384 + 128);
  EXPECT_EQ(g.node(1).matmul_flops, 0);  // gelu is no matrix product
  EXPECT_EQ(g.totals().matmul_flops, 32768);
  EXPECT_EQ(g.totals().flops, g.node(0).flops + g.node(1).flops + g.node(2).flops);
  EXPECT_EQ(g.totals().ops, 3);
}

TEST(OpGraph, LinearBytesByHand) {
  auto mlp = test::make_mlp(kIn, kHidden, kOut);
  OpGraph g = trace_forward(*mlp, empty({B, S, kIn}));
  // fc1 reads x [2,4,16] (128 floats = 512 B), W [64,16] (1024 floats = 4096 B), b [64] (256 B)
  // and writes y [2,4,64] (512 floats = 2048 B).
  EXPECT_EQ(g.node(0).bytes_read, 512 + 4096 + 256);
  EXPECT_EQ(g.node(0).bytes_written, 2048);
  // gelu reads and writes [2,4,64]: 2048 B each.
  EXPECT_EQ(g.node(1).bytes_read, 2048);
  EXPECT_EQ(g.node(1).bytes_written, 2048);
  EXPECT_FALSE(g.node(0).is_view);
}

TEST(OpGraph, TensorsAndEdges) {
  auto mlp = test::make_mlp(kIn, kHidden, kOut);
  Tensor x = empty({B, S, kIn});
  OpGraph g = trace_forward(*mlp, x);
  const OpNode& fc1 = g.node(0);
  const OpNode& act = g.node(1);
  const OpNode& fc2 = g.node(2);
  // Inputs and parameters carry their role and name, registered before the trace.
  ASSERT_EQ(fc1.inputs.size(), 3u);
  EXPECT_EQ(g.tensor(fc1.inputs[0]).role, TensorRole::kInput);
  EXPECT_EQ(g.tensor(fc1.inputs[0]).name, "input.0");
  EXPECT_EQ(g.tensor(fc1.inputs[1]).name, "0.weight");
  EXPECT_EQ(g.tensor(fc1.inputs[1]).role, TensorRole::kParameter);
  EXPECT_EQ(g.tensor(fc1.inputs[2]).name, "0.bias");
  EXPECT_EQ(g.tensor(fc1.inputs[1]).producer, -1);
  EXPECT_EQ(*g.id_of(x), fc1.inputs[0]);
  EXPECT_EQ(*g.id_of(mlp->get_parameter("2.weight")), fc2.inputs[1]);
  // The chain: fc1 -> gelu -> fc2.
  ASSERT_EQ(fc1.outputs.size(), 1u);
  EXPECT_EQ(act.inputs[0], fc1.outputs[0]);
  EXPECT_EQ(fc2.inputs[0], act.outputs[0]);
  const GraphTensor& h = g.tensor(fc1.outputs[0]);
  EXPECT_EQ(h.producer, 0);
  EXPECT_EQ(h.role, TensorRole::kActivation);
  EXPECT_EQ(h.sizes, (DimVector{B, S, kHidden}));
  EXPECT_EQ(h.dtype, DType::kFloat32);
  EXPECT_EQ(h.nbytes, B * S * kHidden * 4);
  EXPECT_THAT(g.consumers(fc1.outputs[0]), ElementsAre(1));
  EXPECT_EQ(g.tensor(fc2.outputs[0]).sizes, (DimVector{B, S, kOut}));
}

TEST(OpGraph, PerModuleTotalsAreInclusive) {
  auto mlp = test::make_mlp(kIn, kHidden, kOut);
  OpGraph g = trace_forward(*mlp, empty({B, S, kIn}));
  const auto& per = g.module_totals();
  EXPECT_EQ(per.at("0").matmul_flops, 16384);
  EXPECT_EQ(per.at("0").ops, 1);
  EXPECT_EQ(per.at("2").flops, 16384 + 128);
  EXPECT_EQ(per.at("").flops, g.totals().flops);  // the root encloses everything
  EXPECT_EQ(per.at("").bytes_written, g.totals().bytes_written);
  ASSERT_EQ(g.module_calls().size(), 4u);  // root, 0, 1, 2
  EXPECT_EQ(g.module_calls()[0].type, "Sequential");
  EXPECT_EQ(g.module_calls()[2].fqn, "1");
  EXPECT_EQ(g.module_calls()[2].type, "GELU");
  EXPECT_EQ(g.module_calls()[2].depth, 1);
  EXPECT_EQ(g.module_calls()[2].first_node, 1);
  EXPECT_EQ(g.module_calls()[2].end_node, 2);
}

TEST(OpGraph, TransformerAttributionAndMatmulFlops) {
  test::TinyLM lm;
  const int64_t b = 2, s = 8, d = test::TinyLM::kDim, f = test::TinyLM::kHidden,
                v = test::TinyLM::kVocab;
  OpGraph g = trace_forward(lm, empty({b, s}, {.dtype = DType::kInt64}));
  const auto& per = g.module_totals();
  // q/k/v/o projections: 4 * 2*b*s*d*d; attention: QK^T and PV, 2*b*s*s*d each (heads split d);
  // mlp: 2 * 2*b*s*d*f.
  const double proj = 4.0 * 2 * b * s * d * d;  // 4 * 32768  = 131072
  const double attn = 2.0 * 2 * b * s * s * d;  // 2 * 8192   =  16384
  const double mlp = 2.0 * 2 * b * s * d * f;   // 2 * 131072 = 262144
  EXPECT_EQ(per.at("layers.0.attn").matmul_flops, proj + attn);
  EXPECT_EQ(per.at("layers.1.mlp").matmul_flops, mlp);
  EXPECT_EQ(per.at("layers.0.attn.q_proj").matmul_flops, 2.0 * b * s * d * d);
  EXPECT_EQ(per.at("lm_head").matmul_flops, 2.0 * b * s * d * v);  // 102400
  EXPECT_EQ(g.totals().matmul_flops, 2 * (proj + attn + mlp) + 2.0 * b * s * d * v);
  // Attribution follows calls: the ModuleList "layers" is iterated, never called.
  EXPECT_EQ(per.count("layers"), 0u);
  // Innermost attribution: the sdpa node belongs to the attention module itself.
  int sdpa = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "scaled_dot_product_attention") {
      EXPECT_THAT(n.module, ::testing::AnyOf("layers.0.attn", "layers.1.attn"));
      ++sdpa;
    }
    if (n.op == "embedding") {
      EXPECT_EQ(n.module, "embed");
    }
  }
  EXPECT_EQ(sdpa, 2);
  // The tied table is one graph tensor, named after its first FQN, read by embedding and lm_head.
  const int64_t table = *g.id_of(lm.embed->weight());
  EXPECT_EQ(g.tensor(table).name, "embed.weight");
  EXPECT_EQ(g.consumers(table).size(), 2u);
}

TEST(OpGraph, ViewsAreMarkedAndAlias) {
  test::Attention attn(8, 2);
  OpGraph g = trace_forward(attn, empty({1, 3, 8}));
  int views = 0;
  for (const OpNode& n : g.nodes()) {
    if (!n.is_view) continue;
    ++views;
    EXPECT_EQ(n.bytes_read + n.bytes_written, 0) << n.op;
    EXPECT_EQ(n.flops, 0) << n.op;
    EXPECT_EQ(g.tensor(n.inputs[0]).storage_id, g.tensor(n.outputs[0]).storage_id) << n.op;
  }
  EXPECT_GT(views, 0);
}

TEST(OpGraph, NoSinkNoRecording) {
  OpGraphRecorder rec;
  auto mlp = test::make_mlp(4, 4, 4);
  mlp->call(empty({1, 4}));  // not inside a TraceScope
  EXPECT_TRUE(rec.graph().nodes().empty());
  {
    TraceScope scope(&rec);
    mlp->call(empty({1, 4}));
  }
  EXPECT_EQ(rec.graph().nodes().size(), 3u);
}

}  // namespace
}  // namespace shardplan::tensor
