#include "tensor/training.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/checked.h"
#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/saved_tensor_rules.h"
#include "tensor/step_recorder.h"
#include "tensor/trace.h"

namespace shardplan::tensor {
namespace {

// Bytes of one fp32 value per row of a [.., last] tensor (layer-norm statistics, logsumexp).
int64_t fp32_per_row(const StepTensor& t) {
  const int64_t last = t.sizes.empty() ? 1 : t.sizes.back();
  const int64_t rows = last == 0 ? 0 : t.nbytes / itemsize(t.dtype) / last;
  return rows * 4;
}

class Deriver {
 public:
  explicit Deriver(TrainingStep& s) : s_(s) {}

  void run() {
    for (size_t i = 0; i < s_.ops.size(); ++i) apply_rule(static_cast<int64_t>(i));
    mark_recompute();
    retain_and_attribute();
    peak();
    count_parameters();
    sum_totals();
  }

 private:
  StepTensor& tensor(int64_t id) { return s_.tensors[static_cast<size_t>(id)]; }
  StepBuffer& buffer(int64_t id) { return s_.buffers[static_cast<size_t>(id)]; }

  int64_t new_extra(int64_t bytes, int64_t producer) {
    StepBuffer b;
    b.bytes = bytes;
    b.producer = producer;
    b.is_activation = true;
    s_.buffers.push_back(b);
    return static_cast<int64_t>(s_.buffers.size()) - 1;
  }

  void save(TrainingOp& op, int64_t tensor_id, std::string_view what) {
    op.saved.push_back({tensor(tensor_id).buffer, tensor_id, what});
  }

  void apply_rule(int64_t id) {
    TrainingOp& op = s_.ops[static_cast<size_t>(id)];
    if (op.is_view || op.skipped) {
      op.flops = op.matmul_flops = 0;
      if (op.skipped) op.bytes_read = op.bytes_written = 0;
      return;
    }
    // Note [No-grad regions] in tensor/trace.h: its forward only, nothing saved, no backward.
    if (op.no_grad) return;
    const std::optional<Rule> known = saved_tensor_rule(op.op);
    const Rule rule = known.value_or(Rule::kInputs);
    op.rule_known = known.has_value();
    const auto& in = op.inputs;
    switch (rule) {
      case Rule::kNothing:
        break;
      case Rule::kInputs:
        for (size_t k = 0; k < in.size(); ++k) {
          if (!op.rule_known && !is_floating(tensor(in[k]).dtype)) continue;
          save(op, in[k], tensor(in[k]).role == TensorRole::kParameter ? "weight" : "input");
        }
        break;
      case Rule::kProduct:
        for (size_t k = 0; k < std::min<size_t>(2, in.size()); ++k) {
          save(op, in[k], tensor(in[k]).role == TensorRole::kParameter ? "weight" : "input");
        }
        break;
      case Rule::kFirstInput:
        if (!in.empty()) save(op, in[0], "input");
        break;
      case Rule::kOutput:
        if (!op.outputs.empty()) save(op, op.outputs[0], "output");
        break;
      case Rule::kTensorOperands:
        if (in.size() >= 2) {
          for (int64_t t : in) save(op, t, "input");
        }
        break;
      case Rule::kDropout:
        // One byte per element (torch.bool), Korthikanti et al. §4.1.
        if (!op.outputs.empty()) {
          const StepTensor& o = tensor(op.outputs[0]);
          op.saved.push_back({new_extra(o.nbytes / itemsize(o.dtype), id), -1, "mask"});
        }
        break;
      case Rule::kLayerNorm:
      case Rule::kRmsNorm:
        save(op, in[0], "input");
        for (size_t k = 1; k < in.size(); ++k) save(op, in[k], "weight");
        op.saved.push_back(
            {new_extra((rule == Rule::kLayerNorm ? 2 : 1) * fp32_per_row(tensor(in[0])), id), -1,
             rule == Rule::kLayerNorm ? "mean_rstd" : "rstd"});
        break;
      case Rule::kSdpa:
        apply_sdpa(op, id);
        break;
      case Rule::kCrossEntropy: {
        const StepTensor& x = tensor(in[0]);
        op.saved.push_back({new_extra(x.nbytes, id), -1, "log_probs"});
        if (in.size() > 1) save(op, in[1], "target");
        break;
      }
      case Rule::kEmbedding:
        if (in.size() > 1) save(op, in[1], "indices");
        break;
      case Rule::kWhere:
        if (!in.empty()) save(op, in[0], "condition");
        break;
      case Rule::kGatedDelta:
        apply_gated_delta(op, id);
        break;
      case Rule::kMambaScan:
        apply_mamba_scan(op, id);
        break;
      case Rule::kSelectiveScan:
        apply_selective_scan(op, id);
        break;
      case Rule::kLightning:
        apply_lightning(op);
        break;
      case Rule::kLinearScan:
        // Note [Linear scan work] in tensor/ops.h: the decays and the states h.
        if (!in.empty()) save(op, in[0], "input");
        if (!op.outputs.empty()) save(op, op.outputs[0], "output");
        break;
      case Rule::kWkv:
        // Note [WKV work] in tensor/ops.h: the decay, the bonus (a parameter), k, v and the
        // output, which the kernel's backward reads instead of the states.
        for (int64_t t : in) {
          save(op, t, tensor(t).role == TensorRole::kParameter ? "weight" : "input");
        }
        if (!op.outputs.empty()) save(op, op.outputs[0], "output");
        break;
      case Rule::kMlstm:
        apply_mlstm(op, id);
        break;
    }
    backward_cost(op);
  }

