// mistral: transformers' MistralConfig (max_position_embeddings 4096 * 32, sliding_window 4096 on
// every layer unless null) and modeling_mistral.py, the rotary decoder of
// tensor/models/rotary_decoder.h without biases.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMistralFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-6});
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

}  // namespace shardplan::tensor
