// One transformer block (and the embedding and output layer around it) traced once and priced on
// one rank for any tensor-, sequence- and context-parallel split: the planner's cached unit
// (docs/cost-model.md §8 "The step model").
//   TracedModel t = trace_one_block(cfg, {.micro_batch = 1, .seq = 2048});
//   RankWork w = rank_work(t, compute_model(cluster, Precision::kBf16), {.tp = 8});
//   w.block.forward_s; w.block.retained_bytes; w.block.tp_forward;   // one block, one micro-batch
//
// Note [Tracing one block at full width]
// The model is built with one layer and traced once per (micro-batch, local sequence,
// recomputation, attention implementation). The tensor-parallel split is then applied to the
// trace by dataflow, from the family's TP plan (the same rules parallelize_module applies):
// outputs of column-parallel modules are sharded, an op with a sharded input produces sharded
// outputs, and a row-parallel module's output is reduced back to full width. A sharded op does
// 1 / tp of the work (a column-parallel GEMM has N / tp columns, a row-parallel one K / tp, any
// other product 1 / tp of its batch of heads); the rest (norms, residual adds, dropout outside
// the split regions) is replicated work, or 1 / tp of it under sequence parallelism. Tensor-
// parallel traffic follows Megatron-LM's f and g operators (Shoeybi et al. 2019 §3; Korthikanti
// et al. 2022 §4.2.2): each row-parallel output is all-reduced in forward (reduce-scattered under
// SP) and each distinct input of a column-parallel region is all-reduced in backward (under SP:
// all-gathered in forward and reduce-scattered in backward), S being the full activation.
// Under SP the gathered input of a column-parallel region is not kept (Korthikanti et al. 2022
// §4.2.2 count only the 1 / t shard), so backward all-gathers it once more for the weight
// gradient. Megatron-LM issues that gather asynchronously beside the input-gradient GEMM, but
// the measured layer says it is not free: in Korthikanti et al.'s Table 4 (22B, t = 8) sequence
// parallelism saves 0.5 ms of a 7.7 ms forward and only 0.1 ms of an 11.9 ms backward, although
// the backward's norms and dropouts shrink by as much as the forward's. The planner prices it
// exposed, like every tensor-parallel collective (docs/cost-model.md §8.2).
// Context parallelism traces s / cp tokens per rank; the attention core (the fused attention op,
// or the products and the softmax over [s, s] scores) then sees all s keys: cp times the traced
// work, with the keys and values passed around the ring.
//
// Note [Ring attention steps]
// Under context parallelism a rank computes its attention in cp steps: against its own keys
// (the causal diagonal block, 1 / cp of its work once the chunks are load-balanced) and then
// against each other rank's keys as they come around the ring. The model prices all of it as one
// fused kernel over all keys, at the fused kernel's rate, and the stack says how fast its ring
// steps run against that: ring_attention_rate (configs/stacks/*.json, default 1). PyTorch's ring
// (torch.distributed.tensor.experimental.context_parallel, which torchtitan calls) runs each step
// as its own SDPA call on half blocks, merges the partial outputs in fp32, copies keys and values
// into one buffer per step and passes the key and value gradients around a second fp32 ring. In
// torchtitan's published Llama 3.1 8B runs on 8 H100 (docs/cost-model.md §8.5) the rows at cp 2,
// 4 and 8 move the same 32K tokens per rank through the same dense layers, and their throughput
// implies the steps against other ranks' keys run at about 0.6 of the rate of the rank's own: the
// stack file's fit on the cp 2 and cp 4 rows, which the cp 8 row, left out, confirms within 9 %.
// The communication those steps add is small beside it (keys and values of 32K tokens cross
// NVLink in about a millisecond against tens of milliseconds of attention), so the rate is
// kernel and merge time, not hidden communication; the model keeps pricing the ring's traffic
// on its own (hidden behind the attention core, what sticks out exposed).
//
// Note [Math attention traffic]
// The traced attention op counts only q, k, v and its output. The math implementation (Megatron-
// LM's fused scale-mask-softmax, PyTorch's math path) also writes the [s, s] scores of every head
// to HBM and reads them back: Q K^T writes them (2 bytes each in 16-bit), softmax reads and writes
// them (4), dropout reads and writes them and writes a 1-byte mask (5, only with attention
// dropout), scores x V reads them (2): 13 bytes per score element in forward, 8 without dropout;
// backward moves about twice that (each step's gradient is read and written, and the saved
// probabilities and mask are read). FlashAttention keeps the scores on chip: none of this.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/collective_call.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/training.h"

