// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2; DeepSeek-AI 2024, "DeepSeek-V2" §2.1):
// keys and values come from one low-rank latent per token, and only a narrow slice of each head
// is rotated. Internal to tensor/models/: the rotary decoder builds it for families whose
// RotaryDecoderStyle::latent_attention is set. Names and shapes are transformers 5's
// (modeling_deepseek_v3.py), h hidden, n heads, r = qk_rope_head_dim, d = qk_nope_head_dim,
// v = v_head_dim:
//   q_a_proj [q_lora_rank, h], q_a_layernorm [q_lora_rank], q_b_proj [n (d + r), q_lora_rank]
//     (or q_proj [n (d + r), h] when q_lora_rank is null)
//   kv_a_proj_with_mqa [kv_lora_rank + r, h], kv_a_layernorm [kv_lora_rank],
//   kv_b_proj [n (d + v), kv_lora_rank], o_proj [h, n v]
#pragma once

#include <memory>
#include <string>

#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// What a decoder layer calls: x [B, S, h] and the rotary tables of the rotated width.
class AttentionBlock : public Module {
 public:
  using Module::Module;
  virtual Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) = 0;
};

// The latent attention of `c` (c.kv_lora_rank > 0); norms by `make_norm` (width, eps, options).
std::shared_ptr<AttentionBlock> make_latent_attention(
    const ModelConfig& c, const std::string& prefix, const TensorOptions& o, bool training,
    ModulePtr (*make_norm)(int64_t dim, double eps, const TensorOptions& o));

}  // namespace shardplan::tensor::models
