// glm4_moe (GLM-4.5, GLM-4.5-Air): transformers' Glm4MoeConfig (vocab 151552, max positions
// 131072, rms_norm_eps 1e-5, partial_rotary_factor 0.5, attention_bias on q/k/v only, one dense
// layer first, one shared expert) and modeling_glm4_moe.py: grouped-query attention with optional
// per-head q/k RMSNorm (use_qk_norm) and DeepSeek-V3's MoE block: the fused routed experts, the
// sigmoid router "gate" (its e_score_correction_bias is a buffer, not a parameter) and the shared
// experts, in that order (parse_deepseek_moe reads the MoE fields).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGlm4MoeFamily;  // listed in family_registry.cpp

namespace {

bool qk_norm_of(const ModelConfig& c) { return c.qk_norm_per_head; }

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-5});
  c.qkv_bias = f.boolean("attention_bias", false);  // q, k, v; never o_proj
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);
  c.qk_norm_per_head = f.boolean("use_qk_norm", false);
  models::parse_deepseek_moe(f, c, {.first_k_dense_replace = 1, .n_shared_experts = 1});
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::deepseek_moe_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["use_qk_norm"] = c.qk_norm_per_head;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGlm4MoeFamily.hf_class_prefix,
                                       .qk_norm = qk_norm_of(c),
                                       .moe = models::kDeepseekMoeStyle});
}

}  // namespace

const ModelFamily kGlm4MoeFamily{
    .model_type = "glm4_moe",
    .hf_class_prefix = "Glm4Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "Glm4MoeExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
