// The time and memory of one training step of one configuration, from the cached block work
// (block_cost.h) and the links of the candidate's mesh dims (docs/cost-model.md §8 "The step
// model"). The search calls evaluate() for every candidate; reports ask for the bill.
//   StepContext ctx = ...;                      // model, cluster, setup, compute model
//   RankWork work = rank_work(trace_one_block(model, {...}), ctx.compute, {.tp = 8});
//   Bill bill;
//   StepResult r = evaluate(ctx, config, work, links, layer_parameters, &bill);
//   r.step_time_s;                               // == the sum of time_parts(bill)
//   r.memory_bytes; bill.collectives[0].exposed_s;
//
// Note [Partial recomputation]
// Full recomputation of only the first N layers of each model chunk (Megatron-LM's
// --recompute-granularity full --recompute-method block --recompute-num-layers N): those layers
// keep only their input and re-run their forward in backward, the others keep every activation
// and run once. A stage of n layers in v chunks recomputes sum over its chunks of min(N, chunk)
// of them; its time and retained bytes are that mix of the two traced blocks. Recomputing a layer
// only adds time and only saves memory, so the search takes, for each candidate that fits with
// every layer recomputed, the smallest N that still fits (docs/cost-model.md §8.3).
//
// Note [Step time]
// A pipeline stage runs each micro-batch's forward and backward through its layers: the traced
// block times L_stage, the tensor-parallel collectives (exposed: they sit between dependent
// GEMMs), the context-parallel ring (hidden behind the attention core, the rest exposed), expert
// all-to-alls (exposed), FSDP gathers and reduce-scatters (prefetched: exposed only beyond the
// compute they overlap) and the point-to-point sends to the next stage. The slowest stage sets
// the pace: T_pipe = (m + (p - 1) / v) t_stage (Narayanan et al. 2021 §2.2), the layers split so
// that the stages' times balance (Note [Stage partition]). After the last
// backward the data-parallel gradient reduction finishes (it overlaps the last micro-batch's
// backward except its last bucket), ZeRO-1/2 gather the updated parameters (overlapping the next
// step's first forward except one layer's worth) and the optimizer streams its states once
// through HBM.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/topology.h"
#include "planner/candidate/parallel_config.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/model_state_memory.h"
#include "planner/cost/stage_partition.h"
#include "tensor/models/layer_kinds.h"

