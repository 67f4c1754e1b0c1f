// ernie4_5 (ERNIE-4.5-0.3B): transformers' Ernie4_5Config (max positions 131072, rms_norm_eps
// 1e-5, rope_theta 500000, head_dim 128 whatever hidden / heads is (hidden / heads when the file
// says null), tied embeddings, one use_bias
// for every projection) and modeling_ernie4_5.py: Llama's layer with biases on q, k, v, o and the
// MLP when use_bias, no attention dropout whatever the file says, and RoPE rotating interleaved
// channel pairs (GLM's layout: no shape or count changes). The output layer has no bias.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kErnie45Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 500000,
                                .tie_word_embeddings = true,
                                // Ernie4_5Config: 128 when absent; null is hidden / heads
                                .head_dim = f.is_null("head_dim") ? 0 : 128});
  c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("use_bias", false);
  c.attention_dropout = 0;  // Ernie4_5Attention sets 0.0 over the config's value
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["use_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kErnie45Family.hf_class_prefix});
}

}  // namespace

const ModelFamily kErnie45Family{
    .model_type = "ernie4_5",
    .hf_class_prefix = "Ernie4_5",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
