// Model-state memory of data-parallel training: parameters, gradients and optimizer states for a
// mixed-precision recipe, and what one rank holds of them under ZeRO stages 0-3 (Rajbhandari et
// al., SC20, §3.1 and §5; docs/cost-model.md §3). The planner adds activations to it.
//   ModelStateMemory m = model_state_memory(7'500'000'000, MixedPrecision{}, 3, 64);
//   m.total_bytes();   // 1'875'000'000: 16 bytes per parameter over 64 ranks
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

namespace shardplan::planner {

// Bytes per parameter of each model-state component. The default is ZeRO's mixed-precision Adam:
// 16-bit working weights and gradients, fp32 master weights and two fp32 Adam moments, so
// K = master + moments = 12 (ZeRO §3.1).
struct MixedPrecision {
  int64_t param_bytes = 2;            // working (bf16/fp16) weights the forward reads
  int64_t grad_bytes = 2;             // gradients, as reduced across data-parallel ranks
  int64_t master_bytes = 4;           // fp32 master weights; 0 when the working weights are fp32
  int64_t optimizer_state_bytes = 8;  // Adam's exp_avg and exp_avg_sq, fp32 each

  // K of ZeRO: what the optimizer partitions at stage 1 (master weights and moments).
  int64_t optimizer_bytes() const { return master_bytes + optimizer_state_bytes; }

  // bf16 (or fp16) weights and gradients with an fp32 master copy and fp32 Adam moments (K = 12).
  static MixedPrecision adam_16bit() { return {}; }
  // Megatron-LM's bf16 recipe: bf16 weights, fp32 gradient buffer ("main grads"), fp32 master
  // weights and moments: 18 bytes per parameter (Megatron dist_optimizer.md).
  static MixedPrecision adam_bf16_fp32_grads() { return {2, 4, 4, 8}; }
  // Everything in fp32, no master copy: 16 bytes per parameter.
  static MixedPrecision adam_fp32() { return {4, 4, 0, 8}; }

  bool operator==(const MixedPrecision&) const = default;
};

// The recipe the planner prices and `materialize --state model` allocates: fp32 Adam on a CPU
// cluster (CPUs train in fp32), ZeRO's 16-bit mixed precision on accelerators.
MixedPrecision training_recipe(bool cpu);

// What one data-parallel rank holds, in bytes. ZeRO partitions flattened buffers into dp equal
// parts, padding the last (DeepSpeed pads to a multiple of dp), so a partitioned component is
// ceil(num_params / dp) elements per rank.
struct ModelStateMemory {
  uint64_t num_params = 0;
  int zero_stage = 0;  // 0 = plain data parallelism (DDP)
  int64_t dp = 1;
  uint64_t param_bytes = 0;      // working weights
  uint64_t grad_bytes = 0;       // gradients
  uint64_t optimizer_bytes = 0;  // master weights + optimizer moments

  uint64_t total_bytes() const;
  bool operator==(const ModelStateMemory&) const = default;
};

// Bytes per rank of `num_params` parameters trained with `precision` under ZeRO `zero_stage`
// (0: nothing partitioned; 1: optimizer states; 2: + gradients; 3: + parameters) over `dp`
// data-parallel ranks. Throws shardplan::Error for a stage outside 0-3, dp < 1, a negative byte
// count, or a total that overflows uint64.
ModelStateMemory model_state_memory(uint64_t num_params, const MixedPrecision& precision,
                                    int zero_stage, int64_t dp);

std::ostream& operator<<(std::ostream& os, const MixedPrecision& p);
std::ostream& operator<<(std::ostream& os, const ModelStateMemory& m);
void to_json(nlohmann::json& j, const MixedPrecision& p);
void from_json(const nlohmann::json& j, MixedPrecision& p);
void to_json(nlohmann::json& j, const ModelStateMemory& m);
void from_json(const nlohmann::json& j, ModelStateMemory& m);

}  // namespace shardplan::planner

template <>
struct std::hash<shardplan::planner::MixedPrecision> {
  size_t operator()(const shardplan::planner::MixedPrecision& p) const noexcept;
};