namespace shardplan::planner {

struct TraceKey {
  int64_t micro_batch = 1;
  int64_t seq = 1;  // tokens per rank: the sequence / cp
  tensor::RecomputePolicy recompute = tensor::RecomputePolicy::kNone;
  // What kSelective recomputes (the stack's choice, Note [Stack profiles]).
  tensor::SelectiveRecompute selective = tensor::SelectiveRecompute::kAttentionCore;
  tensor::AttentionImpl attention = tensor::AttentionImpl::kFlash;
  tensor::DType dtype = tensor::DType::kBFloat16;  // weights and activations
  // Routing imbalance (--moe-imbalance): the busiest expert's tokens over the balanced load.
  // The routed experts' GEMMs and the token all-to-all of the rank holding it scale by it, and
  // the step waits for that rank (1: the force-balanced routing of published benchmarks).
  double moe_imbalance = 1;
  bool operator==(const TraceKey&) const = default;
};

// Where an op sits: the embedding before the first block, the block, or the output layer and
// loss after it.
enum class Part : uint8_t { kEmbedding, kBlock, kHead };
inline constexpr int kParts = 3;

enum class OpSplit : uint8_t {
  kReplicated,  // full work on every TP rank (1 / tp under sequence parallelism)
  kColumn,      // a column-parallel GEMM: N / tp
  kRow,         // a row-parallel GEMM (or a vocabulary-parallel embedding): K / tp
  kSharded,     // reads a sharded activation: 1 / tp of the work
};

struct TracedModel {
  tensor::TrainingStep step;
  std::vector<Part> part;      // per op
  std::vector<OpSplit> split;  // per op
  std::vector<bool> score_op;  // per op: attention core work, scaled by cp
  std::vector<bool> expert_op;  // per op: the routed experts' work, scaled by moe_imbalance
  double moe_imbalance = 1;
  // Tensors crossing TP boundaries, per part: outputs of row-parallel modules, and the distinct
  // inputs of column-parallel regions.
  std::vector<int64_t> row_outputs[kParts];
  std::vector<int64_t> region_inputs[kParts];
  // Per step tensor: a row output or region input of the routed experts (their TP collectives).
  std::vector<bool> expert_boundary;
  // Per step tensor: a row output or region input of an op traced in a no-grad region (Note
  // [No-grad regions] in tensor/trace.h): its forward collective only, no gradient to reduce.
  std::vector<bool> forward_only;
  int64_t kv_bytes = 0;            // keys and values of one block's attention (full width)
  // The keys a query of the block attends at most (the kind's sliding window or chunk), 0: all.
  int64_t attention_window = 0;
  bool sliding = false;            // a sliding window (a band), not a chunk (a causal square)
  int64_t moe_dispatch_bytes = 0;  // tokens x top-k x hidden of one block's routed experts
  int64_t hidden_size = 0;
  // Note [Math attention traffic]: bytes per score element the unfused attention moves.
  double score_bytes_forward = 0;
  tensor::AttentionImpl attention = tensor::AttentionImpl::kFlash;
  tensor::DType dtype = tensor::DType::kBFloat16;  // of the weights and activations (TraceKey)
};

// Traces `cfg` with one layer of kind `kind` (tensor/models/layer_kinds.h; Note [Tracing one block
// at full width]); without a kind, the kind of its first layer. Throws shardplan::Error when the
// model cannot be traced at these sizes.
TracedModel trace_one_block(const tensor::ModelConfig& cfg, const tensor::LayerKind& kind,
                            const TraceKey& key);
TracedModel trace_one_block(const tensor::ModelConfig& cfg, const TraceKey& key);

// Whether op i of `t` is an attention whose keys the layer's window, chunk or top-k bound (not
// the lightning indexer's scoring, which reads every earlier key: Note [Lightning indexer trace]
// in tensor/models/latent_attention.h).
bool windowed_attention(const TracedModel& t, size_t i);
// Whether op i of `t` is the lightning indexer's scoring (Note [Lightning indexer trace]).
bool indexer_attention(const TracedModel& t, size_t i);

struct RankSplit {
  int64_t tp = 1;
  bool sequence_parallel = false;
  int64_t cp = 1;
  // Whole experts (etp = 1 < tp, Note [Expert fold] in parallel_dims.h): the tp ranks split the
  // routed experts' tokens, not their weights, so the experts' GEMMs keep their full width, their
  // tensor-parallel collectives vanish, and each rank dispatches 1 / tp of the tokens.
  bool whole_experts = false;
  // Expert parallelism: a rank runs E / ep of a layer's experts, each on the tokens of ep ranks, so
  // its grouped GEMMs have ep times the rows of the traced ones on 1 / ep of the batch (the same
  // work, in larger and more efficient GEMMs).
  int64_t ep = 1;
};

// One collective a part issues per micro-batch: S bytes as nccl-tests counts them.
struct CommItem {
  collectives::CollectiveKind kind = collectives::CollectiveKind::kAllReduce;
  int64_t bytes = 0;
};

struct PartWork {
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;
  double attention_s = 0;        // forward + backward of the attention core (CP overlaps it)
  int64_t retained_bytes = 0;    // saved from forward to backward under the policy
  int64_t activation_bytes = 0;  // every activation the forward makes (a recomputed block's)
  std::vector<CommItem> tp_forward;
  std::vector<CommItem> tp_backward;
};

struct RankWork {
  PartWork parts[kParts];
  const PartWork& embedding() const { return parts[0]; }
  const PartWork& block() const { return parts[1]; }
  const PartWork& head() const { return parts[2]; }
  int64_t cp_kv_bytes = 0;        // S of the ring's key/value all-gather per block, per direction
  int64_t ep_dispatch_bytes = 0;  // S of one all-to-all (dispatch or combine) per block
};

// The GEMM one rank runs for matrix-product op `i` of `t` under `split` (its 1 / tp of N or K,
// the sequence-parallel rows, the experts it holds): the shape rank_work prices and `rehearse`
// times (planner/materialize/layer_gemms.h).
GemmShape local_gemm_shape(const TracedModel& t, size_t i, const RankSplit& split);

// The work of one rank for one micro-batch under `split`.
RankWork rank_work(const TracedModel& t, const ComputeModel& a, const RankSplit& split);

}  // namespace shardplan::planner
