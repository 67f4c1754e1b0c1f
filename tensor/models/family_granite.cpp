// granite (IBM Granite 3.x dense): transformers' GraniteConfig (max positions 2048, rms_norm_eps
// 1e-6, rope_theta 10000, untied unless the file ties, biases by attention_bias and mlp_bias, no
// pad_token_id; embedding_multiplier, residual_multiplier, attention_multiplier and
// logits_scaling each 1.0) and modeling_granite.py: Llama's layer with those multipliers applied
// always (embeddings times embedding_multiplier, each half's output times residual_multiplier,
// the softmax scale attention_multiplier in place of 1/sqrt(head_dim), logits divided by
// logits_scaling): elementwise ops on activations Llama has anyway, no parameter.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGraniteFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::parse_granite_multipliers(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  models::granite_multipliers_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kGraniteFamily.hf_class_prefix, .granite_multipliers = true});
}

constexpr FieldRename kGraniteRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kGraniteFamily{
    .model_type = "granite",
    .hf_class_prefix = "Granite",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGraniteRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
