// A software stack as data: what a training framework can run and how fast its kernels go,
// separately from the hardware (configs/stacks/*.json, every number with its source, like the
// cluster files). The search explores only what the stack can run; the cost model reads its
// efficiency and what its overlapped communication costs.
//   StackProfile s = load_stack(resolve_stack("torchtitan"));
//   s.compute_efficiency;                   // of the cluster file's priced compute rate
//   stack_refuses(s, config);               // "" or why the stack cannot run it
//
// Note [Stack profiles]
// The cluster file prices a kernel at the hardware's achievable rate (a measured GEMM ceiling, the
// HBM stream rate). A stack reaches some fraction of it: eager PyTorch launches unfused
// elementwise kernels and waits on the host, torch.compile fuses them, Megatron-Core with
// TransformerEngine fuses more. compute_efficiency scales every compute rate (GEMMs, attention,
// memory-bound ops) by that fraction, one number fitted per stack on the calibration rows its
// source names (docs/cost-model.md §8.5); the default stack, megatron, is 1 (the cluster files
// were calibrated on Megatron-LM runs). overlap_interference is Note [Overlap interference]'s
// share. The capability fields restrict the search: ZeRO stages, interleaved pipelines, context
// and expert parallelism, whole experts (etp 1).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "planner/candidate/parallel_config.h"

namespace shardplan::planner {

struct StackProfile {
  std::string name = "megatron";
  std::string description;
  double compute_efficiency = 1;
  double overlap_interference = 0.15;
  // What --recompute selective means in this stack (Note [Selective recomputation] in
  // tensor/training.cpp).
  tensor::SelectiveRecompute selective = tensor::SelectiveRecompute::kAttentionCore;
  // Its FP8 recipe (Note [FP8 GEMMs]): current scaling's amax pass; weights cast every
  // micro-batch.
  bool fp8_current_scaling = true;
  bool fp8_weight_casts = false;
  // Pipeline sends overlapped with compute in interleaved schedules.
  bool pp_overlap_interleaved = true;
  std::vector<int> zero_stages = {0, 1, 2, 3};
  bool interleaved_pipeline = true;
  bool context_parallel = true;
  bool expert_parallel = true;
  bool whole_experts = true;  // etp 1 < tp
  friend bool operator==(const StackProfile&, const StackProfile&) = default;
};

// The stack files' folder lookup (configs/stacks/<name>.json, or a path); throws
// shardplan::Error naming the value and the shipped stacks.
std::filesystem::path resolve_stack(std::string_view name_or_path);
// Reads and validates a stack file; throws shardplan::Error naming the file, the field and what
// was expected.
StackProfile load_stack(const std::filesystem::path& path);
StackProfile stack_from_json(const nlohmann::json& j, const std::string& origin);
// The shipped default (configs/stacks/megatron.json when present, else the built-in values, which
// equal that file's: tests/planner/candidate/stack_profile_test.cpp).
StackProfile default_stack();

// Whether `s` can run `c` (the search's test, no strings built), and why not ("" when it can):
// one line naming the stack and the flag.
bool stack_runs(const StackProfile& s, const ParallelConfig& c);
std::string stack_refuses(const StackProfile& s, const ParallelConfig& c);

}  // namespace shardplan::planner
