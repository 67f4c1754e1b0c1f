// deepseek_v3 (DeepSeek-V3, DeepSeek-R1, Kimi K2, and the DeepSeek-V2-Lite shape with q_lora_rank
// null): transformers' DeepseekV3Config (vocab 129280, max positions 4096, rms_norm_eps 1e-6,
// q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128,
// the first 3 layers dense, 256 routed experts and one shared expert) and
// modeling_deepseek_v3.py: multi-head latent attention (tensor/models/latent_attention.h) and
// DeepSeek's MoE block: the fused routed experts, the sigmoid router "gate" with grouped top-k (its
// e_score_correction_bias is a buffer in transformers: not counted, see docs/models.md), and the
// shared experts. The multi-token prediction modules (num_nextn_predict_layers) are not part of
// the transformers model; they are read into ModelConfig::mtp_layers.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kDeepseekV3Family;  // listed in family_registry.cpp
extern const ModelFamily kKimiK2Family;      // listed in family_registry.cpp
extern const ModelFamily kDeepseekV2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(f, c, {.moe = {.first_k_dense_replace = 3, .n_shared_experts = 1}});
  f.string("topk_method", "noaux_tc");
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  // Kimi K2's files name their own model_type, its classes are DeepSeek-V3's.
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = "DeepseekV3", .latent_attention = true, .moe = models::kDeepseekMoeStyle});
}

// DeepSeek-V2 (transformers' DeepseekV2Config: max positions 2048, no dense layers and two
// shared experts by default; modeling_deepseek_v2.py): the same latent attention and MoE block
// as DeepSeek-V3's, routed by softmax scores (greedy or group-limited top-k), so the router has
// no score-correction bias.
void parse_v2(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(f, c,
                         {.max_position_embeddings = 2048,
                          .moe = {.first_k_dense_replace = 0, .n_shared_experts = 2},
                          .scoring_func = "softmax"});
  const std::string method = f.string("topk_method", "greedy");
  if (method != "greedy" && method != "group_limited_greedy") {
    f.fail("topk_method", "\"" + method.substr(0, 40) +
                              "\", expected \"greedy\" or \"group_limited_greedy\" "
                              "(DeepseekV2Moe's top-k methods)");
  }
}

ModulePtr build_v2(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = "DeepseekV2",
       .latent_attention = true,
       .moe = {.router_first = false, .shared_name = "shared_experts"}});
}

}  // namespace

const ModelFamily kDeepseekV3Family{
    .model_type = "deepseek_v3",
    .hf_class_prefix = "DeepseekV3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = models::deepseek_to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "DeepseekV3Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kLatentMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kDeepseekV2Family = [] {
  ModelFamily f = kDeepseekV3Family;
  f.model_type = "deepseek_v2";
  f.hf_class_prefix = "DeepseekV2";
  f.parse = parse_v2;
  f.build = build_v2;
  f.experts_class = "DeepseekV2Experts";
  f.router_score_bias = ModelFamily::RouterBias::kNone;
  return f;
}();

// Kimi K2 (moonshotai/Kimi-K2-*): its config.json says model_type "kimi_k2" and names
// DeepseekV3ForCausalLM as its architecture; the model is DeepSeek-V3's with its own sizes, so
// the entry is DeepSeek-V3's under the other model_type (defined after it in this file).
const ModelFamily kKimiK2Family = [] {
  ModelFamily f = kDeepseekV3Family;
  f.model_type = "kimi_k2";
  return f;
}();

}  // namespace shardplan::tensor
