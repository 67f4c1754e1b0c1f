// The planner: candidates over (tp, cp, pp, dp, ep, ZeRO, micro-batch, recomputation, virtual
// stages, sequence parallelism, mesh dims inside a node), each priced by the step model on cached
// block work, the fastest that fit ranked (docs/user-guide.md "plan", docs/cost-model.md §8).
//   Planner p(find_model_config("llama3-70b"), load_cluster(...), {.gpus = 64, .seq = 4096,
//             .global_batch = 256}, {});
//   SearchResult r = p.search({}, 10);   // r.top[0].config, r.top[0].step_time_s
//   Bill b;
//   p.estimate(r.top[0].config, r.top[0].order, &b);   // time_parts(b) sum to step_time_s
//
// Note [Search space]
// tp: divisors of the GPUs within one node that the heads allow (families without a TP plan keep
// tp = 1); cp: powers of two with seq divisible by 2 cp and at least 2,048 tokens on each rank
// (Note [Context-parallel floor] in planner.cpp; a pin may go below); pp: divisors of the rest up
// to the layers; dp: what remains; ep (MoE): divisors of the experts, cp times a divisor of dp with
// etp = tp, or tp x cp times a divisor of dp with etp = 1 (Note [Expert fold] in parallel_dims.h);
// ZeRO 0-3 (1-3 only with dp x cp > 1); micro-batch: powers of two up to 16 that, with dp, divide
// the global batch; recomputation none / selective / full, and for each candidate that fits with
// full recomputation the fewest recomputed layers per chunk that still fit (Note [Partial
// recomputation]; not when --recompute is pinned); sequence parallelism with tp > 1; virtual stages
// v > 1 when pp > 1, at least one layer per chunk and the micro-batches a multiple of pp (chunks
// may differ by a layer: the slowest stage sets the pace); tp innermost, or (where tp x cp spans
// nodes) cp inside the node and tp outside it; only what the stack can run (StackProfile). A pin
// fixes its dimension (any value check_parallel_config accepts). Candidates
// that break a divisibility rule are pruned before evaluation (counted in `pruned`); evaluated ones
// that do not fit in memory are rejected by kOverMemoryRule; SearchResult::rejected counts every
// rule with its first candidate.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/cluster.h"
#include "planner/candidate/stack_profile.h"
#include "planner/cost/step_model.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {

struct PlannerOptions {
  Precision precision = Precision::kBf16;
  // The software stack the plan is for (Note [Stack profiles]): what the search may choose and
  // how fast the stack's kernels run. The default is the built-in megatron profile.
  StackProfile stack;
  tensor::AttentionImpl attention = tensor::AttentionImpl::kFlash;
  // The busiest expert's tokens over the balanced load (TraceKey::moe_imbalance), >= 1.
  double moe_imbalance = 1;
  // Bytes per GPU a plan must leave free below the device's usable memory (--memory-headroom):
  // the allocator's fragmentation, a framework's own buffers. 0 keeps every plan that fits.
  int64_t memory_headroom_bytes = 0;
  // Called every 4096 evaluated candidates with the count and the seconds since the search
  // began, and once at the end with evaluated = -1 (the CLI draws a progress line on a terminal
  // when a search takes over a second, and clears it).
  std::function<void(int64_t evaluated, double seconds)> progress;
};

// Mesh dim orders (slowest first) the search tries: tp innermost, or cp innermost.
enum class DimOrder : uint8_t { kTpInner, kCpInner };
std::string_view to_string(DimOrder o);
std::array<int64_t, 5> dim_order(DimOrder o);

struct PlanResult {
  ParallelConfig config;
  DimOrder order = DimOrder::kTpInner;
  StageEnds stages;  // layers of the first and last pipeline stage (Note [Stage partition])
  double step_time_s = 0;
  int64_t memory_bytes = 0;
  bool fits = false;  // memory_bytes within the accelerator's memory (the step model's verdict)
  double mfu = 0;     // model FLOPs with attention as the full square (6 N + 12 L H Q s)
  double mfu_causal = 0;  // with causal attention as the half it computes (6 N + 6 L H Q s)
  double tokens_per_s = 0;
};

// The rule that rejects a priced candidate: more bytes per GPU than the accelerator holds.
inline constexpr std::string_view kOverMemoryRule = "exceeds memory per GPU";

struct Rejection {
  int64_t count = 0;
  ParallelConfig first;                 // the first candidate the rule rejected
  std::optional<int64_t> memory_bytes;  // its bytes per GPU, for kOverMemoryRule
};

struct SearchResult {
  std::vector<PlanResult> top;     // fastest first
  std::vector<PlanResult> pareto;  // memory against step time, fastest first
  int64_t evaluated = 0;
  int64_t feasible = 0;
  int64_t pruned = 0;  // removed before pricing, by the pruning rules
  // rule -> how many candidates it removed and the first of them: the pruning rules (Note
  // [Pruning rules] in planner.cpp; their candidates only as far as the search had chosen) and,
  // after pricing, kOverMemoryRule (with that candidate's bytes).
  std::map<std::string, Rejection> rejected;
  // The evaluated candidate that needs the least memory per GPU: when nothing fits, how far the
  // closest plan is from fitting.
  std::optional<PlanResult> least_memory;
  double search_seconds = 0;
  int64_t cached_blocks = 0;  // traced (micro-batch, sequence, recompute) entries
  int64_t cached_work = 0;    // priced (trace, tp, sp, cp) entries
};

// "tp+pp+dp zero-1": the dims above 1 and the ZeRO stage.
std::string family_of(const ParallelConfig& c);

class Planner {
 public:
  // Checks the setup against the model and the cluster (one line naming the flag, exit 2).
  Planner(tensor::ModelConfig model, collectives::Cluster cluster, TrainingSetup setup,
          PlannerOptions options);
  ~Planner();
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;

  // The `top_k` fastest candidates that fit, among those `keep` accepts (all when empty), with
  // every pinned dimension fixed. Throws shardplan::Error for pins that contradict each other or
  // the setup, and when no candidate is left to price (naming the pruning rules); a search whose
  // candidates all exceed memory is a result (top empty, least_memory set).
  SearchResult search(const Pins& pins, int64_t top_k,
                      const std::function<bool(const ParallelConfig&)>& keep = {});
  // The best plan for each filter in one pass (compare); nullopt where none fits, with the
  // rejection counts of that filter's candidates. `all`, when given, gets the counts, the Pareto
  // front and the `top_k` fastest plans that fit.
  struct Best {
    std::optional<PlanResult> best;
    int64_t evaluated = 0;
    std::map<std::string, int64_t> rejected;  // reason -> candidates
  };
  std::vector<Best> best_of_each(const Pins& pins,
                                 const std::vector<std::function<bool(const ParallelConfig&)>>& f,
                                 SearchResult* all, int64_t top_k = 0);

  // One configuration (checked with check_parallel_config), priced with its bill.
  PlanResult estimate(const ParallelConfig& c, DimOrder order, Bill* bill);

  const tensor::ModelConfig& model() const;
  const collectives::Cluster& cluster() const;
  const TrainingSetup& setup() const;
  const PlannerOptions& options() const;
  const StepContext& context() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardplan::planner
