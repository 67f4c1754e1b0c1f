// exaone4 (EXAONE 4.0 32B and 1.2B): transformers' Exaone4Config (max positions 2048,
// rms_norm_eps 1e-5, a sliding window of 4096 on three layers of four: sliding_window_pattern 4)
// and modular_exaone4.py: OLMo 2's layer (norms after each half only) with Qwen3's per-head q/k
// norms and no biases. With a window, the full-attention layers take no RoPE (NoPE: "we use
// global NoPE for hybrid attention"); a null sliding_window makes every layer a full RoPE layer.
// Which layers slide: the file's layer_types, else sliding_window_pattern: an integer N slides
// all but every N-th layer; a string of L (local) and G (global) repeats over the layers with the
// last one global, as Exaone4Config documents (its code derives layer types from an integer
// only; the released files list layer_types beside their "LLLG").
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kExaone4Family;  // listed in family_registry.cpp

namespace {

std::vector<AttentionType> pattern_layer_types(const ConfigFields& f, int64_t layers) {
  std::vector<AttentionType> out;
  const char* key = "sliding_window_pattern";
  const nlohmann::json p = f.has(key) ? f.raw(key) : nlohmann::json(4);
  if (p.is_number_integer() && p.get<int64_t>() > 0) {
    const int64_t n = p.get<int64_t>();
    for (int64_t i = 0; i < layers; ++i) {
      out.push_back((i + 1) % n != 0 ? AttentionType::kSliding : AttentionType::kFull);
    }
    return out;
  }
  const bool letters = p.is_string() && !p.get<std::string>().empty() &&
                       p.get<std::string>().find_first_not_of("LG") == std::string::npos;
  if (!letters) {
    f.fail(key, p.dump().substr(0, 60) +
                    " is not a pattern; expected a positive integer or a string of L (local) and "
                    "G (global)");
  }
  const std::string s = p.get<std::string>();
  for (int64_t i = 0; i < layers; ++i) {
    const bool local = s[static_cast<size_t>(i) % s.size()] == 'L' && i + 1 < layers;
    out.push_back(local ? AttentionType::kSliding : AttentionType::kFull);
  }
  return out;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  if (!f.has("num_key_value_heads") && !f.is_null("num_key_value_heads")) {
    c.num_key_value_heads = 32;
  }
  c.sliding_window = models::sliding_window_or(f, 4096);
  std::vector<AttentionType> types;
  if (f.has("layer_types")) {
    types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
    f.has("sliding_window_pattern");  // read: layer_types wins over it
  } else if (c.sliding_window) {
    types = pattern_layer_types(f, c.num_hidden_layers);
  }
  if (!c.sliding_window) {
    f.has("sliding_window_pattern");  // no window: every layer full, with RoPE
    return;
  }
  models::rope_on_windowed_layers_only(f, c, types, "EXAONE 4");  // global NoPE
  c.layer_types = std::move(types);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;
    return;
  }
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kExaone4Family.hf_class_prefix,
                                       .qk_norm = true,
                                       .norms = models::NormPlacement::kPost});
}

}  // namespace

const ModelFamily kExaone4Family{
    .model_type = "exaone4",
    .hf_class_prefix = "Exaone4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
