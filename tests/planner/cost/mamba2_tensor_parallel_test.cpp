// mamba2's tensor-parallel plan applied by dataflow (Note [Tracing one block at full width]).
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/block_cost.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// Megatron-LM's mixer split: in_proj column-parallel, out_proj row-parallel.
TEST(Mamba2Models, TensorParallelSplitsTheMixer) {
  const tensor::ModelConfig c = tensor::find_model_config("mamba-codestral-7b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 0), key);
  EXPECT_EQ(t.kv_bytes, 0);
  int rows = 0, cols = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.op != "linear" || op.call < 0) continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (fqn.ends_with("mixer.in_proj") && t.split[i] == OpSplit::kColumn) ++cols;
    if (fqn.ends_with("mixer.out_proj") && t.split[i] == OpSplit::kRow) ++rows;
  }
  EXPECT_EQ(cols, 1);
  EXPECT_EQ(rows, 1);
}

}  // namespace
}  // namespace shardplan::planner
