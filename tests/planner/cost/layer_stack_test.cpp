// A model as a stack of layer kinds in the step model (Note [Stack of layer kinds] in
// planner/cost/step_model.h): Mixtral 8x7B with its first three layers dense. The stage's time is
// its layers' per-kind work summed, checked against the traced layers of each kind; the largest
// stage's parameters against the full model built and counted per stage; the partition of unequal
// layers against hand-worked splits and an exhaustive search.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_set>
#include <vector>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/stage_partition.h"
#include "planner/cost/tensor_parallel.h"
#include "planner/search/planner.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::planner {
namespace {

tensor::ModelConfig mixed_mixtral() {
  tensor::ModelConfig c = tensor::find_model_config("mixtral-8x7b");
  c.dense_layers = {0, 1, 2};
  c.dense_intermediate_size = 28672;
  return c;
}

Planner planner_for(const tensor::ModelConfig& c, const TrainingSetup& s) {
  return Planner(c, collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), s, {});
}

TEST(LayerStack, OneStageComputesEachKindsTracedLayers) {
  const tensor::ModelConfig c = mixed_mixtral();
  const TrainingSetup setup{.gpus = 8, .seq = 4096, .global_batch = 64};
  Planner p = planner_for(c, setup);
  ParallelConfig cfg;
  cfg.tp = 8;
  cfg.dp = 1;
  cfg.micro_batch = 1;
  cfg.sequence_parallel = true;
  Bill bill;
  (void)p.estimate(cfg, DimOrder::kTpInner, &bill);
  // By hand: 3 dense and 29 MoE layers, each kind's forward, backward (and any recomputation the
  // trace holds) as traced, plus the embedding and the output layer, for each of the 64
  // micro-batches.
  const tensor::LayerStack stack = tensor::layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 2U);
  auto work = [&](int kind) {
    return rank_work(
        trace_one_block(c, stack.kinds[static_cast<size_t>(kind)], {.micro_batch = 1, .seq = 4096}),
        p.context().compute, {.tp = 8, .sequence_parallel = true});
  };
  const RankWork dense = work(0), moe = work(1);
  auto fb = [](const PartWork& w) { return w.forward_s + w.backward_s + w.recompute_s; };
  const double per_micro_batch =
      3 * fb(dense.block()) + 29 * fb(moe.block()) + fb(dense.embedding()) + fb(dense.head());
  EXPECT_NEAR(bill.compute_s, 64 * per_micro_batch, 1e-12 * bill.compute_s);
  // The two kinds differ, so the sum is not 32 of either.
  EXPECT_GT(std::abs(fb(dense.block()) - fb(moe.block())), 0.05 * fb(moe.block()));
  // The bill names each kind's tensor-parallel collectives: each kind's traced ones, once per
  // layer of that kind and micro-batch.
  std::map<std::string, int64_t> calls;
  for (const BillCollective& b : bill.collectives) calls[b.what] += b.calls;
  auto scatters = [](const PartWork& w) {
    return std::count_if(w.tp_forward.begin(), w.tp_forward.end(), [](const CommItem& c) {
      return c.kind == collectives::CollectiveKind::kReduceScatter;
    });
  };
  EXPECT_EQ(calls["tp reduce_scatter (dense block forward)"], 64 * 3 * scatters(dense.block()));
  EXPECT_EQ(calls["tp reduce_scatter (moe block forward)"], 64 * 29 * scatters(moe.block()));
  // Each kind reduces twice per layer: after attention's o_proj and after its feed-forward (the
  // dense down_proj, or the grouped experts' down GEMM, one row-parallel product for all experts).
  EXPECT_EQ(scatters(moe.block()), 2);
  EXPECT_EQ(scatters(dense.block()), 2);
}

// Parameters on each pipeline stage of `partition` (tp = 1), counted on the full model, and the
// routed experts' among them.
struct StageCount {
  int64_t all = 0, experts = 0;
};
std::vector<StageCount> count_stages(const tensor::ModelConfig& c, const StagePartition& part) {
  const tensor::ModulePtr m = tensor::build_model(c);
  ParameterStage stage_of(c, part);
  std::vector<StageCount> out(static_cast<size_t>(part.stages()));
  std::vector<std::unordered_set<const void*>> seen(out.size());
  for (const tensor::NamedTensor& t : m->named_parameters({.remove_duplicate = false})) {
    const auto s = static_cast<size_t>(stage_of(t.name));
    if (!seen[s].insert(t.tensor.impl()).second) continue;
    out[s].all += t.tensor.numel();
    if (t.name.find(".experts.") != std::string::npos) out[s].experts += t.tensor.numel();
  }
  return out;
}

TEST(LayerStack, TheLargestStageHoldsWhatTheBuiltModelPutsThere) {
  const tensor::ModelConfig c = mixed_mixtral();
  const TrainingSetup setup{.gpus = 32, .seq = 4096, .global_batch = 64};
  Planner p = planner_for(c, setup);
  for (int64_t ep : {1, 4}) {
    ParallelConfig cfg;
    cfg.tp = 1;
    cfg.pp = 4;
    cfg.dp = 8;
    cfg.ep = ep;
    cfg.micro_batch = 1;
    Bill bill;
    const PlanResult r = p.estimate(cfg, DimOrder::kTpInner, &bill);
    const StagePartition part = partition_from_ends(c.num_hidden_layers, 4, r.stages);
    int64_t most = 0;
    for (const StageCount& s : count_stages(c, part)) {
      most = std::max(most, s.all - s.experts * (ep - 1) / ep);
    }
    SCOPED_TRACE(testing::Message() << "ep " << ep);
    EXPECT_EQ(bill.parameter_bytes, 2 * most);  // bf16 weights, ZeRO 0
  }
}

