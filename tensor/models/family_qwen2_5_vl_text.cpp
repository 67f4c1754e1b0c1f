// qwen2_5_vl_text and qwen2_vl_text: the language models of Qwen2.5-VL and Qwen2-VL (their
// multimodal files, read through Note [Multimodal configs]; the published ones are flat: the text
// keys at the top level beside vision_config). transformers' Qwen2_5_VLTextConfig (max positions
// 32768, rms_norm_eps 1e-5, rope_theta 1e6) and modeling_qwen2_5_vl.py: Qwen2's layer (q, k, v
// with biases, o_proj without) with head_dim always hidden / heads (a head_dim key is ignored, as
// Qwen2_5_VLAttention ignores it) and multimodal RoPE, which rotates a text token's channels as
// plain RoPE does (mrope_section changes no shape). Qwen2-VL's text stack is the same.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen2VlTextFamily;   // listed in family_registry.cpp
extern const ModelFamily kQwen25VlTextFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c,
      {.max_position_embeddings = 32768, .rms_norm_eps = 1e-5, .rope_theta = 1e6, .mrope = true});
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads", std::to_string(c.num_attention_heads) +
                                      " does not divide hidden_size " +
                                      std::to_string(c.hidden_size) + " (Qwen2-VL's head_dim)");
  }
  if (c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  c.qkv_bias = true;
  // Qwen2_5_VLTextConfig's max_window_layers is 80, not Qwen2Config's 28.
  models::parse_qwen_sliding_window(f, c, models::slides_from_max_window_layers, true, 80);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::qwen_sliding_window_to_hf_json(c, j);
  j["max_window_layers"] = c.max_window_layers;
}

ModulePtr build_qwen2_vl(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kQwen2VlTextFamily.hf_class_prefix});
}

ModulePtr build_qwen25_vl(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kQwen25VlTextFamily.hf_class_prefix});
}

}  // namespace

const ModelFamily kQwen2VlTextFamily{
    .model_type = "qwen2_vl_text",
    .hf_class_prefix = "Qwen2VLText",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build_qwen2_vl,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kQwen25VlTextFamily{
    .model_type = "qwen2_5_vl_text",
    .hf_class_prefix = "Qwen2_5_VLText",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build_qwen25_vl,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
