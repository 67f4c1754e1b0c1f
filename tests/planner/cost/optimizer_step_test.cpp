// Adam's step cost, counted by hand from torch.optim.Adam's single-tensor update (Note [Adam's
// step] in planner/cost/optimizer_step.cpp) on the MLP of tests/tensor/training_test.cpp.
#include "planner/cost/optimizer_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "base/error.h"

namespace shardplan::planner {
namespace {

TEST(OptimizerStep, MixedPrecisionAdamOnTracedParameters) {
  // Linear(16, 64) + Linear(64, 16) with biases: 16*64 + 64 + 64*16 + 16 = 2128 elements, the
  // count the traced training step reports.
  const int64_t params = 16 * 64 + 64 + 64 * 16 + 16;
  const OptimizerStep s = adam_step(params, MixedPrecision::adam_16bit());
  // lerp 3 + mul/addcmul 4 + sqrt/div/add 3 + addcdiv 3 = 13 FLOPs per element.
  EXPECT_DOUBLE_EQ(s.flops, 13.0 * 2128);
  // Read grad 2 + master 4 + moments 8; write master 4 + moments 8 + bf16 copy 2 = 28 bytes.
  EXPECT_EQ(s.bytes, 28 * 2128);
}

TEST(OptimizerStep, Fp32AdamHasNoMasterCopy) {
  // fp32: read grad 4 + weights 4 + moments 8, write weights 4 + moments 8 = 28, no extra copy.
  EXPECT_EQ(adam_bytes_per_param(MixedPrecision::adam_fp32()), 4 + 2 * (4 + 8));
  // Megatron's bf16 recipe with fp32 main grads: 4 + 2 * (4 + 8) + 2 = 30.
  EXPECT_EQ(adam_bytes_per_param(MixedPrecision::adam_bf16_fp32_grads()), 30);
}

TEST(OptimizerStep, BadCountsAreBadInput) {
  EXPECT_THROW(adam_step(-1, MixedPrecision{}), Error);
  EXPECT_THROW(adam_step(INT64_MAX / 4, MixedPrecision{}), Error);
}

}  // namespace
}  // namespace shardplan::planner