  // Flash: q, k, v, out, logsumexp (fp32 per query row and head); the dropout mask is regenerated
  // from the RNG state. Math: softmax(q k^T * scale) [dropout] @ v as separate autograd ops:
  // q, k, v (repeated to the query heads with GQA), the probabilities, and with dropout its mask
  // and the dropped probabilities (Korthikanti et al. §4.1: 2as^2b + as^2b + 2as^2b).
  void apply_sdpa(TrainingOp& op, int64_t id) {
    const int64_t q = op.inputs[0], k = op.inputs[1], v = op.inputs[2], out = op.outputs[0];
    const StepTensor& qt = tensor(q);
    const StepTensor& ot = tensor(out);
    const int64_t item = itemsize(qt.dtype);
    const int64_t L = qt.sizes[qt.sizes.size() - 2];
    const int64_t S = tensor(k).sizes[tensor(k).sizes.size() - 2];
    const int64_t Ev = ot.sizes.back();
    const int64_t heads_rows = Ev == 0 ? 0 : ot.nbytes / item / Ev;  // batch * heads * L
    if (options_attention() == AttentionImpl::kFlash) {
      for (int64_t t : {q, k, v, out}) save(op, t, t == out ? "output" : "input");
      op.saved.push_back({new_extra(heads_rows * 4, id), -1, "logsumexp"});
      // FlashAttention's backward recomputes the scores q k^T (stores none): hardware work.
      const int64_t E = qt.sizes.back();
      op.recompute_flops += 2.0 * static_cast<double>(heads_rows) * S * E;
      return;
    }
    save(op, q, "input");
    // With GQA the math path repeats k and v to the query heads: the repeated copies are saved.
    for (int64_t t : {k, v}) {
      const StepTensor& kv = tensor(t);
      const int64_t kv_heads = kv.sizes.size() >= 3 ? kv.sizes[kv.sizes.size() - 3] : 1;
      const int64_t q_heads = qt.sizes.size() >= 3 ? qt.sizes[qt.sizes.size() - 3] : 1;
      if (kv_heads == q_heads) {
        save(op, t, "input");
      } else {
        op.saved.push_back({new_extra(kv.nbytes / kv_heads * q_heads, id), -1, "repeated_kv"});
      }
    }
    const int64_t scores = L == 0 ? 0 : heads_rows / L * L * S;  // batch * heads * L * S
    op.saved.push_back({new_extra(scores * item, id), -1, "probs"});
    if (dropout_on()) {
      op.saved.push_back({new_extra(scores, id), -1, "mask"});
      op.saved.push_back({new_extra(scores * item, id), -1, "dropped_probs"});
    }
  }

  // Note [Gated delta rule work] in tensor/ops.h. flash-linear-attention's
  // ChunkGatedDeltaRuleFunction keeps q and k (L2-normalized copies of the inputs' size), v, g
  // and beta, the chunks' solved C x C systems A [B, T, H, C] in the inputs' dtype, and one fp32
  // reciprocal norm per token and head for q and for k; its backward recomputes w, u and the
  // chunk states h rather than keeping them.
  void apply_gated_delta(TrainingOp& op, int64_t id) {
    for (int64_t t : op.inputs) save(op, t, "input");
    const StepTensor& q = tensor(op.inputs[0]);
    const int64_t rows = q.sizes[0] * q.sizes[1] * q.sizes[2];  // B T H
    op.saved.push_back(
        {new_extra(rows * kGatedDeltaChunk * itemsize(q.dtype), id), -1, "solved_chunks"});
    op.saved.push_back({new_extra(2 * rows * 4, id), -1, "qk_rstd"});
    op.recompute_flops += gated_delta_work(op).recompute;
  }

  // The op's work from its query [B, T, H, K] and value [B, T, H, V], T padded to whole chunks.
  ChunkedScanWork gated_delta_work(const TrainingOp& op) {
    const StepTensor& q = tensor(op.inputs[0]);
    const StepTensor& v = tensor(op.inputs[2]);
    const int64_t padded =
        (q.sizes[1] + kGatedDeltaChunk - 1) / kGatedDeltaChunk * kGatedDeltaChunk;
    return gated_delta_rule_work(q.sizes[0] * padded, q.sizes[2], q.sizes[3], v.sizes[3],
                                 kGatedDeltaChunk);
  }

