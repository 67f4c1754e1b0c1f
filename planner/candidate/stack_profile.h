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
// TransformerEngine fuses more. compute_efficiency scales the GEMM and memory-bound rates (the
// fused attention: Note [Attention kernels]) by that fraction, one number fitted per stack on the
// calibration rows its source names (docs/cost-model.md §8.5); the default stack, megatron, is 1
// (the cluster files were calibrated on Megatron-LM runs). overlap_interference is Note [Overlap
// interference]'s share. The capability fields restrict the search: ZeRO stages, interleaved
// pipelines, context and expert parallelism, whole experts (etp 1).
//
// Note [Attention kernels]
// The fused attention is one long kernel per layer, so a stack's launch gaps and unfused
// elementwise ops (compute_efficiency) do not slow it; which kernel the stack calls does. The
// cluster files' attention prices are those of the Hopper-native fused kernels (cuDNN's, which
// TransformerEngine calls, and PyTorch's SDPA from 2.9 on on Hopper: measured on an H100 and an
// H200, docs/cost-model.md §8.6). SDPA's flash backend, which PyTorch 2.5.1 to 2.8 preferred, is
// FlashAttention-2, written for Ampere's tensor-core instructions: on an H100 SXM (head dim 128,
// 16K tokens) it runs the causal forward at 335 TFLOP/s where cuDNN runs 539, and the backward at
// 322 where cuDNN runs 516 (Shah et al. 2024, FlashAttention-3, Figures 5 and 6): 0.62 of the fused
// rate, forward and backward alike. On Ampere it is the fast kernel (rate 1). Blackwell has no
// published FlashAttention-2 figure; it keeps Hopper's ratio (assumed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/cluster.h"
#include "planner/candidate/parallel_config.h"

namespace shardplan::planner {

enum class AttentionKernel {
  kFused,   // cuDNN / TransformerEngine / FlashAttention-3: the cluster file's rate
  kFlash2,  // FlashAttention-2 (PyTorch SDPA's flash backend)
};

// Note [Attention kernels]: the fraction of the cluster file's attention rate that `k` reaches on
// `arch`.
double attention_kernel_rate(AttentionKernel k, collectives::Arch arch);

struct StackProfile {
  std::string name = "megatron";
  std::string description;
  double compute_efficiency = 1;
  // Of the GEMM ceiling alone (matrix products, the attention's included): the GEMM library and
  // clocks of a stack's era, where the cluster file states today's hardware ceiling (optional, 1).
  double gemm_efficiency = 1;
  double overlap_interference = 0.15;
  AttentionKernel attention_kernel = AttentionKernel::kFused;
  // Note [Ring attention steps] (planner/cost/block_cost.h): the rate of the context-parallel
  // ring's steps against other ranks' keys, of the fused local attention's (optional, 1).
  double ring_attention_rate = 1;
  // What --recompute selective means in this stack (Note [Selective recomputation] in
  // tensor/training.cpp).
  tensor::SelectiveRecompute selective = tensor::SelectiveRecompute::kAttentionCore;
  // Its FP8 recipe (Note [FP8 GEMMs]): current scaling's amax pass; weights cast every
  // micro-batch.
  bool fp8_current_scaling = true;
  bool fp8_weight_casts = false;
  // The data-parallel gradient reduction in fp32 whatever the working dtype (torchtitan's FSDP2
  // reduce_dtype; optional, false: in the recipe's gradient dtype).
  bool fp32_gradient_reduce = false;
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
