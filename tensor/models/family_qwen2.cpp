// qwen2 (Qwen2, Qwen2.5): transformers' Qwen2Config (max_position_embeddings 32768, a sliding
// window only with use_sliding_window) and modeling_qwen2.py: the rotary decoder with biased
// q/k/v projections and an unbiased o_proj.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen2Family;  // listed in family_registry.cpp

namespace {

// Qwen2Config: with use_sliding_window, layer i slides from max_window_layers (default 28) on.
AttentionType slides_from_max_window_layers(const ModelConfig& c, int64_t layer) {
  return c.sliding_window && layer >= c.max_window_layers ? AttentionType::kSliding
                                                          : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6});
  c.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
  // Qwen2Config keeps sliding_window (default 4096) only with use_sliding_window, and derives
  // layer_types from max_window_layers when the file has none.
  if (f.boolean("use_sliding_window", false)) {
    c.sliding_window = f.is_null("sliding_window")
                           ? std::nullopt
                           : std::optional<int64_t>(f.integer("sliding_window", 4096));
    c.max_window_layers = f.integer("max_window_layers", 28);
    if (c.max_window_layers < 0) {
      f.fail("max_window_layers", "must be >= 0, got " + std::to_string(c.max_window_layers));
    }
    if (c.sliding_window) {
      c.layer_types =
          models::parse_layer_types(f, c.num_hidden_layers, slides_from_max_window_layers, c);
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["use_sliding_window"] = c.sliding_window.has_value();
  if (c.sliding_window) {
    j["max_window_layers"] = c.max_window_layers;
    j["layer_types"] = models::layer_types_json(c);
  }
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
