#include "planner/step_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "collectives/cost_model.h"
#include "planner/pipeline_schedule.h"
#include "tensor/base/error.h"

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
                    const std::array<TpSeconds, kParts>* tp) {
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
  // Full recomputation re-runs the forward, its TP collectives included.
  const double tp_layer = tp_blk.forward + tp_blk.backward + (full ? tp_blk.forward : 0);
  auto tp_gather_s = [&](int64_t bytes) {
    return c.tp > 1 ? seconds_of(CollectiveKind::kAllGather, bytes, tp_l) : 0.0;
  };
  double cp_layer = 0, cp_exposed_layer = 0;
  if (c.cp > 1) {
    // Forward: the keys and values go round the ring; backward: again, and their gradients back.
    cp_layer = 2 * seconds_of(CollectiveKind::kAllGather, w.cp_kv_bytes, cp_l) +
               seconds_of(CollectiveKind::kReduceScatter, w.cp_kv_bytes, cp_l);
    if (full) cp_layer += seconds_of(CollectiveKind::kAllGather, w.cp_kv_bytes, cp_l);
    cp_exposed_layer = std::max(0.0, cp_layer - blk.attention_s);
  }
  double ep_layer = 0;
  if (c.ep > 1 && ctx.moe) {
    // Dispatch and combine in forward, their mirrors in backward (and the forward again).
    ep_layer =
        (full ? 6 : 4) * seconds_of(CollectiveKind::kAllToAll, w.ep_dispatch_bytes * c.ep, ep_l);
  }
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
  const double fwd_compute = blk.forward_s;
  const double bwd_compute = blk.backward_s + blk.recompute_s;
  const double fsdp_exposed_layer =
      std::max(0.0, fsdp_layer_fwd - fwd_compute) + std::max(0.0, fsdp_layer_bwd - bwd_compute);
  const double layer_s =
      fwd_compute + bwd_compute + tp_layer + cp_exposed_layer + ep_layer + fsdp_exposed_layer;

  // ---- one micro-batch through each stage; the slowest sets the pace
  const TpSeconds tp_emb = tp != nullptr ? (*tp)[0] : tp_seconds(w.embedding(), tp_l);
  const TpSeconds tp_head = tp != nullptr ? (*tp)[2] : tp_seconds(w.head(), tp_l);
  const double emb_s =
      w.embedding().forward_s + w.embedding().backward_s + tp_emb.forward + tp_emb.backward;
  const double head_s =
      w.head().forward_s + w.head().backward_s + tp_head.forward + tp_head.backward;
  // Point-to-point: the activation of one micro-batch, forward to the next stage and its
  // gradient back, once per model chunk. Each TP rank sends only its 1 / tp slice: under
  // sequence parallelism that is all it holds; without it, between nodes, the receivers all-
  // gather the slices over the node's fabric when that is quicker than every rank sending all of
  // it over the network (Megatron-LM's scatter/gather optimization, Narayanan et al. 2021 §4.1;
  // docs/cost-model.md §8.3).
  const int64_t full_act_bytes =
      ctx.setup.seq / c.cp * c.micro_batch * ctx.hidden * ctx.activation_itemsize;
  // Neighbouring stages: a pair of the pp dim's group, on two nodes when the group spans nodes.
  collectives::GroupLinks pair = pp_l;
  pair.group_size = 2;
  pair.nodes = std::min<int64_t>(pp_l.nodes, 2);
  pair.ranks_per_node = pair.nodes > 1 ? 1 : 2;
  int64_t act_bytes = full_act_bytes;
  double p2p_one = 0, p2p_gather_one = 0;
  if (pp > 1) {
    const int64_t slice_bytes = full_act_bytes / c.tp;
    const bool split = c.sequence_parallel || (c.tp > 1 && pair.nodes > 1);
    const double slice_s = split ? seconds_of(CollectiveKind::kSendRecv, slice_bytes, pair) : 0;
    const double gather_s = split && !c.sequence_parallel ? tp_gather_s(full_act_bytes) : 0;
    const double whole_s =
        c.sequence_parallel ? 0 : seconds_of(CollectiveKind::kSendRecv, full_act_bytes, pair);
    if (c.sequence_parallel || (split && slice_s + gather_s < whole_s)) {
      act_bytes = slice_bytes;
      p2p_one = slice_s;
      p2p_gather_one = gather_s;
    } else {
      p2p_one = whole_s;
    }
  }
  const double p2p_stage = 2.0 * static_cast<double>(v) * (p2p_one + p2p_gather_one);
  // The bubble is p - 1 model chunks' time (Narayanan et al. 2021 §2.2.2: (p - 1) / v stages).
  // When a stage's layers do not split evenly into v chunks the largest chunk paces the fill and
  // the drain, so a stage of n layers counts its time x ceil(n / v) / n per chunk.
  const StageEnds ends = balance_stage_ends(L, pp, layer_s, emb_s, head_s);
  auto stage_layers = [&](int64_t s) {
    return s == 0 ? ends.first : s == pp - 1 ? ends.last : ends.middle_max;
  };
  double t_stage = 0, t_chunk = 0;
  for (int64_t s : {int64_t{0}, pp / 2, pp - 1}) {
    const int64_t layers = stage_layers(s);
    double t = static_cast<double>(layers) * layer_s + p2p_stage;
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
  for (int64_t s = 0; s < pp; ++s) {
    int64_t n = 0;
    const int64_t end = stage_begin(L, pp, ends, s + 1);
    for (int64_t i = stage_begin(L, pp, ends, s); i < end; ++i) {
      n += params.per_layer[static_cast<size_t>(i)];
    }
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
  const double bwd_window = static_cast<double>(stage_layers_max) * bwd_compute;
  const double fwd_window = static_cast<double>(stage_layers_max) * fwd_compute;
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
      const double exp_f = std::max(0.0, fsdp_layer_fwd - fwd_compute);
      const double exp_b = std::max(0.0, fsdp_layer_bwd - bwd_compute);
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
  int64_t act_peak = 0;
  int act_stage = 0;
  for (int64_t s : {int64_t{0}, pp - 1}) {
    // Chunks in flight of this stage's own layers / v (Note [In-flight micro-batches]).
    const double held_layers = static_cast<double>(chunks_in_flight(shape, s)) *
                               static_cast<double>(stage_layers(s)) / static_cast<double>(v);
    const int64_t in_flight = chunks_in_flight(shape, s) / std::max<int64_t>(v, 1);
    int64_t a = static_cast<int64_t>(held_layers * static_cast<double>(blk.retained_bytes));
    if (s == 0) a += std::max<int64_t>(in_flight, 1) * w.embedding().retained_bytes;
    if (s == pp - 1) a += w.head().retained_bytes;
    if (a > act_peak) {
      act_peak = a;
      act_stage = static_cast<int>(s);
    }
  }
  int64_t transient = blk.activation_bytes + w.head().activation_bytes / std::max<int64_t>(pp, 1);
  if (c.zero == 3 && dp > 1) {
    // The gathered layer in use and the next one prefetched, at full size.
    transient += 2 * layer_params * ctx.recipe.param_bytes;
  }
  const int64_t tensors = static_cast<int64_t>(states.total_bytes()) + act_peak + transient;
  const int64_t overhead =
      ctx.context_bytes + static_cast<int64_t>(kAllocatorOverhead * static_cast<double>(tensors));
  r.memory_bytes = tensors + overhead;
  r.fits = static_cast<double>(r.memory_bytes) <= ctx.memory_capacity_bytes;

  if (bill != nullptr) {
    Bill& b = *bill;
    b.parameter_bytes = static_cast<int64_t>(states.param_bytes);
    b.gradient_bytes = static_cast<int64_t>(states.grad_bytes);
    b.optimizer_bytes = static_cast<int64_t>(states.optimizer_bytes);
    b.activation_bytes = act_peak;
    b.transient_bytes = transient;
    b.overhead_bytes = overhead;
    b.peak_stage = std::max(mem_stage, act_stage);
    const double mm = static_cast<double>(m);
    const double layers_d = static_cast<double>(stage_layers_max);
    b.compute_s = mm * (layers_d * (fwd_compute + bwd_compute) + w.embedding().forward_s +
                        w.embedding().backward_s + w.head().forward_s + w.head().backward_s);
    b.bubble_s = bubble_s;
    b.optimizer_s = optimizer_s;
    const double per_layer_calls = mm * layers_d;
    auto add_tp = [&](const PartWork& p, const char* where, double times) {
      for (const CommItem& ci : p.tp_forward) {
        const double t = seconds_of(ci.kind, ci.bytes, tp_l);
        const auto calls = static_cast<int64_t>(times * (full && p.recompute_s > 0 ? 2 : 1));
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
              "cp", cp_l, w.cp_kv_bytes, static_cast<int64_t>(per_layer_calls) * (full ? 4 : 3),
              cp_layer * per_layer_calls, cp_exposed_layer * per_layer_calls);
    }
    if (c.ep > 1 && ctx.moe) {
      rec.add("ep all_to_all (token dispatch and combine)", CollectiveKind::kAllToAll, "ep", ep_l,
              w.ep_dispatch_bytes * c.ep, static_cast<int64_t>(per_layer_calls) * (full ? 6 : 4),
              ep_layer * per_layer_calls, ep_layer * per_layer_calls);
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
