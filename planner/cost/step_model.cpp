#include "planner/cost/step_model.h"

#include <algorithm>
#include <cmath>
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
  thread_local std::unordered_map<collectives::CollectiveCall, double> memo;
  const collectives::CollectiveCall call{kind, links.group_size, bytes, links};
  auto it = memo.find(call);
  if (it != memo.end()) return it->second;
  if (memo.size() > 100000) memo.clear();
  const double t = collectives::collective_cost(call).time_s;
  memo.emplace(call, t);
  return t;
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
  out.pair = pp_l;
  out.pair.group_size = 2;
  out.pair.nodes = std::min<int64_t>(pp_l.nodes, 2);
  out.pair.ranks_per_node = out.pair.nodes > 1 ? 1 : 2;
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
  double total_s = 0;  // compute and everything exposed
  double retained_bytes = 0;
  // f of this and 1 - f of `other`, field by field.
  LayerCost mix(const LayerCost& o, double f) const {
    auto m = [f](double a, double b) { return f * a + (1 - f) * b; };
    return {m(forward_s, o.forward_s), m(backward_s, o.backward_s),        m(tp_s, o.tp_s),
            m(cp_s, o.cp_s),           m(cp_exposed_s, o.cp_exposed_s),    m(ep_s, o.ep_s),
            m(total_s, o.total_s),     m(retained_bytes, o.retained_bytes)};
  }
};

struct Recorder {
  Bill* bill;
  void add(std::string what, CollectiveKind kind, const char* dim, const collectives::GroupLinks& l,
           int64_t bytes, int64_t calls, double seconds, double exposed) {
    if (bill == nullptr || calls == 0 || l.group_size <= 1) return;
    bill->collectives.push_back(
        {std::move(what), kind, dim, l.group_size, bytes, calls, seconds, exposed});
  }
};

}  // namespace

TpSeconds tp_seconds(const PartWork& p, const collectives::GroupLinks& tp_links) {
  TpSeconds t;
  for (const CommItem& c : p.tp_forward) t.forward += seconds_of(c.kind, c.bytes, tp_links);
  for (const CommItem& c : p.tp_backward) t.backward += seconds_of(c.kind, c.bytes, tp_links);
  return t;
}

