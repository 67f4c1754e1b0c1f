// qwen2_moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): transformers' Qwen2MoeConfig (vocab 151936, max
// positions 32768, rms_norm_eps 1e-6, rope_theta 10000) and transformers 5's
// modeling_qwen2_moe.py: Qwen2's attention (biased q/k/v) and, in the sparse layers, the router
// "gate", the fused experts, and a shared expert of shared_expert_intermediate_size whose output is
// scaled by sigmoid(shared_expert_gate(x)); dense layers as parse_qwen_moe says. With
// use_sliding_window, transformers 5's Qwen2MoeConfig slides the even layers below
// max_window_layers (slides_even_layers_below_max_window_layers).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen2MoeFamily;  // listed in family_registry.cpp

namespace {

// Qwen2MoeConfig's layer_types: layer i slides when i is even and below max_window_layers.
AttentionType slides_even_layers_below_max_window_layers(const ModelConfig& c, int64_t layer) {
  return c.sliding_window && layer % 2 == 0 && layer < c.max_window_layers ? AttentionType::kSliding
                                                                           : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6});
  c.qkv_bias = f.boolean("qkv_bias", true);  // Qwen2MoeAttention: q/k/v biased, o_proj not
  models::parse_qwen_sliding_window(f, c, slides_even_layers_below_max_window_layers);
  models::parse_qwen_moe(f, c);
  c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size");
  f.boolean("norm_topk_prob", false);  // renormalized top-k weights: no shape or FLOP changes
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::qwen_moe_to_hf_json(c, j);
  j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  j["qkv_bias"] = c.qkv_bias;
  models::qwen_sliding_window_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kQwen2MoeFamily.hf_class_prefix, .moe = {.shared_gate = true}});
}

}  // namespace

const ModelFamily kQwen2MoeFamily{
    .model_type = "qwen2_moe",
    .hf_class_prefix = "Qwen2Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kQwenMoeRenames,
    .moe = true,
    .experts_class = "Qwen2MoeExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
