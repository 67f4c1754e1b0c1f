// dots1 (rednote-hilab's dots.llm1): transformers' Dots1Config (vocab 152064, max positions 2048,
// rms_norm_eps 1e-6, biases on q, k, v and o by attention_bias; the experts' count, top-k and
// shared experts required, as the class has no usable default; first_k_dense_replace 0; a
// window of 4096 on the layers from max_window_layers (62) on, or as layer_types says) and
// modeling_dots1.py: Qwen3's attention (per-head q/k RMSNorm) and DeepSeek-V3's MoE block: the
// fused routed experts, the sigmoid router "gate" (its e_score_correction_bias a buffer) and the
// shared experts, in that order.
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kDots1Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 32);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  // Dots1Config leaves n_shared_experts None, which its MoE block cannot build: required here.
  f.integer("n_shared_experts");
  models::parse_deepseek_moe(f, c, {.first_k_dense_replace = 0, .n_shared_experts = 0});
  // Dots1Config derives layer types from the window alone (no use_sliding_window switch): layer
  // i slides from max_window_layers on; a null window leaves every layer full whatever
  // layer_types says, as the attention passes no window then.
  c.sliding_window = models::sliding_window_or(f, 4096);
  c.max_window_layers = f.integer("max_window_layers", 62);
  if (c.max_window_layers < 0) {
    f.fail("max_window_layers", std::to_string(c.max_window_layers) + ", expected >= 0");
  }
  f.has("use_sliding_window");  // Qwen's switch, which Dots1 does not read
  f.has("scoring_func");        // the published files say "sigmoid"; Dots1's router always is
  if (c.sliding_window) {
    c.layer_types =
        models::parse_layer_types(f, c.num_hidden_layers, models::slides_from_max_window_layers, c);
  } else {
    f.has("layer_types");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  models::deepseek_moe_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["max_window_layers"] = c.max_window_layers;
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;
  } else {
    j["layer_types"] = models::layer_types_json(c);
  }
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kDots1Family.hf_class_prefix, .qk_norm = true, .moe = models::kDeepseekMoeStyle});
}

constexpr FieldRename kDots1Renames[] = {{"norm_eps", "rms_norm_eps"},
                                         {"num_local_experts", "n_routed_experts"},
                                         {"intermediate_size", "moe_intermediate_size"},
                                         {"dense_intermediate_size", "intermediate_size"},
                                         {"dense_layers", "first_k_dense_replace"},
                                         {"shared_expert_intermediate_size", "n_shared_experts"},
                                         {"qkv_bias", "attention_bias"},
                                         {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kDots1Family{
    .model_type = "dots1",
    .hf_class_prefix = "Dots1",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kDots1Renames,
    .moe = true,
    .experts_class = "Dots1Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