StepResult evaluate(const StepContext& ctx, const ParallelConfig& c, const RankWork& w,
                    const DimLinks& links, const LayerParameters& params, Bill* bill,
                    const std::array<TpSeconds, kParts>* tp, const PartWork* stored_block) {
  Recorder rec{bill};
  const collectives::GroupLinks& pp_l = links[0];
  const collectives::GroupLinks& dp_l = links[1];
  const collectives::GroupLinks& ep_l = links[2];
  const collectives::GroupLinks& cp_l = links[3];
  const collectives::GroupLinks& tp_l = links[4];
  const int64_t L = ctx.layers;
  const int64_t pp = c.pp;
  const int64_t v = c.virtual_stages;
  const int64_t m = micro_batches_per_step(ctx.setup, c);
  const bool full = c.recompute == tensor::RecomputePolicy::kFull;

  // ---- one micro-batch through one layer
  const PartWork& blk = w.block();
  const TpSeconds tp_blk = tp != nullptr ? (*tp)[1] : tp_seconds(blk, tp_l);
  // FSDP (ZeRO-3): every micro-batch gathers each layer's parameters for forward and again for
  // backward and reduce-scatters its gradients; prefetching hides them behind the layer's compute.
  const int64_t layer_params = params.per_layer.empty() ? 0 : params.per_layer[L / 2];
  const int64_t dp = c.dp;
  double fsdp_layer_fwd = 0, fsdp_layer_bwd = 0;
  if (c.zero == 3 && dp > 1) {
    const int64_t pbytes = layer_params * ctx.recipe.param_bytes;
    const int64_t gbytes = layer_params * ctx.recipe.grad_bytes;
    fsdp_layer_fwd = seconds_of(CollectiveKind::kAllGather, pbytes, dp_l);
    fsdp_layer_bwd = fsdp_layer_fwd + seconds_of(CollectiveKind::kReduceScatter, gbytes, dp_l);
  }
  // Context-parallel ring and expert all-to-all prices, looked up once.
  const double cp_ag = c.cp > 1 ? seconds_of(CollectiveKind::kAllGather, w.cp_kv_bytes, cp_l) : 0;
  const double cp_rs =
      c.cp > 1 ? seconds_of(CollectiveKind::kReduceScatter, w.cp_kv_bytes, cp_l) : 0;
  const double ep_a2a =
      c.ep > 1 && ctx.moe ? seconds_of(CollectiveKind::kAllToAll, w.ep_dispatch_bytes * c.ep, ep_l)
                          : 0;
  // One layer's time; a recomputed layer re-runs its forward, collectives included.
  auto layer_cost = [&](const PartWork& b, bool recomputed) {
    LayerCost k;
    k.forward_s = b.forward_s;
    k.backward_s = b.backward_s + b.recompute_s;
    k.tp_s = tp_blk.forward + tp_blk.backward + (recomputed ? tp_blk.forward : 0);
    if (c.cp > 1) {
      // Forward: the keys and values go round the ring; backward: again, and their gradients.
      k.cp_s = (recomputed ? 3 : 2) * cp_ag + cp_rs;
      k.cp_exposed_s = std::max(0.0, k.cp_s - b.attention_s);
    }
    if (c.ep > 1 && ctx.moe) {
      // Dispatch and combine in forward, their mirrors in backward (and the forward again).
      k.ep_s = (recomputed ? 6 : 4) * ep_a2a;
    }
    const double fsdp_exposed =
        std::max(0.0, fsdp_layer_fwd - k.forward_s) + std::max(0.0, fsdp_layer_bwd - k.backward_s);
    k.total_s = k.forward_s + k.backward_s + k.tp_s + k.cp_exposed_s + k.ep_s + fsdp_exposed;
    k.retained_bytes = b.retained_bytes;
    return k;
  };
  // Partial recomputation: the first N layers of each model chunk are recomputed, the others keep
  // their activations (Megatron-LM's block method; Note [Partial recomputation]).
  const bool partial = full && c.recompute_layers > 0 && stored_block != nullptr;
  const LayerCost recomputed_cost = layer_cost(blk, full);
  const LayerCost stored_cost = partial ? layer_cost(*stored_block, false) : recomputed_cost;
  auto recomputed_in = [&](int64_t n) {  // of a stage's n layers in v chunks
    if (!partial) return n;
    const int64_t q = n / v, rem = n % v, k = c.recompute_layers;
    return rem * std::min(k, q + 1) + (v - rem) * std::min(k, q);
  };
  // The average layer of a stage of n layers.
  auto mixed = [&](int64_t n) {
    const double f = n > 0 ? static_cast<double>(recomputed_in(n)) / static_cast<double>(n) : 1.0;
    return recomputed_cost.mix(stored_cost, f);
  };
  // ---- one micro-batch through each stage; the slowest sets the pace
  const TpSeconds tp_emb = tp != nullptr ? (*tp)[0] : tp_seconds(w.embedding(), tp_l);
  const TpSeconds tp_head = tp != nullptr ? (*tp)[2] : tp_seconds(w.head(), tp_l);
  const double emb_s =
      w.embedding().forward_s + w.embedding().backward_s + tp_emb.forward + tp_emb.backward;
  const double head_s =
      w.head().forward_s + w.head().backward_s + tp_head.forward + tp_head.backward;
  // Point-to-point: the activation of one micro-batch, forward to the next stage and its
  // gradient back, once per model chunk (pipeline_sends).
  const int64_t full_act_bytes =
      ctx.setup.seq / c.cp * c.micro_batch * ctx.hidden * ctx.activation_itemsize;
  const PipelineSends sends =
      pp > 1 ? pipeline_sends(full_act_bytes, c.tp, c.sequence_parallel, pp_l, tp_l)
             : PipelineSends{};
  const collectives::GroupLinks& pair = sends.pair;
  const int64_t act_bytes = sends.bytes;
  const double p2p_one = sends.send_s, p2p_gather_one = sends.gather_s;
  const double p2p_stage = 2.0 * static_cast<double>(v) * (p2p_one + p2p_gather_one);
  // The bubble is p - 1 model chunks' time (Narayanan et al. 2021 §2.2.2: (p - 1) / v stages).
  // When a stage's layers do not split evenly into v chunks the largest chunk paces the fill and
  // the drain, so a stage of n layers counts its time x ceil(n / v) / n per chunk.
  const int64_t nominal_layers = (L + pp - 1) / pp;
  // Each stage keeps at least one layer per model chunk.
  const StageEnds ends = balance_stage_ends(L, pp, mixed(nominal_layers).total_s, emb_s, head_s, v);
  auto stage_layers = [&](int64_t s) {
    return s == 0 ? ends.first : s == pp - 1 ? ends.last : ends.middle_max;
  };
  double t_stage = 0, t_chunk = 0;
  for (int64_t s : {int64_t{0}, pp / 2, pp - 1}) {
    const int64_t layers = stage_layers(s);
    double t = static_cast<double>(layers) * mixed(layers).total_s + p2p_stage;
    if (s == 0) t += emb_s;
    if (s == pp - 1) t += head_s;
    t_stage = std::max(t_stage, t);
    const int64_t chunk_layers = (layers + v - 1) / v;
    t_chunk = std::max(
        t_chunk, layers > 0 ? t * static_cast<double>(chunk_layers) / static_cast<double>(layers)
                            : t / static_cast<double>(v));
  }
  const double bubble_s = static_cast<double>(pp - 1) * t_chunk;
  const double t_pipe = static_cast<double>(m) * t_stage + bubble_s;

  // ---- after the last backward: data-parallel reduction, ZeRO gathers, the optimizer
  int64_t stage_params = 0;  // the largest stage's local parameters
  int64_t stage_layers_max = 1;
  int mem_stage = 0;
  // The middle layers are alike (the planner's LayerParameters repeat one), so the largest stage
  // is an end or the widest middle stage; sums come from the prefix sums.
  SP_ASSERT(params.prefix.size() == params.per_layer.size() + 1,
            "LayerParameters::set_prefix runs before pricing");
  const int64_t widest = widest_middle_stage(L, pp, ends);
  for (int64_t s : {int64_t{0}, widest, pp - 1}) {
    const int64_t n = params.prefix[static_cast<size_t>(stage_begin(L, pp, ends, s + 1))] -
                      params.prefix[static_cast<size_t>(stage_begin(L, pp, ends, s))];
    if (n > stage_params) {
      stage_params = n;
      mem_stage = static_cast<int>(s);
    }
  }
  stage_layers_max = std::max({ends.first, ends.last, ends.middle_max});
  if (pp == 1) stage_params -= params.tied_twice;
  // Expert parameters are split over ep more: ep ranks hold different experts.
  const int64_t expert_local =
      c.ep > 1 ? params.experts_per_layer * stage_layers_max * (c.ep - 1) / c.ep : 0;
  const auto stage_params_u =
      static_cast<uint64_t>(std::max<int64_t>(0, stage_params - expert_local));
  const int64_t grad_bytes = static_cast<int64_t>(stage_params_u) * ctx.recipe.grad_bytes;
  const int64_t param_bytes = static_cast<int64_t>(stage_params_u) * ctx.recipe.param_bytes;
  const LayerCost peak_layer = mixed(stage_layers_max);  // the average layer of the largest stage
  const double bwd_window = static_cast<double>(stage_layers_max) * peak_layer.backward_s;
  const double fwd_window = static_cast<double>(stage_layers_max) * peak_layer.forward_s;
  const double buckets = static_cast<double>(std::max<int64_t>(1, stage_layers_max));
  double dp_exposed = 0;
  if (dp > 1) {
    if (c.zero == 0) {
      const double t = seconds_of(CollectiveKind::kAllReduce, grad_bytes, dp_l);
      const double e = std::max(t / buckets, t - bwd_window);
      dp_exposed += e;
      rec.add("dp all_reduce (gradients)", CollectiveKind::kAllReduce, "dp", dp_l, grad_bytes, 1, t,
              e);
    } else if (c.zero <= 2) {
      const double t_rs = seconds_of(CollectiveKind::kReduceScatter, grad_bytes, dp_l);
      const double e_rs = std::max(t_rs / buckets, t_rs - bwd_window);
      const double t_ag = seconds_of(CollectiveKind::kAllGather, param_bytes, dp_l);
      const double e_ag = std::max(t_ag / buckets, t_ag - fwd_window);
      dp_exposed += e_rs + e_ag;
      rec.add("dp reduce_scatter (gradients)", CollectiveKind::kReduceScatter, "dp", dp_l,
              grad_bytes, 1, t_rs, e_rs);
      rec.add("dp all_gather (updated parameters)", CollectiveKind::kAllGather, "dp", dp_l,
              param_bytes, 1, t_ag, e_ag);
    } else {
      const double first = fsdp_layer_fwd;  // the first layer's gather has nothing to hide behind
      dp_exposed += first;
      const int64_t lp = layer_params * ctx.recipe.param_bytes;
      const int64_t lg = layer_params * ctx.recipe.grad_bytes;
      const auto calls = static_cast<int64_t>(m) * stage_layers_max;
      const double ag = seconds_of(CollectiveKind::kAllGather, lp, dp_l);
      const double rs = seconds_of(CollectiveKind::kReduceScatter, lg, dp_l);
      const double exp_f = std::max(0.0, fsdp_layer_fwd - peak_layer.forward_s);
      const double exp_b = std::max(0.0, fsdp_layer_bwd - peak_layer.backward_s);
      rec.add("dp all_gather (fsdp parameters, forward and backward)", CollectiveKind::kAllGather,
              "dp", dp_l, lp, 2 * calls, 2 * ag * static_cast<double>(calls),
              (exp_f + std::max(0.0, exp_b - rs)) * static_cast<double>(calls) + first);
      rec.add("dp reduce_scatter (fsdp gradients)", CollectiveKind::kReduceScatter, "dp", dp_l, lg,
              calls, rs * static_cast<double>(calls),
              std::min(rs, exp_b) * static_cast<double>(calls));
    }
  }
  // Adam reads the gradient, the master weights and two moments and writes the last three and
  // the working weights: its states once through HBM, on the shard this rank updates.
  const ModelStateMemory states = model_state_memory(stage_params_u, ctx.recipe, c.zero, dp);
  const int64_t updated = c.zero >= 1 ? static_cast<int64_t>((stage_params_u + dp - 1) / dp)
                                      : static_cast<int64_t>(stage_params_u);
  const double opt_bytes =
      static_cast<double>(updated) *
      static_cast<double>(ctx.recipe.grad_bytes + 2 * ctx.recipe.optimizer_bytes() +
                          ctx.recipe.param_bytes);
  const double optimizer_s = opt_bytes / ctx.compute.memory_bytes_per_s;

  StepResult r;
  r.step_time_s = t_pipe + dp_exposed + optimizer_s;
  r.stages = ends;

  // ---- memory of the stage holding the most: states, in-flight activations, working set
  const PipelineShape shape = pipeline_shape(ctx.setup, c);
  // Bytes in double (exact below 2^53, i.e. 9 PB) and saturated into int64 at the end: a
  // hostile model or sequence may need more than int64 counts, which then never fits.
  double act_peak = 0;
  int act_stage = 0;
  // Earlier stages hold more micro-batches, later middle stages may hold a layer more: the peak
  // is on the first stage, the second, the first middle stage with the most layers or the last.
  for (int64_t s : {int64_t{0}, std::min<int64_t>(1, pp - 1), widest, pp - 1}) {
    // Chunks in flight of this stage's own layers / v (Note [In-flight micro-batches]).
    const int64_t n = stage_begin(L, pp, ends, s + 1) - stage_begin(L, pp, ends, s);
    const double held_layers = static_cast<double>(chunks_in_flight(shape, s)) *
                               static_cast<double>(n) / static_cast<double>(v);
    const int64_t in_flight = chunks_in_flight(shape, s) / std::max<int64_t>(v, 1);
    double a = std::trunc(held_layers * static_cast<double>(mixed(n).retained_bytes));
    if (s == 0) {
      a += static_cast<double>(std::max<int64_t>(in_flight, 1)) *
           static_cast<double>(w.embedding().retained_bytes);
    }
    if (s == pp - 1) a += static_cast<double>(w.head().retained_bytes);
    if (a > act_peak) {
      act_peak = a;
      act_stage = static_cast<int>(s);
    }
  }
  double transient = static_cast<double>(blk.activation_bytes) +
                     static_cast<double>(w.head().activation_bytes / std::max<int64_t>(pp, 1));
  if (c.zero == 3 && dp > 1) {
    // The gathered layer in use and the next one prefetched, at full size.
    transient += 2 * static_cast<double>(layer_params) * ctx.recipe.param_bytes;
  }
  const double tensors = static_cast<double>(states.total_bytes()) + act_peak + transient;
  const double overhead =
      static_cast<double>(ctx.context_bytes) + std::trunc(kAllocatorOverhead * tensors);
  r.memory_bytes = saturating_int64(tensors + overhead);
  r.fits = static_cast<double>(r.memory_bytes) <= ctx.memory_capacity_bytes;

  if (bill != nullptr) {
    Bill& b = *bill;
    b.parameter_bytes = saturating_int64(states.param_bytes);
    b.gradient_bytes = saturating_int64(states.grad_bytes);
    b.optimizer_bytes = saturating_int64(states.optimizer_bytes);
    b.activation_bytes = saturating_int64(act_peak);
    b.transient_bytes = saturating_int64(transient);
    b.overhead_bytes = saturating_int64(overhead);
    b.peak_stage = std::max(mem_stage, act_stage);
    const double mm = static_cast<double>(m);
    const double layers_d = static_cast<double>(stage_layers_max);
    b.compute_s =
        mm * (layers_d * (peak_layer.forward_s + peak_layer.backward_s) + w.embedding().forward_s +
              w.embedding().backward_s + w.head().forward_s + w.head().backward_s);
    b.bubble_s = bubble_s;
    b.optimizer_s = optimizer_s;
    const double per_layer_calls = mm * layers_d;
    // The share of the largest stage's layers that recompute (and re-run their collectives).
    const double f = static_cast<double>(recomputed_in(stage_layers_max)) / layers_d;
    const double again = full ? f : 0;
    auto add_tp = [&](const PartWork& p, const char* where, double times) {
      for (const CommItem& ci : p.tp_forward) {
        const double t = seconds_of(ci.kind, ci.bytes, tp_l);
        const auto calls = std::llround(times * (p.recompute_s > 0 ? 1 + again : 1));
        rec.add(std::string("tp ") + std::string(collectives::to_string(ci.kind)) + " (" + where +
                    " forward)",
                ci.kind, "tp", tp_l, ci.bytes, calls, t * static_cast<double>(calls),
                t * static_cast<double>(calls));
      }
      for (const CommItem& ci : p.tp_backward) {
        const double t = seconds_of(ci.kind, ci.bytes, tp_l);
        rec.add(std::string("tp ") + std::string(collectives::to_string(ci.kind)) + " (" + where +
                    " backward)",
                ci.kind, "tp", tp_l, ci.bytes, static_cast<int64_t>(times), t * times, t * times);
      }
    };
    add_tp(blk, "block", per_layer_calls);
    add_tp(w.embedding(), "embedding", mm);
    add_tp(w.head(), "output layer", mm);
    if (c.cp > 1) {
      rec.add("cp ring attention (keys, values and their gradients)", CollectiveKind::kAllGather,
              "cp", cp_l, w.cp_kv_bytes, std::llround(per_layer_calls * (3 + again)),
              peak_layer.cp_s * per_layer_calls, peak_layer.cp_exposed_s * per_layer_calls);
    }
    if (c.ep > 1 && ctx.moe) {
      rec.add("ep all_to_all (token dispatch and combine)", CollectiveKind::kAllToAll, "ep", ep_l,
              w.ep_dispatch_bytes * c.ep, std::llround(per_layer_calls * (4 + 2 * again)),
              peak_layer.ep_s * per_layer_calls, peak_layer.ep_s * per_layer_calls);
    }
    if (pp > 1) {
      const auto calls = static_cast<int64_t>(2 * mm * static_cast<double>(v));
      rec.add("pp send_recv (activations and their gradients)", CollectiveKind::kSendRecv, "pp",
              pair, act_bytes, calls, p2p_one * static_cast<double>(calls),
              p2p_one * static_cast<double>(calls));
      if (p2p_gather_one > 0) {
        rec.add("tp all_gather (pipeline slices)", CollectiveKind::kAllGather, "tp", tp_l,
                full_act_bytes, calls, p2p_gather_one * static_cast<double>(calls),
                p2p_gather_one * static_cast<double>(calls));
      }
    }
    double exposed = 0;
    for (const BillCollective& bc : b.collectives) exposed += bc.exposed_s;
    b.exposed_comm_s = exposed;
  }
  return r;
}

}  // namespace shardplan::planner
