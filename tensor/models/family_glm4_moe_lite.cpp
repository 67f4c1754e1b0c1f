// glm4_moe_lite (GLM-4.7-Flash): transformers' Glm4MoeLiteConfig (max positions 202752,
// rms_norm_eps 1e-5, q_lora_rank 768, qk_nope_head_dim 192, v_head_dim 256, one shared expert)
// and modular_glm4_moe_lite.py: DeepSeek-V3's latent attention (Glm4MoeLiteAttention is
// DeepseekV3Attention) and GLM-4.5's MoE block, which is DeepSeek's (experts, the sigmoid router
// "gate" with its score-correction buffer, shared_experts). Which layers are dense is
// mlp_layer_types alone: without it layer 0 is dense and the rest MoE, whatever
// first_k_dense_replace says (the config class has no such field), so a file whose
// first_k_dense_replace says otherwise is refused rather than built two ways.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kGlm4MoeLiteFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(
      f, c,
      {.max_position_embeddings = 202752,
       .rms_norm_eps = 1e-5,
       .moe = {.first_k_dense_replace = 1, .n_shared_experts = 1},
       .latent = {.q_lora_rank = 768, .qk_nope_head_dim = 192, .v_head_dim = 256}});
  f.string("topk_method", "noaux_tc");
  if (f.has("mlp_layer_types") && !f.is_null("mlp_layer_types")) {
    models::parse_mlp_layer_types(f, c);
  } else if (f.has("first_k_dense_replace") && f.integer("first_k_dense_replace") != 1) {
    f.fail("first_k_dense_replace",
           std::to_string(f.integer("first_k_dense_replace")) +
               ", but Glm4MoeLiteConfig has no such field: transformers builds layer 0 dense "
               "and the rest MoE; expected 1, or mlp_layer_types listing the layers");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::deepseek_to_hf_json(c, j);
  j["mlp_layer_types"] = models::mlp_layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGlm4MoeLiteFamily.hf_class_prefix,
                                       .latent_attention = true,
                                       .moe = models::kDeepseekMoeStyle});
}

}  // namespace

const ModelFamily kGlm4MoeLiteFamily{
    .model_type = "glm4_moe_lite",
    .hf_class_prefix = "Glm4MoeLite",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "Glm4MoeLiteExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kLatentMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
