// apertus (Swiss AI's Apertus 8B and 70B): transformers' ApertusConfig (max positions 65536,
// rms_norm_eps 1e-5, hidden_act "xielu", biases on q, k, v and o by attention_bias, untied,
// pad_token_id 3; without rope_parameters, Llama 3's scaling by 8 from 8,192 positions over a
// base of 1.2e7) and modeling_apertus.py: Llama's attention with a per-head RMSNorm on q and k
// before RoPE, and an MLP without a gate, down_proj(xIELU(up_proj(x))) with no biases, whose
// xIELU activation module (act_fn) holds two learned scalars per layer. The layer's norms are
// attention_layernorm and feedforward_layernorm, registered after the MLP.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kApertusFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 65536, .rms_norm_eps = 1e-5, .hidden_act = "xielu"});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::class_rope_unless_given(f, c, 1.2e7,
                                  {.rope_type = "llama3",
                                   .factor = 8,
                                   .low_freq_factor = 1,
                                   .high_freq_factor = 4,
                                   .original_max_position_embeddings = 8192});
  models::pad_token_id_or(f, c, 3);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  models::say_when_rope_is_unscaled(c, j);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 3
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kApertusFamily.hf_class_prefix,
                                       .qk_norm = true,
                                       .input_norm_name = "attention_layernorm",
                                       .post_attention_norm_name = "feedforward_layernorm",
                                       .ungated_mlp = true});
}

constexpr FieldRename kApertusRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

// xIELU's two scalars start where XIELUActivation's constructor puts them (ApertusPreTrainedModel's
// _init_weights leaves them): log(expm1(0.8)) and log(expm1(0.8 - beta)), beta 0.5, computed in
// the model's dtype; the rest as the Llama-shaped decoders.
constexpr InitRule kXieluInitRules[] = {
    {"XIELUActivation", "alpha_p", InitFill::kSoftplusInverse, 0.8},
    {"XIELUActivation", "alpha_n", InitFill::kSoftplusInverse, 0.8 - 0.5}};
constexpr auto kApertusInitRules =
    models::concat_init_rules(kXieluInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kApertusFamily{
    .model_type = "apertus",
    .hf_class_prefix = "Apertus",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kApertusRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kApertusInitRules,
};

}  // namespace shardplan::tensor
