// mistral4 (Mistral Small 4, 119B with 128 experts: the language model of its mistral3 file):
// transformers' Mistral4Config (max positions 1048576, rms_norm_eps 1e-6, q_lora_rank 1024,
// kv_lora_rank 256, qk_nope_head_dim 64, v_head_dim 128, no dense layers, one shared expert,
// pad_token_id 11; without rope_parameters, YaRN by 128 from 8,192 positions over a base of
// 1e4) and modular_mistral4.py: DeepSeek-V3's latent attention and MoE block (experts, router
// "gate", shared_experts, registered in that order), routed as DeepSeek-V2 routes: softmax scores
// with group-limited top-k, so the router holds its weight alone (no score-correction buffer).
// Its queries are scaled by position (Llama 4's attention temperature, llama_4_scaling_beta), an
// elementwise product that is not traced.
#include <nlohmann/json.hpp>
#include <string>

#include "base/checked.h"
#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kMistral4Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(
      f, c,
      {.max_position_embeddings = 1048576,
       .rms_norm_eps = 1e-6,
       .moe = {.first_k_dense_replace = 0, .n_shared_experts = 1},
       .latent = {.q_lora_rank = 1024, .kv_lora_rank = 256, .qk_nope_head_dim = 64},
       .scoring_func = "softmax"});
  // Mistral4TopkRouter drops DeepSeek-V2's topk_method: a file's value is read and ignored.
  f.has("topk_method");
  // Mistral4Config's head_dim is the whole query-key width, of which partial_rotary_factor
  // (default qk_rope_head_dim / head_dim) rotates: the rotary tables are qk_rope_head_dim wide,
  // as DeepSeek's are (rope_parameters may restate the factor; parse_model_config reads it).
  if (!add_into(c.qk_nope_head_dim, c.qk_rope_head_dim, c.head_dim)) {
    f.fail("qk_nope_head_dim", std::to_string(c.qk_nope_head_dim) +
                                   " plus qk_rope_head_dim overflows int64; expected a head width");
  }
  c.partial_rotary_factor =
      f.number("partial_rotary_factor",
               static_cast<double>(c.qk_rope_head_dim) / static_cast<double>(c.head_dim));
  models::class_rope_unless_given(f, c, 1e4,
                                  {.rope_type = "yarn",
                                   .factor = 128,
                                   .low_freq_factor = std::nullopt,
                                   .high_freq_factor = std::nullopt,
                                   .original_max_position_embeddings = 8192});
  models::pad_token_id_or(f, c, 11);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::deepseek_to_hf_json(c, j);
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  models::say_when_rope_is_unscaled(c, j);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 11
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kMistral4Family.hf_class_prefix,
       .latent_attention = true,
       .moe = {.router_first = false, .shared_name = "shared_experts"}});
}

}  // namespace

const ModelFamily kMistral4Family{
    .model_type = "mistral4",
    .hf_class_prefix = "Mistral4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "Mistral4Experts",
    .tp_plan = models::kLatentMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
