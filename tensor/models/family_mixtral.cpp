// mixtral: transformers' MixtralConfig (rms_norm_eps 1e-5, rope_theta 1e6, sliding_window, the
// required num_local_experts / num_experts_per_tok) and transformers 5's modeling_mixtral.py: the
// rotary decoder with sparse MoE blocks under "mlp", the router "gate" before the fused experts
// (Note [Expected-load MoE] in models.h).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMixtralFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-5, .rope_theta = 1e6});
  c.sliding_window = f.opt_integer("sliding_window");  // MixtralConfig: none by default
  if (c.sliding_window) {
    c.layer_types =
        models::parse_layer_types(f, c.num_hidden_layers, models::every_layer_sliding, c);
  }
  c.num_local_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kMixtralFamily.hf_class_prefix});
}

}  // namespace

const ModelFamily kMixtralFamily{
    .model_type = "mixtral",
    .hf_class_prefix = "Mixtral",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .moe = true,
    .experts_class = "MixtralExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
