#include "planner/cost/block_cost.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "mesh/parallel_style.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::planner {
namespace {

using tensor::StepTensor;
using tensor::TrainingOp;
using tensor::TrainingStep;

enum class Style : uint8_t { kNone, kColwise, kRowwise, kExperts };

// The style of the nearest module around each call that a TP rule names.
std::vector<Style> call_styles(const TrainingStep& step, const tensor::ModelFamily& family) {
  std::vector<Style> out(step.calls.size(), Style::kNone);
  for (size_t c = 0; c < step.calls.size(); ++c) {
    const tensor::StepCall& call = step.calls[c];
    Style s = call.parent >= 0 ? out[static_cast<size_t>(call.parent)] : Style::kNone;
    for (const tensor::TensorParallelRule& r : family.tp_plan) {
      if (mesh::fqn_matches(r.pattern, call.fqn)) {
        s = r.style == "rowwise"   ? Style::kRowwise
            : r.style == "experts" ? Style::kExperts
                                   : Style::kColwise;
      }
    }
    out[c] = s;  // parents come before children in the call list
  }
  return out;
}

// The attention core: the fused op, or an op of the math path whose output is the scores
// [batch, heads (or 1 for a mask), L, S]. Four dims at least: a [batch, tokens, hidden] output
// whose hidden size equals the sequence (Llama 3 8B at 4096 tokens, 70B at 8192) is not scores.
bool is_score_op(const TrainingStep& step, const TrainingOp& op, int64_t seq) {
  if (op.op == "scaled_dot_product_attention") return true;
  if (op.outputs.empty() || op.block < 0) return false;
  const StepTensor& out = step.tensors[static_cast<size_t>(op.outputs.front())];
  const size_t n = out.sizes.size();
  return n >= 4 && seq > 1 && out.sizes[n - 1] == seq && out.sizes[n - 2] == seq;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

TracedModel trace_one_block(const tensor::ModelConfig& cfg, const TraceKey& key) {
  return trace_one_block(cfg, tensor::layer_kind(cfg, 0), key);
}

TracedModel trace_one_block(const tensor::ModelConfig& cfg, const tensor::LayerKind& kind,
                            const TraceKey& key) {
  const tensor::ModelConfig one = tensor::uniform_config(cfg, kind);
  const tensor::ModulePtr model = tensor::build_model(one, {.dtype = key.dtype, .training = true});
  TracedModel t;
  tensor::TraceOptions opts;
  opts.batch = key.micro_batch;
  opts.seq = key.seq;
  opts.recompute = key.recompute;
  opts.selective = key.selective;
  opts.attention = key.attention;
  t.step = tensor::trace_training_step(*model, opts);
  t.hidden_size = cfg.hidden_size;
  const TrainingStep& st = t.step;
  const size_t n = st.ops.size();
  t.part.assign(n, Part::kEmbedding);
  t.split.assign(n, OpSplit::kReplicated);
  t.score_op.assign(n, false);
  const tensor::ModelFamily& family = tensor::family_of(cfg);
  const std::vector<Style> styles = call_styles(st, family);
  // The calls inside a routed-experts module (its type is the family's experts_class).
  std::vector<bool> in_experts(st.calls.size(), false);
  for (size_t c = 0; c < st.calls.size(); ++c) {
    const tensor::StepCall& call = st.calls[c];
    in_experts[c] = (!family.experts_class.empty() && call.type == family.experts_class) ||
                    (call.parent >= 0 && in_experts[static_cast<size_t>(call.parent)]);
  }
  t.expert_op.assign(n, false);
  t.moe_imbalance = key.moe_imbalance;
  std::vector<bool> sharded(st.tensors.size(), false);
  t.expert_boundary.assign(st.tensors.size(), false);
  t.forward_only.assign(st.tensors.size(), false);
  std::unordered_set<int64_t> region_seen;  // buffers already counted as region inputs
  bool seen_block = false;
  for (size_t i = 0; i < n; ++i) {
    const TrainingOp& op = st.ops[i];
    if (op.block >= 0) seen_block = true;
    const Part part = op.block >= 0 ? Part::kBlock : seen_block ? Part::kHead : Part::kEmbedding;
    t.part[i] = part;
    t.score_op[i] = is_score_op(st, op, key.seq);
    t.expert_op[i] = op.call >= 0 && in_experts[static_cast<size_t>(op.call)];
    Style style = op.call >= 0 ? styles[static_cast<size_t>(op.call)] : Style::kNone;
    if (style == Style::kExperts) {
      // Grouped experts hold both halves of an MLP: the GEMM on the replicated tokens is the
      // column-parallel one (gate_up_proj), the GEMM on its sharded output the row-parallel one
      // (down_proj), whose output is reduced; their elementwise ops follow their inputs. A
      // projection alone (JetMoE's input_linear, output_linear) is one of the two, told apart the
      // same way.
      style = Style::kNone;
      if (op.matmul_flops > 0) {
        const bool reads_sharded = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int64_t in) {
          return st.tensors[static_cast<size_t>(in)].role != tensor::TensorRole::kParameter &&
                 sharded[static_cast<size_t>(in)];
        });
        if (reads_sharded) {
          t.split[i] = OpSplit::kRow;
          if (!op.outputs.empty()) {
            t.row_outputs[static_cast<int>(part)].push_back(op.outputs.front());
            // The routed experts' reduction; shared experts (Inkling's, styled alike) keep theirs
            // when the routed ones go whole.
            t.expert_boundary[static_cast<size_t>(op.outputs.front())] = t.expert_op[i];
            t.forward_only[static_cast<size_t>(op.outputs.front())] = op.no_grad;
          }
          continue;  // its outputs are full width (sharded stays false)
        }
        style = Style::kColwise;
      }
    }
    bool in_sharded = false;
    for (int64_t in : op.inputs) {
      const StepTensor& x = st.tensors[static_cast<size_t>(in)];
      if (x.role != tensor::TensorRole::kParameter && sharded[static_cast<size_t>(in)]) {
        in_sharded = true;
      }
    }
    bool out_sharded = in_sharded;
    OpSplit split = in_sharded ? OpSplit::kSharded : OpSplit::kReplicated;
    if (style == Style::kColwise && op.matmul_flops > 0) {
      // The column-parallel product shards its output; the module's other ops (a view of its
      // input before, a bias after) follow their inputs.
      out_sharded = true;
      split = OpSplit::kColumn;
      if (!in_sharded) {
        // The activation operand (addmm lists the bias first; weights are parameters).
        for (int64_t in : op.inputs) {
          const StepTensor& x = st.tensors[static_cast<size_t>(in)];
          if (x.role == tensor::TensorRole::kParameter) continue;
          if (region_seen.insert(x.buffer).second) {
            t.region_inputs[static_cast<int>(part)].push_back(in);
            if (t.expert_op[i]) t.expert_boundary[static_cast<size_t>(in)] = true;
            t.forward_only[static_cast<size_t>(in)] = op.no_grad;
          }
          break;
        }
      }
    } else if (style == Style::kRowwise) {
      // The row-parallel product (or the vocabulary-parallel lookup) is split; what follows it
      // inside the module (a bias add) runs on the reduced, full-width output.
      const bool first_op = op.call >= 0 && st.calls[static_cast<size_t>(op.call)].first_op ==
                                                static_cast<int64_t>(i);
      split =
          op.matmul_flops > 0 || (first_op && !in_sharded) ? OpSplit::kRow : OpSplit::kReplicated;
      out_sharded = false;
      const bool last_op =
          st.calls[static_cast<size_t>(op.call)].end_op == static_cast<int64_t>(i) + 1;
      if (last_op && !op.outputs.empty()) {
        t.row_outputs[static_cast<int>(part)].push_back(op.outputs.front());
        t.forward_only[static_cast<size_t>(op.outputs.front())] = op.no_grad;
      }
    }
    t.split[i] = split;
    for (int64_t o : op.outputs) sharded[static_cast<size_t>(o)] = out_sharded;
  }
  const int64_t item = tensor::itemsize(key.dtype);
  t.attention = key.attention;
  t.dtype = key.dtype;
  if (key.attention == tensor::AttentionImpl::kMath) {
    // Note [Math attention traffic], in units of the activation itemsize (2 for 16-bit).
    const double per = static_cast<double>(item) / 2.0;
    t.score_bytes_forward = (cfg.attention_dropout > 0 ? 13.0 : 8.0) * per;
  }
  // A layer without attention (a feed-forward block) has no keys; a linear-attention layer passes
  // no keys around a ring: under context parallelism each rank
  // hands the next its chunk state (heads x K x V, small beside keys), which is not priced.
  t.kv_bytes = kind.attention == tensor::AttentionType::kLinear ||
                       kind.attention == tensor::AttentionType::kNone
                   ? 0
                   : key.micro_batch * key.seq * tensor::kv_heads_of(cfg, kind) *
                         (tensor::head_dim_of(cfg, kind) + tensor::value_head_dim(cfg, kind)) *
                         item * tensor::family_of(cfg).attentions_per_layer;
  t.attention_window = kind.window;
  // A heavily compressed layer (DeepSeek-V4's HCA) also reads every entry of the sequence, one
  // per compress_rate tokens (Note [Compressed attention trace] in
  // tensor/models/compressed_attention.h).
  if (kind.attention == tensor::AttentionType::kHeavilyCompressed && kind.compress_rate > 0) {
    t.attention_window += key.seq / kind.compress_rate;
  }
  // The indexer's top-k keys are a band of that width per query, as a sliding window's.
  t.sliding = kind.attention == tensor::AttentionType::kSliding ||
              kind.attention == tensor::AttentionType::kSparse ||
              kind.attention == tensor::AttentionType::kCompressedSparse ||
              kind.attention == tensor::AttentionType::kHeavilyCompressed;
  if (kind.ffn == tensor::FfnKind::kMoe) {
    // A pick of a zero-computation expert stays on its rank (Note [Zero-computation experts] in
    // tensor/models/models.h): the routed experts' share of the k picks crosses the all-to-all.
    const int64_t per_pick = key.micro_batch * key.seq * cfg.hidden_size * item;
    const double bytes = cfg.zero_experts > 0
                             ? tensor::routed_experts_per_token(cfg) * static_cast<double>(per_pick)
                             : static_cast<double>(per_pick * cfg.num_experts_per_tok);
    t.moe_dispatch_bytes = static_cast<int64_t>(
        std::ceil(key.moe_imbalance * bytes * tensor::family_of(cfg).routed_exchanges_per_layer));
  }
  return t;
}

