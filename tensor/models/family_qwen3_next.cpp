// qwen3_next (Qwen3-Next-80B-A3B): transformers' Qwen3NextConfig and modeling_qwen3_next.py. A
// hybrid stack: three of every four layers mix tokens with Gated DeltaNet linear attention
// ("linear_attn", tensor/models/gated_delta_net.h), the fourth with gated full attention
// ("self_attn": q_proj twice as wide, the second half a per-head output gate; q/k norms over
// head_dim; a quarter of head_dim rotated). Every layer's MLP is Qwen2-MoE's sparse block (router
// "gate" first, the fused experts, a shared expert scaled by sigmoid(shared_expert_gate(x))),
// dense where mlp_only_layers or decoder_sparse_step say (parse_qwen_moe). Norms are Gemma 3's
// (1 + weight) RMSNorm (Qwen3NextRMSNorm). Defaults where a file is silent are the config class's:
// head_dim 256, partial_rotary_factor 0.25, rms_norm_eps 1e-6, max positions 32768, linear
// attention of 16 key heads and 32 value heads of 128 channels with a 4-tap convolution, and a
// full-attention layer every full_attention_interval (4) layers unless layer_types lists them.
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/linear_attention_config.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen3NextFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Qwen3NextRMSNorm", dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6, .head_dim = 256});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_qwen_moe(f, c);
  c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size");
  f.boolean("norm_topk_prob", true);  // renormalized top-k weights: no shape or FLOP changes
  models::parse_linear_attention(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::qwen_moe_to_hf_json(c, j);
  j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  j["attention_bias"] = c.qkv_bias;
  models::linear_attention_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kQwen3NextFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .qk_norm = true,
                                       .output_gate = true,
                                       .moe = {.shared_gate = true}});
}

}  // namespace

// No init rules: Qwen3NextPreTrainedModel._init_weights draws A_log as log(uniform(0, 16)), a
// fill kernels/ does not make, so materialize refuses the family rather than fill it otherwise.
const ModelFamily kQwen3NextFamily{
    .model_type = "qwen3_next",
    .hf_class_prefix = "Qwen3Next",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kQwenMoeRenames,
    .moe = true,
    .experts_class = "Qwen3NextExperts",
    .linear_attention = true,
    .tp_plan = models::kLinearAttentionTpPlan,
};

}  // namespace shardplan::tensor