  // Note [Mamba-2 scan work] in tensor/ops.h. mamba_ssm's MambaSplitConv1dScanCombinedFn keeps
  // zxbcdt (the in_proj output), the scan's output before the gated norm or gate (out_x, the
  // output's size and dtype), the norm's rstd (the op's second output; none without the norm)
  // and the parameters; its backward recomputes the convolution, C B^T and the chunk states.
  void apply_mamba_scan(TrainingOp& op, int64_t id) {
    save(op, op.inputs[0], "input");
    for (size_t k = 1; k < op.inputs.size(); ++k) {
      const int64_t t = op.inputs[k];
      save(op, t, tensor(t).role == TensorRole::kParameter ? "weight" : "input");
    }
    op.saved.push_back({new_extra(tensor(op.outputs[0]).nbytes, id), -1, "out_x"});
    if (op.outputs.size() > 1) save(op, op.outputs[1], "rstd");
    op.recompute_flops += mamba_work(op).recompute;
  }

  // The op's work from its output [B, T, H, P], its group count g and convolution weight
  // [d_inner + 2 g N, 1, K], T padded to whole chunks.
  // Note [Mamba-2 groups]
  // A traced op carries tensors and work, no integer arguments. With the gated norm g is rstd's
  // last size ([B, T, g], the op's second output). Without it (Falcon-H1's mamba_rms_norm false)
  // mamba_ssm writes no rstd, and g is the divisor of the heads whose forward work is what the op
  // recorded (matmul_flops, from the same mamba_scan_work): at a fixed g N = (conv_dim -
  // d_inner) / 2 the per-head part 4 N P falls as g grows and the rest stays, so one g fits.
  ChunkedScanWork mamba_work(const TrainingOp& op) {
    const StepTensor& out = tensor(op.outputs[0]);
    const int64_t conv_dim = tensor(op.inputs[1]).sizes[0];
    const int64_t heads = out.sizes[2], head_dim = out.sizes[3], inner = heads * head_dim;
    const int64_t padded = (out.sizes[1] + kMambaChunk - 1) / kMambaChunk * kMambaChunk;
    const int64_t bc = conv_dim - inner;  // 2 g N
    auto work = [&](int64_t groups) {
      return mamba_scan_work(out.sizes[0] * padded, heads, head_dim, groups, bc / (2 * groups),
                             kMambaChunk);
    };
    if (op.outputs.size() > 1) return work(tensor(op.outputs[1]).sizes[2]);
    int64_t groups = 0;
    double miss = 0;
    for (int64_t g = 1; g <= heads; ++g) {
      if (heads % g != 0 || bc % (2 * g) != 0) continue;
      const double d = std::abs(work(g).forward - op.matmul_flops);
      if (groups == 0 || d < miss) {
        groups = g;
        miss = d;
      }
    }
    SP_ASSERT(groups > 0 && miss <= 1e-9 * op.matmul_flops,
              "a Mamba-2 scan without rstd whose work fits no group count");
    return work(groups);
  }

  // Note [Mamba-1 scan work] in tensor/ops.h. mamba_ssm's SelectiveScanFn keeps its inputs (u,
  // delta, A, B, C, D, z, delta_bias: contiguous copies where it made them, which the trace shows
  // as their own ops), the chunks' running states x [B, d_inner, chunks, 2 N] in fp32, and with a
  // gate z the output before it (`out`, the output's size and dtype); its backward recomputes the
  // states within each chunk.
  void apply_selective_scan(TrainingOp& op, int64_t id) {
    for (const int64_t t : op.inputs) {
      save(op, t, tensor(t).role == TensorRole::kParameter ? "weight" : "input");
    }
    const StepTensor& out = tensor(op.outputs[0]);
    const int64_t batch = out.sizes[0], channels = out.sizes[1], tokens = out.sizes[2];
    const int64_t state = tensor(op.inputs[2]).sizes[1];
    const int64_t chunks = (tokens + kSelectiveScanChunk - 1) / kSelectiveScanChunk;
    op.saved.push_back(
        {new_extra(batch * channels * chunks * 2 * state * 4, id), -1, "chunk_states"});
    // z is the one input after A, B and C laid out [B, d_inner, T] (D and delta_bias are
    // [d_inner]).
    bool gated = false;
    for (size_t k = 5; k < op.inputs.size(); ++k) {
      gated = gated || tensor(op.inputs[k]).sizes.size() == 3;
    }
    if (gated) op.saved.push_back({new_extra(out.nbytes, id), -1, "out"});
    op.recompute_flops += selective_work(op).recompute;
  }

  // The op's per-state work from its output [B, d_inner, T] and A [d_inner, N].
  ChunkedScanWork selective_work(const TrainingOp& op) {
    const StepTensor& out = tensor(op.outputs[0]);
    return selective_scan_work(out.sizes[0] * out.sizes[2], out.sizes[1],
                               tensor(op.inputs[2]).sizes[1]);
  }

