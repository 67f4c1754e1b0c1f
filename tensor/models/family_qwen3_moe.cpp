// qwen3_moe (Qwen3-30B-A3B, Qwen3-235B-A22B): transformers' Qwen3MoeConfig (vocab 151936, max
// positions 32768, rms_norm_eps 1e-6, rope_theta 10000, attention_bias false, norm_topk_prob) and
// transformers 5's modeling_qwen3_moe.py: Qwen3's attention (q/k RMSNorm per head) and, in the
// sparse layers, the fused experts registered before the router "gate"; dense layers where
// mlp_only_layers and decoder_sparse_step say (parse_qwen_moe). With use_sliding_window every
// layer slides (Qwen3MoeAttention passes config.sliding_window whatever the layer).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen3MoeFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_qwen_sliding_window(f, c, models::every_layer_sliding, /*has_layer_types=*/false);
  models::parse_qwen_moe(f, c);
  f.boolean("norm_topk_prob", false);  // renormalized top-k weights: no shape or FLOP changes
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::qwen_moe_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  models::qwen_sliding_window_to_hf_json(c, j, /*has_layer_types=*/false);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kQwen3MoeFamily.hf_class_prefix, .qk_norm = true, .moe = {.router_first = false}});
}

}  // namespace

const ModelFamily kQwen3MoeFamily{
    .model_type = "qwen3_moe",
    .hf_class_prefix = "Qwen3Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kQwenMoeRenames,
    .moe = true,
    .experts_class = "Qwen3MoeExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
