// The largest inputs shardplan takes, in one place (docs/user-guide.md "Limits"): beyond them an
// input is refused with one line naming the value and the limit (exit 2), so that no value a user
// can type makes the tool run for minutes or exhaust the machine's memory. Each bound sits well
// above what real training jobs and models need, and low enough that work and memory at the bound
// stay within a few seconds and a few hundred MB on a laptop.
//   SP_CHECK(gpus <= kMaxRanks, "--gpus ", gpus, ", expected at most ", kMaxRanks, ...);
#pragma once

#include <cstdint>

namespace shardplan {

// Ranks (GPUs) of one job, of one collective's group and of a cluster sized for a job: 2^20, about
// five times the largest GPU clusters announced for 2026 (xAI's Colossus 2 and the first Stargate
// site are planned at 200,000 to 500,000 GPUs). `shard` summarises larger meshes by class
// (mesh/shard_classes.h) and has its own, higher bound.
inline constexpr int64_t kMaxRanks = int64_t{1} << 20;

// Transformer layers of a model (num_hidden_layers): real models have at most 128 (Llama 3.1 405B
// has 126); building, tracing and placing a 1,024-layer model takes under a second.
inline constexpr int64_t kMaxLayers = 1024;

// Routed experts of a whole model (num_hidden_layers x num_local_experts): a layer's experts are
// two tensors whatever their number (tensor/layers.h GroupedExperts), so the bound only keeps the
// product far from overflow; Kimi K2 has 23,040 (384 x 60).
inline constexpr int64_t kMaxExpertMlps = int64_t{1} << 20;

// Hybrid layers of a model with shared transformer blocks (Zamba2, ModelConfig::num_mem_blocks):
// each of them builds a block with an adapter slot per hybrid layer, as transformers does, so the
// modules grow with the square of the count (128: 16,384 slots a list); Zamba2-7B has 13.
inline constexpr int64_t kMaxHybridLayers = 128;

// Bytes of a JSON input (plan file, config.json, cluster file, tensor description, safetensors
// index, nccl-tests log): a plan for a 1,024-layer model is under 1 MB, the largest
// model.safetensors.index.json on the Hugging Face hub about 10 MB.
inline constexpr int64_t kMaxTextFileBytes = int64_t{64} << 20;

// A model's or cluster's name as a plan records it (a configs/ name or a path): PATH_MAX on
// Linux. A longer one is no name, and would be echoed into every line that names the model.
inline constexpr int64_t kMaxNameBytes = 4096;

}  // namespace shardplan
