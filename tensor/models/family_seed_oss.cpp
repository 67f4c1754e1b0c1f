// seed_oss (Seed-OSS-36B): transformers' SeedOssConfig (vocab 155136, max positions 524288,
// rms_norm_eps 1e-6, head_dim 128 unless null, biases on q, k and v but not on o
// (attention_bias true, attention_out_bias false), attention_dropout and residual_dropout 0.1,
// pad_token_id 1) and modeling_seed_oss.py: Llama's layer, each half's output dropped out
// (residual_dropout) before it joins the residual stream when training.
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kSeedOssFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 524288,
                                .rms_norm_eps = 1e-6,
                                .head_dim = f.is_null("head_dim") ? 0 : 128});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 8);
  c.qkv_bias = f.boolean("attention_bias", true);
  c.o_bias = f.boolean("attention_out_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.attention_dropout = f.number("attention_dropout", 0.1);
  c.resid_dropout = f.number("residual_dropout", 0.1);
  models::pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["attention_out_bias"] = c.o_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["residual_dropout"] = c.resid_dropout;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kSeedOssFamily.hf_class_prefix});
}

constexpr FieldRename kSeedOssRenames[] = {{"norm_eps", "rms_norm_eps"},
                                           {"qkv_bias", "attention_bias"},
                                           {"o_bias", "attention_out_bias"},
                                           {"resid_dropout", "residual_dropout"}};

}  // namespace

const ModelFamily kSeedOssFamily{
    .model_type = "seed_oss",
    .hf_class_prefix = "SeedOss",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kSeedOssRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
