// A stack that reduces gradients in fp32 (StackProfile::fp32_gradient_reduce, torchtitan's FSDP2
// reduce_dtype) moves 4 bytes per gradient element in the data-parallel reduction and gathers the
// 2-byte working weights as before; memory keeps the recipe's. Llama 3 8B's decoder layer, counted
// from its config (hidden 4096, 8 KV heads of 128, MLP 14336): q and o 2 x 4096 x 4096, k and v
// 2 x 1024 x 4096, MLP 3 x 4096 x 14336, two norms 2 x 4096 = 218,112,000 parameters.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collectives/cluster.h"
#include "planner/candidate/stack_profile.h"
#include "planner/search/planner.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

constexpr int64_t kLayerParams = 218'112'000;

Bill priced(bool fp32_reduce, int zero) {
  PlannerOptions o;
  o.stack.fp32_gradient_reduce = fp32_reduce;
  Planner p(tensor::find_model_config("llama3-8b"),
            collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 8, .seq = 4096, .global_batch = 16}, o);
  ParallelConfig c;
  c.dp = 8;
  c.zero = zero;
  c.micro_batch = 1;
  c.recompute = tensor::RecomputePolicy::kFull;
  Bill bill;
  (void)p.estimate(c, DimOrder::kTpInner, &bill);
  return bill;
}

int64_t bytes_of(const Bill& b, const std::string& what) {
  for (const BillCollective& c : b.collectives) {
    if (c.what == what) return c.bytes;
  }
  ADD_FAILURE() << "no collective '" << what << "'";
  return 0;
}

TEST(GradientReduce, Fp32ReductionDoublesTheGradientBytesOnly) {
  const Bill bf16 = priced(false, 3), fp32 = priced(true, 3);
  EXPECT_EQ(bytes_of(bf16, "dp reduce_scatter (fsdp gradients)"), kLayerParams * 2);
  EXPECT_EQ(bytes_of(fp32, "dp reduce_scatter (fsdp gradients)"), kLayerParams * 4);
  EXPECT_EQ(bytes_of(fp32, "dp all_gather (fsdp parameters, forward and backward)"),
            kLayerParams * 2);
  EXPECT_EQ(fp32.gradient_bytes, bf16.gradient_bytes);
  EXPECT_EQ(fp32.optimizer_bytes, bf16.optimizer_bytes);
  EXPECT_EQ(fp32.transient_bytes, bf16.transient_bytes);
  // Plain data parallelism all-reduces every gradient of the model once per step.
  const Bill ddp16 = priced(false, 0), ddp32 = priced(true, 0);
  EXPECT_EQ(bytes_of(ddp32, "dp all_reduce (gradients)"),
            2 * bytes_of(ddp16, "dp all_reduce (gradients)"));
}

}  // namespace
}  // namespace shardplan::planner
