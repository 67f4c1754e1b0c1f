// The family builders behind build_model (tensor/models/models.h); internal to tensor/models/.
//   ModulePtr m = models::build_gpt2(cfg, {.dtype = DType::kFloat16}, /*training=*/false);
#pragma once

#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// llama, mistral, mixtral, qwen2, gemma (tensor/models/llama.cpp).
ModulePtr build_llama_like(const ModelConfig& c, const TensorOptions& o, bool training);
// gpt2 (tensor/models/gpt2.cpp).
ModulePtr build_gpt2(const ModelConfig& c, const TensorOptions& o, bool training);
// gpt_neox (tensor/models/gpt_neox.cpp).
ModulePtr build_gpt_neox(const ModelConfig& c, const TensorOptions& o, bool training);

// The rotated width per head: int(head_dim * partial_rotary_factor), as transformers truncates.
inline int64_t rotary_dim(const ModelConfig& c) {
  return static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
}

}  // namespace shardplan::tensor::models
