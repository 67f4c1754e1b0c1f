// olmo2 (OLMo 2 7B, 13B, 32B): transformers' Olmo2Config (vocab 50304, max positions 2048,
// rms_norm_eps 1e-5, attention_bias false) and modeling_olmo2.py: the rotary decoder with its norms
// after each half only (post_attention_layernorm, post_feedforward_layernorm; no input norm), and
// q_norm / k_norm over the whole q and k projection width, before the split into heads.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kOlmo2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kOlmo2Family.hf_class_prefix,
                                       .qk_norm_full_width = true,
                                       .norms = models::NormPlacement::kPost});
}

}  // namespace

const ModelFamily kOlmo2Family{
    .model_type = "olmo2",
    .hf_class_prefix = "Olmo2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
