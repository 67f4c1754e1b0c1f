// solar_open (Upstage's Solar Open 100B): transformers' SolarOpenConfig, GLM-4.5's config with
// its own defaults (vocab 196608, hidden 4096, 48 layers, 64 heads of 128, 8 key-value heads,
// max positions 131072, rms_norm_eps 1e-5, RoPE base 1e6 over the whole head, 128 routed experts
// of 1280 with top-8 and one shared expert) and modular_solar_open.py: Llama's attention (biases
// on q, k and v by attention_bias, never on o_proj) and GLM-4.5's MoE block (DeepSeek's: experts,
// the sigmoid router "gate" with its score-correction buffer, shared_experts) in every layer.
// The class deletes GLM-4.5's intermediate_size, first_k_dense_replace, use_qk_norm and
// num_mtp_layers: a file's intermediate_size is read and ignored (no layer is dense), and a file
// asking for dense layers or q/k norms is refused rather than built otherwise than it says.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kSolarOpenFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  if (f.has("first_k_dense_replace") && f.integer("first_k_dense_replace") != 0) {
    f.fail("first_k_dense_replace",
           std::to_string(f.integer("first_k_dense_replace")) +
               ", but SolarOpenConfig has no such field: every layer is MoE; expected 0");
  }
  if (f.boolean("use_qk_norm", false)) {
    f.fail("use_qk_norm",
           "true, but SolarOpenConfig has no such field: its attention has no "
           "q/k norms; expected false");
  }
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 196608,
                                                                    .hidden_size = 4096,
                                                                    .intermediate_size = 0,
                                                                    .num_hidden_layers = 48,
                                                                    .num_attention_heads = 64,
                                                                    .num_key_value_heads = 8},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 1e6,
                                .head_dim = 128});
  c.qkv_bias = f.boolean("attention_bias", false);  // q, k, v; o_proj never
  c.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  models::parse_deepseek_moe(f, c,
                             {.first_k_dense_replace = 0,
                              .n_shared_experts = 1,
                              .n_routed_experts = 128,
                              .num_experts_per_tok = 8,
                              .moe_intermediate_size = 1280});
  c.dense_intermediate_size = 0;  // no dense layer: the file's intermediate_size means nothing
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::deepseek_moe_to_hf_json(c, j);
  j.erase("intermediate_size");
  j.erase("first_k_dense_replace");
  j["attention_bias"] = c.qkv_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kSolarOpenFamily.hf_class_prefix, .moe = models::kDeepseekMoeStyle});
}

}  // namespace

const ModelFamily kSolarOpenFamily{
    .model_type = "solar_open",
    .hf_class_prefix = "SolarOpen",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "SolarOpenExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
