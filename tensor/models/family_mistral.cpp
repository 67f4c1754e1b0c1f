// mistral: transformers' MistralConfig (max_position_embeddings 4096 * 32, sliding_window 4096 on
// every layer unless null) and modeling_mistral.py, the rotary decoder of
// tensor/models/rotary_decoder.h without biases.
//
// ministral (Mistral's Ministral 8B of 2024), defined here as it is Mistral's model:
// MinistralConfig (MistralConfig's fields and defaults, and layer_types: every layer sliding when a
// window is set, else full, unless the file lists them) and modular_ministral.py: Qwen2's layer
// with q, k and v never biased, the window on the layers layer_types names.
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMistralFamily;    // listed in family_registry.cpp
extern const ModelFamily kMinistralFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-6});
  // MistralConfig's (and MinistralConfig's) 8 key-value heads where the file has no such key
  // (null: the head count).
  models::key_value_heads_or(f, c, 8);
  // MistralConfig's sliding_window is 4096 unless the file says otherwise (null: none, as Mistral
  // 7B v0.2 and later say); every layer attends within it (modeling_mistral.py).
  c.sliding_window = models::sliding_window_or(f, 4096);
  if (c.sliding_window) {
    c.layer_types =
        models::parse_layer_types(f, c.num_hidden_layers, models::every_layer_sliding, c);
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kMistralFamily.hf_class_prefix});
}

// Ministral's layer_types may mix sliding and full layers: written back as they are.
void ministral_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;  // absent would mean 4096
    return;
  }
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build_ministral(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kMinistralFamily.hf_class_prefix});
}

}  // namespace

const ModelFamily kMistralFamily{
    .model_type = "mistral",
    .hf_class_prefix = "Mistral",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kMinistralFamily{
    .model_type = "ministral",
    .hf_class_prefix = "Ministral",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = ministral_to_hf_json,
    .build = build_ministral,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
