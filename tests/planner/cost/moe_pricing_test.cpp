// MoE priced as expert parallelism works (Note [Expert and dense data parallelism] in
// planner/cost/step_model.cpp), on Mixtral 8x7B over 16 H100s, every number counted by hand from
// its config (hidden 4096, 14336 per expert, 8 experts, top-2, 32 heads of 128 with 8 KV heads,
// 32 layers, vocabulary 32000, untied):
//   attention 2 x 4096 x 4096 + 2 x 1024 x 4096 = 41,943,040; two norms 8,192; router 8 x 4096
//   = 32,768: dense part of a layer 41,984,000;
//   experts 8 x 3 x 4096 x 14336 = 1,409,286,144 per layer, 176,160,768 on each of ep = 8 ranks;
//   embedding and output layer 2 x 32000 x 4096 = 262,144,000, final norm 4,096.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/search/planner.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

constexpr int64_t kDenseLayer = 41'984'000;
constexpr int64_t kExpertsLayer = 1'409'286'144;
constexpr int64_t kEnds = 262'144'000 + 4'096;
constexpr int64_t kLayers = 32;

struct Priced {
  PlanResult result;
  Bill bill;
  std::map<std::string, BillCollective> rows;  // by what
};

Priced price(int64_t ep, int zero, int64_t tp = 1, int64_t etp = 0) {
  Planner p(tensor::find_model_config("mixtral-8x7b"),
            collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 16, .seq = 4096, .global_batch = 64}, {});
  ParallelConfig c;
  c.tp = tp;
  c.dp = 16 / tp;
  c.ep = ep;
  c.etp = etp;
  c.zero = zero;
  c.micro_batch = 1;
  c.recompute = tensor::RecomputePolicy::kFull;
  Priced out;
  out.result = p.estimate(c, DimOrder::kTpInner, &out.bill);
  for (const BillCollective& b : out.bill.collectives) out.rows[b.what] = b;
  return out;
}

TEST(MoePricing, EachRankSendsItsOwnTokensWhateverEpIs) {
  // One micro-batch of 4096 tokens, each to top-2 experts, 4096 bf16 values: 64 MiB per rank.
  for (int64_t ep : {2, 4, 8}) {
    const Priced p = price(ep, 1);
    SCOPED_TRACE(ep);
    const BillCollective& a2a = p.rows.at("ep all_to_all (token dispatch and combine)");
    EXPECT_EQ(a2a.bytes, 4096 * 2 * 4096 * 2);
    EXPECT_EQ(a2a.group_size, ep);
  }
}

TEST(MoePricing, FsdpGathersDenseWeightsOverDpAndOnlyItsOwnExperts) {
  const Priced p = price(8, 3);
  const BillCollective& dense =
      p.rows.at("dp all_gather (fsdp dense parameters, forward and backward)");
  const BillCollective& experts =
      p.rows.at("dp all_gather (fsdp expert parameters, forward and backward)");
  EXPECT_EQ(dense.bytes, kDenseLayer * 2);
  EXPECT_EQ(dense.group_size, 16);
  EXPECT_EQ(experts.bytes, kExpertsLayer / 8 * 2);
  EXPECT_EQ(experts.group_size, 2);  // the expert-data-parallel group: 16 / 8
  // With ep 1 every weight of the layer is gathered over all 16 ranks.
  const Priced one = price(1, 3);
  EXPECT_EQ(one.rows.at("dp all_gather (fsdp parameters, forward and backward)").bytes,
            (kDenseLayer + kExpertsLayer) * 2);
}

TEST(MoePricing, ExpertStatesShardOverTheExpertDataParallelGroup) {
  // ZeRO-1: fp32 master weights and two Adam moments (12 bytes a parameter) shard over the
  // ranks that hold a replica: dense weights over 16, this rank's experts over 16 / 8 = 2.
  const Priced p = price(8, 1);
  const int64_t dense = kEnds + kLayers * kDenseLayer;
  const int64_t experts = kLayers * kExpertsLayer / 8;
  EXPECT_EQ(p.bill.optimizer_bytes, (dense + 15) / 16 * 12 + (experts + 1) / 2 * 12);
  EXPECT_EQ(p.bill.parameter_bytes, (dense + experts) * 2);
  // The gradients reduce in two groups: dense over 16 ranks, experts over 2.
  EXPECT_EQ(p.rows.at("dp reduce_scatter (dense gradients)").group_size, 16);
  EXPECT_EQ(p.rows.at("dp reduce_scatter (dense gradients)").bytes, dense * 2);
  EXPECT_EQ(p.rows.at("dp reduce_scatter (expert gradients)").group_size, 2);
  EXPECT_EQ(p.rows.at("dp reduce_scatter (expert gradients)").bytes, experts * 2);
}

