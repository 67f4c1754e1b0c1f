// granitemoe (IBM Granite 3.0/3.1 MoE: granite-3.0-1b-a400m, granite-3.0-3b-a800m) and
// granitemoeshared (IBM's moe-7b-1b-active-shared-experts), one file as they differ in one field.
// transformers' GraniteMoeConfig (Granite's defaults and multipliers, no mlp_bias; the experts'
// count and top-k required, as Mixtral's) and transformers 5's modeling_granitemoe.py: Granite's
// layer whose feed-forward is a sparse block "block_sparse_moe" registered after the two norms,
// its router "router" [E, h] before the fused experts gate_up_proj [E, 2 F, h] ([gate; up]) and
// down_proj [E, h, F]; the router takes the top k logits, then a softmax over those k. (The Hub's
// files name them input_linear, output_linear and router.layer, which transformers renames on
// load.) GraniteMoeSharedConfig adds shared_intermediate_size (0: none) and
// modeling_granitemoeshared.py `shared_mlp` after the sparse block: input_linear [2 S, h]
// ([gate; up]) and output_linear [h, S], no biases, reading the same normed tokens, every one,
// its output added to the experts' before the residual multiplier.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGraniteMoeFamily;        // listed in family_registry.cpp
extern const ModelFamily kGraniteMoeSharedFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.num_local_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  models::parse_granite_multipliers(f, c);
}

void parse_shared(const ConfigFields& f, ModelConfig& c) {
  parse(f, c);
  c.shared_expert_intermediate_size = f.integer("shared_intermediate_size", 0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  models::granite_multipliers_to_hf_json(c, j);
}

void to_hf_json_shared(const ModelConfig& c, nlohmann::json& j) {
  to_hf_json(c, j);
  j["shared_intermediate_size"] = c.shared_expert_intermediate_size;
}

// The shared MLP is built only where the config has one (GraniteMoe's never does).
ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  const bool shared = c.model_type == kGraniteMoeSharedFamily.model_type;
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = shared ? kGraniteMoeSharedFamily.hf_class_prefix
                        : kGraniteMoeFamily.hf_class_prefix,
       .ffn_name = "block_sparse_moe",
       .norms_before_ffn = true,
       .granite_multipliers = true,
       .moe = {.router = "router", .shared_in_layer = true, .softmax_after_top_k = true}});
}

constexpr FieldRename kGraniteMoeRenames[] = {{"norm_eps", "rms_norm_eps"},
                                              {"qkv_bias", "attention_bias"},
                                              {"o_bias", "attention_bias"}};
constexpr FieldRename kGraniteMoeSharedRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"shared_expert_intermediate_size", "shared_intermediate_size"}};

}  // namespace

const ModelFamily kGraniteMoeFamily{
    .model_type = "granitemoe",
    .hf_class_prefix = "GraniteMoe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGraniteMoeRenames,
    .moe = true,
    .experts_class = "GraniteMoeExperts",
    .tp_plan = models::kGraniteMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kGraniteMoeSharedFamily{
    .model_type = "granitemoeshared",
    .hf_class_prefix = "GraniteMoeShared",
    .layers_path = "model.layers",
    .parse = parse_shared,
    .to_hf_json = to_hf_json_shared,
    .build = build,
    .renamed = kGraniteMoeSharedRenames,
    .moe = true,
    .experts_class = "GraniteMoeSharedExperts",
    .tp_plan = models::kGraniteMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