  // Note [Lightning attention work] in tensor/ops.h. Lightning Attention-2's autograd function
  // keeps q, k, v and the decays only (in MiniMax's layer q, k and v are views of one SiLU output,
  // kept once); its backward recomputes each block's scores Q K^T and the states KV.
  void apply_lightning(TrainingOp& op) {
    for (int64_t t : op.inputs) {
      save(op, t, tensor(t).role == TensorRole::kParameter ? "weight" : "input");
    }
    op.recompute_flops += lightning_work(op).recompute;
  }

  // The op's work from its query [B, T, H, d], T padded to whole blocks.
  ChunkedScanWork lightning_work(const TrainingOp& op) {
    const StepTensor& q = tensor(op.inputs[0]);
    const int64_t padded = (q.sizes[1] + kLightningBlock - 1) / kLightningBlock * kLightningBlock;
    return lightning_attention_work(q.sizes[0] * padded, q.sizes[2], q.sizes[3], kLightningBlock);
  }

  // Note [mLSTM chunkwise work] in tensor/ops.h. mlstm_kernels' chunkwise autograd function keeps
  // q, k, v and the two gates (the contiguous copies its @contiguous makes of the layer's
  // transposed views: the inputs' bytes) and, per token and head, the fp32 normalizer and max
  // state of the forward (vecN_out, vecM_out); its backward recomputes the chunk states
  // (recompute_states_in_bw, the default).
  void apply_mlstm(TrainingOp& op, int64_t id) {
    for (int64_t t : op.inputs) save(op, t, "input");
    const StepTensor& q = tensor(op.inputs[0]);
    const int64_t rows = q.sizes[0] * q.sizes[1] * q.sizes[2];  // B T H
    op.saved.push_back({new_extra(2 * rows * 4, id), -1, "normalizer_max_state"});
    op.recompute_flops += mlstm_work(op).recompute;
  }

  // The op's work from its query [B, T, H, K] and value [B, T, H, V], T padded to whole chunks.
  ChunkedScanWork mlstm_work(const TrainingOp& op) {
    const StepTensor& q = tensor(op.inputs[0]);
    const StepTensor& v = tensor(op.inputs[2]);
    const int64_t padded = (q.sizes[1] + kMlstmChunk - 1) / kMlstmChunk * kMlstmChunk;
    return mlstm_chunkwise_work(q.sizes[0] * padded, q.sizes[2], q.sizes[3], v.sizes[3],
                                kMlstmChunk);
  }

  AttentionImpl options_attention() const { return s_.options.attention; }
  bool dropout_on() const { return s_.options.dropout; }

  // Note [Training FLOPs]. Bytes: backward reads the output gradients and the saved tensors and
  // writes the gradients of the inputs that require grad.
  void backward_cost(TrainingOp& op) {
    if (is_matmul_op(op.op) && op.inputs.size() >= 2) {
      const bool a = tensor(op.inputs[0]).requires_grad, b = tensor(op.inputs[1]).requires_grad;
      op.backward_matmul_flops = op.matmul_flops * ((a ? 1 : 0) + (b ? 1 : 0));
    } else if (op.op == "chunk_gated_delta_rule") {
      // Note [Gated delta rule work]: the gradients of q, k, v, the decays and the WY systems.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_matmul_flops = any ? gated_delta_work(op).backward : 0;
    } else if (op.op == "mamba_split_conv1d_scan_combined") {
      // Note [Mamba-2 scan work]: the gradients of x, B, C, dt and the decays.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_matmul_flops = any ? mamba_work(op).backward : 0;
    } else if (op.op == "lightning_attention") {
      // Note [Lightning attention work]: dq, dk, dv inside the blocks and across them.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_matmul_flops = any ? lightning_work(op).backward : 0;
    } else if (op.op == "mlstm_chunkwise") {
      // Note [mLSTM chunkwise work]: dC across the chunks, dv, dk and dq within them.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_matmul_flops = any ? mlstm_work(op).backward : 0;
    } else if (op.op == "scaled_dot_product_attention") {
      // dq, dk, dv, d(probs): four products against the forward's two.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_matmul_flops = any ? 2 * op.matmul_flops : 0;
    }
    op.backward_flops = op.backward_matmul_flops + (op.flops - op.matmul_flops);
    if (op.op == "selective_scan_fn") {
      // Note [Mamba-1 scan work]: the states' gradients, and twice the per-channel forward work
      // (the op's recorded FLOPs beyond its per-state part).
      const ChunkedScanWork w = selective_work(op);
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_flops = any ? w.backward + 2 * (op.flops - w.forward) : 0;
    }
    if (op.op == "linear_scan") {
      // Note [Linear scan work]: the reverse scan's multiply-add and da's product, 3 per element
      // against the forward's 2.
      bool any = false;
      for (int64_t t : op.inputs) any = any || tensor(t).requires_grad;
      op.backward_flops = any ? 1.5 * op.flops : 0;
    }
    bool wkv_grad = false;
    if (op.op == "wkv") {
      // Note [WKV work]: 60 FLOPs per element against the forward's 23.
      for (int64_t t : op.inputs) wkv_grad = wkv_grad || tensor(t).requires_grad;
      op.backward_flops = wkv_grad ? op.flops * kWkvBackwardFlops / kWkvForwardFlops : 0;
    }
    // A convolution's backward is two: the input's gradient and the weight's.
    if (op.op == "conv1d") op.backward_flops += op.flops;
    for (int64_t t : op.outputs) {
      if (tensor(t).requires_grad) {
        add_count(op.backward_bytes_read, tensor(t).nbytes, "bytes read by one op's backward");
      }
    }
    for (const SavedTensor& sv : op.saved) {
      add_count(op.backward_bytes_read,
                sv.tensor >= 0 ? tensor(sv.tensor).nbytes : buffer(sv.buffer).bytes,
                "bytes read by one op's backward");
    }
    for (int64_t t : op.inputs) {
      if (tensor(t).requires_grad) {
        add_count(op.backward_bytes_written, tensor(t).nbytes,
                  "bytes written by one op's backward");
      }
    }
    if (wkv_grad && !op.outputs.empty()) {
      // Note [WKV work]: the q and r scratch of every element, written by the backward's first
      // pass to thread-local memory and read by its second.
      const StepTensor& out = tensor(op.outputs[0]);
      const int64_t each_way = out.nbytes / itemsize(out.dtype) * (kWkvBackwardScratchBytes / 2);
      add_count(op.backward_bytes_written, each_way, "bytes written by one op's backward");
      add_count(op.backward_bytes_read, each_way, "bytes read by one op's backward");
    }
  }

