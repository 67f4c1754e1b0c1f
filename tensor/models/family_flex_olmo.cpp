// flex_olmo (AllenAI's FlexOlmo-7x7B-1T): transformers' FlexOlmoConfig (vocab 100352, max
// positions 4096, rms_norm_eps 1e-6, 7 experts with top 5, untied, pad_token_id 100277) and
// modular_flex_olmo.py: OLMo 2's layer (norms after each half only, post_attention_layernorm and
// post_feedforward_layernorm; q_norm and k_norm over the whole projection width) whose
// feed-forward is OLMoE's sparse block (the router "gate" [E, h], a softmax over all experts,
// before the fused experts).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kFlexOlmoFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.num_local_experts = f.integer("num_experts", 7);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 5);
  f.boolean("norm_topk_prob", false);  // routing values only
  models::pad_token_id_or(f, c, 100277);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 100277
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kFlexOlmoFamily.hf_class_prefix,
                                       .qk_norm_full_width = true,
                                       .norms = models::NormPlacement::kPost});
}

constexpr FieldRename kFlexOlmoRenames[] = {{"norm_eps", "rms_norm_eps"},
                                            {"num_local_experts", "num_experts"},
                                            {"qkv_bias", "attention_bias"},
                                            {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kFlexOlmoFamily{
    .model_type = "flex_olmo",
    .hf_class_prefix = "FlexOlmo",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kFlexOlmoRenames,
    .moe = true,
    .experts_class = "FlexOlmoExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
