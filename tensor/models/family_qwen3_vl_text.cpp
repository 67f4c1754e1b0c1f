// qwen3_vl_text: the language model of Qwen3-VL (its multimodal file's text_config, Note
// [Multimodal configs]). transformers' Qwen3VLTextConfig (max positions 128000, rms_norm_eps 1e-6,
// rope_theta 5e5, head_dim 128, attention_bias false, no sliding window) and
// modeling_qwen3_vl.py: Qwen3's layer (q_norm and k_norm per head) with interleaved multimodal
// RoPE, which rotates a text token's channels as plain RoPE does. The DeepStack visual features
// are added to early layers' hidden states: no text parameters, an elementwise add not traced.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen3VlTextFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 128000,
                                .rms_norm_eps = 1e-6,
                                .rope_theta = 5e5,
                                .head_dim = 128});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kQwen3VlTextFamily.hf_class_prefix, .qk_norm = true});
}

}  // namespace

const ModelFamily kQwen3VlTextFamily{
    .model_type = "qwen3_vl_text",
    .hf_class_prefix = "Qwen3VLText",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
