// Which traced ops are the attention core (scaled by cp under context parallelism; CP overlaps
// them): docs/cost-model.md §8.2.
#include "planner/cost/block_cost.h"

#include <gtest/gtest.h>

#include <string>

#include "collectives/cluster.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/layer_kinds.h"
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

// Note [Ring attention steps]: at cp 4 a rank's own keys are a quarter of its attention work, the
// other three ring steps run at the stack's ring rate; everything but the attention core is
// untouched, and without context parallelism the rate changes nothing.
TEST(BlockCost, RingStepsRunTheOtherRanksKeysAtTheStacksRingRate) {
  const TracedModel t = trace("llama3-8b", 8192, tensor::AttentionImpl::kFlash);
  const ComputeModel fused = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), Precision::kBf16);
  ComputeModel ring = fused;
  ring.ring_attention_rate = 0.5;
  for (int64_t cp : {1, 2, 4}) {
    SCOPED_TRACE(cp);
    const PartWork a = rank_work(t, fused, {.cp = cp}).block();
    const PartWork b = rank_work(t, ring, {.cp = cp}).block();
    // 1 / cp of the work at the fused rate, (cp - 1) / cp at half of it: (1 + 2 (cp - 1)) / cp.
    const double slow = (1.0 + 2.0 * static_cast<double>(cp - 1)) / static_cast<double>(cp);
    EXPECT_NEAR(b.attention_s, a.attention_s * slow, 1e-12 * a.attention_s);
    const double rest_a = a.forward_s + a.backward_s - a.attention_s;
    const double rest_b = b.forward_s + b.backward_s - b.attention_s;
    EXPECT_NEAR(rest_b, rest_a, 1e-12 * rest_a);
  }
}