  // Recompute regions: [first, last] op ranges whose forward re-runs before their backward.
  void mark_recompute() {
    const RecomputePolicy policy = s_.options.recompute;
    if (policy == RecomputePolicy::kNone) return;
    for (const StepBlock& b : s_.blocks) {
      // A block run under no_grad keeps nothing and has no backward to recompute for.
      if (all_no_grad(b)) continue;
      if (policy == RecomputePolicy::kFull) {
        regions_.push_back({b.first_op, b.end_op - 1});
        continue;
      }
      if (s_.options.selective == SelectiveRecompute::kEveryOtherMatmul) {
        every_other_matmul(b);
        continue;
      }
      // Selective: the attention core, from Q K^T to scores x V, or one sdpa op.
      int64_t open = -1;
      for (int64_t i = b.first_op; i < b.end_op; ++i) {
        const TrainingOp& op = s_.ops[static_cast<size_t>(i)];
        if (op.no_grad) continue;
        if (op.op == "scaled_dot_product_attention") {
          regions_.push_back({i, i});
          continue;
        }
        if (!is_matmul_op(op.op) || op.op == "linear" || op.inputs.size() < 2) continue;
        const bool two_activations = buffer(tensor(op.inputs[0]).buffer).is_activation &&
                                     buffer(tensor(op.inputs[1]).buffer).is_activation;
        if (!two_activations) continue;
        if (open < 0) {
          open = i;
        } else {
          regions_.push_back({open, i});
          open = -1;
        }
      }
    }
    for (const auto& [first, last] : regions_) {
      for (int64_t i = first; i <= last; ++i) {
        TrainingOp& op = s_.ops[static_cast<size_t>(i)];
        if (op.no_grad) continue;  // no backward to recompute for
        op.recomputed = true;
        op.recompute_flops += op.flops;
      }
    }
  }

  // Every op of block `b` ran in a no-grad region (Note [No-grad regions] in tensor/trace.h).
  bool all_no_grad(const StepBlock& b) const {
    for (int64_t i = b.first_op; i < b.end_op; ++i) {
      if (!s_.ops[static_cast<size_t>(i)].no_grad) return false;
    }
    return b.end_op > b.first_op;
  }

  // Note [Selective recomputation]
  // torchtitan's op-level selective checkpointing (torchtitan/models/llama3/parallelize, its
  // _save_list policy) saves the outputs of matmuls, attention and a few reductions and
  // recomputes every other op, and of the matmuls it saves only the odd ones in order (the 1st,
  // 3rd, ... of a block), recomputing the even ones. So the recomputed regions are the runs of
  // ops between saved ones: elementwise ops, norms and every second projection.
  void every_other_matmul(const StepBlock& b) {
    int64_t matmuls = 0, open = -1;
    for (int64_t i = b.first_op; i < b.end_op; ++i) {
      const TrainingOp& op = s_.ops[static_cast<size_t>(i)];
      bool saved = op.op == "scaled_dot_product_attention";
      if (is_matmul_op(op.op)) saved = ++matmuls % 2 == 1;
      if (!saved && open < 0) open = i;
      if (saved && open >= 0) {
        regions_.push_back({open, i - 1});
        open = -1;
      }
    }
    if (open >= 0) regions_.push_back({open, b.end_op - 1});
  }

