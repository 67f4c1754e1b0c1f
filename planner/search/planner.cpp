#include "planner/search/planner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <tuple>
#include <utility>

#include "base/checked.h"
#include "base/error.h"
#include "collectives/rank_placement.h"
#include "collectives/topology.h"
#include "planner/candidate/candidate_mesh.h"
#include "planner/cost/tensor_parallel.h"
#include "planner/cost/training_metrics.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"

namespace shardplan::planner {
namespace {

using tensor::RecomputePolicy;

constexpr std::array<RecomputePolicy, 3> kPolicies = {
    RecomputePolicy::kNone, RecomputePolicy::kSelective, RecomputePolicy::kFull};
constexpr int64_t kMaxSearchedMicroBatch = 16;
constexpr int64_t kMaxSearchedVirtualStages = 8;
constexpr int64_t kMinCpTokens = 2048;  // Note [Context-parallel floor]

std::vector<int64_t> divisors(int64_t n, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Note [Pruning rules]: why a candidate was dropped before it was priced, one named rule each; the
// counts are reported (SearchResult::pruned_by), and when no candidate is left at all they are the
// reason the pins or the job are refused.
enum PruneRule : uint8_t {
  kWorldUndivided,
  kDpNotThePin,
  kBatchByDp,
  kEpByDp,
  kBatchByMicroBatch,
  kSpWithoutTp,
  kZeroWithoutDp,
  kChunks,
  kStack,
  kPruneRules
};
constexpr std::array<std::string_view, kPruneRules> kPruneRuleNames = {
    "tp x cp x pp does not divide the GPUs",
    "dp (the GPUs left by tp x cp x pp) is not the pinned --dp",
    "dp does not divide the global batch",
    "the experts do not fold onto the mesh (ep over cp then dp, or whole tp groups with etp 1)",
    "dp x micro-batch does not divide the global batch",
    "sequence parallelism needs tp > 1",
    "ZeRO 1-3 shard over dp x cp and need dp x cp > 1",
    "interleaving (virtual stages > 1) needs pp > 1, micro-batches a multiple of pp and a layer "
    "per model chunk",
    "the software stack (--stack) cannot run it"};
struct Pruned {
  int64_t total = 0;
  std::array<int64_t, kPruneRules> by{};
  std::array<ParallelConfig, kPruneRules> first{};  // the degrees known when it was pruned
  void add(PruneRule r, const ParallelConfig& c) {
    ++total;
    if (by[r]++ == 0) first[r] = c;
  }
};

// "--tp 8 --virtual-stages 4": the pins as the user typed them.
std::string pins_text(const Pins& p) {
  std::string s;
  auto add = [&s](std::string_view flag, const std::string& v) {
    s += (s.empty() ? "" : " ") + std::string(flag) + " " + v;
  };
  for (const ParallelDim& d : parallel_dims()) {
    if (p.*d.pin) add(d.flag, std::to_string(*(p.*d.pin)));
  }
  const std::pair<std::string_view, const std::optional<int64_t>*> counts[] = {
      {"--micro-batch", &p.micro_batch},
      {"--virtual-stages", &p.virtual_stages},
      {"--recompute-layers", &p.recompute_layers}};
  for (const auto& [flag, v] : counts) {
    if (*v) add(flag, std::to_string(**v));
  }
  if (p.zero) add("--zero", std::to_string(*p.zero));
  if (p.recompute) add("--recompute", std::string(tensor::to_string(*p.recompute)));
  if (p.sequence_parallel) add("--sequence-parallel", *p.sequence_parallel ? "on" : "off");
  return s;
}

template <typename T>
std::vector<T> pinned_or(const std::optional<T>& pin, std::vector<T> all) {
  if (pin) return {*pin};
  return all;
}

// A plan is better when faster; ties go to less memory, then to the smaller degrees (a stable,
// deterministic order).
auto plan_key(const PlanResult& p) {
  const ParallelConfig& c = p.config;
  return std::make_tuple(p.step_time_s, p.memory_bytes, c.tp, c.pp, c.cp, c.ep, c.etp, c.zero,
                         c.micro_batch, static_cast<int>(c.recompute), c.virtual_stages,
                         c.sequence_parallel, static_cast<int>(p.order));
}
bool faster(const PlanResult& a, const PlanResult& b) { return plan_key(a) < plan_key(b); }

// The k fastest feasible plans and the Pareto front of memory against step time, kept as the
// search streams plans in: storing every feasible plan and sorting them at the end (hundreds of
// thousands on a large job) cost more than evaluating them. Both equal what sorting all plans
// by `faster` and sweeping would give; plan_key is unique per candidate, so the order is total.
class FastestAndFront {
 public:
  explicit FastestAndFront(int64_t k) : k_(static_cast<size_t>(std::max<int64_t>(k, 0))) {}

  void add(const PlanResult& p) {
    if (k_ > 0) {
      // A max-heap by `faster`: its front is the slowest of the k kept.
      if (top_.size() < k_) {
        top_.push_back(p);
        std::push_heap(top_.begin(), top_.end(), faster);
      } else if (faster(p, top_.front())) {
        std::pop_heap(top_.begin(), top_.end(), faster);
        top_.back() = p;
        std::push_heap(top_.begin(), top_.end(), faster);
      }
    }
    // The front, fastest first, holds each plan using less memory than every faster plan: the
    // prefix minima of memory. p joins unless the front member just faster uses no more memory;
    // then the slower members it now beats on memory leave.
    auto at = std::lower_bound(front_.begin(), front_.end(), p, faster);
    if (at != front_.begin() && std::prev(at)->memory_bytes <= p.memory_bytes) return;
    auto end = at;
    while (end != front_.end() && end->memory_bytes >= p.memory_bytes) ++end;
    at = front_.erase(at, end);
    front_.insert(at, p);
  }

  std::vector<PlanResult> take_top() {
    std::sort_heap(top_.begin(), top_.end(), faster);
    return std::move(top_);
  }
  std::vector<PlanResult> take_front() { return std::move(front_); }

 private:
  size_t k_;
  std::vector<PlanResult> top_;
  std::vector<PlanResult> front_;
};

}  // namespace

std::string_view to_string(DimOrder o) { return o == DimOrder::kTpInner ? "tp-inner" : "cp-inner"; }

std::array<int64_t, 5> dim_order(DimOrder o) {
  if (o == DimOrder::kCpInner) return {kPpDim, kDpDim, kEpDim, kTpDim, kCpDim};
  return kDefaultDimOrder;
}

std::string family_of(const ParallelConfig& c) {
  // The dimensions above 1, in their family rank (Note [Parallel dimensions]).
  std::array<std::string_view, kMeshDims> named{};
  for (const ParallelDim& d : parallel_dims()) {
    if (c.*d.degree > 1) named[static_cast<size_t>(d.family_rank)] = d.name;
  }
  std::string s;
  for (std::string_view n : named) {
    if (n.empty()) continue;
    if (!s.empty()) s += "+";
    s += n;
  }
  if (s.empty()) s = "single";
  if (c.zero > 0) s += " zero-" + std::to_string(c.zero);
  return s;
}

struct Planner::Impl {
  tensor::ModelConfig model;
  collectives::Cluster cluster;  // as given (one node); candidates are placed on it
  TrainingSetup setup;
  PlannerOptions options;
  StepContext ctx;
  double flops_per_token = 0;
  double attention_flops_per_token = 0;  // its 12 L H Q s
  bool has_tp_plan = false;
  int64_t per_node = 1;
  tensor::DType dtype = tensor::DType::kBFloat16;

