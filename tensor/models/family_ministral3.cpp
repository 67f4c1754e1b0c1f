// ministral3 (Ministral 3 3B, 8B, 14B: the language model of the mistral3 files that carry it):
// transformers' Ministral3Config (vocab 131072, head_dim 128 unless null, max positions 262144,
// rms_norm_eps 1e-5, pad_token_id 11; without rope_parameters, YaRN by 16 from 16,384 positions
// over rope_theta 1e6) and modeling_ministral3.py: Mistral's layer without biases, every layer
// sliding when sliding_window is set (default none), whatever a layer_types key says. Its queries
// are scaled by position (Llama 4's attention temperature, llama_4_scaling_beta), an elementwise
// product that is not traced.
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMinistral3Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 262144,
                                .rms_norm_eps = 1e-5,
                                .head_dim = f.is_null("head_dim") ? 0 : 128});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 8);
  models::class_rope_unless_given(f, c, 1e6,
                                  {.rope_type = "yarn",
                                   .factor = 16,
                                   .low_freq_factor = std::nullopt,
                                   .high_freq_factor = std::nullopt,
                                   .original_max_position_embeddings = 16384});
  // Every layer slides when sliding_window is set (Ministral3Attention passes it whatever the
  // layer); a layer_types key is read and ignored, as Ministral3Config only warns about it.
  c.sliding_window = f.opt_integer("sliding_window");
  f.has("layer_types");
  if (c.sliding_window) {
    c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kSliding);
  }
  models::pad_token_id_or(f, c, 11);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  models::say_when_rope_is_unscaled(c, j);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 11
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kMinistral3Family.hf_class_prefix});
}

}  // namespace

const ModelFamily kMinistral3Family{
    .model_type = "ministral3",
    .hf_class_prefix = "Ministral3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
