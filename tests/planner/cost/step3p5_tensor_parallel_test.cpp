// Step 3.5's tensor-parallel plan (tensor/models/family_step3p5.cpp) and the tp rule for its
// per-layer-type head counts (planner/candidate/parallel_dims.cpp), against counts written out by
// hand from Step 3.5 Flash's config (h 4096, 8 KV heads of 128, full layers of 64 heads on
// 0, 4, ..., 44 and sliding layers of 96 heads, a dense MLP of 11264 on layers 0-2, 288 experts of
// 1280 and a shared expert of 1280 on the other 42, vocabulary 128896 untied).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// Step 3.5 Flash on 8 ranks: q, k, v, the per-head gate and o_proj split by heads, the MLPs and
// each expert by their width, embedding and output layer by vocabulary rows; the router, the q/k
// norms and the layer norms replicated.
//   embed_tokens and lm_head: 128896 x 4096 / 8 = 65,994,752 each
//   full layer (64 heads): (2 x 64 x 128 x 4096 + 2 x 8 x 128 x 4096 + 64 x 4096) / 8
//              = 9,469,952, q_norm and k_norm 256: 9,470,208
//   sliding layer (96 heads): (2 x 96 x 128 x 4096 + 2 x 8 x 128 x 4096 + 96 x 4096) / 8
//              = 13,680,640, norms 256: 13,680,896
//   dense MLP (layers 0-2): 3 x 4096 x 11264 / 8 = 17,301,504
//   MoE block: experts 3 x 288 x 4096 x 1280 / 8 = 566,231,040, router 1,179,648, shared expert
//              3 x 4096 x 1280 / 8 = 1,966,080: 569,376,768
//   two RMSNorms a layer 8,192; final norm 4,096
//   12 x 9,470,208 + 33 x 13,680,896 + 45 x 8,192 + 3 x 17,301,504 + 42 x 569,376,768
//   + 2 x 65,994,752 + 4,096 = 24,663,203,072
TEST(Step3p5TensorParallel, FlashSplitsEachLayerTypeByItsHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("step-3.5-flash");
  EXPECT_EQ(tp_rank_parameters(c, 8), 24'663'203'072);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 24'663'203'072);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 98'503'023'872);
  EXPECT_EQ(tp_rank_parameters(c, 1), 196'956'118'272);  // the whole model
  // One MoE layer's routed experts on rank 0 of 8: 3 x 288 x 4096 x 1280 / 8.
  EXPECT_EQ(expert_parameters_per_layer(c, 8), 566'231'040);
}

// tp must divide the full layers' 64 heads and the sliding layers' 96 (and divide the 8 KV heads
// or be a multiple of them).
TEST(Step3p5TensorParallel, TpDividesTheHeadsOfEveryLayerType) {
  const tensor::ModelConfig c = tensor::find_model_config("step-3.5-flash");
  const TrainingSetup s{.gpus = 128, .seq = 4096, .global_batch = 128};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 16), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 32), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 64),
            "--tp 64 does not divide the model's 96 sliding-layer attention heads, expected a "
            "divisor of 96");
}

}  // namespace
}  // namespace shardplan::planner
