#include "planner/planner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <tuple>
#include <utility>

#include "collectives/rank_placement.h"
#include "collectives/topology.h"
#include "planner/candidate_mesh.h"
#include "planner/tensor_parallel.h"
#include "planner/training_metrics.h"
#include "tensor/base/error.h"
#include "tensor/models/family.h"

namespace shardplan::planner {
namespace {

using tensor::RecomputePolicy;

constexpr std::array<RecomputePolicy, 3> kPolicies = {
    RecomputePolicy::kNone, RecomputePolicy::kSelective, RecomputePolicy::kFull};
constexpr int64_t kMaxSearchedMicroBatch = 16;
constexpr int64_t kMaxSearchedVirtualStages = 8;

std::vector<int64_t> divisors(int64_t n, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
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
  return std::make_tuple(p.step_time_s, p.memory_bytes, c.tp, c.pp, c.cp, c.ep, c.zero,
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
  std::string s;
  auto add = [&](const char* name, int64_t d) {
    if (d <= 1) return;
    if (!s.empty()) s += "+";
    s += name;
  };
  add("tp", c.tp);
  add("cp", c.cp);
  add("pp", c.pp);
  add("dp", c.dp);
  add("ep", c.ep);
  if (s.empty()) s = "single";
  if (c.zero > 0) s += " zero-" + std::to_string(c.zero);
  return s;
}

// family_of's name depends on which of tp, cp, pp, dp, ep exceed 1 and on the ZeRO stage: a key
// of 5 bits and the stage (0..3).
constexpr size_t kFamilyKeys = 32 * 4;
size_t family_key(const ParallelConfig& c) {
  const size_t dims = (c.tp > 1 ? 1u : 0u) | (c.cp > 1 ? 2u : 0u) | (c.pp > 1 ? 4u : 0u) |
                      (c.dp > 1 ? 8u : 0u) | (c.ep > 1 ? 16u : 0u);
  return dims * 4 + static_cast<size_t>(c.zero & 3);
}

struct Planner::Impl {
  tensor::ModelConfig model;
  collectives::Cluster cluster;  // as given (one node); candidates are placed on it
  TrainingSetup setup;
  PlannerOptions options;
  StepContext ctx;
  double flops_per_token = 0;
  bool has_tp_plan = false;
  int64_t per_node = 1;
  tensor::DType dtype = tensor::DType::kBFloat16;

  std::map<std::tuple<int64_t, int64_t, int>, std::unique_ptr<TracedModel>> traces;
  struct WorkEntry {
    RankWork work;
    // TP seconds per part, for the tp links seen so far (few distinct ones).
    std::vector<std::pair<collectives::GroupLinks, std::array<TpSeconds, kParts>>> tp;
  };
  std::map<std::tuple<int64_t, bool, int64_t, int64_t, int>, std::unique_ptr<WorkEntry>> work;
  std::map<int64_t, LayerParameters> params;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int>, DimLinks> links;
  collectives::RankPlacement placement;
  std::unique_ptr<collectives::Topology> topology;
  std::vector<int64_t> launch_devices;                                     // launch rank -> device
  std::map<std::pair<int64_t, int64_t>, collectives::GroupLinks> strided;  // (size, stride)

  const TracedModel& trace(int64_t mb, int64_t seq_local, RecomputePolicy rc) {
    auto& slot = traces[{mb, seq_local, static_cast<int>(rc)}];
    if (!slot) {
      slot = std::make_unique<TracedModel>(trace_one_block(model, {.micro_batch = mb,
                                                                   .seq = seq_local,
                                                                   .recompute = rc,
                                                                   .attention = options.attention,
                                                                   .dtype = dtype}));
    }
    return *slot;
  }

  WorkEntry& work_for(const ParallelConfig& c) {
    auto& slot =
        work[{c.tp, c.sequence_parallel, c.cp, c.micro_batch, static_cast<int>(c.recompute)}];
    if (!slot) {
      slot = std::make_unique<WorkEntry>();
      slot->work = rank_work(trace(c.micro_batch, setup.seq / c.cp, c.recompute), ctx.compute,
                             {.tp = c.tp, .sequence_parallel = c.sequence_parallel, .cp = c.cp});
    }
    return *slot;
  }

  // The block without recomputation, for the layers partial recomputation leaves stored.
  const PartWork* stored_block(const ParallelConfig& c) {
    if (c.recompute != RecomputePolicy::kFull || c.recompute_layers == 0) return nullptr;
    ParallelConfig none = c;
    none.recompute = RecomputePolicy::kNone;
    none.recompute_layers = 0;
    return &work_for(none).work.block();
  }
  // Prices `c`: its block's work, and under partial recomputation the block's work without it.
  StepResult eval(const ParallelConfig& c, DimOrder order, Bill* bill = nullptr) {
    WorkEntry& e = work_for(c);
    const DimLinks& l = links_for(c, order);
    return evaluate(ctx, c, e.work, l, params_for(c.tp), bill, &tp_for(e, l[4]), stored_block(c));
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
    tensor::ModelConfig small = model;
    small.num_hidden_layers = std::min<int64_t>(layers, 3);
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
    if (model.num_local_experts > 0) {
      lp.experts_per_layer =
          model.num_local_experts * 3 * model.hidden_size * (model.intermediate_size / tp);
    }
    lp.set_prefix();
    return params.emplace(tp, std::move(lp)).first->second;
  }

  const DimLinks& links_for(const ParallelConfig& c, DimOrder order) {
    const auto key = std::make_tuple(c.pp, c.dp, c.ep, c.cp, c.tp, static_cast<int>(order));
    auto it = links.find(key);
    if (it != links.end()) return it->second;
    // The same launch-rank placement and topology for every candidate (built once). A mesh dim's
    // groups are the launch ranks r + k * stride (k < size), stride the product of the sizes of
    // the dims after it in the order (candidate_mesh.h): their links depend on (size, stride)
    // only, priced once each as the middle dim of a [world / (size stride), size, stride] mesh.
    if (!topology) {
      placement = collectives::place_ranks(cluster, {.world = setup.gpus});
      topology =
          std::make_unique<collectives::Topology>(collectives::cluster_for(cluster, placement));
      launch_devices.resize(static_cast<size_t>(setup.gpus));
      for (int64_t r = 0; r < setup.gpus; ++r) {
        launch_devices[static_cast<size_t>(r)] = placement.device_of(r);
      }
    }
    const std::array<int64_t, 5> o = dim_order(order);
    const std::array<int64_t, 5> shape = {c.pp, c.dp / c.ep, c.ep, c.cp, c.tp};
    DimLinks l;
    int64_t stride = 1;
    for (size_t i = o.size(); i-- > 0;) {
      const auto d = static_cast<size_t>(o[i]);
      const int64_t size = shape[d];
      auto it = strided.find({size, stride});
      if (it == strided.end()) {
        const std::vector<int64_t> sub = {setup.gpus / (size * stride), size, stride};
        it = strided
                 .emplace(std::make_pair(size, stride),
                          collectives::mesh_dim_links(*topology, sub, launch_devices, 1)[1])
                 .first;
      }
      l[d] = it->second;
      stride *= size;
    }
    return links.emplace(key, l).first->second;
  }

  PlanResult result_of(const ParallelConfig& c, DimOrder order, const StepResult& r) const {
    PlanResult p;
    p.config = c;
    p.order = order;
    p.stages = r.stages;
    p.step_time_s = r.step_time_s;
    p.memory_bytes = r.memory_bytes;
    const double tokens = static_cast<double>(setup.global_batch * setup.seq);
    p.tokens_per_s = tokens / r.step_time_s;
    p.mfu = mfu(flops_per_token, setup.global_batch * setup.seq, setup.gpus,
                ctx.compute.mfu_peak_flops, r.step_time_s);
    return p;
  }

  void check_pins(const Pins& pins) const;
  template <typename Visit>
  void enumerate(const Pins& pins, int64_t& pruned, Visit&& visit);
};

void Planner::Impl::check_pins(const Pins& pins) const {
  const int64_t g = setup.gpus;
  int64_t product = 1;
  std::string named;
  auto use = [&](const char* flag, const std::optional<int64_t>& v) {
    if (!v) return;
    SP_CHECK(*v >= 1, flag, " ", *v, ", expected a positive degree");
    product *= *v;
    named += (named.empty() ? "" : " x ") + std::string(flag) + " " + std::to_string(*v);
  };
  use("--tp", pins.tp);
  use("--pp", pins.pp);
  use("--dp", pins.dp);
  use("--cp", pins.cp);
  const bool all = pins.tp && pins.pp && pins.dp && pins.cp;
  SP_CHECK(g % product == 0 && (!all || product == g), "pins contradict the job: ", named, " = ",
           product, " ranks, which ", all ? "differs from" : "does not divide", " --gpus ", g,
           ", expected tp * pp * dp * cp = ", g);
  if (pins.tp && pins.pp && pins.dp && !pins.cp) {
    SP_CHECK(product == g, "pins contradict the job: ", named, " = ", product,
             " ranks but --gpus is ", g, ", expected tp * pp * dp (* cp) = ", g);
  }
  if (pins.zero) {
    SP_CHECK(*pins.zero >= 0 && *pins.zero <= 3, "--zero ", *pins.zero, ", expected 0, 1, 2 or 3");
  }
  if (pins.recompute_layers) {
    SP_CHECK(*pins.recompute_layers >= 1 && *pins.recompute_layers <= model.num_hidden_layers,
             "--recompute-layers ", *pins.recompute_layers, ", expected between 1 and the model's ",
             model.num_hidden_layers, " layers");
    SP_CHECK(!pins.recompute || *pins.recompute == RecomputePolicy::kFull, "--recompute-layers ",
             *pins.recompute_layers, " with --recompute ", tensor::to_string(*pins.recompute),
             ", expected --recompute full (partial recomputation recomputes whole layers)");
  }
  if (pins.tp && *pins.tp > 1) {
    SP_CHECK(has_tp_plan, "--tp ", *pins.tp, ": model family ", model.model_type,
             " has no tensor-parallel plan yet, expected --tp 1");
  }
  if (pins.dp) {
    SP_CHECK(setup.global_batch % *pins.dp == 0, "--global-batch ", setup.global_batch,
             " is not divisible by --dp ", *pins.dp,
             ", expected a multiple of the data-parallel degree");
  }
}

template <typename Visit>
void Planner::Impl::enumerate(const Pins& pins, int64_t& pruned, Visit&& visit) {
  const int64_t g = setup.gpus;
  const int64_t L = model.num_hidden_layers;
  std::vector<int64_t> tps;
  for (int64_t t : divisors(g, has_tp_plan ? per_node : 1)) {
    if (model.num_attention_heads % t != 0) continue;
    if (model.num_key_value_heads % t != 0 && t % model.num_key_value_heads != 0) continue;
    tps.push_back(t);
  }
  std::vector<int64_t> cps;
  for (int64_t c = 1; c <= g; c *= 2) {
    if (setup.seq % (2 * c) == 0 || c == 1) cps.push_back(c);
  }
  for (int64_t tp : pinned_or(pins.tp, tps)) {
    for (int64_t cp : pinned_or(pins.cp, cps)) {
      if (g % (tp * cp) != 0) continue;
      for (int64_t pp : pinned_or(pins.pp, divisors(g / (tp * cp), L))) {
        if (g % (tp * cp * pp) != 0) continue;
        const int64_t dp = g / (tp * cp * pp);
        if (pins.dp && *pins.dp != dp) continue;
        if (setup.global_batch % dp != 0) {
          ++pruned;
          continue;
        }
        std::vector<int64_t> eps = {1};
        if (model.num_local_experts > 0) {
          eps.clear();
          for (int64_t e : divisors(dp, model.num_local_experts)) {
            if (model.num_local_experts % e == 0 &&
                model.num_local_experts / e >= model.num_experts_per_tok) {
              eps.push_back(e);
            }
          }
        }
        std::vector<int64_t> mbs;
        for (int64_t b = 1; b <= kMaxSearchedMicroBatch; b *= 2) {
          if ((setup.global_batch / dp) % b == 0) mbs.push_back(b);
        }
        std::vector<int> zeros = dp > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
        std::vector<DimOrder> orders = {DimOrder::kTpInner};
        if (tp > 1 && cp > 1) orders.push_back(DimOrder::kCpInner);
        for (int64_t ep : pinned_or(pins.ep, eps)) {
          if (dp % ep != 0) {
            ++pruned;
            continue;
          }
          for (DimOrder order : orders) {
            for (int zero : pinned_or(pins.zero, zeros)) {
              for (int64_t mb : pinned_or(pins.micro_batch, mbs)) {
                if (setup.global_batch % (dp * mb) != 0) {
                  ++pruned;
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
                                       .zero = zero,
                                       .micro_batch = mb,
                                       .recompute = rc,
                                       .recompute_layers = pins.recompute_layers.value_or(0),
                                       .virtual_stages = v,
                                       .sequence_parallel = sp,
                                       .precision = options.precision};
                      if ((sp && tp == 1) || (zero > 0 && dp == 1) ||
                          (v > 1 && (pp == 1 || m % pp != 0 || L < pp * v))) {
                        ++pruned;
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
  SP_CHECK(setup.gpus >= 1, "--gpus ", setup.gpus, ", expected at least 1");
  SP_CHECK(setup.seq >= 1, "--seq ", setup.seq, ", expected at least 1");
  SP_CHECK(setup.global_batch >= 1, "--global-batch ", setup.global_batch, ", expected at least 1");
  SP_CHECK(setup.seq <= model.max_position_embeddings, "--seq ", setup.seq, " is longer than ",
           model.model_type, "'s ", model.max_position_embeddings,
           " positions (max_position_embeddings), expected at most ",
           model.max_position_embeddings);
  // Throws for a GPU count the cluster cannot hold (naming the nodes and GPUs per node).
  const collectives::RankPlacement placed =
      collectives::place_ranks(cluster, {.world = setup.gpus});
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
  ctx.hidden = I.model.hidden_size;
  ctx.setup = setup;
  ctx.compute = compute_model(I.cluster, options.precision);
  ctx.recipe = cpu ? MixedPrecision::adam_fp32() : MixedPrecision::adam_16bit();
  ctx.activation_itemsize = tensor::itemsize(I.dtype);
  const collectives::Cluster sized = collectives::cluster_for(I.cluster, placed);
  ctx.memory_capacity_bytes = sized.accelerator.memory_gb.value * 1e9;
  ctx.context_bytes = cpu ? 0 : kGpuContextBytes;
  ctx.moe = I.model.num_local_experts > 0;
  I.flops_per_token = model_flops_per_token(I.model, setup.seq);
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
  std::array<int64_t, kFamilyKeys> rejected{};
  std::array<ParallelConfig, kFamilyKeys> family_example{};
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
      // Counted by a small family key here, named once at the end: building the family's name
      // for every rejected candidate cost more than evaluating it.
      const size_t key = family_key(c);
      if (rejected[key]++ == 0) family_example[key] = c;
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
  auto consider = [&](const ParallelConfig& c, DimOrder order, const StepResult& s) {
    count(c, s);
    if (s.fits) offer(c, order, s);
  };
  I.enumerate(pins, r.pruned, [&](const ParallelConfig& c, DimOrder order) {
    bool any = filters.empty();
    for (size_t f = 0; f < filters.size(); ++f) {
      in[f] = filters[f](c);
      any = any || in[f];
    }
    if (!any) return;
    Impl::WorkEntry& e = I.work_for(c);
    const DimLinks& links = I.links_for(c, order);
    const LayerParameters& params = I.params_for(c.tp);
    const std::array<TpSeconds, kParts>& tp = I.tp_for(e, links[4]);
    const StepResult s = evaluate(I.ctx, c, e.work, links, params, nullptr, &tp, I.stored_block(c));
    consider(c, order, s);
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
    const PartWork* stored = I.stored_block(p);
    auto try_layers = [&](int64_t n) {
      p.recompute_layers = n;
      const StepResult t = evaluate(I.ctx, p, e.work, links, params, nullptr, &tp, stored);
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
  for (size_t key = 0; key < kFamilyKeys; ++key) {
    if (rejected[key] > 0)
      r.rejected[family_of(family_example[key])]["exceeds memory"] += rejected[key];
  }
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