// The slowest stage of ends `e` over layers whose running times are `prefix`.
double slowest(const std::vector<double>& prefix, int64_t p, const StageEnds& e, double first,
               double last) {
  const auto L = static_cast<int64_t>(prefix.size()) - 1;
  double worst = 0;
  for (int64_t s = 0; s < p; ++s) {
    double t = prefix[static_cast<size_t>(stage_begin(L, p, e, s + 1))] -
               prefix[static_cast<size_t>(stage_begin(L, p, e, s))];
    if (s == 0) t += first;
    if (s == p - 1) t += last;
    worst = std::max(worst, t);
  }
  return worst;
}

std::vector<double> running(const std::vector<double>& times) {
  std::vector<double> prefix{0};
  for (double t : times) prefix.push_back(prefix.back() + t);
  return prefix;
}

// DeepSeek-V4-Flash: four kinds (sliding or CSA attention with hashed routing, then CSA and HCA
// with top-k). Between stages go its hc_mult = 4 hyper-connected streams, not one hidden state:
// 4,096 tokens x 4 x 4,096 x 2 bytes (bf16) a micro-batch (Note [Hyper-connection trace]). A
// heavily compressed layer's queries read the 128-token window and every entry of 128 tokens:
// 128 + 4,096 / 128 = 160 keys (Note [Compressed attention trace]).
TEST(LayerStack, DeepseekV4StagesSendEveryStream) {
  const tensor::ModelConfig c = tensor::find_model_config("deepseek-v4-flash");
  ASSERT_EQ(c.hc_mult, 4);
  const tensor::LayerStack stack = tensor::layer_stack(c);
  ASSERT_EQ(stack.kinds.size(), 4U);
  int hca = 0;
  for (const tensor::LayerKind& k : stack.kinds) {
    if (k.attention != tensor::AttentionType::kHeavilyCompressed) continue;
    const TracedModel t = trace_one_block(c, k, {.micro_batch = 1, .seq = 4096});
    EXPECT_EQ(t.attention_window, 128 + 4096 / 128);
    EXPECT_TRUE(t.sliding);
    ++hca;
  }
  EXPECT_EQ(hca, 1);
  Planner p = planner_for(c, {.gpus = 2, .seq = 4096, .global_batch = 8});
  ParallelConfig cfg;
  cfg.pp = 2;
  cfg.dp = 1;
  cfg.micro_batch = 1;
  Bill bill;
  (void)p.estimate(cfg, DimOrder::kTpInner, &bill);
  int sends = 0;
  for (const BillCollective& b : bill.collectives) {
    if (b.kind != collectives::CollectiveKind::kSendRecv) continue;
    EXPECT_EQ(b.bytes, int64_t{4096} * 4 * 4096 * 2);
    ++sends;
  }
  EXPECT_EQ(sends, 1);
}

TEST(LayerStack, CheapLayersGoToTheFirstStage) {
  // Four layers of 1 s then four of 3 s on two stages: 4 | 4 takes 4 s and 12 s, 5 | 3 takes 7 s
  // and 9 s, 6 | 2 takes 10 s and 6 s: the best is 5 | 3.
  const StageEnds e = balance_stack_ends(running({1, 1, 1, 1, 3, 3, 3, 3}), 2, 0, 0);
  EXPECT_EQ(e.first, 5);
  EXPECT_EQ(e.last, 3);
}

TEST(LayerStack, EqualLayersSplitAsTheUniformPartition) {
  for (int64_t L = 2; L <= 40; ++L) {
    for (int64_t p = 1; p <= std::min<int64_t>(L, 8); ++p) {
      const std::vector<double> prefix = running(std::vector<double>(static_cast<size_t>(L), 1.0));
      const StageEnds stack = balance_stack_ends(prefix, p, 0.7, 1.9);
      const StageEnds uniform = balance_stage_ends(L, p, 1.0, 0.7, 1.9);
      SCOPED_TRACE(testing::Message() << L << " layers, " << p << " stages");
      EXPECT_EQ(slowest(prefix, p, stack, 0.7, 1.9), slowest(prefix, p, uniform, 0.7, 1.9));
    }
  }
}

TEST(LayerStack, MatchesAnExhaustiveSearchOverTheEnds) {
  // Two kinds of layer in a repeating pattern, against every (first, last) whose middle stages
  // share the rest evenly.
  const std::vector<std::vector<double>> patterns = {
      {1, 1, 1, 3}, {0.5, 2}, {2, 2, 2, 0.4, 0.4}, {1, 3, 3}};
  for (const auto& pattern : patterns) {
    for (int64_t L = 3; L <= 20; ++L) {
      std::vector<double> times;
      for (int64_t i = 0; i < L; ++i)
        times.push_back(pattern[static_cast<size_t>(i) % pattern.size()]);
      const std::vector<double> prefix = running(times);
      for (int64_t p = 2; p <= std::min<int64_t>(L, 5); ++p) {
        double best = std::numeric_limits<double>::infinity();
        for (int64_t first = 1; first <= L; ++first) {
          for (int64_t last = 1; first + last <= L; ++last) {
            const int64_t rest = L - first - last, m = p - 2;
            if ((m == 0 && rest != 0) || (m > 0 && rest / m < 1)) continue;
            const StageEnds e{first, last, m > 0 ? (rest + m - 1) / m : 0};
            best = std::min(best, slowest(prefix, p, e, 0.3, 1.2));
          }
        }
        const StageEnds got = balance_stack_ends(prefix, p, 0.3, 1.2);
        SCOPED_TRACE(testing::Message() << L << " layers, " << p << " stages");
        EXPECT_NEAR(slowest(prefix, p, got, 0.3, 1.2), best, 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace shardplan::planner