  tensor::LayerStack stack;  // the model's layer kinds (Note [Stack of layer kinds])
  // (kind, micro-batch, local sequence, recomputation) -> one traced layer of that kind.
  std::map<std::tuple<int, int64_t, int64_t, int>, std::unique_ptr<TracedModel>> traces;
  struct WorkEntry {
    RankWork work;
    // TP seconds per part, for the tp links seen so far (few distinct ones).
    std::vector<std::pair<collectives::GroupLinks, std::array<TpSeconds, kParts>>> tp;
  };
  // (kind, tp, sp, cp, micro-batch, recomputation, whole experts, ep) -> its work.
  using WorkKey = std::tuple<int, int64_t, bool, int64_t, int64_t, int, bool, int64_t, bool>;
  std::map<WorkKey, std::unique_ptr<WorkEntry>> work;
  std::array<std::pair<WorkKey, WorkEntry*>, kMaxLayerKinds> last_work{};
  std::map<int64_t, LayerParameters> params;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>, DimLinks> links;
  collectives::RankPlacement placement;
  std::unique_ptr<collectives::Topology> topology;
  std::map<std::pair<int64_t, int64_t>, collectives::GroupLinks> strided;  // (size, stride)
  // (inner size, inner stride, outer size, outer stride)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, collectives::GroupLinks> two_level;

  const TracedModel& trace(int kind, int64_t mb, int64_t seq_local, RecomputePolicy rc) {
    auto& slot = traces[{kind, mb, seq_local, static_cast<int>(rc)}];
    if (!slot) {
      slot = std::make_unique<TracedModel>(
          trace_one_block(model, stack.kinds[static_cast<size_t>(kind)],
                          {.micro_batch = mb,
                           .seq = seq_local,
                           .recompute = rc,
                           .selective = options.stack.selective,
                           .attention = options.attention,
                           .dtype = dtype,
                           .moe_imbalance = options.moe_imbalance}));
    }
    return *slot;
  }

  WorkEntry& work_for(int kind, const ParallelConfig& c) {
    // Whole experts (etp = 1 < tp) split the tokens of the routed experts, not their weights.
    // Both matter to MoE layers only: dense kinds share one entry across them.
    const bool moe = ctx.stack.moe[static_cast<size_t>(kind)];
    const bool whole_experts = moe && expert_tp(c) != c.tp;
    const int64_t ep = moe ? c.ep : 1;
    // Under ZeRO-3 a gathered weight lives for one micro-batch, so no stack can keep its fp8 copy
    // across micro-batches: it is cast again each time (Note [FP8 GEMMs]).
    const bool casts = ctx.compute.quantized_gemms && !ctx.compute.fp8_weight_casts && c.zero == 3;
    const WorkKey key{kind,
                      c.tp,
                      c.sequence_parallel,
                      c.cp,
                      c.micro_batch,
                      static_cast<int>(c.recompute),
                      whole_experts,
                      ep,
                      casts};
    // Consecutive candidates mostly share a kind's entry (the innermost loops vary what it does
    // not depend on): the last one found per kind answers them without the map.
    if (kind < kMaxLayerKinds && last_work[kind].first == key && last_work[kind].second)
      return *last_work[kind].second;
    auto& slot = work[key];
    if (!slot) {
      slot = std::make_unique<WorkEntry>();
      ComputeModel compute = ctx.compute;
      compute.fp8_weight_casts = compute.fp8_weight_casts || casts;
      slot->work = rank_work(trace(kind, c.micro_batch, setup.seq / c.cp, c.recompute), compute,
                             {.tp = c.tp,
                              .sequence_parallel = c.sequence_parallel,
                              .cp = c.cp,
                              .whole_experts = whole_experts,
                              .ep = ep});
    }
    if (kind < kMaxLayerKinds) last_work[kind] = {key, slot.get()};
    return *slot;
  }

  // The block without recomputation, for the layers partial recomputation leaves stored.
  const PartWork* stored_block(int kind, const ParallelConfig& c) {
    if (c.recompute != RecomputePolicy::kFull || c.recompute_layers == 0) return nullptr;
    ParallelConfig none = c;
    none.recompute = RecomputePolicy::kNone;
    none.recompute_layers = 0;
    return &work_for(kind, none).work.block();
  }
  // Each layer kind's work for `c` on links `l`, and under partial recomputation its work
  // without it, written into `out`.
  std::span<const KindWork> kind_works(const ParallelConfig& c, const DimLinks& l,
                                       std::array<KindWork, kMaxLayerKinds>& out) {
    for (int k = 0; k < ctx.stack.kinds; ++k) {
      WorkEntry& e = work_for(k, c);
      out[static_cast<size_t>(k)] = {&e.work, &tp_for(e, l[kTpDim]), stored_block(k, c)};
    }
    return {out.data(), static_cast<size_t>(ctx.stack.kinds)};
  }
  // Prices `c`.
  StepResult eval(const ParallelConfig& c, DimOrder order, Bill* bill = nullptr) {
    const DimLinks& l = links_for(c, order);
    std::array<KindWork, kMaxLayerKinds> kinds;
    return evaluate(ctx, c, kind_works(c, l, kinds), l, params_for(c.tp), bill);
  }