bool indexer_attention(const TracedModel& t, size_t i) {
  const TrainingOp& op = t.step.ops[i];
  return op.op == "scaled_dot_product_attention" && op.call >= 0 &&
         t.step.calls[static_cast<size_t>(op.call)].type.ends_with("Indexer");
}

bool windowed_attention(const TracedModel& t, size_t i) {
  // Note [Lightning indexer trace]: the indexer scores every earlier key.
  return t.attention_window > 0 && t.step.ops[i].op == "scaled_dot_product_attention" &&
         !indexer_attention(t, i);
}

GemmShape local_gemm_shape(const TracedModel& t, size_t i, const RankSplit& split) {
  const TrainingOp& op = t.step.ops[i];
  GemmShape g = gemm_shape(t.step, op);
  const int64_t tp = split.tp;
  const bool sp = split.sequence_parallel && tp > 1;
  if (split.whole_experts && t.expert_op[i] && t.split[i] != OpSplit::kReplicated) {
    // Whole experts on 1 / tp of the tokens: the same work, in shorter, full-width GEMMs.
    g.m = ceil_div(g.m, tp);
  } else {
    switch (t.split[i]) {
      case OpSplit::kColumn:
        g.n = ceil_div(g.n, tp);
        break;
      case OpSplit::kRow:
        g.k = ceil_div(g.k, tp);
        break;
      case OpSplit::kSharded:
        if (g.batch >= tp) {
          g.batch = ceil_div(g.batch, tp);
        } else {
          g.m = ceil_div(g.m, tp);
        }
        break;
      case OpSplit::kReplicated:
        if (sp) g.m = ceil_div(g.m, tp);
        break;
    }
  }
  if (t.score_op[i]) g.k *= split.cp;
  if (t.expert_op[i] && split.ep > 1 && g.batch >= split.ep && g.batch % split.ep == 0) {
    // A grouped GEMM over the layer's experts: this rank's E / ep of them, each fed by the
    // ep ranks of its group (RankSplit::ep).
    g.batch /= split.ep;
    g.m *= split.ep;
  }
  return g;
}

