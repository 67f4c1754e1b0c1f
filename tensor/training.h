// One training step of a Module traced on meta: the forward op graph with FLOPs, bytes and, per op,
// the tensors autograd saves for backward; backward and the Adam step derived from it; activation
// memory under recomputation none / selective / full, with dropout on or off.
//   TrainingStep st = trace_training_step(*model, {.batch = 1, .seq = 4096});
//   st.totals.model_flops();  st.totals.activation_bytes;  st.totals.peak_activation_bytes;
//
// Note [Saved tensors and activation memory]
// Each forward op saves what PyTorch's autograd saves for its backward (the rule table in
// training.cpp, one comment per row): inputs or outputs of the op, or extra tensors that are not
// op outputs (a dropout mask, layer-norm mean/rstd, flash attention's logsumexp). Saved tensors are
// counted by storage: views of one storage, or a tensor several ops save, count once, and a view
// keeps its whole storage alive (the qkv output of a fused projection, when q, k and v are saved).
// Only activations count: tensors produced by the traced ops, and the extra tensors. Parameters,
// buffers, model inputs and free tensors (position tables) are saved by reference and live anyway.
//
// Note [Blocks and recomputation]
// A block is a repeated layer: a child of a ModuleList or Sequential (the outermost such children),
// or the modules named in TraceOptions::block_fqns. Recomputation applies inside blocks:
//   none      - every saved tensor is kept until its backward.
//   selective - the attention core (Korthikanti et al. 2022 §5) is recomputed: the ops from the
//               first product of two activations (Q K^T) to the next one (scores x V), or one
//               scaled_dot_product_attention op. Tensors they produce and save are dropped; the
//               core's inputs (q, k, v) are kept. Recompute re-runs the core's forward.
//   full      - only the block's inputs are kept (Megatron's checkpointed layer); backward re-runs
//               the whole block's forward first.
// Ops outside blocks (embeddings, final norm, output layer, loss) are never recomputed, nor are
// ops of a no-grad region (Note [No-grad regions] in tensor/trace.h), which keep nothing.
//
// Note [Training FLOPs]
// Model FLOPs = forward + backward; backward of a matrix product is one product per operand that
// requires grad (2x forward when both do: the input gradient and the weight gradient), of any
// other op its forward FLOPs (pointwise: about as much work as forward). Hardware FLOPs add the
// recomputed forward work, and for flash attention the Q K^T its backward recomputes
// (FlashAttention stores no scores). This is the convention of Megatron-LM (Narayanan et al. 2021,
// Appendix) and Korthikanti et al. 2022 (Appendix A): 72 B L s h^2 (1 + s/6h + V/12hL) model FLOPs
// for GPT, 96 B L s h^2 (...) with full recomputation.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/dim_vector.h"
#include "tensor/dtype.h"
#include "tensor/op_graph.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {

class Module;

enum class RecomputePolicy : uint8_t { kNone, kSelective, kFull };

// What "selective" recomputes, which differs between stacks (Note [Selective recomputation] in
// training.cpp): Megatron-LM's attention core (Korthikanti et al. 2022 §4.2), or torchtitan's
// op-level policy that keeps every other matmul's output and the attention's and recomputes the
// rest.
enum class SelectiveRecompute : uint8_t { kAttentionCore, kEveryOtherMatmul };

// How scaled_dot_product_attention runs, which fixes what it saves.
enum class AttentionImpl : uint8_t {
  kFlash,  // FlashAttention / memory-efficient kernels: saves q, k, v, out and the logsumexp
  kMath,   // the math path: softmax(Q K^T) V with scores materialized (and their dropout)
};

struct TraceOptions {
  int64_t batch = 1;
  int64_t seq = 2048;
  RecomputePolicy recompute = RecomputePolicy::kNone;
  SelectiveRecompute selective = SelectiveRecompute::kAttentionCore;  // under kSelective
  // false: every dropout op of the model is the identity (no mask saved, no FLOPs), and attention
  // has no dropout. true: the model's dropout ops run, and scaled_dot_product_attention in kMath
  // mode drops its probabilities (the op event does not carry dropout_p: a model calling sdpa is
  // assumed to pass its attention dropout).
  bool dropout = true;
  AttentionImpl attention = AttentionImpl::kFlash;
  // Trace the loss: cross_entropy(logits.view(-1, V), targets) after the model's output.
  bool loss = true;
  // Model input; undefined: token ids [batch, seq] int64 on meta.
  Tensor input;
  // Blocks (Note [Blocks and recomputation]); empty: the children of ModuleLists found in the
  // model.
  std::vector<std::string> block_fqns;
};

// One saved-for-backward item of an op.
struct SavedTensor {
  int64_t buffer = -1;    // index into TrainingStep::buffers
  int64_t tensor = -1;    // the StepTensor saved, or -1 for an extra tensor (mask, statistics)
  std::string_view what;  // "input", "weight", "output", "mask", "mean_rstd", "logsumexp", ...
};

