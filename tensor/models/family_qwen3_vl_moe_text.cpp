// qwen3_vl_moe_text: the language model of Qwen3-VL's MoE models (30B-A3B, 235B-A22B; their
// multimodal file's text_config, Note [Multimodal configs]). transformers' Qwen3VLMoeTextConfig
// (max positions 128000, rms_norm_eps 1e-6, rope_theta 5e5, head_dim hidden / heads unless given)
// and modeling_qwen3_vl_moe.py: Qwen3-MoE's layer (q_norm and k_norm per head; the fused experts
// registered before the router "gate"; dense layers where mlp_only_layers and decoder_sparse_step
// say, parse_qwen_moe) with interleaved multimodal RoPE. The top-k weights are always
// renormalized (no norm_topk_prob field; a file's is read and changes nothing).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen3VlMoeTextFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 128000, .rms_norm_eps = 1e-6, .rope_theta = 5e5});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_qwen_moe(f, c);
  f.boolean("norm_topk_prob", true);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::qwen_moe_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kQwen3VlMoeTextFamily.hf_class_prefix,
                                       .qk_norm = true,
                                       .moe = {.router_first = false}});
}

}  // namespace

const ModelFamily kQwen3VlMoeTextFamily{
    .model_type = "qwen3_vl_moe_text",
    .hf_class_prefix = "Qwen3VLMoeText",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kQwenMoeRenames,
    .moe = true,
    .experts_class = "Qwen3VLMoeTextExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
