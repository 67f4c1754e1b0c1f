#include "planner/cost/step_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include "base/checked.h"
#include "base/error.h"
#include "collectives/cost_model.h"
#include "planner/candidate/pipeline_schedule.h"

namespace shardplan::planner {
namespace {

using collectives::CollectiveKind;

// Pricing a collective tries every algorithm and protocol; the search asks the same few
// questions for thousands of candidates, so answers are remembered (per thread).
double seconds_of(CollectiveKind kind, int64_t bytes, const collectives::GroupLinks& links) {
  if (links.group_size <= 1 || bytes <= 0) return 0;
  const collectives::CollectiveCall call{kind, links.group_size, bytes, links};
  // A search asks for the same few calls again and again: a small direct-mapped table of the
  // latest ones, indexed by the cheap fields and checked on every field, answers most of them
  // without hashing the links (which cost a tenth of a DeepSeek-V3 search).
  struct Recent {
    collectives::CollectiveCall call;
    double seconds = -1;
  };
  thread_local std::array<Recent, 4096> recent;
  uint64_t h = static_cast<uint64_t>(bytes) * 0x9E3779B97F4A7C15ULL;
  for (const int64_t x : {links.group_size, links.nodes, links.ranks_per_node,
                          links.groups_sharing_nics, static_cast<int64_t>(kind)}) {
    h = (h ^ static_cast<uint64_t>(x)) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  const auto slot = static_cast<size_t>(h & (recent.size() - 1));
  Recent& r = recent[slot];
  if (r.seconds >= 0 && r.call == call) return r.seconds;
  thread_local std::unordered_map<collectives::CollectiveCall, double> memo;
  auto it = memo.find(call);
  double t = 0;
  if (it != memo.end()) {
    t = it->second;
  } else {
    if (memo.size() > 100000) memo.clear();
    t = collectives::collective_cost(call).time_s;
    memo.emplace(call, t);
  }
  r = {call, t};
  return t;
}

// Two neighbouring members of a group priced by `g`: on two nodes (one NIC each way) when the
// group spans nodes, else on one node's fabric.
collectives::GroupLinks neighbour_pair(const collectives::GroupLinks& g) {
  collectives::GroupLinks pair = g;
  pair.group_size = 2;
  pair.nodes = std::min<int64_t>(g.nodes, 2);
  pair.ranks_per_node = pair.nodes > 1 ? 1 : 2;
  return pair;
}

// The cp - 1 send/recv steps of a ring that passes each of `ranks` chunks of `gathered_bytes`
// round the group priced by `g`.
double ring_pass_seconds(int64_t gathered_bytes, int64_t ranks, const collectives::GroupLinks& g) {
  const double step =
      seconds_of(CollectiveKind::kSendRecv, gathered_bytes / ranks, neighbour_pair(g));
  return static_cast<double>(ranks - 1) * step;
}

// One micro-batch's activation sent to the next stage: each TP rank sends only its 1 / tp slice.
// Under sequence parallelism that is all it holds; without it, between nodes, the receivers
// all-gather the slices over the node's fabric when that is quicker than every rank sending all of
// it over the network (Megatron-LM's scatter/gather optimization, Narayanan et al. 2021 §4.1;
// docs/cost-model.md §8.3).
struct PipelineSends {
  collectives::GroupLinks pair;  // two neighbouring stages
  int64_t bytes = 0;             // S of each send
  double send_s = 0, gather_s = 0;
};

PipelineSends pipeline_sends(int64_t full_bytes, int64_t tp, bool sp,
                             const collectives::GroupLinks& pp_l,
                             const collectives::GroupLinks& tp_l) {
  // The search asks the same question for many candidates in a row: remember the last answer.
  struct Last {
    int64_t full_bytes = -1, tp = 0;
    bool sp = false;
    collectives::GroupLinks pp_l, tp_l;
    PipelineSends answer;
  };
  thread_local Last last;
  if (last.full_bytes == full_bytes && last.tp == tp && last.sp == sp && last.pp_l == pp_l &&
      last.tp_l == tp_l) {
    return last.answer;
  }
  PipelineSends out;
  // Neighbouring stages: a pair of the pp dim's group, on two nodes when the group spans nodes.
  out.pair = neighbour_pair(pp_l);
  const int64_t slice_bytes = full_bytes / tp;
  const bool split = sp || (tp > 1 && out.pair.nodes > 1);
  const double slice_s = split ? seconds_of(CollectiveKind::kSendRecv, slice_bytes, out.pair) : 0;
  const double gather_s =
      split && !sp && tp > 1 ? seconds_of(CollectiveKind::kAllGather, full_bytes, tp_l) : 0;
  const double whole_s = sp ? 0 : seconds_of(CollectiveKind::kSendRecv, full_bytes, out.pair);
  if (sp || (split && slice_s + gather_s < whole_s)) {
    out.bytes = slice_bytes;
    out.send_s = slice_s;
    out.gather_s = gather_s;
  } else {
    out.bytes = full_bytes;
    out.send_s = whole_s;
  }
  last = {full_bytes, tp, sp, pp_l, tp_l, out};
  return out;
}

// One layer's work for one micro-batch, in seconds (and the bytes it keeps for backward).
struct LayerCost {
  double forward_s = 0, backward_s = 0;  // compute; backward includes any recomputation
  double tp_s = 0, cp_s = 0, cp_exposed_s = 0, ep_s = 0;
  // FSDP's per-layer gathers and reduce-scatters beyond the compute they hide behind; a backward
  // overrun is the reduce-scatter's first (it is issued last).
  double fsdp_gather_exposed_s = 0, fsdp_scatter_exposed_s = 0;
  // What hidden collectives slow the compute they overlap (Note [Overlap interference]).
  double interference_s = 0;
  double total_s = 0;  // compute and everything exposed
  double retained_bytes = 0;
  // f of this and 1 - f of `other`, field by field.
  LayerCost mix(const LayerCost& o, double f) const {
    auto m = [f](double a, double b) { return f * a + (1 - f) * b; };
    return {m(forward_s, o.forward_s),
            m(backward_s, o.backward_s),
            m(tp_s, o.tp_s),
            m(cp_s, o.cp_s),
            m(cp_exposed_s, o.cp_exposed_s),
            m(ep_s, o.ep_s),
            m(fsdp_gather_exposed_s, o.fsdp_gather_exposed_s),
            m(fsdp_scatter_exposed_s, o.fsdp_scatter_exposed_s),
            m(interference_s, o.interference_s),
            m(total_s, o.total_s),
            m(retained_bytes, o.retained_bytes)};
  }
};

struct Recorder {
  Bill* bill;
  // The whole data-parallel group is named "dp" like the dp mesh dim (it is the dp degree).
  void add_data(std::string_view what, CollectiveKind kind, const collectives::GroupLinks& l,
                int64_t bytes, int64_t calls, double seconds, double exposed) {
    add(what, kind, kDpDim, l, bytes, calls, seconds, exposed);
  }
  // `what` follows the dim's name: add("all_reduce (gradients)", ..., kDpDim, ...) records
  // "dp all_reduce (gradients)". Nothing is built without a bill (the search's hot path).
  void add(std::string_view what, CollectiveKind kind, MeshDim dim,
           const collectives::GroupLinks& l, int64_t bytes, int64_t calls, double seconds,
           double exposed) {
    if (bill == nullptr || calls == 0 || l.group_size <= 1) return;
    std::string name = dim_name(dim);
    bill->collectives.push_back(
        {name + " " + std::string(what), kind, name, l.group_size, bytes, calls, seconds, exposed});
  }
};

}  // namespace

TpSeconds tp_seconds(const PartWork& p, const collectives::GroupLinks& tp_links) {
  TpSeconds t;
  for (const CommItem& c : p.tp_forward) t.forward += seconds_of(c.kind, c.bytes, tp_links);
  for (const CommItem& c : p.tp_backward) t.backward += seconds_of(c.kind, c.bytes, tp_links);
  return t;
}

namespace {

// Note [Step model parts]
// evaluate() sums the step time from named parts, each computed by one function below, and
// prices memory apart:
//   stage_times            the slowest (pacing) stage's time per micro-batch, split into its
//                          compute and its exposed communication, and the pipeline bubble;
//   data_parallel_sync     what the gradient reduction (and ZeRO's parameter gather) leaves
//                          exposed after the last backward;
//   optimizer_seconds      Adam's pass over the states this rank updates;
//   step_memory            the stage holding the most bytes.
// step = m x (pacing compute + pacing communication) + bubble + data-parallel sync + optimizer
// + overlap interference (Note [Overlap interference]: the pacing stage's and the data-parallel
// sync's), and the bill's time parts are exactly these six terms, so they add up to step_time_s for
// every plan, pipelined or not (docs/cost-model.md §8). The bill's collectives are the pacing
// stage's (and the data-parallel ones): their exposed seconds add up to the two communication
// terms.

// The layers of one stage, by kind (Note [Stack of layer kinds]).
struct StageLoad {
  int64_t n = 0;
  std::array<int64_t, kMaxLayerKinds> of{};
};

StageLoad uniform_load(int64_t n) {
  StageLoad l;
  l.n = n;
  l.of[0] = n;
  return l;
}

// Layers [begin, end) by kind, the multi-token prediction modules' on the last stage.
StageLoad load_of(const StackLayout& s, int64_t begin, int64_t end) {
  if (s.uniform()) return uniform_load(end - begin);
  StageLoad l;
  l.n = end - begin;
  const auto& b = s.prefix[static_cast<size_t>(begin)];
  const auto& e = s.prefix[static_cast<size_t>(end)];
  for (int k = 0; k < s.kinds; ++k) l.of[static_cast<size_t>(k)] = e[k] - b[k];
  if (s.mtp_layers > 0 && end + 1 == static_cast<int64_t>(s.prefix.size())) {
    l.of[static_cast<size_t>(s.mtp_kind)] += s.mtp_layers;
    l.n += s.mtp_layers;
  }
  return l;
}

// Note [Distinct stages]
// A stack's stages price alike when they hold the same layers by kind, unless they are the first
// (the embedding) or the last (the output layer): same time, same parameters, and the earlier one
// holds at least as many in-flight micro-batches (chunks_in_flight does not grow with the stage).
// So the slowest stage, the largest and the one with the most activations are all among the
// first and last stages and the first middle stage of each distinct load: for DeepSeek-V3 (3
// dense layers, then 58 MoE) on 16 stages, 3 or 4 stages instead of 16. In stage order, so ties
// resolve to the earliest stage as a walk over every stage would.
struct DistinctStage {
  int64_t stage = 0;
  StageLoad load;
};

const std::vector<DistinctStage>& distinct_stages(const StackLayout& stack, int64_t L, int64_t pp,
                                                  const StageEnds& ends) {
  using Key = std::tuple<uint64_t, int64_t, int64_t, int64_t, int64_t>;
  thread_local std::map<Key, std::vector<DistinctStage>> memo;
  const Key key{stack.serial, L, pp, ends.first, ends.last};
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= 4096) memo.clear();
  std::vector<DistinctStage> out;
  for (int64_t s = 0; s < pp; ++s) {
    const StageLoad load =
        load_of(stack, stage_begin(L, pp, ends, s), stage_begin(L, pp, ends, s + 1));
    const bool end = s == 0 || s == pp - 1;
    const bool seen = !end && std::any_of(out.begin(), out.end(), [&](const DistinctStage& d) {
      return d.stage != 0 && d.load.n == load.n && d.load.of == load.of;
    });
    if (!seen) out.push_back({s, load});
  }
  return memo.emplace(key, std::move(out)).first->second;
}

// One layer kind's prices for one candidate.
struct KindPrices {
  LayerCost recomputed, stored;  // a layer that recomputes (or every layer), one that keeps all
  TpSeconds tp_block;
  double fsdp_forward_s = 0, fsdp_backward_s = 0;  // one layer's FSDP collectives
  int64_t layer_params = 0;                        // one layer's local parameters (FSDP)
  // Under ZeRO-3 with ep > 1 (Note [Expert and dense data parallelism]): the layer's dense
  // parameters, gathered over the whole data-parallel group, and this rank's routed experts,
  // gathered over the expert-data-parallel one; their seconds. With ep = 1 all are dense.
  int64_t dense_params = 0, expert_params = 0;
  double fsdp_dense_gather_s = 0, fsdp_expert_gather_s = 0;
  double fsdp_dense_scatter_s = 0, fsdp_expert_scatter_s = 0;
  const RankWork* work = nullptr;
};

// What one micro-batch costs per layer for one candidate; every part reads it.
struct LayerPrices {
  int64_t v = 1;                 // model chunks per pipeline rank
  bool partial = false;          // Note [Partial recomputation]
  int64_t recompute_layers = 0;  // N of that note
  int kinds = 1;
  std::array<KindPrices, kMaxLayerKinds> kind;  // [0, kinds) used
  const KindPrices& of(size_t k) const { return kind[k]; }
  TpSeconds tp_embedding, tp_head;
  double embedding_s = 0, head_s = 0;  // compute and TP collectives of the ends