  // Which saved buffers stay alive from forward to backward, and to which block they count.
  // release_[b]: the op whose backward frees it (the earliest op that needs it);
  // remat_[b]: for a recomputed buffer, the last op of its region (when backward re-creates it).
  void retain_and_attribute() {
    const size_t nb = s_.buffers.size();
    release_.assign(nb, -1);
    remat_.assign(nb, -1);
    std::vector<int64_t> region_of(s_.ops.size(), -1);
    for (size_t r = 0; r < regions_.size(); ++r) {
      for (int64_t i = regions_[r].first; i <= regions_[r].second; ++i) {
        region_of[static_cast<size_t>(i)] = static_cast<int64_t>(r);
      }
    }
    const bool full = s_.options.recompute == RecomputePolicy::kFull;
    auto keep = [&](int64_t b, int block, int64_t user) {
      StepBuffer& buf = buffer(b);
      if (!buf.is_activation) return;
      if (!buf.retained) {
        buf.retained = true;
        buf.block = block;
      }
      const size_t k = static_cast<size_t>(b);
      release_[k] = release_[k] < 0 ? user : std::min(release_[k], user);
    };
    for (int64_t i = 0; i < static_cast<int64_t>(s_.ops.size()); ++i) {
      const TrainingOp& op = s_.ops[static_cast<size_t>(i)];
      const int64_t r = region_of[static_cast<size_t>(i)];
      if (full && r >= 0 && !op.no_grad) {
        // Full: the block's inputs (activations made before the block) are what it keeps.
        const int64_t first = regions_[static_cast<size_t>(r)].first;
        for (int64_t t : op.inputs) {
          const StepBuffer& buf = buffer(tensor(t).buffer);
          if (buf.producer >= 0 && buf.producer < first) keep(tensor(t).buffer, op.block, first);
        }
      }
      for (const SavedTensor& sv : op.saved) {
        const StepBuffer& buf = buffer(sv.buffer);
        if (!buf.is_activation) continue;
        if (r >= 0) {
          const auto [first, last] = regions_[static_cast<size_t>(r)];
          if (buf.producer >= first && buf.producer <= last) {
            // Made inside the region: re-created by the recompute, not kept.
            const size_t k = static_cast<size_t>(sv.buffer);
            remat_[k] = std::max(remat_[k], last);
            release_[k] = release_[k] < 0 ? i : std::min(release_[k], i);
            continue;
          }
          if (full) continue;  // made before the block: kept as a block input above
        }
        keep(sv.buffer, op.block, i);
      }
    }
    for (size_t k = 0; k < nb; ++k) {
      if (s_.buffers[k].retained) remat_[k] = -1;  // kept: nothing to re-create
    }
  }

  // Note [Peak activation memory]: a sweep over forward then backward, with difference arrays on
  // the op index. Forward: a buffer lives from its producer to its last forward reader, or to the
  // end of forward when retained. Backward (ops in reverse): a retained buffer lives until the
  // backward of the earliest op needing it; a recomputed one from its region's re-run to the same
  // point; the gradient of an activation lives from the backward of its last reader to that of its
  // producer.
  void peak() {
    const int64_t n = static_cast<int64_t>(s_.ops.size());
    if (n == 0) return;
    std::vector<int64_t> last_read(s_.buffers.size(), -1);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t : s_.ops[static_cast<size_t>(i)].inputs) {
        last_read[static_cast<size_t>(tensor(t).buffer)] = i;
      }
    }
    std::vector<int64_t> fwd(static_cast<size_t>(n) + 1, 0), bwd(static_cast<size_t>(n) + 1, 0);
    auto add_range = [this](std::vector<int64_t>& d, int64_t lo, int64_t hi, int64_t bytes) {
      if (lo > hi || bytes == 0) return;
      add_bytes(d[static_cast<size_t>(lo)], bytes, "live activations");
      add_bytes(d[static_cast<size_t>(hi) + 1], -bytes, "live activations");
    };
    std::vector<int64_t> grad_bytes(s_.buffers.size(), 0);
    for (const StepTensor& t : s_.tensors) {
      if (t.requires_grad && is_floating(t.dtype)) {
        int64_t& g = grad_bytes[static_cast<size_t>(t.buffer)];
        g = std::max(g, t.nbytes);
      }
    }
    for (size_t k = 0; k < s_.buffers.size(); ++k) {
      const StepBuffer& b = s_.buffers[k];
      if (!b.is_activation || b.producer < 0) continue;
      const int64_t end = b.retained ? n - 1 : std::max(b.producer, last_read[k]);
      add_range(fwd, b.producer, end, b.bytes);
      if (b.retained) add_range(bwd, std::max<int64_t>(release_[k], 0), n - 1, b.bytes);
      if (remat_[k] >= 0) add_range(bwd, release_[k], remat_[k], b.bytes);
      if (grad_bytes[k] > 0) {
        add_range(bwd, b.producer, std::max(b.producer, last_read[k]), grad_bytes[k]);
      }
    }
    int64_t live = 0, best = 0;
    for (int64_t i = 0; i < n; ++i) {
      add_bytes(live, fwd[static_cast<size_t>(i)], "live activations");
      best = std::max(best, live);
    }
    live = 0;
    for (int64_t i = 0; i < n; ++i) {
      add_bytes(live, bwd[static_cast<size_t>(i)], "live activations");
      best = std::max(best, live);
    }
    s_.totals.peak_activation_bytes = best;
  }

