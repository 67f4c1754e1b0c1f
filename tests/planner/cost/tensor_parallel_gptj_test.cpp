// GPT-J's tensor-parallel plan (tensor/models/family_gptj.cpp) applied by parallelize_module:
// what TP rank 0 holds against counts written out by hand from the shipped config (Megatron's
// split: q, k, v, fc_in and the vocabulary divided by tp, row-parallel biases and norms
// replicated).
#include <gtest/gtest.h>

#include <vector>

#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// GPT-J-6B on 8 ranks (h 4096, 16 heads of 256: 2 a rank, F 16384, vocab 50400, 28 layers):
//   wte by vocabulary rows: 50400 / 8 = 6300 rows x 4096 = 25,804,800
//   lm_head: the same weight rows 25,804,800 plus its bias split with them, 6,300: 25,811,100
//   per layer: q_proj, k_proj, v_proj 3 x 4096^2 / 8 = 6,291,456; out_proj 4096^2 / 8 =
//              2,097,152 (no bias); fc_in (F x h + F) / 8 = 8,390,656; fc_out h x F / 8 =
//              8,388,608 plus its bias 4,096 (row-parallel: replicated); ln_1 8,192
//              = 25,180,160
//   28 x 25,180,160 + ln_f 8,192 + 25,804,800 + 25,811,100 = 756,668,572
TEST(TensorParallelGptj, Gptj6BOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("gpt-j-6b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 756'668'572);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 756'668'572);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 6'050'882'784);   // the whole model
  // Every rule names modules the model builds, q, k and v one part each (not fused).
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c));
  ASSERT_EQ(rules.size(), 8u);
  for (const mesh::StyleRule& r : rules) EXPECT_EQ(r.fused_parts, 1) << r.pattern;
}

}  // namespace
}  // namespace shardplan::planner