// Whole experts (etp 1) on tp 4 x dp 4 with ep 8 (Note [Expert fold] in parallel_dims.h): the
// 16 ranks regroup as ep 8 x edp 2, so ep exceeds dp. Each rank holds one whole expert of each
// layer (8 / 8), sends its quarter of the tensor-parallel group's tokens (4096 x top-2 x 4096 x 2
// bytes / 4 = 16 MiB), and the experts add no tensor-parallel collective: the block's traffic is
// the dense layers' alone, as with the same tp 4 on a dense layer.
TEST(MoePricing, WholeExpertsLetEpSpanTensorAndDataParallelRanks) {
  const Priced whole = price(8, 1, 4, 1);
  const BillCollective& a2a = whole.rows.at("ep all_to_all (token dispatch and combine)");
  EXPECT_EQ(a2a.bytes, 4096 * 2 * 4096 * 2 / 4);
  EXPECT_EQ(a2a.group_size, 8);
  // Dense weights 1 / tp each (the row-parallel biases and norms are whole, none here but
  // norms and the router: 8,192 + 32,768 of a layer's 41,984,000 stay whole).
  const int64_t dense_layer = (kDenseLayer - 8'192 - 32'768) / 4 + 8'192 + 32'768;
  const int64_t experts = kLayers * kExpertsLayer / 8;
  const int64_t dense = kLayers * dense_layer + kEnds / 4 + 4'096 - 4'096 / 4;
  EXPECT_EQ(whole.rows.at("dp reduce_scatter (expert gradients)").bytes, experts * 2);
  EXPECT_EQ(whole.rows.at("dp reduce_scatter (expert gradients)").group_size, 2);  // 16 / 8
  EXPECT_EQ(whole.rows.at("dp reduce_scatter (dense gradients)").group_size, 4);
  EXPECT_EQ(whole.bill.parameter_bytes, (dense + experts) * 2);
  // The experts split like the dense layers (etp 4) over ep 4 = dp: 1 / 4 of each of 2 experts
  // per rank, 1 / 16 of the expert weights, and 64 MiB sent per rank (the whole replicated
  // micro-batch: every tp rank needs every token for its slice of each expert).
  const Priced split = price(4, 1, 4);
  EXPECT_EQ(split.rows.at("ep all_to_all (token dispatch and combine)").bytes, 4096 * 2 * 4096 * 2);
  EXPECT_EQ(split.bill.parameter_bytes, (dense + experts / 2) * 2);
  // Tensor-parallel traffic per step: the split experts add their own all-reduces.
  auto tp_bytes = [](const Priced& p) {
    int64_t b = 0;
    for (const BillCollective& c : p.bill.collectives) {
      if (c.what.rfind("tp ", 0) == 0) b += c.bytes * c.calls;
    }
    return b;
  };
  EXPECT_LT(tp_bytes(whole), tp_bytes(split));
}