  // Each tensor's byte count fits int64 (checked where the tensor is made); a sum of thousands of
  // them may not, and must not wrap into a negative total.
  void add_bytes(int64_t& total, int64_t bytes, const char* what) const {
    SP_CHECK(add_into(total, bytes, total), what, " of one training step of batch ",
             s_.options.batch, " x seq ", s_.options.seq,
             " exceed 2^63 bytes (int64), expected a smaller batch or sequence");
  }

  void count_parameters() {
    // Trainable elements: each parameter storage once (ties and views share one).
    std::vector<bool> seen(s_.buffers.size(), false);
    int64_t params = 0;
    for (const StepTensor& t : s_.tensors) {
      if (t.role != TensorRole::kParameter || seen[static_cast<size_t>(t.buffer)]) continue;
      seen[static_cast<size_t>(t.buffer)] = true;
      params += buffer(t.buffer).bytes / itemsize(t.dtype);
    }
    StepTotals& tot = s_.totals;
    tot.parameters = params;
  }

  void sum_totals() {
    StepTotals& tot = s_.totals;
    for (const TrainingOp& op : s_.ops) {
      if (op.is_view || op.skipped) continue;
      tot.ops += 1;
      tot.forward_flops += op.flops;
      tot.forward_matmul_flops += op.matmul_flops;
      tot.backward_flops += op.backward_flops;
      tot.backward_matmul_flops += op.backward_matmul_flops;
      tot.recompute_flops += op.recompute_flops;
      add_bytes(tot.forward_bytes, op.bytes_read, "bytes moved");
      add_bytes(tot.forward_bytes, op.bytes_written, "bytes moved");
      add_bytes(tot.backward_bytes, op.backward_bytes_read, "bytes moved");
      add_bytes(tot.backward_bytes, op.backward_bytes_written, "bytes moved");
      if (op.block >= 0) {
        StepBlock& b = s_.blocks[static_cast<size_t>(op.block)];
        b.flops += op.flops;
        b.recompute_flops += op.recompute_flops;
      }
    }
    for (const StepBuffer& b : s_.buffers) {
      if (!b.retained) continue;
      add_bytes(tot.activation_bytes, b.bytes, "activations");
      if (b.block >= 0) {
        add_bytes(s_.blocks[static_cast<size_t>(b.block)].activation_bytes, b.bytes, "activations");
      } else {
        add_bytes(tot.activation_bytes_outside_blocks, b.bytes, "activations");
      }
    }
  }

  TrainingStep& s_;
  std::vector<std::pair<int64_t, int64_t>> regions_;
  std::vector<int64_t> release_;
  std::vector<int64_t> remat_;
};

// Children of ModuleList / Sequential modules, outermost only (Note [Blocks and recomputation]).
void find_blocks(const Module& m, std::vector<std::string>& out) {
  const bool is_list = m.type_name() == "ModuleList" || m.type_name() == "Sequential";
  for (const auto& [name, child] : m.named_children()) {
    if (is_list) {
      out.push_back(child->fqn());
    } else {
      find_blocks(*child, out);
    }
  }
}

}  // namespace

int64_t TrainingStep::max_block_activation_bytes() const {
  int64_t best = 0;
  for (const StepBlock& b : blocks) best = std::max(best, b.activation_bytes);
  return best;
}

