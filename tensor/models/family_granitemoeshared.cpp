// granitemoeshared (IBM's MoE with a shared expert: moe-7b-1b-active-shared-experts):
// transformers' GraniteMoeSharedConfig (GraniteMoe's fields and shared_intermediate_size, 0: no
// shared MLP) and modeling_granitemoeshared.py: GraniteMoe's layer with `shared_mlp` registered
// after the sparse block: input_linear [2 S, h] ([gate; up]) and output_linear [h, S], no biases,
// reading the same normed tokens, every one, its output added to the experts' before the residual
// multiplier.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGraniteMoeSharedFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.num_local_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.shared_expert_intermediate_size = f.integer("shared_intermediate_size", 0);
  models::parse_granite_multipliers(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["shared_intermediate_size"] = c.shared_expert_intermediate_size;
  models::granite_multipliers_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kGraniteMoeSharedFamily.hf_class_prefix,
       .ffn_name = "block_sparse_moe",
       .norms_before_ffn = true,
       .granite_multipliers = true,
       .moe = {.router = "router", .shared_in_layer = true, .softmax_after_top_k = true}});
}

constexpr FieldRename kGraniteMoeSharedRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"shared_expert_intermediate_size", "shared_intermediate_size"}};

}  // namespace

const ModelFamily kGraniteMoeSharedFamily{
    .model_type = "granitemoeshared",
    .hf_class_prefix = "GraniteMoeShared",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGraniteMoeSharedRenames,
    .moe = true,
    .experts_class = "GraniteMoeSharedExperts",
    .tp_plan = models::kGraniteMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