// Note [Multi-token prediction]: DeepSeek-V3's MTP modules train on the last stage. A tiny
// DeepSeek-V3 (4 layers, the first dense, one MTP module) priced with and without it on one GPU:
// the parameters grow by what inspect counts for the module (tensor::parameters_beyond_model: an
// MoE layer, eh_proj [h, 2h], three norms and the router's e_score_correction_bias buffer, which
// the planner, like transformers, does not count as a parameter), and the step by at least one
// more MoE layer's time.
// The memory peak is the stage holding the most parameters per rank, its routed experts split over
// ep: an end stage's embedding can outweigh a middle stage's extra layers once ep divides the
// experts. Qwen3-30B-A3B (48 layers, vocabulary 151,936 x 2,048 untied, 128 experts of 3 x 2,048
// x 768 per layer) on pp 4 splits 11 / 13 / 13 / 11; with ep 8 an end stage's embedding or output
// layer (311M) outweighs the middle stages' two extra layers (19M dense + 75M of experts per rank
// each), while by whole counts the middle stages hold the most. The per-stage states are the
// layout's own count (what materialize allocates); the peak must be the largest of them.
TEST(MoePricing, ThePeakStageIsTheLargestPerRankAfterTheExpertSplit) {
  for (int64_t ep : {1, 2, 8}) {
    SCOPED_TRACE(ep);
    Planner p(tensor::find_model_config("qwen3-30b-a3b"),
              collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
              {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
    ParallelConfig c;
    c.pp = 4;
    c.dp = 16;
    c.ep = ep;
    c.zero = 1;
    c.micro_batch = 1;
    c.recompute = tensor::RecomputePolicy::kFull;
    Bill bill;
    (void)p.estimate(c, DimOrder::kTpInner, &bill);
    ASSERT_EQ(bill.stage_states.size(), 4u);
    int64_t largest = 0;
    for (const StageStateBytes& s : bill.stage_states) largest = std::max(largest, s.parameters);
    EXPECT_EQ(bill.parameter_bytes, largest);
    if (ep == 8) {
      // 11 / 13 / 13 / 11 layers: the ends hold 2 layers fewer and the embedding or the output
      // layer (and final norm), and the most per rank.
      EXPECT_GT(bill.parameter_bytes, bill.stage_states[1].parameters);
    }
  }
}

TEST(MoePricing, MultiTokenPredictionTrainsOnTheLastStage) {
  const tensor::ModelConfig with = tensor::find_model_config(
      std::string(SHARDPLAN_TEST_DATA_DIR) + "/hf_families/configs/tiny-deepseek-v3.json");
  ASSERT_EQ(with.mtp_layers, 1);
  tensor::ModelConfig without = with;
  without.mtp_layers = 0;
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  ParallelConfig c;
  c.micro_batch = 1;
  auto priced = [&](const tensor::ModelConfig& m, Bill* bill) {
    Planner p(m, h100, {.gpus = 1, .seq = 512, .global_batch = 4}, {});
    return p.estimate(c, DimOrder::kTpInner, bill);
  };
  Bill b_with, b_without;
  const PlanResult r_with = priced(with, &b_with), r_without = priced(without, &b_without);
  const int64_t mtp = tensor::parameters_beyond_model(with).mtp - with.num_local_experts;
  EXPECT_EQ(b_with.parameter_bytes - b_without.parameter_bytes, mtp * 2);
  EXPECT_GT(r_with.step_time_s, r_without.step_time_s);
  EXPECT_GT(b_with.activation_bytes, b_without.activation_bytes);
}

// --moe-imbalance F: the busiest expert's tokens are F times the balanced load, so the routed
// experts' GEMMs (their forward seconds) and the all-to-all bytes scale by F, and nothing else
// moves: attention, norms and router price as before. One Mixtral layer, 4,096 tokens, tp 1.
TEST(MoePricing, ImbalanceScalesTheExpertsAndTheAllToAllOnly) {
  const tensor::ModelConfig c = tensor::find_model_config("mixtral-8x7b");
  const tensor::LayerKind moe{.ffn = tensor::FfnKind::kMoe};
  const TracedModel even = trace_one_block(c, moe, {.micro_batch = 1, .seq = 4096});
  const TracedModel hot =
      trace_one_block(c, moe, {.micro_batch = 1, .seq = 4096, .moe_imbalance = 1.5});
  // 4,096 tokens x top-2 x 4,096 x 2 bytes = 64 MiB balanced, 96 MiB at 1.5.
  EXPECT_EQ(even.moe_dispatch_bytes, int64_t{64} << 20);
  EXPECT_EQ(hot.moe_dispatch_bytes, int64_t{96} << 20);
  const ComputeModel a = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), Precision::kBf16);
  int expert_ops = 0;
  for (size_t i = 0; i < even.step.ops.size(); ++i) {
    if (even.step.ops[i].is_view || even.part[i] != Part::kBlock) continue;
    // One op priced alone: its seconds at the imbalance over its seconds balanced.
    const double scale = hot.expert_op[i] ? 1.5 : 1.0;
    expert_ops += even.expert_op[i] ? 1 : 0;
    EXPECT_EQ(even.expert_op[i], hot.expert_op[i]);
    const OpSeconds e = op_seconds(a, even.step.ops[i], 1.0, 1.0);
    const OpSeconds h = op_seconds(a, hot.step.ops[i], 1.0, scale);
    EXPECT_NEAR(h.forward, scale * e.forward, 1e-12) << even.step.ops[i].op;
  }
  EXPECT_GE(expert_ops, 4);  // two grouped GEMMs, the activation and the product at least
  const RankWork w_even = rank_work(even, a, {}), w_hot = rank_work(hot, a, {});
  const double experts_s = [&] {
    double s = 0;
    for (size_t i = 0; i < even.step.ops.size(); ++i) {
      if (even.expert_op[i] && !even.step.ops[i].is_view && even.part[i] == Part::kBlock) {
        s += op_seconds(a, even.step.ops[i],
                        gemm_efficiency(a, gemm_shape(even.step, even.step.ops[i])))
                 .forward;
      }
    }
    return s;
  }();
  EXPECT_GT(experts_s, 0);
  // The block's forward grows by half the experts' forward, nothing more.
  EXPECT_NEAR(w_hot.block().forward_s - w_even.block().forward_s, 0.5 * experts_s,
              1e-9 * w_even.block().forward_s);
  EXPECT_EQ(w_hot.ep_dispatch_bytes, int64_t{96} << 20);
}

}  // namespace
}  // namespace shardplan::planner