TrainingStep trace_training_step(Module& model, const TraceOptions& options) {
  SP_CHECK(options.batch >= 1, "trace_training_step: batch must be >= 1, got ", options.batch);
  SP_CHECK(options.seq >= 1, "trace_training_step: seq must be >= 1, got ", options.seq);
  model.assign_fqns();
  TrainingStep step;
  step.options = options;
  std::vector<std::string> block_names = options.block_fqns;
  if (block_names.empty()) {
    find_blocks(model, block_names);
  } else {
    for (const std::string& f : block_names) (void)model.get_submodule(f);  // throws if absent
  }
  const std::unordered_set<std::string_view> block_set(block_names.begin(), block_names.end());
  const Tensor input = options.input.defined()
                           ? options.input
                           : empty({options.batch, options.seq}, {DType::kInt64});
  StepRecorder rec(step, block_set, StepRecorder::expected_entries(block_names.size()));
  rec.set_dropout(options.dropout);
  rec.tensor_id(input, TensorRole::kInput);
  {
    TraceScope scope(&rec);
    Tensor out = model.call(input);
    if (options.loss && out.defined() && out.dim() >= 2 && is_floating(out.dtype())) {
      // Next-token loss over every position: logits [.., V] -> [N, V] against N int64 targets.
      const int64_t classes = out.sizes().back();
      const int64_t rows = classes == 0 ? 0 : out.numel() / classes;
      const Tensor targets = empty({rows}, {DType::kInt64});
      cross_entropy(reshape(out, {rows, classes}), targets);
    }
  }
  for (StepBlock& b : step.blocks) {
    if (b.end_op < b.first_op) b.end_op = b.first_op;  // a block still open on an error path
  }
  Deriver(step).run();
  return step;
}

namespace {
constexpr EnumName<RecomputePolicy> kRecomputeNames[] = {{"none", RecomputePolicy::kNone},
                                                         {"selective", RecomputePolicy::kSelective},
                                                         {"full", RecomputePolicy::kFull}};
constexpr EnumName<AttentionImpl> kAttentionNames[] = {{"flash", AttentionImpl::kFlash},
                                                       {"math", AttentionImpl::kMath}};
}  // namespace

std::string_view to_string(RecomputePolicy p) { return enum_name(p, kRecomputeNames); }
std::string_view to_string(AttentionImpl a) { return enum_name(a, kAttentionNames); }

RecomputePolicy parse_recompute_policy(std::string_view s) {
  return parse_enum_name(s, kRecomputeNames, "recompute policy");
}

AttentionImpl parse_attention_impl(std::string_view s) {
  return parse_enum_name(s, kAttentionNames, "attention implementation");
}

std::ostream& operator<<(std::ostream& os, const StepTotals& t) {
  return os << "StepTotals(ops=" << t.ops << ", forward_flops=" << t.forward_flops
            << ", backward_flops=" << t.backward_flops << ", recompute_flops=" << t.recompute_flops
            << ", parameters=" << t.parameters << ", activation_bytes=" << t.activation_bytes
            << ", peak_activation_bytes=" << t.peak_activation_bytes << ")";
}

void to_json(nlohmann::json& j, const StepTotals& t) {
  j = {{"ops", t.ops},
       {"forward_flops", t.forward_flops},
       {"forward_matmul_flops", t.forward_matmul_flops},
       {"backward_flops", t.backward_flops},
       {"backward_matmul_flops", t.backward_matmul_flops},
       {"recompute_flops", t.recompute_flops},
       {"forward_bytes", t.forward_bytes},
       {"backward_bytes", t.backward_bytes},
       {"parameters", t.parameters},
       {"activation_bytes", t.activation_bytes},
       {"activation_bytes_outside_blocks", t.activation_bytes_outside_blocks},
       {"peak_activation_bytes", t.peak_activation_bytes}};
}

void from_json(const nlohmann::json& j, StepTotals& t) {
  JsonFields f(j, "step totals");
  StepTotals out;
  out.ops = f.integer("ops", 0);
  out.forward_flops = f.number("forward_flops");
  out.forward_matmul_flops = f.number("forward_matmul_flops");
  out.backward_flops = f.number("backward_flops");
  out.backward_matmul_flops = f.number("backward_matmul_flops");
  out.recompute_flops = f.number("recompute_flops");
  out.forward_bytes = f.integer("forward_bytes", 0);
  out.backward_bytes = f.integer("backward_bytes", 0);
  out.parameters = f.integer("parameters", 0);
  out.activation_bytes = f.integer("activation_bytes", 0);
  out.activation_bytes_outside_blocks = f.integer("activation_bytes_outside_blocks", 0);
  out.peak_activation_bytes = f.integer("peak_activation_bytes", 0);
  f.done();
  t = out;
}

nlohmann::json summary_json(const TrainingStep& step) {
  const TraceOptions& o = step.options;
  nlohmann::json blocks = nlohmann::json::array();
  for (const StepBlock& b : step.blocks) {
    blocks.push_back({{"fqn", b.fqn},
                      {"type", b.type},
                      {"ops", b.end_op - b.first_op},
                      {"activation_bytes", b.activation_bytes},
                      {"flops", b.flops},
                      {"recompute_flops", b.recompute_flops}});
  }
  return {{"options",
           {{"batch", o.batch},
            {"seq", o.seq},
            {"recompute", to_string(o.recompute)},
            {"dropout", o.dropout},
            {"attention", to_string(o.attention)},
            {"loss", o.loss}}},
          {"totals", step.totals},
          {"max_block_activation_bytes", step.max_block_activation_bytes()},
          {"blocks", blocks}};
}

}  // namespace shardplan::tensor
