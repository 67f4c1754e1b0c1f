// Mellum's tensor-parallel plan (tensor/models/family_mellum.cpp) applied to Mellum2-12B-A2.5B,
// against counts written out by hand from its config (h 2304, 32 query heads and 4 key-value
// heads of 128, 28 MoE layers of 64 experts of 896, vocabulary 98304 untied).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// On 4 ranks: q, k, v (one key-value head a rank) and o_proj split by heads, each expert by its
// width, embedding and output layer by vocabulary rows; the router, the q/k norms and the layer
// norms replicated.
//   embed_tokens and lm_head: 98304 x 2304 / 4 = 56,623,104 each
//   attention: (2 x 32 x 128 x 2304 + 2 x 4 x 128 x 2304) / 4 = 5,308,416, q/k norms 256
//   experts: 3 x 64 x 2304 x 896 / 4 = 99,090,432; router 64 x 2304 = 147,456
//   two RMSNorms a layer 4,608; final norm 2,304
//   28 x (5,308,416 + 256 + 99,090,432 + 147,456 + 4,608) + 2 x 56,623,104 + 2,304
//   = 3,040,681,216
TEST(MellumTensorParallel, Mellum2SplitsHeadsExpertsAndVocabulary) {
  const tensor::ModelConfig c = tensor::find_model_config("mellum2-12b-a2.5b");
  EXPECT_EQ(tp_rank_parameters(c, 4), 3'040'681'216);
  EXPECT_EQ(tp_rank_parameters(c, 4, 3), 3'040'681'216);  // even splits: every rank alike
  // On 2 ranks the split parts halve instead: 28 x (10,616,832 + 256 + 198,180,864 + 147,456
  // + 4,608) + 2 x 113,246,208 + 2,304.
  EXPECT_EQ(tp_rank_parameters(c, 2), 6'077'095'168);
  EXPECT_EQ(tp_rank_parameters(c, 1), 12'149'923'072);  // the whole model
  // One MoE layer's routed experts on rank 0 of 4: 3 x 64 x 2304 x 896 / 4.
  EXPECT_EQ(expert_parameters_per_layer(c, 4), 99'090'432);
}

// tp must divide the 32 query heads, and divide the 4 key-value heads or be a multiple of them.
TEST(MellumTensorParallel, TpDividesTheHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("mellum2-12b-a2.5b");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 4), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 64),
            "--tp 64 does not divide the model's 32 attention heads, expected a divisor of 32");
  // The experts split whole over expert-parallel ranks: ep must divide the 64.
  EXPECT_EQ(dim(kEpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kEpDim).refuses(c, s, 3),
            "--ep 3 does not divide the model's 64 experts, expected a divisor of 64");
}

}  // namespace
}  // namespace shardplan::planner
