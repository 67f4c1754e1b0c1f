// One fully specified way to train a model: the parallel degrees (pp, dp, cp, tp, ep), ZeRO stage,
// micro-batch, recomputation, pipeline chunks, sequence parallelism and precision, with the checks
// that make it runnable for a model and a training setup (docs/user-guide.md "plan").
//   TrainingSetup setup{.gpus = 64, .seq = 4096, .global_batch = 256};
//   ParallelConfig c{.tp = 8, .pp = 2, .dp = 4, .micro_batch = 1};
//   check_parallel_config(model, setup, c);   // throws shardplan::Error naming the flag
//   micro_batches_per_step(setup, c);         // 256 / (1 * 4) = 64
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "planner/candidate/pipeline_schedule.h"
#include "tensor/models/model_config.h"
#include "tensor/training.h"

namespace shardplan::planner {

// bf16 everywhere, or fp8 GEMMs (at the GPU's FP8 peak) with the rest in bf16.
enum class Precision : uint8_t { kBf16, kFp8 };
std::string_view to_string(Precision p);
// "bf16", "fp8" (any case); throws shardplan::Error naming the accepted names.
Precision parse_precision(std::string_view s);

// The job: world size, sequence length in tokens, and sequences per optimizer step.
struct TrainingSetup {
  int64_t gpus = 1;
  int64_t seq = 1;
  int64_t global_batch = 1;
  bool operator==(const TrainingSetup&) const = default;
};

struct ParallelConfig {
  int64_t tp = 1;  // tensor parallel (Megatron column/row split of attention and MLP)
  int64_t pp = 1;  // pipeline stages
  int64_t dp = 1;  // data parallel (ZeRO shards over it and cp)
  int64_t cp = 1;  // context parallel (the sequence split, ring attention)
  int64_t ep = 1;  // expert parallel (MoE only): over cp then dp, or tp, cp and dp with etp = 1
  // Expert tensor parallelism (MoE only): the ranks that split each routed expert's weights, 1 or
  // tp; 0 follows tp (Megatron-Core's default). Note [Expert fold] in parallel_dims.h.
  int64_t etp = 0;
  int zero = 0;  // ZeRO stage 0-3 over dp x cp (3 = FSDP)
  int64_t micro_batch = 1;
  tensor::RecomputePolicy recompute = tensor::RecomputePolicy::kNone;
  // With full recomputation: the first N layers of each model chunk are recomputed, the rest keep
  // their activations (Note [Partial recomputation] in step_model.h); 0 recomputes every layer.
  int64_t recompute_layers = 0;
  int64_t virtual_stages = 1;  // model chunks per pipeline rank; > 1 is interleaved 1F1B
  bool sequence_parallel = false;
  Precision precision = Precision::kBf16;

  bool operator==(const ParallelConfig&) const = default;
};

// What the user fixed of a configuration; the search varies the rest (search/planner.h).
struct Pins {
  // recompute_layers: partial recomputation (implies full; ParallelConfig::recompute_layers).
  std::optional<int64_t> tp, pp, dp, cp, ep, etp, micro_batch, virtual_stages, recompute_layers;
  std::optional<int> zero;
  std::optional<tensor::RecomputePolicy> recompute;
  std::optional<bool> sequence_parallel;
};

// m: micro-batches each pipeline runs per step, global_batch / (micro_batch * dp).
int64_t micro_batches_per_step(const TrainingSetup& setup, const ParallelConfig& c);
// The pipeline the configuration runs: 1F1B, or interleaved 1F1B with v > 1.
PipelineShape pipeline_shape(const TrainingSetup& setup, const ParallelConfig& c);

// Checks the job on its own: --gpus in [1, kMaxRanks] (base/limits.h), --seq positive and
// within the model's positions, --global-batch positive, and tokens per step (global batch x seq)
// a count that fits int64. One line naming the flag on failure.
void check_training_setup(const tensor::ModelConfig& model, const TrainingSetup& setup);

// Checks that the setup fits the model (check_training_setup) and the configuration can run it; the
// first violation is a shardplan::Error of one line naming the flag, its value and what was
// expected:
//   setup: positive counts, seq within the model's positions;
//   degrees: tp * pp * dp * cp == gpus; tp divides the attention heads, and the key/value heads
//   or is a multiple of them (KV heads are then replicated); pp * virtual_stages at most the
//   layers; seq divisible by 2 * cp (causal load balancing gives each rank two chunks); ep > 1
//   only for a MoE model, dividing its experts; etp 1 or tp, and ep inside dp (etp = tp) or made
//   of whole tp groups and part of dp (etp = 1, cp = 1) (Note [Expert fold]);
//   batch: dp * micro_batch divides the global batch; the interleaved schedule's micro-batch count
//   a multiple of pp;
//   options: zero in 0..3; sequence parallelism only with tp > 1; recompute_layers in 0..layers,
//   above 0 only with full recomputation.
void check_parallel_config(const tensor::ModelConfig& model, const TrainingSetup& setup,
                           const ParallelConfig& c);

}  // namespace shardplan::planner
