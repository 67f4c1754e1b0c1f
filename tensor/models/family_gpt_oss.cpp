// gpt_oss (GPT-OSS 20B and 120B): transformers' GptOssConfig (vocab 201088, head_dim 64, max
// positions 131072, rms_norm_eps 1e-5, rope_theta 150000 with YaRN, a sliding window of 128 on
// the even layers unless layer_types says otherwise, biases on every attention projection) and
// modeling_gpt_oss.py: attention with a learned sink logit per head (`sinks`), and an MoE block of
// a biased router followed by the experts, stored transposed ([E, H, 2F], [E, F, H]) with biases
// and gate/up in alternating columns. The experts' clamped GLU (gate * sigmoid(1.702 gate) *
// (up + 1)) is priced as SwiGLU: the same products, a few elementwise ops apart.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGptOssFamily;  // listed in family_registry.cpp

namespace {

// GptOssConfig: layer i slides when (i + 1) % 2 != 0.
AttentionType even_layers_slide(const ModelConfig& /*c*/, int64_t layer) {
  return (layer + 1) % 2 != 0 ? AttentionType::kSliding : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-5, .rope_theta = 150000});
  c.qkv_bias = c.o_bias = true;  // GptOssConfig forces attention_bias
  f.boolean("attention_bias", true);
  c.sliding_window = f.integer("sliding_window", 128);
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, even_layers_slide, c);
  c.num_local_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["layer_types"] = models::layer_types_json(c);
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGptOssFamily.hf_class_prefix,
                                       .attention_sinks = true,
                                       .moe = {.router = "router",
                                               .router_bias = true,
                                               .layout = GroupedExperts::Layout::kInOut,
                                               .expert_bias = true,
                                               .interleaved_gate_up = true}});
}

// GptOssPreTrainedModel._init_weights: Llama's, and the sinks and the router's bias normal(0,
// initializer_range); the experts' projections normal, their biases zero.
constexpr InitRule kGptOssInitRules[] = {{"*", "sinks", InitFill::kNormal},
                                         {"Linear", "router.bias", InitFill::kNormal},
                                         {"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"*", "gate_up_proj", InitFill::kNormal},
                                         {"*", "down_proj", InitFill::kNormal},
                                         {"*", "gate_up_proj_bias", InitFill::kZeros},
                                         {"*", "down_proj_bias", InitFill::kZeros},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"RMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kGptOssFamily{
    .model_type = "gpt_oss",
    .hf_class_prefix = "GptOss",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .moe = true,
    .experts_class = "GptOssExperts",
    .attention_sinks = true,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = kGptOssInitRules,
};

}  // namespace shardplan::tensor
