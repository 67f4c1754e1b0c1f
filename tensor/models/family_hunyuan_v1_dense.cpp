// hunyuan_v1_dense (Tencent Hunyuan 0.5B-7B): transformers' HunYuanDenseV1Config (vocab 290943,
// max positions 2048, rms_norm_eps 1e-5, biases on q, k, v and o by attention_bias, untied unless
// the file ties, pad_token_id 0, head_dim required: the class leaves it None and its attention
// cannot run without one) and modeling_hunyuan_v1_dense.py: Llama's layer whose attention norms q
// and k per head after RoPE (query_layernorm, key_layernorm [head_dim]). The files' dynamic RoPE
// with an NTK alpha changes the base, no shape.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kHunYuanDenseV1Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  if (!f.has("head_dim")) {
    f.fail("head_dim",
           "missing; HunYuanDenseV1Config leaves it None, which its attention cannot "
           "run with: expected the width of one head");
  }
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  f.has("use_qk_norm");  // an attribute: transformers' HunYuan norms q and k always
  models::pad_token_id_or(f, c, 0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kHunYuanDenseV1Family.hf_class_prefix,
                                       .qk_norm = true,
                                       .qk_norm_names = models::kHunYuanQkNormNames,
                                       .qk_norm_after_rope = true});
}

constexpr FieldRename kHunYuanDenseRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kHunYuanDenseV1Family{
    .model_type = "hunyuan_v1_dense",
    .hf_class_prefix = "HunYuanDenseV1",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kHunYuanDenseRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