  const std::array<TpSeconds, kParts>& tp_for(WorkEntry& e, const collectives::GroupLinks& l) {
    for (const auto& [links, secs] : e.tp) {
      if (links == l) return secs;
    }
    std::array<TpSeconds, kParts> s;
    for (int p = 0; p < kParts; ++p) s[static_cast<size_t>(p)] = tp_seconds(e.work.parts[p], l);
    e.tp.emplace_back(l, s);
    return e.tp.back().second;
  }

  const LayerParameters& params_for(int64_t tp) {
    auto it = params.find(tp);
    if (it != params.end()) return it->second;
    // The blocks are identical (docs/cost-model.md §8), so a 3-layer copy of the model gives every
    // count: its stages of one layer each are [embedding + first layer, a middle layer, last layer
    // + head], and the full model's per-layer list repeats the middle one. Building and
    // parallelizing a 126-layer model per TP degree cost more than the whole search.
    const int64_t layers = model.num_hidden_layers;
    if (!ctx.stack.uniform()) return params.emplace(tp, stack_parameters(tp)).first->second;
    const tensor::ModelConfig small =
        tensor::uniform_config(model, stack.kinds.front(), std::min<int64_t>(layers, 3));
    const std::vector<int64_t> few = stage_parameters(small, tp, small.num_hidden_layers, 0);
    LayerParameters lp;
    if (layers <= 3) {
      lp.per_layer = few;
    } else {
      lp.per_layer.assign(static_cast<size_t>(layers), few[1]);
      lp.per_layer.front() = few[0];
      lp.per_layer.back() = few[2];
    }
    int64_t few_sum = 0;
    for (int64_t n : few) few_sum += n;
    lp.tied_twice = few_sum - tp_rank_parameters(small, tp, 0);
    lp.experts_per_layer = expert_parameters_per_layer(model, tp);
    share_blocks(lp, tp);
    lp.set_prefix();
    return params.emplace(tp, std::move(lp)).first->second;
  }

  // A stack of kinds: a 3-layer model of each kind gives its layer's parameters (the middle
  // stage) and the ends' extras (the first and last stages beyond their layer), the same for
  // every kind; layer i holds its kind's count and, at the ends, the extras.
  LayerParameters stack_parameters(int64_t tp) {
    const int64_t layers = model.num_hidden_layers;
    LayerParameters lp;
    int64_t first_extra = 0, last_extra = 0;
    for (size_t k = 0; k < stack.kinds.size(); ++k) {
      const tensor::ModelConfig small = tensor::uniform_config(model, stack.kinds[k], 3);
      const std::vector<int64_t> few = stage_parameters(small, tp, 3, 0);
      lp.kind_layer[k] = few[1];
      lp.kind_experts[k] =
          stack.kinds[k].ffn == tensor::FfnKind::kMoe ? expert_parameters_per_layer(model, tp) : 0;
      if (k == 0) {
        first_extra = few[0] - few[1];
        last_extra = few[2] - few[1];
        lp.tied_twice = few[0] + few[1] + few[2] - tp_rank_parameters(small, tp, 0);
      }
    }
    lp.per_layer.resize(static_cast<size_t>(layers));
    for (int64_t i = 0; i < layers; ++i) {
      lp.per_layer[static_cast<size_t>(i)] = lp.kind_layer[static_cast<size_t>(stack.kind_of(i))];
    }
    lp.per_layer.front() += first_extra;
    lp.per_layer.back() += last_extra;
    share_blocks(lp, tp);  // before the prediction layers, which the model holds none of
    // Each multi-token prediction module on the last stage (Note [Multi-token prediction] in
    // step_model.cpp): a layer of the last layer's kind, eh_proj [h, 2h] split over tp, and the
    // norms enorm, hnorm and its head's norm (tensor::parameters_beyond_model counts the same).
    const int64_t h = model.hidden_size;
    lp.per_layer.back() +=
        ctx.stack.mtp_layers *
        (lp.kind_layer[static_cast<size_t>(ctx.stack.mtp_kind)] + 2 * h * h / tp + 3 * h);
    lp.set_prefix();
    return lp;
  }

  // Note [Weights shared across layers] (planner/cost/training_metrics.cpp): a kind's 3-layer
  // model charges every layer that uses a shared block (ModelConfig::num_mem_blocks: the layers
  // attending kFull) a whole block, Zamba2-7B's 13 hybrid layers 13 blocks for its 2. The whole
  // model on one TP rank holds each block once: the surplus comes off those layers evenly, which
  // is exact on one stage; a stage of several holds each block it uses once, which this spreads
  // over the stages (their memory a block or so low). Their FSDP gathers keep the whole block
  // (kind_layer): each layer that runs it gathers it.
  void share_blocks(LayerParameters& lp, int64_t tp) {
    if (!tensor::family_of(model).shared_transformer_blocks) return;
    std::vector<size_t> users;
    for (size_t i = 0; i < model.layer_types.size() && i < lp.per_layer.size(); ++i) {
      if (model.layer_types[i] == tensor::AttentionType::kFull) users.push_back(i);
    }
    int64_t planned = -lp.tied_twice;
    for (const int64_t n : lp.per_layer) planned += n;
    const int64_t surplus = planned - tp_rank_parameters(model, tp, 0);
    if (surplus <= 0 || users.empty()) return;
    const auto n = static_cast<int64_t>(users.size());
    for (int64_t k = 0; k < n; ++k) {
      lp.per_layer[users[static_cast<size_t>(k)]] -= surplus / n + (k < surplus % n ? 1 : 0);
    }
  }

