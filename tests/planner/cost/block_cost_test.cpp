// Which traced ops are the attention core (scaled by cp under context parallelism; CP overlaps
// them): docs/cost-model.md §8.2.
#include "planner/cost/block_cost.h"

#include <gtest/gtest.h>

#include <string>

#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

int score_ops(const TracedModel& t) {
  int n = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) n += t.score_op[i] ? 1 : 0;
  return n;
}

TracedModel trace(const char* model, int64_t seq, tensor::AttentionImpl attention) {
  return trace_one_block(tensor::find_model_config(model),
                         {.micro_batch = 1,
                          .seq = seq,
                          .recompute = tensor::RecomputePolicy::kNone,
                          .attention = attention,
                          .dtype = tensor::DType::kBFloat16});
}

// Llama 3 8B's hidden size is 4096 and GPT-2's 768: at that many traced tokens their
// [1, tokens, hidden] norm, projection and residual outputs end in [seq, seq] like scores, and are
// not the attention core. The trace has one attention op per block on either path (the math
// path's score traffic is priced on it: Note [Math attention traffic]).
TEST(BlockCost, OnlyTheAttentionOpIsTheCoreWhenHiddenEqualsTheSequence) {
  struct Case {
    const char* model;
    int64_t seq;
    tensor::AttentionImpl attention;
  };
  for (const Case& c : {Case{"llama3-8b", 2048, tensor::AttentionImpl::kFlash},
                        Case{"llama3-8b", 4096, tensor::AttentionImpl::kFlash},
                        Case{"gpt2", 512, tensor::AttentionImpl::kMath},
                        Case{"gpt2", 768, tensor::AttentionImpl::kMath}}) {
    SCOPED_TRACE(std::string(c.model) + " " + std::to_string(c.seq));
    const TracedModel t = trace(c.model, c.seq, c.attention);
    ASSERT_EQ(score_ops(t), 1);
    for (size_t i = 0; i < t.step.ops.size(); ++i) {
      if (t.score_op[i]) {
        EXPECT_EQ(t.step.ops[i].op, "scaled_dot_product_attention");
      }
    }
  }
}

}  // namespace
}  // namespace shardplan::planner
