// olmo3 (OLMo 3 7B, 32B): transformers' Olmo3Config, which is Olmo2Config (vocab 50304, max
// positions 2048, rms_norm_eps 1e-5, attention_bias false) with a sliding window (default 4096)
// on three layers of four: layer i slides unless (i + 1) % 4 == 0, or as layer_types says. The
// layer is OLMo 2's (modeling_olmo3.py): norms after each half only and q_norm / k_norm over the
// whole q and k projection width. A null sliding_window makes every layer attend in full, as
// Olmo3Attention passes no window then; the full layers' RoPE scaling changes no shape.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kOlmo3Family;  // listed in family_registry.cpp

namespace {

AttentionType three_of_four_slide(const ModelConfig& c, int64_t layer) {
  return c.sliding_window && (layer + 1) % 4 != 0 ? AttentionType::kSliding : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.sliding_window = models::sliding_window_or(f, 4096);
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, three_of_four_slide, c);
  for (AttentionType& t : c.layer_types) {
    if (t == AttentionType::kChunked) {
      f.fail("layer_types",
             "has chunked_attention, which OLMo 3 does not run; expected "
             "\"full_attention\" or \"sliding_attention\"");
    }
    if (!c.sliding_window) t = AttentionType::kFull;  // no window: every layer attends in full
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  if (!c.sliding_window) j["sliding_window"] = nullptr;
  j["attention_bias"] = c.qkv_bias;
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kOlmo3Family.hf_class_prefix,
                                       .qk_norm_full_width = true,
                                       .norms = models::NormPlacement::kPost});
}

}  // namespace

const ModelFamily kOlmo3Family{
    .model_type = "olmo3",
    .hf_class_prefix = "Olmo3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