namespace shardplan::planner {

// Bytes the allocator, the CUDA context and library workspaces take beyond the tensors: a fixed
// part per GPU and a fraction of the rest (docs/cost-model.md §8.3).
inline constexpr int64_t kGpuContextBytes = int64_t{2} << 30;
inline constexpr double kAllocatorOverhead = 0.05;

// Note [Overlap interference]
// A collective hidden behind compute is not free: its kernels run on SMs the compute then lacks
// (NCCL gives each channel a thread block, one SM) and move its bytes through the same HBM. The
// compute it overlaps is priced kOverlapInterference of the hidden collective's seconds longer.
// 0.15 is the share of SMs that DeepSeek-V3's training gave its overlapped communication: 20 of
// the H800's 132 (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" §3.2.2); NCCL's own default
// on Hopper, up to 32 channels for NVLink rings, takes more (docs/cost-model.md §8.3). Applied to
// the hidden part of FSDP gathers and reduce-scatters, the context-parallel ring, and the
// data-parallel gradient reduction and parameter gather.
// The default; a stack profile states its own (StepContext::overlap_interference).
inline constexpr double kOverlapInterference = 0.15;

// Note [Stack of layer kinds]
// A model is an ordered stack of layer kinds (tensor/models/layer_kinds.h) between its embedding
// and its output layer. The search traces one layer of each kind and prices each kind's layer for
// a candidate; a stage's time, parameters and saved activations are then its layers' counts per
// kind times each kind's price, so one stage of DeepSeek-V3 may hold dense and MoE layers. A
// uniform model is the one-kind case, priced by the same sums (n x the layer). The layers are
// split into stages as Note [Stage partition] says for a uniform model; for a stack the first and
// last stages' counts are searched around that split taken with the average layer, the middle
// stages sharing the rest evenly, which is the split Megatron-LM can express
// (docs/cost-model.md §8.3). Every stage is then priced, not only the ends and the widest middle.
// DeepSeek-V4 reaches six (sliding, CSA and HCA attention, each with hashed or top-k routing).
inline constexpr int kMaxLayerKinds = 8;

// Which kind each layer is, with prefix counts for a stage's layers by kind.
struct StackLayout {
  int kinds = 1;
  std::array<bool, kMaxLayerKinds> moe{};         // kinds that route tokens to experts
  std::array<std::string, kMaxLayerKinds> names;  // "dense", "moe": the bill's labels
  // prefix[i][k]: layers of kind k among the first i (empty for a uniform stack).
  std::vector<std::array<int32_t, kMaxLayerKinds>> prefix;
  std::vector<int32_t> kind_of_layer;  // empty for a uniform stack
  // Distinct for every layout `of` makes in the process: memos of per-stack results key on it.
  uint64_t serial = 0;
  // Multi-token prediction (ModelConfig::mtp_layers, DeepSeek-V3 §2.2): each module one more layer
  // of the last layer's kind on the last stage, and one more pass of the shared output layer
  // (Note [Multi-token prediction] in step_model.cpp). A stack with them is never uniform.
  int64_t mtp_layers = 0;
  int32_t mtp_kind = 0;
  bool uniform() const { return kinds == 1 && mtp_layers == 0; }
  // Throws shardplan::Error when the model has more kinds than the step model prices.
  static StackLayout of(const tensor::LayerStack& s, int64_t mtp_layers = 0);
};

// Everything about the job that does not change between candidates.
struct StepContext {
  int64_t layers = 1;
  int64_t hidden = 1;  // the width passed between stages: hidden_size (x hc_mult or AltUp streams)
  TrainingSetup setup;
  ComputeModel compute;
  MixedPrecision recipe = MixedPrecision::adam_16bit();
  // Bytes per gradient element the data-parallel reduction moves (all-reduce, reduce-scatter):
  // the recipe's gradients, or fp32 where the stack reduces in fp32 (StackProfile::
  // fp32_gradient_reduce). Memory keeps the recipe's.
  int64_t gradient_reduce_bytes = 2;
  int64_t activation_itemsize = 2;
  double memory_capacity_bytes = 0;
  // Kept free below the capacity (PlannerOptions::memory_headroom_bytes): a plan fits when its
  // memory is at most memory_budget().
  double memory_headroom_bytes = 0;
  double memory_budget() const { return memory_capacity_bytes - memory_headroom_bytes; }
  int64_t context_bytes = kGpuContextBytes;  // 0 on a CPU
  bool moe = false;                          // some layer routes tokens to experts
  StackLayout stack;
  double overlap_interference = kOverlapInterference;  // Note [Overlap interference]
  // The stack overlaps the pipeline's sends with compute in interleaved schedules (Megatron-Core's
  // overlap_p2p_comm): they then cost only their interference.
  bool pp_overlap_interleaved = false;
};

// Parameters of one TP rank per layer (and the embedding and output layer), from which every
// pipeline split follows by sums.
struct LayerParameters {
  std::vector<int64_t> per_layer;  // layer i's local parameters; [0] and [L-1] hold the ends'
  // prefix[i]: the sum of per_layer[0..i) (set_prefix fills it; evaluate sums stages with it).
  std::vector<int64_t> prefix;
  void set_prefix() {
    prefix.assign(1, 0);
    for (int64_t n : per_layer) prefix.push_back(prefix.back() + n);
  }
  int64_t experts_per_layer = 0;  // local parameters of the routed experts of one layer
  // A stack of several kinds: one layer's local parameters per kind (the ends' extras apart), and
  // its routed experts' (0 for a dense kind). Unused for a uniform stack.
  std::array<int64_t, kMaxLayerKinds> kind_layer{};
  std::array<int64_t, kMaxLayerKinds> kind_experts{};
  // A tied embedding sits on the first and the last stage (Megatron keeps a copy on each); with
  // one stage it is one tensor, counted twice in per_layer.
  int64_t tied_twice = 0;
};

// One priced collective of the plan's step.
struct BillCollective {
  std::string what;  // "tp all_reduce (block forward)", "dp reduce_scatter (gradients)", ...
  collectives::CollectiveKind kind = collectives::CollectiveKind::kAllReduce;
  std::string mesh_dim;
  int64_t group_size = 1;
  int64_t bytes = 0;     // S of one call (nccl-tests' convention)
  int64_t calls = 0;     // per step, on one rank
  double seconds = 0;    // all calls, per step
  double exposed_s = 0;  // the part on the critical path
  bool operator==(const BillCollective&) const = default;
};

// One pipeline stage's model state per rank, in bytes.
struct StageStateBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t total() const { return parameters + gradients + optimizer; }
  bool operator==(const StageStateBytes&) const = default;
};

