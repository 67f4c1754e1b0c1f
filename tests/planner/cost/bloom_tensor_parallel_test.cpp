// BLOOM's tensor-parallel plan (tensor/models/family_bloom.cpp) applied: what TP rank 0 holds,
// from parallelize_module's local shapes, against counts written out by hand (Megatron's split:
// query_key_value, dense_h_to_4h and the tied vocabulary divided by tp; the row-parallel biases
// and every LayerNorm replicated).
#include <gtest/gtest.h>

#include <vector>

#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// BLOOM-7B1 on 4 ranks (h 4,096, 32 heads: 8 whole heads a rank; 30 layers; V 250,880 tied):
//   word_embeddings (lm_head is the same tensor, held once): 250,880 x 4,096 / 4 = 256,901,120
//   per layer: query_key_value (3h x h + 3h) / 4 = 12,585,984; dense h x h / 4 + its bias 4,096
//              = 4,198,400; dense_h_to_4h (4h x h + 4h) / 4 = 16,781,312; dense_4h_to_h
//              4h x h / 4 + its bias 4,096 = 16,781,312; two LayerNorms 16,384
//              = 50,363,392
//   30 x 50,363,392 + word_embeddings_layernorm and ln_f 16,384 + 256,901,120 = 1,767,819,264
TEST(TensorParallel, Bloom7b1FusedQkvSplitsByHead) {
  const tensor::ModelConfig c = tensor::find_model_config("bloom-7b1");
  EXPECT_EQ(tp_rank_parameters(c, 4), 1'767'819'264);
  EXPECT_EQ(tp_rank_parameters(c, 4, 3), 1'767'819'264);  // 250,880 rows split evenly
  EXPECT_EQ(tp_rank_parameters(c, 1), 7'069'016'064);     // the whole model
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c));
  ASSERT_EQ(rules.size(), 6u);
  EXPECT_EQ(rules[1].fused_parts, 1);  // [heads, 3, head_dim] rows: a plain column split
}

// BLOOM (176B) on 8 ranks (h 14,336, 112 heads: 14 a rank; 70 layers), as above:
//   word_embeddings 250,880 x 14,336 / 8 = 449,576,960
//   per layer: 77,075,712 + 25,704,448 + 102,767,616 + 102,774,784 + 57,344 = 308,379,904
//   70 x 308,379,904 + 57,344 + 449,576,960 = 22,036,227,584
TEST(TensorParallel, Bloom176bOnEightRanks) {
  EXPECT_EQ(tp_rank_parameters(tensor::find_model_config("bloom-176b"), 8), 22'036'227'584);
}

}  // namespace
}  // namespace shardplan::planner