RankWork rank_work(const TracedModel& t, const ComputeModel& a, const RankSplit& split) {
  SP_CHECK(split.tp >= 1 && split.cp >= 1, "rank split tp ", split.tp, " cp ", split.cp,
           ", expected positive degrees");
  const TrainingStep& st = t.step;
  const int64_t tp = split.tp;
  const double inv_tp = 1.0 / static_cast<double>(tp);
  const bool sp = split.sequence_parallel && tp > 1;
  RankWork w;
  const ComputeModel attn = attention_compute(a);
  const ComputeModel head = sixteen_bit_compute(a);  // Note [FP8 GEMMs]: the LM head stays bf16
  const int64_t item = tensor::itemsize(t.dtype);
  // The fused attention of a windowed block attends min(window, keys) keys per query: under
  // context parallelism the traced s / cp local keys grow to s, bounded by the window.
  auto windowed = [&](const TrainingOp& op) {
    return windowed_attention(t, static_cast<size_t>(&op - st.ops.data()));
  };
  auto bounded = [&](int64_t keys) {
    return t.attention_window > 0 ? std::min(keys, t.attention_window) : keys;
  };
  // A routed-experts GEMM reads the weights of the experts this rank holds: tp / (ep x etp) of
  // what the traced op (all E experts) times its 1 / tp share reads, 1 / ep with experts split
  // over tp, tp / ep with whole experts; its tokens are the traced ones (RankSplit::ep).
  const double weight_share = split.whole_experts
                                  ? static_cast<double>(tp) / static_cast<double>(split.ep)
                                  : 1.0 / static_cast<double>(split.ep);
  TrainingOp local_op;
  auto expert_weights_local = [&](const TrainingOp& op) -> const TrainingOp& {
    const size_t i = static_cast<size_t>(&op - st.ops.data());
    if (!t.expert_op[i] || op.matmul_flops <= 0 || weight_share == 1.0) return op;
    int64_t weights = 0;
    for (int64_t in : op.inputs) {
      const StepTensor& x = st.tensors[static_cast<size_t>(in)];
      if (!st.buffers[static_cast<size_t>(x.buffer)].is_activation) weights += x.nbytes;
    }
    const auto drop = static_cast<int64_t>(static_cast<double>(weights) * (1.0 - weight_share));
    local_op = op;
    local_op.bytes_read = std::max<int64_t>(0, op.bytes_read - drop);
    local_op.backward_bytes_read = std::max<int64_t>(0, op.backward_bytes_read - drop);
    local_op.backward_bytes_written = std::max<int64_t>(0, op.backward_bytes_written - drop);
    return local_op;
  };
  // An attention core's work against all keys over its work against the rank's own s / cp.
  auto all_keys_over_local = [&](size_t i) {
    const TrainingOp& op = st.ops[i];
    if (windowed(op) && op.inputs.size() >= 2) {
      const StepTensor& k = st.tensors[static_cast<size_t>(op.inputs[1])];
      const int64_t local = k.sizes[k.sizes.size() - 2];
      return static_cast<double>(bounded(local * split.cp)) / static_cast<double>(bounded(local));
    }
    return static_cast<double>(split.cp);
  };
  // The fraction of an op's traced work one rank does.
  auto share = [&](size_t i) {
    const bool split_op = t.split[i] != OpSplit::kReplicated;
    double f = split_op || sp ? inv_tp : 1.0;
    if (t.expert_op[i]) f *= t.moe_imbalance;
    if (t.score_op[i]) f *= all_keys_over_local(i);
    return f;
  };
  for (size_t i = 0; i < st.ops.size(); ++i) {
    const TrainingOp& op = st.ops[i];
    if (op.is_view || op.skipped) continue;
    const GemmShape g = op.matmul_flops > 0 ? local_gemm_shape(t, i, split) : GemmShape{};
    const ComputeModel& rate = t.part[i] == Part::kHead ? head : a;
    double eff = op.matmul_flops > 0 ? gemm_efficiency(rate, g) : 1;
    OpSeconds s;
    if (op.op == "scaled_dot_product_attention" && op.matmul_flops > 0 && op.inputs.size() >= 3) {
      // [.., L, E] queries against [.., S, E] keys: g.batch is batch x local heads, g.m is L.
      // In the attention's own dtype (Note [FP8 GEMMs]).
      const StepTensor& q = st.tensors[static_cast<size_t>(op.inputs[0])];
      const StepTensor& k = st.tensors[static_cast<size_t>(op.inputs[1])];
      const int64_t all_keys = k.sizes[k.sizes.size() - 2] * split.cp;
      const int64_t keys = windowed(op) ? bounded(all_keys) : all_keys;
      // A window narrower than the sequence is a band the kernel computes as counted; a chunk or
      // a wider window is a causal square whose masked half FlashAttention skips.
      const bool band = t.sliding && keys < all_keys;
      // The lightning indexer's one-channel "values" are its per-head weights, an epilogue of
      // the score product rather than a 1-wide GEMM: its rate is the score product's.
      const int64_t value_width = indexer_attention(t, i) ? q.sizes.back() : g.n;
      eff = attention_efficiency(attn, g.batch, g.m, keys, q.sizes.back(), value_width,
                                 t.attention == tensor::AttentionImpl::kFlash && !band);
      s = op_seconds(attn, op, eff, share(i));
      // Note [Attention backward rate]: the fused backward runs slower than the forward.
      if (t.attention == tensor::AttentionImpl::kFlash) s.backward /= kFlashBackwardRate;
    } else if (tensor::chunked_scan_chunk(op.op) > 0) {
      // The chunked scans' kernels run in the activations' 16-bit dtype whatever the GEMMs'
      // precision, and quantize nothing (docs/cost-model.md §8.8, §8.9).
      const ComputeModel sixteen = sixteen_bit_compute(a);
      s = op_seconds(sixteen, op, gemm_efficiency(sixteen, g), share(i));
    } else {
      s = op_seconds(rate, expert_weights_local(op), eff, share(i));
      if (op.matmul_flops > 0 && !t.score_op[i]) {
        // A linear layer's GEMM: its operands quantized under fp8 (Note [FP8 GEMMs]).
        // Under sequence parallelism a rank quantizes its sequence shard before the all-gather
        // (Transformer Engine's and torchao's fp8 all-gather): a column-parallel GEMM's input and
        // a row-parallel GEMM's output gradient are 1 / tp of what the GEMM reads.
        const double rows = static_cast<double>(g.batch) * static_cast<double>(g.m);
        const double sp = split.sequence_parallel ? static_cast<double>(tp) : 1;
        const double in_sp = t.split[i] == OpSplit::kColumn ? sp : 1;
        const double out_sp = t.split[i] == OpSplit::kRow ? sp : 1;
        const OpSeconds qz = quantize_seconds(
            rate, rows * static_cast<double>(g.k) / in_sp, rows * static_cast<double>(g.n) / out_sp,
            item,
            static_cast<double>(g.batch) * static_cast<double>(g.k) * static_cast<double>(g.n));
        s.forward += qz.forward;
        s.backward += qz.backward;
        if (op.recomputed || op.recompute_flops > 0) s.recompute += qz.recompute;
      }
    }
    if (t.score_op[i] && split.cp > 1 && a.ring_attention_rate < 1) {
      // Note [Ring attention steps]: the rank's own keys are 1 / `ring` of its attention work
      // (1 / cp, or less under a window); the rest runs in the ring's steps at their rate.
      const double local = 1 / all_keys_over_local(i);
      const double slow = local + (1 - local) / a.ring_attention_rate;
      s.forward *= slow;
      s.backward *= slow;
      s.recompute *= slow;
    }
    if (t.score_op[i] && t.score_bytes_forward > 0 && !op.outputs.empty() &&
        op.inputs.size() >= 2) {
      // Scores: batch x heads x L x S elements, the output's rows times the keys' length.
      const StepTensor& out = st.tensors[static_cast<size_t>(op.outputs.front())];
      const StepTensor& k = st.tensors[static_cast<size_t>(op.inputs[1])];
      const double rows = static_cast<double>(out.nbytes / tensor::itemsize(out.dtype)) /
                          static_cast<double>(std::max<int64_t>(out.sizes.back(), 1));
      const double keys = static_cast<double>(k.sizes[k.sizes.size() - 2]);
      const double bytes = rows * keys * t.score_bytes_forward * share(i) * split.cp;
      const double fwd = bytes / a.memory_bytes_per_s;
      s.forward += fwd;
      s.backward += 2 * fwd;
      if (op.recomputed || op.recompute_flops > 0) s.recompute += fwd;
    }
    if (op.no_grad) {
      // Note [No-grad regions] in tensor/trace.h: forward only (the math path's score traffic
      // and fp8 casts above price a backward the op does not have).
      s.backward = 0;
      s.recompute = 0;
    }
    PartWork& p = w.parts[static_cast<int>(t.part[i])];
    p.forward_s += s.forward;
    p.backward_s += s.backward;
    p.recompute_s += s.recompute;
    if (t.score_op[i]) p.attention_s += s.forward + s.backward;
  }
  for (const tensor::StepBuffer& b : st.buffers) {
    if (!b.is_activation || b.producer < 0) continue;
    const auto i = static_cast<size_t>(b.producer);
    const bool split_buf = t.split[i] == OpSplit::kColumn || t.split[i] == OpSplit::kSharded;
    const int64_t bytes = split_buf || sp ? ceil_div(b.bytes, tp) : b.bytes;
    PartWork& p = w.parts[static_cast<int>(t.part[i])];
    add_count(p.activation_bytes, bytes, "activation bytes of one layer");
    if (b.retained) add_count(p.retained_bytes, bytes, "activation bytes of one layer");
  }
  if (tp > 1) {
    using collectives::CollectiveKind;
    for (int part = 0; part < kParts; ++part) {
      PartWork& p = w.parts[part];
      // Whole experts have no tensor-parallel collectives of their own.
      auto skipped = [&](int64_t id) {
        return split.whole_experts && t.expert_boundary[static_cast<size_t>(id)];
      };
      for (int64_t id : t.row_outputs[part]) {
        if (skipped(id)) continue;
        const int64_t bytes = st.tensors[static_cast<size_t>(id)].nbytes;
        p.tp_forward.push_back(
            {sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, bytes});
        if (sp && !t.forward_only[static_cast<size_t>(id)]) {
          p.tp_backward.push_back({CollectiveKind::kAllGather, bytes});
        }
      }
      for (int64_t id : t.region_inputs[part]) {
        if (skipped(id)) continue;
        const int64_t bytes = st.tensors[static_cast<size_t>(id)].nbytes;
        if (sp) p.tp_forward.push_back({CollectiveKind::kAllGather, bytes});
        if (t.forward_only[static_cast<size_t>(id)]) continue;  // a no-grad region's: no gradient
        p.tp_backward.push_back(
            {sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, bytes});
        // Sequence parallelism keeps only the sequence shard of the region's input (that is its
        // memory saving), so the weight gradient needs it gathered again (Note [Tracing one block
        // at full width]).
        if (sp) p.tp_backward.push_back({CollectiveKind::kAllGather, bytes});
      }
    }
  }
  // The ring passes every rank's keys and values to every other rank: an all-gather of cp chunks
  // of this rank's heads (1 / tp of them).
  w.cp_kv_bytes = split.cp > 1 ? ceil_div(t.kv_bytes, tp) * split.cp : 0;
  // A rank dispatches its sequence shard's tokens under sequence parallelism, and its 1 / tp of
  // them with whole experts (the tp ranks split the tokens between them).
  w.ep_dispatch_bytes =
      sp || split.whole_experts ? ceil_div(t.moe_dispatch_bytes, tp) : t.moe_dispatch_bytes;
  return w;
}

}  // namespace shardplan::planner