  const DimLinks& links_for(const ParallelConfig& c, DimOrder order) {
    const auto key =
        std::make_tuple(c.pp, c.dp, c.ep, c.cp, c.tp, expert_tp(c), static_cast<int>(order));
    auto it = links.find(key);
    if (it != links.end()) return it->second;
    // The same launch-rank placement and topology for every candidate (built once). A mesh dim's
    // groups are the launch ranks r + k * stride (k < size), stride the product of the sizes of
    // the dims after it in the order (candidate_mesh.h), and launch rank r drives device r: their
    // links depend on (size, stride) only, priced once each (Note [Strided groups] in
    // collectives/topology.cpp: the work does not grow with --gpus).
    if (!topology) {
      placement = collectives::place_evenly(cluster, setup.gpus);
      SP_ASSERT(placement.nodes == 1 || placement.ranks_per_node == placement.devices_per_node,
                "the planner's ranks fill whole nodes in order");
      topology =
          std::make_unique<collectives::Topology>(collectives::cluster_for(cluster, placement));
    }
    const std::array<int64_t, 5> o = dim_order(order);
    const std::array<int64_t, kMeshDims> shape = mesh_shape(c);
    DimLinks l;
    auto group = [&](int64_t size, int64_t stride) {
      auto it = strided.find({size, stride});
      if (it == strided.end()) {
        it = strided
                 .emplace(std::make_pair(size, stride),
                          collectives::strided_group_links(*topology, size, stride))
                 .first;
      }
      return it->second;
    };
    std::array<int64_t, kMeshDims> stride_of{};
    int64_t stride = 1;
    for (size_t i = o.size(); i-- > 0;) {
      const auto d = static_cast<size_t>(o[i]);
      SP_ASSERT(d != kDpDim || (i + 1 < o.size() && o[i + 1] == kEpDim),
                "the ep mesh dim sits just inside the dp one (Note [Candidate mesh dims])");
      stride_of[d] = stride;
      l[d] = group(shape[d], stride);
      stride *= shape[d];
    }
    // The links of the ranks several mesh dims span together: one strided group when the dims
    // are adjacent in rank order, else two runs of them (cp-inner order puts tp between cp and
    // the dp dims).
    auto spanned = [&](std::initializer_list<MeshDim> dims) {
      std::vector<std::pair<int64_t, int64_t>> runs;  // (stride, size), fastest first
      for (MeshDim d : dims) {
        if (shape[d] > 1) runs.emplace_back(stride_of[d], shape[d]);
      }
      std::sort(runs.begin(), runs.end());
      std::vector<std::pair<int64_t, int64_t>> merged;
      for (const auto& [st, n] : runs) {
        if (!merged.empty() && merged.back().first * merged.back().second == st) {
          merged.back().second *= n;
        } else {
          merged.emplace_back(st, n);
        }
      }
      if (merged.empty()) return l[kDpDim];
      if (merged.size() == 1) return group(merged[0].second, merged[0].first);
      SP_ASSERT(merged.size() == 2, "a group of mesh dims spans at most two runs of ranks");
      const auto key2 =
          std::make_tuple(merged[0].second, merged[0].first, merged[1].second, merged[1].first);
      auto it = two_level.find(key2);
      if (it == two_level.end()) {
        it = two_level
                 .emplace(key2, collectives::two_level_group_links(
                                    *topology, merged[0].second, merged[0].first, merged[1].second,
                                    merged[1].first))
                 .first;
      }
      return it->second;
    };
    // The whole data-parallel group of a dense weight: the dp, ep and cp mesh dims (Note
    // [Expert fold]).
    l[kDataGroup] = spanned({kDpDim, kEpDim, kCpDim});
    // An expert group: the ep and cp mesh dims, and the tp one with whole experts.
    l[kEpGroup] = c.ep > 1 && expert_tp(c) != c.tp ? spanned({kEpDim, kCpDim, kTpDim})
                                                   : spanned({kEpDim, kCpDim});
    return links.emplace(key, l).first->second;
  }

  PlanResult result_of(const ParallelConfig& c, DimOrder order, const StepResult& r) const {
    PlanResult p;
    p.config = c;
    p.order = order;
    p.stages = r.stages;
    p.step_time_s = r.step_time_s;
    p.memory_bytes = r.memory_bytes;
    p.fits = r.fits;
    const double tokens = static_cast<double>(setup.global_batch * setup.seq);
    p.tokens_per_s = tokens / r.step_time_s;
    // Over the dense peak of the GEMM dtype (fp8's for an fp8 plan), so never above 1 of the peak
    // the plan computes at (docs/cost-model.md §2.4).
    p.mfu = mfu(flops_per_token, setup.global_batch * setup.seq, setup.gpus, ctx.compute.peak_flops,
                r.step_time_s);
    // The count most frameworks' MFU uses: causal attention's half of 12 L H Q s (§2.4).
    p.mfu_causal = p.mfu * (flops_per_token - 0.5 * attention_flops_per_token) / flops_per_token;
    return p;
  }