struct Bill {
  // Every stage's model state per rank (what materialize --state model allocates), first to last.
  std::vector<StageStateBytes> stage_states;
  // Resident bytes per rank on the stage that holds the most.
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t transient_bytes = 0;  // one block's working set, FSDP's gathered layers
  int64_t overhead_bytes = 0;   // context and allocator allowance
  int peak_stage = 0;
  // Step time parts, seconds: the terms step_time_s is summed from (Note [Step model parts] in
  // step_model.cpp), so they add up to it.
  double compute_s = 0;     // the pacing stage's forward, backward, recompute; all micro-batches
  double stage_comm_s = 0;  // its exposed collectives and pipeline sends; all micro-batches
  double bubble_s = 0;      // the pipeline's fill and drain
  double dp_sync_s = 0;     // data-parallel synchronization left after the last backward
  double optimizer_s = 0;
  // What hidden collectives slowed the compute they overlapped (Note [Overlap interference]):
  // the pacing stage's, all micro-batches, and the data-parallel synchronization's.
  double interference_s = 0;
  int pacing_stage = 0;  // the slowest pipeline stage, whose time sets the pace
  // The pacing stage's collectives and the data-parallel ones.
  std::vector<BillCollective> collectives;
};

// A bill's time parts by name ("compute", "stage_communication", "bubble", "data_parallel_sync",
// "optimizer", "overlap_interference"), in that order: what --json's bill.time_s, the text and
// --explain print.
struct BillTimePart {
  std::string_view name;
  double seconds = 0;
};
inline constexpr size_t kBillTimeParts = 6;
std::array<BillTimePart, kBillTimeParts> time_parts(const Bill& b);

struct StepResult {
  double step_time_s = 0;
  int64_t memory_bytes = 0;
  bool fits = false;
  StageEnds stages;  // the layer partition priced (Note [Stage partition])
};

// The links of each candidate mesh dim, indexed by MeshDim (Note [Candidate mesh dims]), and at
// kDataGroup those of the whole data-parallel group of a dense weight, the dp / e, e and cp dims
// together (dp x cp ranks, data_parallel_ranks): dense weights synchronize over it, routed experts
// over the dp mesh dim alone (the expert-data-parallel group, Note [Expert and dense data
// parallelism] in step_model.cpp). With ep = 1 and cp = 1 the two are one.
inline constexpr size_t kDataGroup = kMeshDims;
// kEpGroup: those of an expert-parallel group, the ranks a token all-to-all spans: the ep and cp
// mesh dims, and the tp one with whole experts (etp = 1, Note [Expert fold]).
inline constexpr size_t kEpGroup = kMeshDims + 1;
using DimLinks = std::array<collectives::GroupLinks, kMeshDims + 2>;

// Prices `c` with the work of one micro-batch `w` and the links `links`; fills `bill` when given.
// Seconds of the tensor-parallel collectives of one part for one micro-batch, forward and
// backward (the search caches them per work entry and link).
struct TpSeconds {
  double forward = 0;
  double backward = 0;
};
TpSeconds tp_seconds(const PartWork& p, const collectives::GroupLinks& tp_links);

// The work of one micro-batch for one layer kind of ctx.stack (the first kind's also gives the
// embedding and the output layer). `tp`, when given, holds tp_seconds of the work's parts on
// links[kTpDim] (the search's cache). Under partial recomputation (c.recompute_layers > 0)
// `stored_block` is the kind's block traced without recomputation, for the layers that keep their
// activations (Note [Partial recomputation]).
// At most the memory_bytes evaluate gives `c` (a few tenths of a percent under it, never above):
// the average stage's model states, ZeRO-sharded over the whole data-parallel group, plus the
// context and the allocator's share, from the parameter counts alone. The search skips pricing
// what this already puts far beyond the device (Note [Memory lower bound] in step_model.cpp).
double memory_lower_bound(const StepContext& ctx, const ParallelConfig& c,
                          const LayerParameters& params);

struct KindWork {
  const RankWork* work = nullptr;
  const std::array<TpSeconds, kParts>* tp = nullptr;
  const PartWork* stored_block = nullptr;
};
StepResult evaluate(const StepContext& ctx, const ParallelConfig& c,
                    std::span<const KindWork> kinds, const DimLinks& links,
                    const LayerParameters& params, Bill* bill = nullptr);
// A uniform stack: one kind.
StepResult evaluate(const StepContext& ctx, const ParallelConfig& c, const RankWork& w,
                    const DimLinks& links, const LayerParameters& params, Bill* bill = nullptr,
                    const std::array<TpSeconds, kParts>* tp = nullptr,
                    const PartWork* stored_block = nullptr);

}  // namespace shardplan::planner
