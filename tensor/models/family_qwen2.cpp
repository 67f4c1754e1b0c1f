// qwen2 (Qwen2, Qwen2.5): transformers' Qwen2Config (max_position_embeddings 32768, a sliding
// window only with use_sliding_window) and modeling_qwen2.py: the rotary decoder with biased
// q/k/v projections and an unbiased o_proj.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6});
  c.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
  models::parse_qwen_sliding_window(f, c, models::slides_from_max_window_layers);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  models::qwen_sliding_window_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kQwen2Family.hf_class_prefix});
}

}  // namespace

const ModelFamily kQwen2Family{
    .model_type = "qwen2",
    .hf_class_prefix = "Qwen2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