// Note [Gated DeltaNet trace] (tensor/models/gated_delta_net.h): Qwen3-Next's linear layer is
// split by key-head groups under tensor parallelism, its chunked rule priced as [C x V] tiles per
// (batch, head, chunk), and it passes no keys around a context-parallel ring.
TEST(BlockCost, GatedDeltaNetSplitsByHeadGroupsAndHasNoKeyRing) {
  const tensor::ModelConfig cfg = tensor::find_model_config("qwen3-next-80b-a3b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel linear = trace_one_block(cfg, tensor::layer_kind(cfg, 0), key);
  EXPECT_EQ(linear.kv_bytes, 0);
  EXPECT_EQ(score_ops(linear), 0);
  int rules = 0, rows = 0, convs = 0;
  for (size_t i = 0; i < linear.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = linear.step.ops[i];
    if (op.op == "chunk_gated_delta_rule") {
      ++rules;
      EXPECT_EQ(linear.split[i], OpSplit::kSharded);
      // 32 value heads x 4096 / 64 chunks of [64 x 128] tiles, a quarter of them per rank at tp 4.
      const GemmShape g = local_gemm_shape(linear, i, {.tp = 4});
      EXPECT_EQ(g.batch, 32 * 64 / 4);
      EXPECT_EQ(g.m, 64);
      EXPECT_EQ(g.n, 128);
    }
    if (op.op == "causal_conv1d") {
      EXPECT_EQ(linear.split[i], OpSplit::kSharded);
      ++convs;
    }
    if (op.op == "linear" && op.call >= 0 &&
        linear.step.calls[static_cast<size_t>(op.call)].fqn.ends_with("linear_attn.out_proj")) {
      EXPECT_EQ(linear.split[i], OpSplit::kRow);
      ++rows;
    }
  }
  EXPECT_EQ(rules, 1);
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(convs, 1);
  // The rule runs in bf16 under --precision fp8 too, quantizing nothing: with every other op of
  // the layer left out, its time is the same at both precisions (H100: fp8 peak twice bf16's).
  TracedModel only_rule = linear;
  for (size_t i = 0; i < only_rule.step.ops.size(); ++i) {
    if (only_rule.step.ops[i].op != "chunk_gated_delta_rule") only_rule.step.ops[i].skipped = true;
  }
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  const PartWork bf16 = rank_work(only_rule, compute_model(h100, Precision::kBf16), {}).block();
  const PartWork fp8 = rank_work(only_rule, compute_model(h100, Precision::kFp8), {}).block();
  EXPECT_GT(bf16.forward_s, 0);
  EXPECT_DOUBLE_EQ(fp8.forward_s, bf16.forward_s);
  EXPECT_DOUBLE_EQ(fp8.backward_s, bf16.backward_s);
  // The full-attention layer's keys and values: 2 kv heads of 256 channels, bf16.
  const TracedModel full = trace_one_block(cfg, tensor::layer_kind(cfg, 3), key);
  EXPECT_EQ(full.kv_bytes, 2 * 4096 * 2 * 256 * 2);
  EXPECT_EQ(score_ops(full), 1);
}

// Note [Mamba-2 trace] (tensor/models/mamba2_mixer.h): Nemotron 3 Nano's Mamba-2 block splits
// its heads and groups under tensor parallelism, its fused scan priced as [Q x P] tiles per
// (batch, head, chunk) in 16-bit whatever the GEMMs' precision; neither it nor a feed-forward
// block (no attention at all) passes keys around a context-parallel ring.
TEST(BlockCost, MambaBlocksAndFeedForwardBlocksHaveNoKeyRing) {
  const tensor::ModelConfig cfg = tensor::find_model_config("nemotron-3-nano-30b-a3b");
  const TraceKey key{.micro_batch = 1, .seq = 4096, .dtype = tensor::DType::kBFloat16};
  const TracedModel mamba = trace_one_block(cfg, tensor::layer_kind(cfg, 0), key);
  EXPECT_EQ(mamba.kv_bytes, 0);
  EXPECT_EQ(score_ops(mamba), 0);
  int scans = 0, rows = 0;
  for (size_t i = 0; i < mamba.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = mamba.step.ops[i];
    if (op.op == "mamba_split_conv1d_scan_combined") {
      ++scans;
      EXPECT_EQ(mamba.split[i], OpSplit::kSharded);
      // 64 heads x 4096 / 256 chunks of [256 x 64] tiles, a quarter of them per rank at tp 4.
      const GemmShape g = local_gemm_shape(mamba, i, {.tp = 4});
      EXPECT_EQ(g.batch, 64 * 16 / 4);
      EXPECT_EQ(g.m, 256);
      EXPECT_EQ(g.n, 64);
    }
    if (op.op == "linear" && op.call >= 0 &&
        mamba.step.calls[static_cast<size_t>(op.call)].fqn.ends_with("mixer.out_proj")) {
      EXPECT_EQ(mamba.split[i], OpSplit::kRow);
      ++rows;
    }
  }
  EXPECT_EQ(scans, 1);
  EXPECT_EQ(rows, 1);
  TracedModel only_scan = mamba;
  for (size_t i = 0; i < only_scan.step.ops.size(); ++i) {
    if (only_scan.step.ops[i].op != "mamba_split_conv1d_scan_combined") {
      only_scan.step.ops[i].skipped = true;
    }
  }
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  const PartWork bf16 = rank_work(only_scan, compute_model(h100, Precision::kBf16), {}).block();
  const PartWork fp8 = rank_work(only_scan, compute_model(h100, Precision::kFp8), {}).block();
  EXPECT_GT(bf16.forward_s, 0);
  EXPECT_DOUBLE_EQ(fp8.forward_s, bf16.forward_s);
  EXPECT_DOUBLE_EQ(fp8.backward_s, bf16.backward_s);
  // Layer 1 is an MoE block without attention: no keys, its dispatch priced as any MoE layer's.
  const TracedModel moe = trace_one_block(cfg, tensor::layer_kind(cfg, 1), key);
  EXPECT_EQ(moe.kv_bytes, 0);
  EXPECT_EQ(score_ops(moe), 0);
  EXPECT_GT(moe.moe_dispatch_bytes, 0);
  // Layer 5 attends (32 heads, 2 kv heads of 128): its keys and values, bf16.
  const TracedModel attention = trace_one_block(cfg, tensor::layer_kind(cfg, 5), key);
  EXPECT_EQ(attention.kv_bytes, 2 * 4096 * 2 * 128 * 2);
  EXPECT_EQ(score_ops(attention), 1);
}

}  // namespace
}  // namespace shardplan::planner