// A storage as the step sees it: views of one storage share it (Note [Saved tensors and ...]).
struct StepBuffer {
  int64_t bytes = 0;           // the storage's size (an extra tensor's size)
  int64_t producer = -1;       // op that created it, -1 for tensors from outside the trace
  bool is_activation = false;  // produced by a traced op, or an extra saved tensor
  bool retained = false;       // kept from forward to backward under the policy
  int block = -1;              // block the retained bytes are attributed to (first op saving it)
};

// A tensor of the step: an edge from its producer op to each consumer op.
struct StepTensor {
  DimVector sizes;
  DType dtype = DType::kFloat32;
  int64_t nbytes = 0;   // numel * itemsize
  int64_t buffer = -1;  // its storage
  int64_t producer = -1;
  TensorRole role = TensorRole::kOther;
  bool requires_grad = false;
};

struct TrainingOp {
  std::string op;  // PyTorch's op name
  int call = -1;   // innermost module call (index into TrainingStep::calls), -1 outside
  int block = -1;  // index into TrainingStep::blocks, -1 outside every block
  std::vector<int64_t> inputs;   // StepTensor ids
  std::vector<int64_t> outputs;  // StepTensor ids
  std::vector<SavedTensor> saved;
  double flops = 0;         // forward, everything
  double matmul_flops = 0;  // forward, matrix products only
  double backward_flops = 0;
  double backward_matmul_flops = 0;
  double recompute_flops = 0;  // forward work re-run for backward (policy, flash attention)
  int64_t bytes_read = 0;      // forward
  int64_t bytes_written = 0;
  int64_t backward_bytes_read = 0;     // output gradients + saved tensors
  int64_t backward_bytes_written = 0;  // gradients of the inputs that require grad
  bool is_view = false;
  bool skipped = false;     // a dropout with TraceOptions::dropout == false: the identity
  bool recomputed = false;  // its forward runs again before its backward
  bool rule_known = true;   // false: no rule for this op; it saves every floating input
  // Traced in a no-grad region (Note [No-grad regions] in tensor/trace.h): it saves nothing, has
  // no backward and is never recomputed.
  bool no_grad = false;
};

// One module call of the trace (the same as OpGraph's ModuleCall).
struct StepCall {
  std::string fqn;
  std::string type;
  int parent = -1;
  int64_t first_op = 0;
  int64_t end_op = 0;
};

struct StepBlock {
  std::string fqn;  // "layers.3"
  std::string type;
  int64_t first_op = 0;
  int64_t end_op = 0;
  int64_t activation_bytes = 0;  // retained bytes attributed to the block
  double flops = 0;              // forward
  double recompute_flops = 0;
};

struct StepTotals {
  int64_t ops = 0;  // non-view, non-skipped forward ops
  double forward_flops = 0;
  double forward_matmul_flops = 0;
  double backward_flops = 0;
  double backward_matmul_flops = 0;
  double recompute_flops = 0;
  int64_t forward_bytes = 0;  // read + written
  int64_t backward_bytes = 0;
  int64_t parameters = 0;  // trainable elements, ties and views counted once
  // Saved for backward at the end of forward, all blocks and the rest (Note [Saved tensors ...]).
  int64_t activation_bytes = 0;
  int64_t activation_bytes_outside_blocks = 0;
  // Most activation bytes alive at once across forward and backward: retained tensors, the
  // forward temporaries still to be read, the gradients in flight and a recomputed block's
  // tensors. Model states (weights, gradients, optimizer) are not included.
  int64_t peak_activation_bytes = 0;

  double model_flops() const { return forward_flops + backward_flops; }
  double hardware_flops() const { return forward_flops + backward_flops + recompute_flops; }
  bool operator==(const StepTotals&) const = default;
};

struct TrainingStep {
  TraceOptions options;
  std::vector<TrainingOp> ops;  // forward order
  std::vector<StepTensor> tensors;
  std::vector<StepBuffer> buffers;
  std::vector<StepCall> calls;
  std::vector<StepBlock> blocks;
  StepTotals totals;

  // The largest activation_bytes of any block (0 without blocks).
  int64_t max_block_activation_bytes() const;
};

// Runs model.call(input) (or forward plus loss) on meta under a trace and derives the step.
// Throws shardplan::Error on bad options (batch or seq < 1, a block FQN that is not a module)
// or when the model's forward rejects the input.
TrainingStep trace_training_step(Module& model, const TraceOptions& options = {});

std::string_view to_string(RecomputePolicy p);
std::string_view to_string(AttentionImpl a);
// "none" | "selective" | "full"; "flash" | "math". Throws shardplan::Error naming the value.
RecomputePolicy parse_recompute_policy(std::string_view s);
AttentionImpl parse_attention_impl(std::string_view s);

std::ostream& operator<<(std::ostream& os, const StepTotals& t);
void to_json(nlohmann::json& j, const StepTotals& t);
void from_json(const nlohmann::json& j, StepTotals& t);
// Options, totals and blocks (not the per-op records).
nlohmann::json summary_json(const TrainingStep& step);

}  // namespace shardplan::tensor