  // Of a stage's n layers in v chunks, how many recompute.
  int64_t recomputed_in(int64_t n) const {
    if (!partial) return n;
    const int64_t q = n / v, rem = n % v, k = recompute_layers;
    return rem * std::min(k, q + 1) + (v - rem) * std::min(k, q);
  }
  // The average layer of kind k in a stage of n layers.
  LayerCost mixed(int k, int64_t n) const {
    const KindPrices& p = of(static_cast<size_t>(k));
    if (!partial) return p.recomputed;  // what the mix with f = 1 gives, bit for bit
    const double f = n > 0 ? static_cast<double>(recomputed_in(n)) / static_cast<double>(n) : 1.0;
    return p.recomputed.mix(p.stored, f);
  }
  // Sum over a stage's layers of `field` (its layers' count per kind times the kind's value).
  template <typename Field>
  double sum(const StageLoad& l, Field field) const {
    double s = 0;
    for (int k = 0; k < kinds; ++k) {
      const int64_t n = l.of[static_cast<size_t>(k)];
      if (n > 0) s += static_cast<double>(n) * field(mixed(k, l.n));
    }
    return s;
  }
};

// Of a layer's routed-expert parameters counted on one tp rank (`experts`, 1 / tp of them), the
// ones this rank holds: 1 / ep of the experts, each split over etp (Note [Expert fold] in
// parallel_dims.h): experts / ep with etp = tp, experts x tp / ep with whole experts.
int64_t local_experts(int64_t experts, const ParallelConfig& c) {
  const __int128 n = static_cast<__int128>(experts) * c.tp / (c.ep * expert_tp(c));
  return static_cast<int64_t>(n);
}
// The ranks holding the same expert shard: the dp mesh dim, tp x dp / (ep x etp) ranks.
int64_t expert_replicas(const ParallelConfig& c) {
  return std::max<int64_t>(1, c.dp / ep_from_dp(c));
}

// Fills the calling thread's one LayerPrices (made once: building four kinds' zeroed prices per
// candidate cost the search about 2 % of its time) and returns it.
const LayerPrices& price_layers(const StepContext& ctx, const ParallelConfig& c,
                                std::span<const KindWork> kinds, const DimLinks& links,
                                const LayerParameters& params) {
  const collectives::GroupLinks& dp_l = links[kDpDim];
  const collectives::GroupLinks& ep_l = links[kEpGroup];
  const collectives::GroupLinks& cp_l = links[kCpDim];
  const collectives::GroupLinks& tp_l = links[kTpDim];
  const bool full = c.recompute == tensor::RecomputePolicy::kFull;
  thread_local LayerPrices lp;
  lp.v = c.virtual_stages;
  lp.recompute_layers = c.recompute_layers;
  lp.kinds = static_cast<int>(kinds.size());
  lp.partial = full && c.recompute_layers > 0 && kinds.front().stored_block != nullptr;
  for (int k = 0; k < lp.kinds; ++k) {
    const KindWork& kw = kinds[static_cast<size_t>(k)];
    const RankWork& w = *kw.work;
    KindPrices& kp = lp.kind[static_cast<size_t>(k)];
    kp = KindPrices{};
    kp.work = &w;
    const PartWork& blk = w.block();
    kp.tp_block = kw.tp != nullptr ? (*kw.tp)[1] : tp_seconds(blk, tp_l);
    // FSDP gathers one layer at a time: a middle layer's parameters (the ends' hold more).
    kp.layer_params =
        ctx.stack.uniform()
            ? (params.per_layer.empty() ? 0 : params.per_layer[static_cast<size_t>(ctx.layers / 2)])
            : params.kind_layer[static_cast<size_t>(k)];
    // FSDP (ZeRO-3): every micro-batch gathers each layer's parameters for forward and again for
    // backward and reduce-scatters its gradients; prefetching hides them behind the layer's
    // compute.
    const int64_t experts = ctx.stack.uniform() ? params.experts_per_layer
                                                : params.kind_experts[static_cast<size_t>(k)];
    kp.dense_params = kp.layer_params;
    if (c.ep > 1 && experts > 0) {
      kp.dense_params = kp.layer_params - experts;
      kp.expert_params = local_experts(experts, c);
    }
    double fsdp_scatter_s = 0;
    if (c.zero == 3 && data_parallel_ranks(c) > 1 && kp.expert_params == 0) {
      // Every weight of the layer over the whole data-parallel group.
      const int64_t pbytes = kp.layer_params * ctx.recipe.param_bytes;
      const int64_t gbytes = kp.layer_params * ctx.gradient_reduce_bytes;
      kp.fsdp_forward_s = seconds_of(CollectiveKind::kAllGather, pbytes, links[kDataGroup]);
      fsdp_scatter_s = seconds_of(CollectiveKind::kReduceScatter, gbytes, links[kDataGroup]);
      kp.fsdp_backward_s = kp.fsdp_forward_s + fsdp_scatter_s;
    } else if (c.zero == 3 && data_parallel_ranks(c) > 1) {
      const collectives::GroupLinks& data_l = links[kDataGroup];
      kp.fsdp_dense_gather_s =
          seconds_of(CollectiveKind::kAllGather, kp.dense_params * ctx.recipe.param_bytes, data_l);
      kp.fsdp_dense_scatter_s = seconds_of(CollectiveKind::kReduceScatter,
                                           kp.dense_params * ctx.gradient_reduce_bytes, data_l);
      kp.fsdp_expert_gather_s =
          seconds_of(CollectiveKind::kAllGather, kp.expert_params * ctx.recipe.param_bytes, dp_l);
      kp.fsdp_expert_scatter_s = seconds_of(CollectiveKind::kReduceScatter,
                                            kp.expert_params * ctx.gradient_reduce_bytes, dp_l);
      kp.fsdp_forward_s = kp.fsdp_dense_gather_s + kp.fsdp_expert_gather_s;
      fsdp_scatter_s = kp.fsdp_dense_scatter_s + kp.fsdp_expert_scatter_s;
      kp.fsdp_backward_s = kp.fsdp_forward_s + fsdp_scatter_s;
    }
    // Context-parallel ring and expert all-to-all prices, looked up once. The ring passes each
    // rank's key/value chunk (1 / cp of the gathered bytes) to its neighbour cp - 1 times, one
    // send/recv per step: when the cp group spans nodes a step runs at one NIC's rate, not at the
    // node's aggregate that NCCL's all-gather reaches (docs/cost-model.md §8.3).
    const double cp_ag = c.cp > 1 ? ring_pass_seconds(w.cp_kv_bytes, c.cp, cp_l) : 0;
    const double cp_rs = cp_ag;
    const bool moe = ctx.stack.moe[static_cast<size_t>(k)];
    const double ep_a2a =
        c.ep > 1 && moe ? seconds_of(CollectiveKind::kAllToAll, w.ep_dispatch_bytes, ep_l) : 0;
    // One layer's time; a recomputed layer re-runs its forward, collectives included.
    auto layer_cost = [&](const PartWork& b, bool recomputed) {
      LayerCost lc;
      lc.forward_s = b.forward_s;
      lc.backward_s = b.backward_s + b.recompute_s;
      lc.tp_s = kp.tp_block.forward + kp.tp_block.backward + (recomputed ? kp.tp_block.forward : 0);
      if (c.cp > 1) {
        // Forward: the keys and values go round the ring; backward: again, and their gradients.
        lc.cp_s = (recomputed ? 3 : 2) * cp_ag + cp_rs;
        lc.cp_exposed_s = std::max(0.0, lc.cp_s - b.attention_s);
      }
      if (c.ep > 1 && moe) {
        // Dispatch and combine in forward, their mirrors in backward (and the forward again).
        lc.ep_s = (recomputed ? 6 : 4) * ep_a2a;
      }
      const double fsdp_fwd = std::max(0.0, kp.fsdp_forward_s - lc.forward_s);
      const double fsdp_bwd = std::max(0.0, kp.fsdp_backward_s - lc.backward_s);
      lc.fsdp_scatter_exposed_s = std::min(fsdp_scatter_s, fsdp_bwd);
      lc.fsdp_gather_exposed_s = fsdp_fwd + (fsdp_bwd - lc.fsdp_scatter_exposed_s);
      const double hidden = (lc.cp_s - lc.cp_exposed_s) + (kp.fsdp_forward_s - fsdp_fwd) +
                            (kp.fsdp_backward_s - fsdp_bwd);
      lc.interference_s = ctx.overlap_interference * hidden;
      lc.total_s = lc.forward_s + lc.backward_s + lc.interference_s + lc.tp_s + lc.cp_exposed_s +
                   lc.ep_s + (fsdp_fwd + fsdp_bwd);
      lc.retained_bytes = b.retained_bytes;
      return lc;
    };
    kp.recomputed = layer_cost(blk, full);
    kp.stored = lp.partial && kw.stored_block != nullptr ? layer_cost(*kw.stored_block, false)
                                                         : kp.recomputed;
  }
  const KindWork& first = kinds.front();
  const RankWork& w = *first.work;
  lp.tp_embedding = first.tp != nullptr ? (*first.tp)[0] : tp_seconds(w.embedding(), tp_l);
  lp.tp_head = first.tp != nullptr ? (*first.tp)[2] : tp_seconds(w.head(), tp_l);
  lp.embedding_s = w.embedding().forward_s + w.embedding().backward_s + lp.tp_embedding.forward +
                   lp.tp_embedding.backward;
  // Note [Multi-token prediction]: each module runs the shared output layer once more.
  const auto heads = static_cast<double>(1 + ctx.stack.mtp_layers);
  lp.head_s =
      heads * (w.head().forward_s + w.head().backward_s + lp.tp_head.forward + lp.tp_head.backward);
  return lp;
}

// The pipeline: the layer partition, the slowest stage per micro-batch and the bubble.
struct StageTimes {
  StageEnds ends;
  PipelineSends sends;
  int64_t full_act_bytes = 0;   // one micro-batch's activation between stages, all TP ranks
  double send_stage_s = 0;      // a stage's sends for one micro-batch, all its chunks
  double t_stage = 0;           // the slowest stage's time for one micro-batch
  int64_t pacing = 0;           // that stage
  StageLoad pacing_load;        // its layers by kind
  double pacing_compute_s = 0;  // its forward, backward and recomputation within t_stage
  double pacing_interference_s = 0;  // Note [Overlap interference] within t_stage
  double bubble_s = 0;
  double pipeline_s = 0;  // m t_stage + bubble
  int64_t layers_of(int64_t s, int64_t pp) const {
    return s == 0 ? ends.first : s == pp - 1 ? ends.last : ends.middle_max;
  }
};

// The stages whose times can be the slowest, with their layers by kind: for a uniform stack the
// ends and the widest middle count (every middle stage is alike); for a stack of kinds the
// distinct stages (Note [Distinct stages]).
template <typename Visit>
void for_each_priced_stage(const StackLayout& stack, int64_t L, int64_t pp, const StageEnds& ends,
                           Visit&& visit) {
  if (stack.uniform()) {
    for (int64_t s : {int64_t{0}, pp / 2, pp - 1}) {
      visit(s, uniform_load(s == 0 ? ends.first : s == pp - 1 ? ends.last : ends.middle_max));
    }
  } else {
    for (const DistinctStage& d : distinct_stages(stack, L, pp, ends)) visit(d.stage, d.load);
  }
}

StageEnds partition_stack(const StepContext& ctx, const LayerPrices& lp, int64_t pp,
                          int64_t nominal_layers) {
  const int64_t L = ctx.layers, v = lp.v;
  if (ctx.stack.uniform()) {
    return balance_stage_ends(L, pp, lp.mixed(0, nominal_layers).total_s, lp.embedding_s, lp.head_s,
                              v);
  }
  // Each layer at its kind's time (Note [Stack of layer kinds]).
  std::array<double, kMaxLayerKinds> t{};
  for (int k = 0; k < lp.kinds; ++k)
    t[static_cast<size_t>(k)] = lp.mixed(k, nominal_layers).total_s;
  // The split depends on these numbers alone, and candidates that differ only where it does not
  // look (the ZeRO stage below 3, the micro-batch count, the memory) share them: a small
  // direct-mapped table of recent splits, checked on every number, answers them.
  struct Recent {
    uint64_t stack = 0;
    int64_t pp = 0, v = 0;
    std::array<double, kMaxLayerKinds + 2> s{};
    StageEnds ends;
  };
  thread_local std::array<Recent, 1024> recent;
  std::array<double, kMaxLayerKinds + 2> s{};
  std::copy(t.begin(), t.end(), s.begin());
  s[kMaxLayerKinds] = lp.embedding_s;
  s[kMaxLayerKinds + 1] = lp.head_s;
  uint64_t h = ctx.stack.serial * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(pp * 131 + v);
  for (double d : s) {
    h = (h ^ std::bit_cast<uint64_t>(d)) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  Recent& r = recent[h & (recent.size() - 1)];
  if (r.stack == ctx.stack.serial && r.pp == pp && r.v == v && r.s == s) return r.ends;
  thread_local std::vector<double> prefix;
  prefix.assign(1, 0.0);
  for (int32_t k : ctx.stack.kind_of_layer)
    prefix.push_back(prefix.back() + t[static_cast<size_t>(k)]);
  // The multi-token prediction layers sit after the last layer, on the last stage.
  const double last_s = lp.head_s + static_cast<double>(ctx.stack.mtp_layers) *
                                        t[static_cast<size_t>(ctx.stack.mtp_kind)];
  r = {ctx.stack.serial, pp, v, s, balance_stack_ends(prefix, pp, lp.embedding_s, last_s, v)};
  return r.ends;
}

StageTimes stage_times(const StepContext& ctx, const ParallelConfig& c, const DimLinks& links,
                       const LayerPrices& lp, int64_t m) {
  const int64_t L = ctx.layers, pp = c.pp, v = c.virtual_stages;
  const RankWork& w = *lp.of(0).work;
  StageTimes st;
  // Point-to-point: the activation of one micro-batch, forward to the next stage and its
  // gradient back, once per model chunk (pipeline_sends).
  st.full_act_bytes = ctx.setup.seq / c.cp * c.micro_batch * ctx.hidden * ctx.activation_itemsize;
  if (pp > 1) {
    st.sends =
        pipeline_sends(st.full_act_bytes, c.tp, c.sequence_parallel, links[kPpDim], links[kTpDim]);
  }
  st.send_stage_s = 2.0 * static_cast<double>(v) * (st.sends.send_s + st.sends.gather_s);
  // Overlapped sends (StepContext::pp_overlap_interleaved) leave only their interference.
  const bool sends_hidden = ctx.pp_overlap_interleaved && v > 1;
  const double send_exposed_s = sends_hidden ? 0 : st.send_stage_s;
  const double send_interference_s = sends_hidden ? ctx.overlap_interference * st.send_stage_s : 0;
  // The bubble is p - 1 model chunks' time (Narayanan et al. 2021 §2.2.2: (p - 1) / v stages).
  // When a stage's layers do not split evenly into v chunks the largest chunk paces the fill and
  // the drain, so a stage of n layers counts its time x ceil(n / v) / n per chunk.
  const int64_t nominal_layers = (L + pp - 1) / pp;
  // Each stage keeps at least one layer per model chunk.
  st.ends = partition_stack(ctx, lp, pp, nominal_layers);
  double t_chunk = 0;
  for_each_priced_stage(ctx.stack, L, pp, st.ends, [&](int64_t s, const StageLoad& load) {
    const int64_t layers = load.n;
    double t = 0, compute = 0, interference = send_interference_s;
    for (int k = 0; k < lp.kinds; ++k) {
      const int64_t n = load.of[static_cast<size_t>(k)];
      if (n == 0) continue;
      const LayerCost layer = lp.mixed(k, layers);
      t += static_cast<double>(n) * layer.total_s;
      compute += static_cast<double>(n) * (layer.forward_s + layer.backward_s);
      interference += static_cast<double>(n) * layer.interference_s;
    }
    t += send_exposed_s + send_interference_s;
    if (s == 0) {
      t += lp.embedding_s;
      compute += w.embedding().forward_s + w.embedding().backward_s;
    }
    if (s == pp - 1) {
      t += lp.head_s;
      compute += static_cast<double>(1 + ctx.stack.mtp_layers) *
                 (w.head().forward_s + w.head().backward_s);
    }
    if (t > st.t_stage) {
      st.t_stage = t;
      st.pacing = s;
      st.pacing_load = load;
      st.pacing_compute_s = compute;
      st.pacing_interference_s = interference;
    }
    const int64_t chunk_layers = (layers + v - 1) / v;
    t_chunk = std::max(
        t_chunk, layers > 0 ? t * static_cast<double>(chunk_layers) / static_cast<double>(layers)
                            : t / static_cast<double>(v));
  });
  st.bubble_s = static_cast<double>(pp - 1) * t_chunk;
  st.pipeline_s = static_cast<double>(m) * st.t_stage + st.bubble_s;
  return st;
}

// The stage holding the most parameters, and this rank's share of them.
struct StageStates {
  uint64_t params = 0;  // local parameters of that stage (experts split over ep)
  // Of those, the routed experts' when ep > 1 (their states shard over the expert-data-parallel
  // group; 0 with ep = 1, where every weight shards over the whole data-parallel group).
  uint64_t expert_params = 0;
  int stage = 0;
  int64_t widest_middle = 0;
  int64_t layers_max = 1;  // the most layers of any stage
  StageLoad window;        // the layers whose backward the gradient reduction overlaps
};

StageStates largest_stage(const StepContext& ctx, const ParallelConfig& c,
                          const LayerParameters& params, const StageEnds& ends) {
  const int64_t pp = c.pp, L = ctx.layers;
  StageStates out;
  SP_ASSERT(params.prefix.size() == params.per_layer.size() + 1,
            "LayerParameters::set_prefix runs before pricing");
  out.widest_middle = widest_middle_stage(L, pp, ends);
  out.layers_max = std::max({ends.first, ends.last, ends.middle_max});
  auto stage_params = [&](int64_t s) {
    return params.prefix[static_cast<size_t>(stage_begin(L, pp, ends, s + 1))] -
           params.prefix[static_cast<size_t>(stage_begin(L, pp, ends, s))];
  };
  if (!ctx.stack.uniform()) {
    // Every stage, its routed experts split over ep (Note [Stack of layer kinds]).
    int64_t best = -1;
    for (const DistinctStage& d : distinct_stages(ctx.stack, L, pp, ends)) {
      const int64_t s = d.stage;
      const StageLoad& load = d.load;
      int64_t experts = 0;
      for (int k = 0; k < ctx.stack.kinds; ++k) {
        experts += load.of[static_cast<size_t>(k)] * params.kind_experts[static_cast<size_t>(k)];
      }
      const int64_t removed = c.ep > 1 ? experts - local_experts(experts, c) : 0;
      int64_t n = stage_params(s) - removed;
      if (pp == 1) n -= params.tied_twice;
      if (n > best) {
        best = n;
        out.stage = static_cast<int>(s);
        out.window = load;
        out.expert_params = c.ep > 1 ? static_cast<uint64_t>(experts - removed) : 0;
      }
    }
    out.params = static_cast<uint64_t>(std::max<int64_t>(0, best));
    return out;
  }
  // The middle layers are alike, so the largest stage is an end or the widest middle stage; sums
  // come from the prefix sums. Compared per rank: each stage's routed experts split over ep (an
  // end stage's embedding can outweigh a middle stage's extra layer once ep divides the experts).
  int64_t most = -1, most_experts = 0;
  for (int64_t s : {int64_t{0}, out.widest_middle, pp - 1}) {
    const int64_t layers = stage_begin(L, pp, ends, s + 1) - stage_begin(L, pp, ends, s);
    const int64_t experts = params.experts_per_layer * layers;
    const int64_t local = c.ep > 1 ? local_experts(experts, c) : experts;
    const int64_t n = stage_params(s) - (experts - local);
    if (n > most) {
      most = n;
      most_experts = local;
      out.stage = static_cast<int>(s);
    }
  }
  if (pp == 1) most -= params.tied_twice;
  out.params = static_cast<uint64_t>(std::max<int64_t>(0, most));
  if (c.ep > 1) {
    out.expert_params =
        std::min<uint64_t>(out.params, static_cast<uint64_t>(std::max<int64_t>(0, most_experts)));
  }
  out.window = uniform_load(out.layers_max);
  return out;
}

// After the last backward: the gradient reduction overlaps the last micro-batch's backward except
// its last bucket; ZeRO-1/2 gather the updated parameters overlapping the next step's first
// forward except one layer's worth; under ZeRO-3 only the step's first gather has nothing to
// hide behind. Returns the exposed seconds; `hidden` gets the seconds hidden behind compute (Note
// [Overlap interference]).
// Note [Expert and dense data parallelism]
// Expert parallelism regroups the context- and data-parallel ranks (and with whole experts the tp
// ranks, Note [Expert fold] in parallel_dims.h): the ranks of an ep group hold different routed
// experts, so a routed expert's replicas are the edp = tp x cp x dp / (ep x etp) ranks of the dp
// mesh dim (Megatron-Core's expert-data-parallel group). Dense weights (attention, norms, the
// router, dense MLPs) are replicated over the whole data-parallel group, dp x cp ranks
// (data_parallel_ranks: context ranks hold the same weights and see other tokens).
// So dense gradients are reduced over dp x cp ranks and the experts' over edp; ZeRO shards dense
// states over dp x cp and expert states over edp; under ZeRO-3 a layer gathers its dense weights
// over dp x cp and only this rank's experts (1 / ep of them, 1 / etp of each) over edp. The token
// all-to-all moves, per rank and per dispatch or combine, its own tokens x top-k x hidden (1 / tp
// of them under sequence parallelism or with whole experts), what each rank sends whatever ep is
// (nccl-tests' S of an all-to-all is the bytes each rank sends), over the ep group.

// The gradient reduction and ZeRO-1/2 gather with ep > 1: the dense part over the whole data-
// parallel group, the experts' over the expert-data-parallel one, one after the other in the same
// buckets, exposed as one reduction is and shared between the two by their seconds.
double split_data_parallel_sync(const StepContext& ctx, const ParallelConfig& c,
                                const StageStates& states, const collectives::GroupLinks& dp_l,
                                const collectives::GroupLinks& data_l, double bwd_window,
                                double fwd_window, double buckets, Recorder& rec, double& hidden) {
  const auto expert = static_cast<int64_t>(states.expert_params);
  const int64_t dense = static_cast<int64_t>(states.params) - expert;
  const MixedPrecision& r = ctx.recipe;
  struct Part {
    const char* what;
    CollectiveKind kind;
    const collectives::GroupLinks* links;
    int64_t bytes;
    double seconds;
  };
  auto part = [](const char* what, CollectiveKind kind, const collectives::GroupLinks& l,
                 int64_t bytes) {
    return Part{what, kind, &l, bytes, seconds_of(kind, bytes, l)};
  };
  auto exposed_pair = [&](const Part& a, const Part& b, double window) {
    const double t = a.seconds + b.seconds;
    const double e = std::max(t / buckets, t - window);
    for (const Part& p : {a, b}) {
      rec.add_data(p.what, p.kind, *p.links, p.bytes, 1, p.seconds, t > 0 ? e * p.seconds / t : 0);
    }
    hidden += t - e;
    return e;
  };
  if (c.zero == 0) {
    return exposed_pair(part("all_reduce (dense gradients)", CollectiveKind::kAllReduce, data_l,
                             dense * ctx.gradient_reduce_bytes),
                        part("all_reduce (expert gradients)", CollectiveKind::kAllReduce, dp_l,
                             expert * ctx.gradient_reduce_bytes),
                        bwd_window);
  }
  const double e_rs =
      exposed_pair(part("reduce_scatter (dense gradients)", CollectiveKind::kReduceScatter, data_l,
                        dense * ctx.gradient_reduce_bytes),
                   part("reduce_scatter (expert gradients)", CollectiveKind::kReduceScatter, dp_l,
                        expert * ctx.gradient_reduce_bytes),
                   bwd_window);
  const double e_ag = exposed_pair(part("all_gather (updated dense parameters)",
                                        CollectiveKind::kAllGather, data_l, dense * r.param_bytes),
                                   part("all_gather (updated expert parameters)",
                                        CollectiveKind::kAllGather, dp_l, expert * r.param_bytes),
                                   fwd_window);
  return e_rs + e_ag;
}

double data_parallel_sync(const StepContext& ctx, const ParallelConfig& c, const LayerPrices& lp,
                          const StageStates& states, const collectives::GroupLinks& dp_l,
                          const collectives::GroupLinks& data_l, Recorder& rec, double& hidden) {
  hidden = 0;
  if (data_parallel_ranks(c) <= 1) return 0;
  // The largest stage's layers.
  const double bwd_window = lp.sum(states.window, [](const LayerCost& k) { return k.backward_s; });
  const double fwd_window = lp.sum(states.window, [](const LayerCost& k) { return k.forward_s; });
  const double buckets = static_cast<double>(std::max<int64_t>(1, states.window.n));
  if (states.expert_params > 0 && c.zero < 3) {
    return split_data_parallel_sync(ctx, c, states, dp_l, data_l, bwd_window, fwd_window, buckets,
                                    rec, hidden);
  }
  const int64_t grad_bytes = static_cast<int64_t>(states.params) * ctx.gradient_reduce_bytes;
  const int64_t param_bytes = static_cast<int64_t>(states.params) * ctx.recipe.param_bytes;
  if (c.zero == 0) {
    const double t = seconds_of(CollectiveKind::kAllReduce, grad_bytes, data_l);
    const double e = std::max(t / buckets, t - bwd_window);
    rec.add("all_reduce (gradients)", CollectiveKind::kAllReduce, kDpDim, data_l, grad_bytes, 1, t,
            e);
    hidden = t - e;
    return e;
  }
  if (c.zero <= 2) {
    const double t_rs = seconds_of(CollectiveKind::kReduceScatter, grad_bytes, data_l);
    const double e_rs = std::max(t_rs / buckets, t_rs - bwd_window);
    const double t_ag = seconds_of(CollectiveKind::kAllGather, param_bytes, data_l);
    const double e_ag = std::max(t_ag / buckets, t_ag - fwd_window);
    rec.add("reduce_scatter (gradients)", CollectiveKind::kReduceScatter, kDpDim, data_l,
            grad_bytes, 1, t_rs, e_rs);
    rec.add("all_gather (updated parameters)", CollectiveKind::kAllGather, kDpDim, data_l,
            param_bytes, 1, t_ag, e_ag);
    hidden = (t_rs - e_rs) + (t_ag - e_ag);
    return e_rs + e_ag;
  }
  // ZeRO-3: the step's first gather (of the first layer) has nothing to hide behind.
  const KindPrices& first =
      lp.of(ctx.stack.uniform() ? 0 : static_cast<size_t>(ctx.stack.kind_of_layer.front()));
  if (first.expert_params > 0) {
    rec.add_data("all_gather (fsdp dense parameters, the step's first layer)",
                 CollectiveKind::kAllGather, data_l, first.dense_params * ctx.recipe.param_bytes, 1,
                 first.fsdp_dense_gather_s, first.fsdp_dense_gather_s);
    rec.add("all_gather (fsdp expert parameters, the step's first layer)",
            CollectiveKind::kAllGather, kDpDim, dp_l, first.expert_params * ctx.recipe.param_bytes,
            1, first.fsdp_expert_gather_s, first.fsdp_expert_gather_s);
    return first.fsdp_dense_gather_s + first.fsdp_expert_gather_s;
  }
  rec.add_data("all_gather (fsdp parameters, the step's first layer)", CollectiveKind::kAllGather,
               data_l, first.layer_params * ctx.recipe.param_bytes, 1, first.fsdp_forward_s,
               first.fsdp_forward_s);
  return first.fsdp_forward_s;
}

// The model state one rank of stage `s` holds: its parameters (the routed experts split over ep,
// a tied embedding once when one stage holds both ends), their gradients and optimizer states
// under the plan's ZeRO stage, dense states over dp x cp and expert states over edp (Note
// [Expert and dense data parallelism]). What materialize --state model allocates.
ModelStateMemory stage_model_state(const StepContext& ctx, const ParallelConfig& c,
                                   const LayerParameters& params, const StageEnds& ends,
                                   int64_t s) {
  const int64_t pp = c.pp, L = ctx.layers;
  const int64_t begin = stage_begin(L, pp, ends, s), end = stage_begin(L, pp, ends, s + 1);
  int64_t n = params.prefix[static_cast<size_t>(end)] - params.prefix[static_cast<size_t>(begin)];
  if (pp == 1) n -= params.tied_twice;
  int64_t experts = 0;
  if (ctx.stack.uniform()) {
    experts = params.experts_per_layer * (end - begin);
  } else {
    const StageLoad load = load_of(ctx.stack, begin, end);
    for (int k = 0; k < ctx.stack.kinds; ++k) {
      experts += load.of[static_cast<size_t>(k)] * params.kind_experts[static_cast<size_t>(k)];
    }
  }
  const int64_t local = c.ep > 1 ? local_experts(experts, c) : experts;
  n = std::max<int64_t>(0, n - (experts - local));
  const int64_t dp = data_parallel_ranks(c);
  if (c.ep <= 1 || local == 0) {
    return model_state_memory(static_cast<uint64_t>(n), ctx.recipe, c.zero, dp);
  }
  const ModelStateMemory dense =
      model_state_memory(static_cast<uint64_t>(n - local), ctx.recipe, c.zero, dp);
  const ModelStateMemory expert =
      model_state_memory(static_cast<uint64_t>(local), ctx.recipe, c.zero, expert_replicas(c));
  ModelStateMemory m = dense;
  m.num_params += expert.num_params;
  m.param_bytes += expert.param_bytes;
  m.grad_bytes += expert.grad_bytes;
  m.optimizer_bytes += expert.optimizer_bytes;
  return m;
}

// Adam reads the gradient, the master weights and two moments and writes the last three and the
// working weights: its states once through HBM, on the shard this rank updates.
double optimizer_seconds(const StepContext& ctx, const ParallelConfig& c,
                         const StageStates& states) {
  const int64_t dp = data_parallel_ranks(c);
  int64_t updated = c.zero >= 1 ? static_cast<int64_t>((states.params + dp - 1) / dp)
                                : static_cast<int64_t>(states.params);
  if (c.zero >= 1 && states.expert_params > 0) {
    // Dense states over dp ranks, expert states over edp (Note [Expert and dense data
    // parallelism]).
    const auto expert = static_cast<int64_t>(states.expert_params);
    const int64_t dense = static_cast<int64_t>(states.params) - expert;
    const int64_t edp = expert_replicas(c);
    updated = (dense + dp - 1) / dp + (expert + edp - 1) / edp;
  }
  const double opt_bytes =
      static_cast<double>(updated) *
      static_cast<double>(ctx.recipe.grad_bytes + 2 * ctx.recipe.optimizer_bytes() +
                          ctx.recipe.param_bytes);
  return opt_bytes / ctx.compute.memory_bytes_per_s;
}

// The memory of the stage holding the most: states, in-flight activations, working set. Bytes in
// double (exact below 2^53, i.e. 9 PB) and saturated into int64 at the end: a hostile model or
// sequence may need more than int64 counts, which then never fits.
int64_t step_memory(const StepContext& ctx, const ParallelConfig& c, const LayerPrices& lp,
                    const StageEnds& ends, const StageStates& states, Bill* bill) {
  const int64_t L = ctx.layers, pp = c.pp, v = c.virtual_stages, dp = data_parallel_ranks(c);
  const RankWork& w = *lp.of(0).work;
  ModelStateMemory model_states = model_state_memory(states.params, ctx.recipe, c.zero, dp);
  if (states.expert_params > 0) {
    // Note [Expert and dense data parallelism]: dense states shard over dp x cp, expert states
    // over edp.
    const ModelStateMemory dense =
        model_state_memory(states.params - states.expert_params, ctx.recipe, c.zero, dp);
    const ModelStateMemory expert =
        model_state_memory(states.expert_params, ctx.recipe, c.zero, expert_replicas(c));
    model_states.param_bytes = dense.param_bytes + expert.param_bytes;
    model_states.grad_bytes = dense.grad_bytes + expert.grad_bytes;
    model_states.optimizer_bytes = dense.optimizer_bytes + expert.optimizer_bytes;
  }
  const PipelineShape shape = pipeline_shape(ctx.setup, c);
  double act_peak = 0;
  int act_stage = 0;
  auto activations_of = [&](int64_t s, const StageLoad& load) {
    // Chunks in flight of this stage's own layers / v (Note [In-flight micro-batches]).
    const int64_t flight = chunks_in_flight(shape, s);
    double held = 0;
    for (int k = 0; k < lp.kinds; ++k) {
      const int64_t n = load.of[static_cast<size_t>(k)];
      if (n == 0) continue;
      const double held_layers =
          static_cast<double>(flight) * static_cast<double>(n) / static_cast<double>(v);
      held += held_layers * static_cast<double>(lp.mixed(k, load.n).retained_bytes);
    }
    double a = std::trunc(held);
    const int64_t in_flight = flight / std::max<int64_t>(v, 1);
    if (s == 0) {
      a += static_cast<double>(std::max<int64_t>(in_flight, 1)) *
           static_cast<double>(w.embedding().retained_bytes);
    }
    if (s == pp - 1) {
      a += static_cast<double>(1 + ctx.stack.mtp_layers) *
           static_cast<double>(w.head().retained_bytes);
    }
    if (a > act_peak) {
      act_peak = a;
      act_stage = static_cast<int>(s);
    }
  };
  if (ctx.stack.uniform()) {
    // Earlier stages hold more micro-batches, later middle stages may hold a layer more: the
    // peak is on the first stage, the second, the first middle stage with the most layers or the
    // last.
    for (int64_t s : {int64_t{0}, std::min<int64_t>(1, pp - 1), states.widest_middle, pp - 1}) {
      activations_of(
          s, load_of(ctx.stack, stage_begin(L, pp, ends, s), stage_begin(L, pp, ends, s + 1)));
    }
  } else {
    for (const DistinctStage& d : distinct_stages(ctx.stack, L, pp, ends)) {
      activations_of(d.stage, d.load);
    }
  }
  // One block's working set (the largest kind's) and the output layer's share.
  int64_t block_working = 0, layer_params = 0;
  for (int k = 0; k < lp.kinds; ++k) {
    block_working =
        std::max(block_working, lp.of(static_cast<size_t>(k)).work->block().activation_bytes);
    const KindPrices& kp = lp.of(static_cast<size_t>(k));
    layer_params = std::max(layer_params, kp.dense_params + kp.expert_params);
  }
  double transient = static_cast<double>(block_working) +
                     static_cast<double>(w.head().activation_bytes / std::max<int64_t>(pp, 1));
  if (c.zero == 3 && dp > 1) {
    // The gathered layer in use and the next one prefetched, at full size.
    transient += 2 * static_cast<double>(layer_params) * ctx.recipe.param_bytes;
  }
  const double tensors = static_cast<double>(model_states.total_bytes()) + act_peak + transient;
  const double overhead =
      static_cast<double>(ctx.context_bytes) + std::trunc(kAllocatorOverhead * tensors);
  if (bill != nullptr) {
    Bill& b = *bill;
    b.parameter_bytes = saturating_int64(model_states.param_bytes);
    b.gradient_bytes = saturating_int64(model_states.grad_bytes);
    b.optimizer_bytes = saturating_int64(model_states.optimizer_bytes);
    b.activation_bytes = saturating_int64(act_peak);
    b.transient_bytes = saturating_int64(transient);
    b.overhead_bytes = saturating_int64(overhead);
    b.peak_stage = std::max(states.stage, act_stage);
  }
  return saturating_int64(tensors + overhead);
}

// The bill's collectives of the pacing stage, all micro-batches: each one's seconds and the part
// on the critical path (their exposed seconds sum to the stage-communication term).
void record_stage_collectives(const StepContext& ctx, const ParallelConfig& c,
                              const DimLinks& links, const LayerPrices& lp, const StageTimes& st,
                              int64_t m, Recorder& rec) {
  const collectives::GroupLinks& tp_l = links[kTpDim];
  const MixedPrecision& recipe = ctx.recipe;
  const int64_t pp = c.pp;
  const StageLoad& load = st.pacing_load;
  const int64_t layers = load.n;
  const RankWork& w = *lp.of(0).work;
  const double mm = static_cast<double>(m);
  const double per_layer_calls = mm * static_cast<double>(layers);
  // The share of the stage's layers that recompute (and re-run their collectives).
  const bool full = c.recompute == tensor::RecomputePolicy::kFull;
  const double again = full && layers > 0 ? static_cast<double>(lp.recomputed_in(layers)) /
                                                static_cast<double>(layers)
                                          : 0;
  auto add_tp = [&](const PartWork& p, const std::string& where, double times) {
    // A recomputed forward runs its collectives again. The calls of one kind's layers are a whole
    // number for a uniform stack; with several kinds the stage's recomputed share is spread over
    // them (Note [Stack of layer kinds]), and the seconds keep the exact share.
    const double exact = times * (p.recompute_s > 0 ? 1 + again : 1);
    const auto calls = std::llround(exact);
    const double counted =
        std::abs(exact - static_cast<double>(calls)) < 1e-6 ? static_cast<double>(calls) : exact;
    for (const CommItem& ci : p.tp_forward) {
      const double t = seconds_of(ci.kind, ci.bytes, tp_l);
      rec.add(std::string(collectives::to_string(ci.kind)) + " (" + where + " forward)", ci.kind,
              kTpDim, tp_l, ci.bytes, calls, t * counted, t * counted);
    }
    for (const CommItem& ci : p.tp_backward) {
      const double t = seconds_of(ci.kind, ci.bytes, tp_l);
      rec.add(std::string(collectives::to_string(ci.kind)) + " (" + where + " backward)", ci.kind,
              kTpDim, tp_l, ci.bytes, static_cast<int64_t>(times), t * times, t * times);
    }
  };
  const bool uniform = ctx.stack.uniform();
  // "block" for a uniform stack; "moe block", "dense block" for a stack of kinds.
  auto label = [&](int k, std::string_view what) {
    return uniform ? std::string(what)
                   : ctx.stack.names[static_cast<size_t>(k)] + " " + std::string(what);
  };
  for (int k = 0; k < lp.kinds; ++k) {
    const int64_t n = load.of[static_cast<size_t>(k)];
    if (n > 0)
      add_tp(lp.of(static_cast<size_t>(k)).work->block(), label(k, "block"),
             mm * static_cast<double>(n));
  }
  if (st.pacing == 0) add_tp(w.embedding(), "embedding", mm);
  if (st.pacing == pp - 1) {
    add_tp(w.head(), "output layer", mm * static_cast<double>(1 + ctx.stack.mtp_layers));
  }
  if (c.zero == 3 && data_parallel_ranks(c) > 1) {
    const collectives::GroupLinks& dp_l = links[kDpDim];
    const collectives::GroupLinks& data_l = links[kDataGroup];
    for (int k = 0; k < lp.kinds; ++k) {
      const int64_t n = load.of[static_cast<size_t>(k)];
      if (n == 0) continue;
      const KindPrices& kp = lp.of(static_cast<size_t>(k));
      const LayerCost layer = lp.mixed(k, layers);
      const double kind_calls = mm * static_cast<double>(n);
      const auto calls = static_cast<int64_t>(m) * n;
      const std::string of =
          uniform ? "" : ", " + ctx.stack.names[static_cast<size_t>(k)] + " layers";
      if (kp.expert_params == 0) {
        const int64_t lp_bytes = kp.layer_params * recipe.param_bytes;
        const int64_t lg_bytes = kp.layer_params * ctx.gradient_reduce_bytes;
        const double ag = seconds_of(CollectiveKind::kAllGather, lp_bytes, data_l);
        const double rs = seconds_of(CollectiveKind::kReduceScatter, lg_bytes, data_l);
        rec.add_data("all_gather (fsdp parameters" + of + ", forward and backward)",
                     CollectiveKind::kAllGather, data_l, lp_bytes, 2 * calls,
                     2 * ag * static_cast<double>(calls), layer.fsdp_gather_exposed_s * kind_calls);
        rec.add_data("reduce_scatter (fsdp gradients" + of + ")", CollectiveKind::kReduceScatter,
                     data_l, lg_bytes, calls, rs * static_cast<double>(calls),
                     layer.fsdp_scatter_exposed_s * kind_calls);
        continue;
      }
      // Dense weights over the whole data-parallel group, this rank's experts over edp; the
      // exposed time shared between them by their seconds.
      const double ag = kp.fsdp_dense_gather_s + kp.fsdp_expert_gather_s;
      const double rs = kp.fsdp_dense_scatter_s + kp.fsdp_expert_scatter_s;
      const double ag_exposed = layer.fsdp_gather_exposed_s * kind_calls;
      const double rs_exposed = layer.fsdp_scatter_exposed_s * kind_calls;
      auto share = [](double exposed, double part, double whole) {
        return whole > 0 ? exposed * part / whole : 0;
      };
      const double cd = static_cast<double>(calls);
      rec.add_data("all_gather (fsdp dense parameters" + of + ", forward and backward)",
                   CollectiveKind::kAllGather, links[kDataGroup],
                   kp.dense_params * recipe.param_bytes, 2 * calls, 2 * kp.fsdp_dense_gather_s * cd,
                   share(ag_exposed, kp.fsdp_dense_gather_s, ag));
      rec.add("all_gather (fsdp expert parameters" + of + ", forward and backward)",
              CollectiveKind::kAllGather, kDpDim, dp_l, kp.expert_params * recipe.param_bytes,
              2 * calls, 2 * kp.fsdp_expert_gather_s * cd,
              share(ag_exposed, kp.fsdp_expert_gather_s, ag));
      rec.add_data("reduce_scatter (fsdp dense gradients" + of + ")",
                   CollectiveKind::kReduceScatter, links[kDataGroup],
                   kp.dense_params * ctx.gradient_reduce_bytes, calls, kp.fsdp_dense_scatter_s * cd,
                   share(rs_exposed, kp.fsdp_dense_scatter_s, rs));
      rec.add("reduce_scatter (fsdp expert gradients" + of + ")", CollectiveKind::kReduceScatter,
              kDpDim, dp_l, kp.expert_params * ctx.gradient_reduce_bytes, calls,
              kp.fsdp_expert_scatter_s * cd, share(rs_exposed, kp.fsdp_expert_scatter_s, rs));
    }
  }
  if (c.cp > 1) {
    double cp_s = 0, cp_exposed = 0;
    for (int k = 0; k < lp.kinds; ++k) {
      const int64_t n = load.of[static_cast<size_t>(k)];
      if (n == 0) continue;
      const LayerCost layer = lp.mixed(k, layers);
      cp_s += layer.cp_s * (mm * static_cast<double>(n));
      cp_exposed += layer.cp_exposed_s * (mm * static_cast<double>(n));
    }
    rec.add("ring attention (keys, values and their gradients)", CollectiveKind::kAllGather, kCpDim,
            links[kCpDim], w.cp_kv_bytes, std::llround(per_layer_calls * (3 + again)), cp_s,
            cp_exposed);
  }
  if (c.ep > 1) {
    // The layers that route to experts.
    double moe_calls = 0, ep_s = 0;
    int64_t bytes = 0;
    for (int k = 0; k < lp.kinds; ++k) {
      const int64_t n = load.of[static_cast<size_t>(k)];
      const LayerCost layer = lp.mixed(k, layers);
      if (n == 0 || layer.ep_s <= 0) continue;
      moe_calls += mm * static_cast<double>(n);
      ep_s += layer.ep_s * (mm * static_cast<double>(n));
      bytes = lp.of(static_cast<size_t>(k)).work->ep_dispatch_bytes;
    }
    if (ep_s > 0) {
      rec.add("all_to_all (token dispatch and combine)", CollectiveKind::kAllToAll, kEpDim,
              links[kEpGroup], bytes, std::llround(moe_calls * (4 + 2 * again)), ep_s, ep_s);
    }
  }
  if (pp > 1) {
    const auto calls = static_cast<int64_t>(2 * mm * static_cast<double>(c.virtual_stages));
    const PipelineSends& s = st.sends;
    const double shown = ctx.pp_overlap_interleaved && c.virtual_stages > 1 ? 0 : 1;
    rec.add("send_recv (activations and their gradients)", CollectiveKind::kSendRecv, kPpDim,
            s.pair, s.bytes, calls, s.send_s * static_cast<double>(calls),
            shown * s.send_s * static_cast<double>(calls));
    if (s.gather_s > 0) {
      rec.add("all_gather (pipeline slices)", CollectiveKind::kAllGather, kTpDim, tp_l,
              st.full_act_bytes, calls, s.gather_s * static_cast<double>(calls),
              shown * s.gather_s * static_cast<double>(calls));
    }
  }
}

}  // namespace

StackLayout StackLayout::of(const tensor::LayerStack& s, int64_t mtp_layers) {
  SP_CHECK(s.kinds.size() <= static_cast<size_t>(kMaxLayerKinds), "a model of ", s.kinds.size(),
           " layer kinds, expected at most ", kMaxLayerKinds,
           " (the most the step model prices; docs/cost-model.md §8.1)");
  static std::atomic<uint64_t> serials{0};
  StackLayout out;
  out.serial = ++serials;
  out.kinds = std::max(1, static_cast<int>(s.kinds.size()));
  for (size_t k = 0; k < s.kinds.size(); ++k) {
    out.moe[k] = s.kinds[k].ffn == tensor::FfnKind::kMoe;
    out.names[k] = tensor::describe(s.kinds[k]);
  }
  out.mtp_layers = std::max<int64_t>(0, mtp_layers);
  if (out.mtp_layers > 0 && !s.kind_of_layer.empty()) out.mtp_kind = s.kind_of_layer.back();
  if (!out.uniform()) {
    out.kind_of_layer = s.kind_of_layer;
    out.prefix.assign(1, {});
    for (int32_t k : s.kind_of_layer) {
      auto next = out.prefix.back();
      ++next[static_cast<size_t>(k)];
      out.prefix.push_back(next);
    }
  }
  return out;
}

// Note [Memory lower bound]
// The largest stage holds at least the average stage's parameters: this rank's share of every
// layer (the routed experts split as local_experts splits them) over pp. Its model states are at
// least those parameters' ZeRO-sharded over the whole data-parallel group (experts shard over
// fewer ranks, and a sum's ceiling is at most the sum of the ceilings), and step_memory adds
// activations, working set, the context and the allocator's share on top. A 1 % margin covers
// the rounding of the per-stage expert split. Most of a large MoE search's candidates need
// several times a GPU's memory (DeepSeek-V3 on 1,024 H100s: 539,000 of 669,000), and this answers
// them without pricing their times.
double memory_lower_bound(const StepContext& ctx, const ParallelConfig& c,
                          const LayerParameters& params) {
  if (params.prefix.empty() || c.pp < 1) return 0;
  double local = static_cast<double>(params.prefix.back());
  if (c.ep > 1) {
    double experts = 0;
    if (ctx.stack.uniform()) {
      experts = static_cast<double>(params.experts_per_layer) * static_cast<double>(ctx.layers);
    } else {
      for (int k = 0; k < ctx.stack.kinds; ++k) {
        auto n = static_cast<double>(ctx.stack.prefix.back()[static_cast<size_t>(k)]);
        if (k == ctx.stack.mtp_kind) n += static_cast<double>(ctx.stack.mtp_layers);
        experts += n * static_cast<double>(params.kind_experts[static_cast<size_t>(k)]);
      }
    }
    const double kept = static_cast<double>(c.tp) / static_cast<double>(c.ep * expert_tp(c));
    local -= experts * (1 - kept);
  }
  if (c.pp == 1) local -= static_cast<double>(params.tied_twice);
  const double stage = std::max(0.0, local / static_cast<double>(c.pp));
  const MixedPrecision& r = ctx.recipe;
  const double dp = static_cast<double>(std::max<int64_t>(1, data_parallel_ranks(c)));
  const double per_param_sharded = (c.zero >= 1 ? r.optimizer_bytes() / dp : r.optimizer_bytes()) +
                                   (c.zero >= 2 ? r.grad_bytes / dp : r.grad_bytes) +
                                   (c.zero >= 3 ? r.param_bytes / dp : r.param_bytes);
  const double states = stage * per_param_sharded;
  return 0.99 * (static_cast<double>(ctx.context_bytes) + states * (1 + kAllocatorOverhead));
}

// Note [Multi-token prediction]
// DeepSeek-V3's multi-token prediction (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" §2.2;
// num_nextn_predict_layers, ModelConfig::mtp_layers) trains D more modules after the last
// layer: each embeds the next tokens with the shared embedding, normalizes it and the previous
// depth's hidden state, projects their concatenation (eh_proj, 2h -> h), runs one transformer
// layer and the shared output layer and loss. Megatron-Core places them on the last pipeline
// stage. The step model prices them there as D more layers of the last layer's kind in the last
// stage's load (their time, their parameters with the experts split as any MoE layer's, their
// saved activations) and D more passes of the output layer (its time, its tp collectives, its
// saved logits); the partition sees them as part of the last stage's extra time. Left out: the
// eh_proj GEMM's time (4 h^2 FLOPs a token, about 1 % of a DeepSeek-V3 layer) and the second
// embedding lookup. transformers drops the modules, so plan.json and materialize do not hold them
// (docs/models.md).

StepResult evaluate(const StepContext& ctx, const ParallelConfig& c,
                    std::span<const KindWork> kinds, const DimLinks& links,
                    const LayerParameters& params, Bill* bill) {
  SP_ASSERT(static_cast<int>(kinds.size()) == ctx.stack.kinds,
            "one work per layer kind of the stack");
  Recorder rec{bill};
  const int64_t m = micro_batches_per_step(ctx.setup, c);
  const LayerPrices& lp = price_layers(ctx, c, kinds, links, params);
  const StageTimes st = stage_times(ctx, c, links, lp, m);
  const StageStates states = largest_stage(ctx, c, params, st.ends);
  double dp_hidden_s = 0;
  const double dp_sync_s =
      data_parallel_sync(ctx, c, lp, states, links[kDpDim], links[kDataGroup], rec, dp_hidden_s);
  const double optimizer_s = optimizer_seconds(ctx, c, states);
  const double dp_interference_s = ctx.overlap_interference * dp_hidden_s;

  StepResult r;
  r.step_time_s = st.pipeline_s + dp_sync_s + optimizer_s + dp_interference_s;
  r.stages = st.ends;
  r.memory_bytes = step_memory(ctx, c, lp, st.ends, states, bill);
  r.fits = static_cast<double>(r.memory_bytes) <= ctx.memory_budget();
  if (bill != nullptr) {
    bill->stage_states.clear();
    for (int64_t s = 0; s < c.pp; ++s) {
      const ModelStateMemory m = stage_model_state(ctx, c, params, st.ends, s);
      bill->stage_states.push_back({saturating_int64(m.param_bytes), saturating_int64(m.grad_bytes),
                                    saturating_int64(m.optimizer_bytes)});
    }
    record_stage_collectives(ctx, c, links, lp, st, m, rec);
    Bill& b = *bill;
    const double stage_s = static_cast<double>(m) * st.t_stage;
    b.pacing_stage = static_cast<int>(st.pacing);
    b.compute_s = static_cast<double>(m) * st.pacing_compute_s;
    const double stage_interference_s = static_cast<double>(m) * st.pacing_interference_s;
    // Rounding may leave -1e-17 where nothing is exposed.
    b.stage_comm_s = std::max(0.0, stage_s - b.compute_s - stage_interference_s);
    b.interference_s = stage_interference_s + dp_interference_s;
    b.bubble_s = st.bubble_s;
    b.dp_sync_s = dp_sync_s;
    b.optimizer_s = optimizer_s;
  }
  return r;
}

StepResult evaluate(const StepContext& ctx, const ParallelConfig& c, const RankWork& w,
                    const DimLinks& links, const LayerParameters& params, Bill* bill,
                    const std::array<TpSeconds, kParts>* tp, const PartWork* stored_block) {
  const KindWork one{&w, tp, stored_block};
  return evaluate(ctx, c, std::span<const KindWork>(&one, 1), links, params, bill);
}

std::array<BillTimePart, kBillTimeParts> time_parts(const Bill& b) {
  return {{{"compute", b.compute_s},
           {"stage_communication", b.stage_comm_s},
           {"bubble", b.bubble_s},
           {"data_parallel_sync", b.dp_sync_s},
           {"optimizer", b.optimizer_s},
           {"overlap_interference", b.interference_s}}};
}

}  // namespace shardplan::planner