  void check_pins(const Pins& pins) const;
  template <typename Visit>
  void enumerate(const Pins& pins, Pruned& pruned, Visit&& visit);
};

void Planner::Impl::check_pins(const Pins& pins) const {
  {
    // A pin the stack cannot run is refused naming the stack (Note [Stack profiles]); the
    // unpinned choices take values every stack runs.
    ParallelConfig probe;
    probe.tp = pins.tp.value_or(1);
    probe.cp = pins.cp.value_or(1);
    probe.ep = pins.ep.value_or(1);
    probe.etp = pins.etp.value_or(0);
    probe.zero = pins.zero.value_or(options.stack.zero_stages.front());
    probe.virtual_stages = pins.virtual_stages.value_or(1);
    const std::string refused = stack_refuses(options.stack, probe);
    SP_CHECK(refused.empty(), refused);
  }
  const int64_t g = setup.gpus;
  const int64_t L = model.num_hidden_layers;
  int64_t product = 1;
  bool overflow = false;
  std::string named;
  // The world is the product of the dimensions not carved out of another (Note [Parallel
  // dimensions]): tp * pp * dp * cp.
  std::string world;
  int64_t unpinned = 0;
  const ParallelDim* last_unpinned = nullptr;
  for (const ParallelDim& d : parallel_dims()) {
    const std::optional<int64_t>& v = pins.*d.pin;
    if (v) SP_CHECK(*v >= 1, d.flag, " ", *v, ", expected a positive degree");
    if (d.carved_from) continue;
    world += (world.empty() ? "" : " * ") + std::string(d.name);
    if (!v) {
      ++unpinned;
      last_unpinned = &d;
      continue;
    }
    overflow = overflow || !mul_into(product, *v, product);
    named += (named.empty() ? "" : " x ") + std::string(d.flag) + " " + std::to_string(*v);
  }
  SP_CHECK(!overflow, "pins contradict the job: ", named, " overflows, expected ", world, " = ", g);
  SP_CHECK(g % product == 0 && (unpinned > 0 || product == g), "pins contradict the job: ", named,
           " = ", product, " ranks, which ", unpinned == 0 ? "differs from" : "does not divide",
           " --gpus ", g, ", expected ", world, " = ", g);
  if (unpinned == 1 && last_unpinned->mesh_dim == kCpDim) {
    // Context parallelism is the dimension users least expect to absorb the rest: say so.
    SP_CHECK(product == g, "pins contradict the job: ", named, " = ", product,
             " ranks but --gpus is ", g, ", expected ", world, " = ", g, " (with --",
             last_unpinned->name, " 1)");
  }
  if (pins.zero) {
    SP_CHECK(*pins.zero >= 0 && *pins.zero <= 3, "--zero ", *pins.zero, ", expected 0, 1, 2 or 3");
    SP_CHECK(*pins.zero == 0 || ((!pins.dp || *pins.dp > 1 || (pins.cp && *pins.cp > 1)) && g > 1),
             "--zero ", *pins.zero, pins.dp ? " with --dp 1" : " on 1 GPU",
             ": ZeRO shards the training state over data- and context-parallel ranks, expected "
             "--dp > 1 or --cp > 1 (or --zero 0)");
  }
  if (pins.recompute_layers) {
    SP_CHECK(*pins.recompute_layers >= 1 && *pins.recompute_layers <= L, "--recompute-layers ",
             *pins.recompute_layers, ", expected between 1 and the model's ", L, " layers");
    SP_CHECK(!pins.recompute || *pins.recompute == RecomputePolicy::kFull, "--recompute-layers ",
             *pins.recompute_layers, " with --recompute ", tensor::to_string(*pins.recompute),
             ", expected --recompute full (partial recomputation recomputes whole layers)");
  }
  if (pins.tp && *pins.tp > 1) {
    SP_CHECK(has_tp_plan, "--tp ", *pins.tp, ": model family ", model.model_type,
             " has no tensor-parallel plan yet, expected --tp 1");
  }
  if (pins.sequence_parallel && *pins.sequence_parallel) {
    SP_CHECK(!pins.tp || *pins.tp > 1,
             "--sequence-parallel on with --tp 1: sequence parallelism splits the activations that "
             "tensor parallelism leaves whole, expected --tp > 1 (or --sequence-parallel off)");
    SP_CHECK(has_tp_plan && per_node > 1 && g > 1,
             "--sequence-parallel on needs tensor "
             "parallelism, which ",
             !has_tp_plan ? "model family " + model.model_type + " has no plan for"
                          : std::string("one GPU per node cannot run"),
             ", expected --sequence-parallel off");
  }
  // Each pinned degree on its own: the dimension's rule (Note [Parallel dimensions]).
  for (const ParallelDim& d : parallel_dims()) {
    const std::optional<int64_t>& v = pins.*d.pin;
    if (!v) continue;
    const std::string why = d.refuses(model, setup, *v);
    SP_CHECK(why.empty(), why);
  }
  if (pins.etp) {
    // Note [Expert fold]: whole experts (1) or split like the dense layers (tp).
    const int64_t e = *pins.etp;
    SP_CHECK(e >= 1, "--etp ", e, ", expected a positive degree");
    SP_CHECK(model.num_local_experts > 0, "--etp ", e, " on a dense model (", model.model_type,
             "), expected no --etp (it splits the experts of a MoE model)");
    SP_CHECK(e == 1 || !pins.tp || e == *pins.tp, "--etp ", e, " with --tp ", *pins.tp,
             ", expected 1 (whole experts) or ", *pins.tp,
             " (experts split like the dense layers)");
  }
  if (pins.virtual_stages && *pins.virtual_stages > 1) {
    const int64_t v = *pins.virtual_stages;
    SP_CHECK(!pins.pp || *pins.pp > 1, "--virtual-stages ", v,
             " with --pp 1: interleaving splits each pipeline rank's layers into model chunks, "
             "expected --pp > 1 (or --virtual-stages 1)");
    const int64_t least_pp = pins.pp.value_or(2);
    SP_CHECK(v <= L / least_pp, "--virtual-stages ", v, " x ", pins.pp ? "--pp " : "at least ",
             least_pp, " stages needs a layer per model chunk, but the model has ", L,
             " layers, expected --virtual-stages at most ", std::max<int64_t>(1, L / least_pp));
  }
  if (pins.micro_batch) {
    const int64_t mb = *pins.micro_batch;
    SP_CHECK(setup.global_batch % mb == 0, "--micro-batch ", mb, " does not divide --global-batch ",
             setup.global_batch,
             ", expected a divisor of the global batch (every data-parallel "
             "rank runs whole micro-batches)");
  }
  if (pins.dp) {
    if (pins.micro_batch) {
      int64_t per_step = 0;
      SP_CHECK(
          mul_into(*pins.dp, *pins.micro_batch, per_step) && setup.global_batch % per_step == 0,
          "--global-batch ", setup.global_batch, " is not divisible by --dp ", *pins.dp,
          " x --micro-batch ", *pins.micro_batch, ", expected a multiple of their product");
    }
  }
}

template <typename Visit>
void Planner::Impl::enumerate(const Pins& pins, Pruned& pruned, Visit&& visit) {
  const int64_t g = setup.gpus;
  const int64_t L = model.num_hidden_layers;
  std::vector<int64_t> tps;
  // Candidate values, each kept when its dimension's rule accepts it (Note [Search space]).
  const ParallelDim& tp_dim = dim(kTpDim);
  const ParallelDim& ep_dim = dim(kEpDim);
  for (int64_t t : divisors(g, has_tp_plan ? per_node : 1)) {
    if (tp_dim.refuses(model, setup, t).empty()) tps.push_back(t);
  }
  // Note [Context-parallel floor]: the search keeps at least kMinCpTokens tokens on each context
  // rank (a pin may go below). A ring step over fewer tokens computes too little to hide its
  // exchange and kernel launches, which the model prices as one fused kernel per step; Megatron-
  // Core's and torchtitan's guidance keeps cp for sequences of several thousand tokens per rank.
  // Below it, candidates rank on costs the model does not see, and a search of a short sequence
  // spent most of its time on them (DeepSeek-V3 on 1,024 GPUs at 4,096 tokens: cp 8-32).
  std::vector<int64_t> cps;
  for (int64_t c = 1; c <= g; c *= 2) {
    if (c > 1 && setup.seq / c < kMinCpTokens) break;
    if (dim(kCpDim).refuses(model, setup, c).empty()) cps.push_back(c);
  }
  for (int64_t tp : pinned_or(pins.tp, tps)) {
    for (int64_t cp : pinned_or(pins.cp, cps)) {
      if (g % (tp * cp) != 0) {
        pruned.add(kWorldUndivided, {.tp = tp, .cp = cp});
        continue;
      }
      for (int64_t pp : pinned_or(pins.pp, divisors(g / (tp * cp), L))) {
        if (g % (tp * cp * pp) != 0) {
          pruned.add(kWorldUndivided, {.tp = tp, .pp = pp, .cp = cp});
          continue;
        }
        const int64_t dp = g / (tp * cp * pp);
        if (pins.dp && *pins.dp != dp) {
          pruned.add(kDpNotThePin, {.tp = tp, .pp = pp, .dp = dp, .cp = cp});
          continue;
        }
        if (setup.global_batch % dp != 0) {
          pruned.add(kBatchByDp, {.tp = tp, .pp = pp, .dp = dp, .cp = cp});
          continue;
        }
        // (ep, etp) pairs (Note [Expert fold]): experts split like the dense layers (etp 0,
        // following tp) with ep the cp ranks times a divisor of dp, or whole experts (etp 1 < tp)
        // with ep whole tp x cp groups times a divisor of dp; and ep 1.
        std::vector<std::pair<int64_t, int64_t>> eps = {{pins.ep.value_or(1), 0}};
        if (model.num_local_experts > 0) {
          eps.clear();
          // The dimension's rule: ep divides the experts, so each rank keeps at least one (the
          // published DeepSeek-V3 runs keep 4 of 256 at ep 64, fewer than its top-8).
          auto usable = [&](int64_t e) { return ep_dim.refuses(model, setup, e).empty(); };
          if (cp > 1) eps.emplace_back(1, 0);
          for (int64_t d : divisors(dp, model.num_local_experts / cp)) {
            if (usable(cp * d)) eps.emplace_back(cp * d, 0);
          }
          if (tp > 1) {
            for (int64_t d : divisors(dp, model.num_local_experts / (tp * cp))) {
              if (usable(tp * cp * d)) eps.emplace_back(tp * cp * d, 1);
            }
          }
          if (pins.ep) {
            // A pinned ep skips the search's own bound; the fold decides below.
            eps = {{*pins.ep, 0}};
            if (tp > 1) eps.emplace_back(*pins.ep, 1);
          }
          if (pins.etp) {
            const int64_t want = *pins.etp == tp ? 0 : *pins.etp;
            std::erase_if(eps, [&](const auto& e) { return e.second != want; });
          }
        }
        std::vector<int64_t> mbs;
        for (int64_t b = 1; b <= kMaxSearchedMicroBatch; b *= 2) {
          if ((setup.global_batch / dp) % b == 0) mbs.push_back(b);
        }
        std::vector<int> zeros = dp * cp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
        std::vector<DimOrder> orders = {DimOrder::kTpInner};
        // The two orders differ only when tp x cp spans nodes: within a node both groups ride the
        // same fabric and every other dim keeps its stride.
        if (tp > 1 && cp > 1 && tp * cp > per_node) orders.push_back(DimOrder::kCpInner);
        for (const auto& [ep, etp] : eps) {
          {
            const ParallelConfig fold{.tp = tp, .pp = pp, .dp = dp, .cp = cp, .ep = ep, .etp = etp};
            if (!expert_fold_refuses(model, fold).empty()) {
              pruned.add(kEpByDp, fold);
              continue;
            }
          }
          for (DimOrder order : orders) {
            for (int zero : pinned_or(pins.zero, zeros)) {
              for (int64_t mb : pinned_or(pins.micro_batch, mbs)) {
                if (setup.global_batch % (dp * mb) != 0) {
                  pruned.add(kBatchByMicroBatch, {.tp = tp,
                                                  .pp = pp,
                                                  .dp = dp,
                                                  .cp = cp,
                                                  .ep = ep,
                                                  .etp = etp,
                                                  .zero = zero,
                                                  .micro_batch = mb});
                  continue;
                }
                const int64_t m = setup.global_batch / (dp * mb);
                std::vector<int64_t> vs = {1};
                if (pp > 1 && m % pp == 0) {
                  for (int64_t v = 2; v <= kMaxSearchedVirtualStages; ++v) {
                    if (pp * v <= L) vs.push_back(v);
                  }
                }
                for (RecomputePolicy rc :
                     pins.recompute_layers
                         ? std::vector<RecomputePolicy>{RecomputePolicy::kFull}
                         : pinned_or(pins.recompute, std::vector<RecomputePolicy>(
                                                         kPolicies.begin(), kPolicies.end()))) {
                  for (bool sp :
                       pinned_or(pins.sequence_parallel, tp > 1 ? std::vector<bool>{false, true}
                                                                : std::vector<bool>{false})) {
                    for (int64_t v : pinned_or(pins.virtual_stages, vs)) {
                      ParallelConfig c{.tp = tp,
                                       .pp = pp,
                                       .dp = dp,
                                       .cp = cp,
                                       .ep = ep,
                                       .etp = etp,
                                       .zero = zero,
                                       .micro_batch = mb,
                                       .recompute = rc,
                                       .recompute_layers = pins.recompute_layers.value_or(0),
                                       .virtual_stages = v,
                                       .sequence_parallel = sp,
                                       .precision = options.precision};
                      if (sp && tp == 1) {
                        pruned.add(kSpWithoutTp, c);
                        continue;
                      }
                      if (zero > 0 && dp * cp == 1) {
                        pruned.add(kZeroWithoutDp, c);
                        continue;
                      }
                      if (v > 1 && (pp == 1 || m % pp != 0 || L < pp * v)) {
                        pruned.add(kChunks, c);
                        continue;
                      }
                      if (!stack_runs(options.stack, c)) {
                        pruned.add(kStack, c);
                        continue;
                      }
                      visit(c, order);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

Planner::Planner(tensor::ModelConfig model, collectives::Cluster cluster, TrainingSetup setup,
                 PlannerOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  check_training_setup(model, setup);
  // The search traces micro-batches of up to kMaxSearchedMicroBatch sequences: their widest
  // activation (tokens x vocab for the logits) must be a countable number of bytes.
  const double widest = static_cast<double>(
      std::max({model.vocab_size, model.intermediate_size, 3 * model.hidden_size,
                model.num_attention_heads * model.head_dim}));
  SP_CHECK(static_cast<double>(setup.seq) * kMaxSearchedMicroBatch * widest * 8 < 9.2e18, "--seq ",
           setup.seq, ": a micro-batch's activations (", kMaxSearchedMicroBatch, " x ", setup.seq,
           " tokens x ", static_cast<int64_t>(widest),
           " elements) would exceed 2^63 bytes, expected a shorter --seq");
  // Throws for a GPU count the cluster cannot hold (naming the nodes and GPUs per node); a count
  // that fills no whole nodes spreads evenly (Note [Even nodes] in rank_placement.h).
  const collectives::RankPlacement placed = collectives::place_evenly(cluster, setup.gpus);
  I.per_node = placed.ranks_per_node;
  I.model = std::move(model);
  I.cluster = std::move(cluster);
  I.setup = setup;
  I.options = options;
  I.has_tp_plan = !tensor::family_of(I.model).tp_plan.empty();
  const bool cpu = I.cluster.accelerator.arch == collectives::Arch::kCpu;
  I.dtype = cpu ? tensor::DType::kFloat32 : tensor::DType::kBFloat16;
  StepContext& ctx = I.ctx;
  ctx.layers = I.model.num_hidden_layers;
  // What passes between layers and pipeline stages: the hidden state, or DeepSeek-V4's hc_mult
  // hyper-connected streams of it (Note [Hyper-connection trace] in
  // tensor/models/hyper_connections.h), or Gemma 3n's altup_num_inputs AltUp copies of it.
  ctx.hidden = I.model.hidden_size * std::max<int64_t>(1, I.model.hc_mult) *
               std::max<int64_t>(1, I.model.altup_num_inputs);
  ctx.setup = setup;
  ctx.compute = compute_model(I.cluster, options.precision);
  // Note [Stack profiles]: the stack reaches compute_efficiency of the GEMM and memory-bound
  // rates, and its attention kernel's share of the fused attention's (Note [Attention kernels]).
  // gemm_efficiency is the stack's share of the GEMM ceiling, the attention's products included.
  const double gemm = options.stack.compute_efficiency * options.stack.gemm_efficiency;
  ctx.compute.matmul_efficiency *= gemm;
  ctx.compute.matmul16_efficiency *= gemm;
  ctx.compute.attention_matmul_efficiency *=
      attention_kernel_rate(options.stack.attention_kernel, I.cluster.accelerator.arch) *
      options.stack.gemm_efficiency;
  ctx.compute.memory_bytes_per_s *= options.stack.compute_efficiency;
  ctx.compute.ring_attention_rate = options.stack.ring_attention_rate;
  ctx.overlap_interference = options.stack.overlap_interference;
  ctx.compute.fp8_amax_pass = options.stack.fp8_current_scaling;
  ctx.pp_overlap_interleaved = options.stack.pp_overlap_interleaved;
  ctx.compute.fp8_weight_casts = options.stack.fp8_weight_casts;
  ctx.recipe = training_recipe(cpu);
  ctx.gradient_reduce_bytes = options.stack.fp32_gradient_reduce
                                  ? std::max<int64_t>(4, ctx.recipe.grad_bytes)
                                  : ctx.recipe.grad_bytes;
  ctx.activation_itemsize = tensor::itemsize(I.dtype);
  const collectives::Cluster sized = collectives::cluster_for(I.cluster, placed);
  ctx.memory_capacity_bytes = sized.accelerator.memory_gb.value * 1e9;
  SP_CHECK(options.memory_headroom_bytes >= 0 &&
               static_cast<double>(options.memory_headroom_bytes) < ctx.memory_capacity_bytes,
           "--memory-headroom ", options.memory_headroom_bytes,
           " bytes, expected at least 0 and "
           "less than the ",
           static_cast<int64_t>(ctx.memory_capacity_bytes), " bytes of a ",
           I.cluster.accelerator.model);
  ctx.memory_headroom_bytes = static_cast<double>(options.memory_headroom_bytes);
  ctx.context_bytes = cpu ? 0 : kGpuContextBytes;
  ctx.moe = I.model.num_local_experts > 0;
  I.stack = tensor::layer_stack(I.model);
  ctx.stack = StackLayout::of(I.stack, I.model.mtp_layers);
  I.flops_per_token = model_flops_per_token(I.model, setup.seq);
  I.attention_flops_per_token = attention_flops_per_token(I.model, setup.seq);
}

Planner::~Planner() = default;

SearchResult Planner::search(const Pins& pins, int64_t top_k,
                             const std::function<bool(const ParallelConfig&)>& keep) {
  SearchResult all;
  std::vector<std::function<bool(const ParallelConfig&)>> filters;
  if (keep) filters.push_back(keep);
  (void)best_of_each(pins, filters, &all, top_k);
  return all;
}

std::vector<Planner::Best> Planner::best_of_each(
    const Pins& pins, const std::vector<std::function<bool(const ParallelConfig&)>>& filters,
    SearchResult* all, int64_t top_k) {
  Impl& I = *impl_;
  I.check_pins(pins);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Best> best(filters.size());
  FastestAndFront kept(all != nullptr ? top_k : 0);
  SearchResult r;
  std::vector<bool> in(filters.size());
  Rejection over_memory;  // the memory rule: counted, with the first candidate it rejected
  std::vector<int64_t> rejected_per_filter(filters.size(), 0);
  // Counts an evaluated configuration (and, when it does not fit, its family's rejection).
  auto count = [&](const ParallelConfig& c, const StepResult& s) {
    ++r.evaluated;
    if (I.options.progress && r.evaluated % 4096 == 0) {
      I.options.progress(
          r.evaluated,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    for (size_t f = 0; f < filters.size(); ++f) best[f].evaluated += in[f] ? 1 : 0;
    if (!s.fits) {
      if (over_memory.count++ == 0) {
        over_memory.first = c;
        over_memory.memory_bytes = s.memory_bytes;
      }
      for (size_t f = 0; f < filters.size(); ++f) {
        if (in[f]) ++rejected_per_filter[f];
      }
    }
  };
  // Ranks a configuration that fits.
  auto offer = [&](const ParallelConfig& c, DimOrder order, const StepResult& s) {
    ++r.feasible;
    const PlanResult p = I.result_of(c, order, s);
    for (size_t f = 0; f < filters.size(); ++f) {
      if (in[f] && (!best[f].best || faster(p, *best[f].best))) best[f].best = p;
    }
    if (all != nullptr) kept.add(p);
  };
  std::optional<PlanResult> least;  // the evaluated candidate needing the least memory
  auto consider = [&](const ParallelConfig& c, DimOrder order, const StepResult& s) {
    count(c, s);
    if (s.fits) offer(c, order, s);
  };
  Pruned pruned;
  I.enumerate(pins, pruned, [&](const ParallelConfig& c, DimOrder order) {
    bool any = filters.empty();
    for (size_t f = 0; f < filters.size(); ++f) {
      in[f] = filters[f](c);
      any = any || in[f];
    }
    if (!any) return;
    const LayerParameters& params = I.params_for(c.tp);
    // Far beyond the device whatever its times (Note [Memory lower bound]): counted as rejected
    // without pricing, once the memory rule has its first, exactly priced, sample and the least
    // memory seen is below it.
    if (over_memory.count > 0 && least) {
      const double floor = memory_lower_bound(I.ctx, c, params);
      if (floor > I.ctx.memory_budget() && floor > static_cast<double>(least->memory_bytes)) {
        count(c, StepResult{});
        return;
      }
    }
    const DimLinks& links = I.links_for(c, order);
    std::array<KindWork, kMaxLayerKinds> kinds;
    const StepResult s = evaluate(I.ctx, c, I.kind_works(c, links, kinds), links, params);
    consider(c, order, s);
    if (!least || s.memory_bytes < least->memory_bytes) least = I.result_of(c, order, s);
    if (c.recompute != RecomputePolicy::kFull || c.recompute_layers > 0 || pins.recompute ||
        !s.fits) {
      return;
    }
    // Partial recomputation: the fewest recomputed layers per chunk that still fit (memory falls
    // and time rises with the count). Each count tried is an evaluated configuration; only the
    // fastest that fits is offered.
    const int64_t chunk =
        (std::max({s.stages.first, s.stages.last, s.stages.middle_max}) + c.virtual_stages - 1) /
        c.virtual_stages;
    if (chunk <= 1) return;
    ParallelConfig p = c;
    p.recompute_layers = 1;
    std::array<KindWork, kMaxLayerKinds> partial;
    const std::span<const KindWork> works = I.kind_works(p, links, partial);
    auto try_layers = [&](int64_t n) {
      p.recompute_layers = n;
      const StepResult t = evaluate(I.ctx, p, works, links, params);
      count(p, t);
      return t;
    };
    int64_t lo = 1, hi = chunk - 1;
    StepResult fit = try_layers(hi);
    if (!fit.fits) return;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      const StepResult t = try_layers(mid);
      if (t.fits) {
        hi = mid;
        fit = t;
      } else {
        lo = mid + 1;
      }
    }
    p.recompute_layers = hi;
    offer(p, order, fit);
  });
  if (I.options.progress) I.options.progress(-1, 0);
  r.pruned = pruned.total;
  for (size_t rule = 0; rule < kPruneRules; ++rule) {
    if (pruned.by[rule] > 0) {
      r.rejected[std::string(kPruneRuleNames[rule])] = {pruned.by[rule], pruned.first[rule], {}};
    }
  }
  if (r.evaluated == 0) {
    // Nothing could even be priced: the pins (or the job) break a rule every candidate needs.
    std::string why;
    for (const auto& [rule, n] : r.rejected) {
      why += (why.empty() ? "" : "; ") + std::to_string(n.count) + " pruned: " + rule;
    }
    const std::string pinned = pins_text(pins);
    SP_FAIL(pinned.empty() ? "no configuration can run this job"
                           : "no configuration satisfies the pins " + pinned,
            " (--gpus ", I.setup.gpus, ", --global-batch ", I.setup.global_batch, ", --seq ",
            I.setup.seq, ", ", I.model.num_hidden_layers,
            " layers): ", why.empty() ? std::string("no candidate") : why,
            pinned.empty() ? "; expected a job that some split of the GPUs can run"
                           : "; expected pins that some configuration can meet");
  }
  r.least_memory = least;
  if (over_memory.count > 0) r.rejected[std::string(kOverMemoryRule)] = over_memory;
  for (size_t f = 0; f < filters.size(); ++f) {
    if (rejected_per_filter[f] > 0) best[f].rejected["exceeds memory"] += rejected_per_filter[f];
  }
  if (all != nullptr) {
    r.pareto = kept.take_front();
    r.top = kept.take_top();
    r.cached_blocks = static_cast<int64_t>(I.traces.size());
    r.cached_work = static_cast<int64_t>(I.work.size());
    r.search_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *all = std::move(r);
  }
  return best;
}

PlanResult Planner::estimate(const ParallelConfig& c, DimOrder order, Bill* bill) {
  Impl& I = *impl_;
  check_parallel_config(I.model, I.setup, c);
  const std::string refused = stack_refuses(I.options.stack, c);
  SP_CHECK(refused.empty(), refused);
  SP_CHECK(c.tp == 1 || I.has_tp_plan, "--tp ", c.tp, ": model family ", I.model.model_type,
           " has no tensor-parallel plan yet, expected --tp 1");
  return I.result_of(c, order, I.eval(c, order, bill));
}

const tensor::ModelConfig& Planner::model() const { return impl_->model; }
const collectives::Cluster& Planner::cluster() const { return impl_->cluster; }
const TrainingSetup& Planner::setup() const { return impl_->setup; }
const PlannerOptions& Planner::options() const { return impl_->options; }
const StepContext& Planner::context() const { return impl_->ctx; }

}  // namespace shardplan::planner
