// qwen3 (Qwen3 dense: 0.6B to 32B): transformers' Qwen3Config (vocab 151936, max positions 32768,
// rms_norm_eps 1e-6, rope_theta 10000, attention_bias false, head_dim its own field) and
// modeling_qwen3.py: the rotary decoder with an RMSNorm over head_dim on every head of q and k
// (q_norm, k_norm) before RoPE; with use_sliding_window, Qwen2's windows from max_window_layers on
// (Qwen3Config derives layer_types as Qwen2Config does).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen3Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_qwen_sliding_window(f, c, models::slides_from_max_window_layers);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  models::qwen_sliding_window_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kQwen3Family.hf_class_prefix, .qk_norm = true});
}

}  // namespace

const ModelFamily kQwen3Family{
    .model_type = "qwen3",
    .hf_class_prefix = "Qwen3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
