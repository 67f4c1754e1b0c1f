// Laguna's tensor-parallel plan (tensor/models/family_laguna.cpp) and the tp rule for its
// per-layer-type head counts (planner/candidate/parallel_dims.cpp), against counts written out
// by hand from Laguna XS.2's config (h 2048, 8 KV heads of 128, full layers of 48 heads on
// 0, 4, ..., 36 and sliding layers of 64 heads, a dense MLP of 8192 on layer 0, 256 experts of
// 512 and a shared expert of 512 on the other 39, vocabulary 100352 untied).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// Laguna XS.2 on 8 ranks: q, k, v, the per-head gate and o_proj split by heads, the MLPs and each
// expert by their width, embedding and output layer by vocabulary rows; the router (weight and
// bias), the q/k norms and the layer norms replicated.
//   embed_tokens and lm_head: 100352 x 2048 / 8 = 25,690,112 each
//   full layer (48 heads): (2 x 48 x 128 x 2048 + 2 x 8 x 128 x 2048 + 48 x 2048) / 8
//              = 3,682,304, q_norm and k_norm 256: 3,682,560
//   sliding layer (64 heads): (2 x 64 x 128 x 2048 + 2 x 8 x 128 x 2048 + 64 x 2048) / 8
//              = 4,734,976, norms 256: 4,735,232
//   dense MLP (layer 0): 3 x 2048 x 8192 / 8 = 6,291,456
//   MoE block: experts 3 x 256 x 2048 x 512 / 8 = 100,663,296, router 524,288 + bias 256,
//              shared expert 3 x 2048 x 512 / 8 = 393,216: 101,581,056
//   two RMSNorms a layer 4,096; final norm 2,048
//   10 x 3,682,560 + 30 x 4,735,232 + 40 x 4,096 + 6,291,456 + 39 x 101,581,056
//   + 2 x 25,690,112 + 2,048 = 4,198,381,312
TEST(LagunaTensorParallel, XsTwoSplitsEachLayerTypeByItsHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("laguna-xs.2");
  EXPECT_EQ(tp_rank_parameters(c, 8), 4'198'381'312);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 4'198'381'312);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 16'731'625'216);
  EXPECT_EQ(tp_rank_parameters(c, 1), 33'442'617'088);  // the whole model
  // One MoE layer's routed experts on rank 0 of 8: 3 x 256 x 2048 x 512 / 8.
  EXPECT_EQ(expert_parameters_per_layer(c, 8), 100'663'296);
}

// tp must divide the full layers' 48 heads and the sliding layers' 64 (and divide the 8 KV heads
// or be a multiple of them).
TEST(LagunaTensorParallel, TpDividesTheHeadsOfEveryLayerType) {
  tensor::ModelConfig c = tensor::find_model_config("laguna-xs.2");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 96};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 32),
            "--tp 32 does not divide the model's 48 attention heads, expected a divisor of 48");
  // Sliding layers of 72 heads beside full ones of 48: tp 16 divides 48, not 72.
  c.sliding_num_attention_heads = 72;
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16),
            "--tp 16 does not divide the model's 72 sliding-layer attention heads, expected a "
            "divisor of 72");
}

}  // namespace
}  // namespace shardplan::planner
