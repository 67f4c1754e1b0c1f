// minimax_m2 (MiniMax-M2 and its point releases): transformers' MiniMaxM2Config (vocab 200064,
// hidden 3072, head_dim 128, 256 experts of width 1536, top 8, max positions 196608,
// rms_norm_eps 1e-6, rope_theta 5e6) and modeling_minimax_m2.py: Mixtral's pre-norm decoder whose
// sparse block keeps the router "gate" before the fused experts, scores experts with a sigmoid and
// keeps a per-expert e_score_correction_bias buffer on the block; the attention is OLMo 2's
// (FlexOlmoAttention): q_norm and k_norm over the whole q and k projection width, and no sliding
// window. The Hub files' own keys for what transformers always builds (use_qk_norm,
// qk_norm_type "per_layer", scoring_func "sigmoid", use_routing_bias, no shared expert, every layer
// full attention in attn_type_list) are checked: a file asking for anything else describes a model
// transformers does not build. The rotated width is MiniMax's rotary_dim (64 of 128 in every
// released file, as its own code and vLLM read it; transformers' config class has read it
// differently across versions) or partial_rotary_factor; it changes no shape, only RoPE's
// elementwise work. Multi-token prediction modules (use_mtp) are dropped, as transformers drops
// them.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMinimaxM2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 196608,
                                .rms_norm_eps = 1e-6,
                                .rope_theta = 5e6,
                                .head_dim = 128});
  c.num_local_experts = f.integer("num_local_experts", 256);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  if (f.has("partial_rotary_factor")) {
    c.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  } else if (f.has("rotary_dim") && c.head_dim > 0) {  // head_dim <= 0: validate() refuses
    const int64_t rotary = f.integer("rotary_dim");
    if (rotary <= 0 || rotary > c.head_dim || rotary % 2 != 0) {
      f.fail("rotary_dim", "must be even and in (0, head_dim = " + std::to_string(c.head_dim) +
                               "], got " + std::to_string(rotary));
    }
    c.partial_rotary_factor = models::rotary_fraction(rotary, c.head_dim);
  }
  models::require_built_value(f, "use_qk_norm", true, "MiniMax-M2",
                              "q_norm and k_norm on every layer");
  models::require_built_value(f, "qk_norm_type", "per_layer", "MiniMax-M2",
                              "q_norm and k_norm over the whole projection");
  models::require_built_value(f, "scoring_func", "sigmoid", "MiniMax-M2", "a sigmoid router");
  models::require_built_value(f, "use_routing_bias", true, "MiniMax-M2",
                              "the router's e_score_correction_bias");
  models::require_built_value(f, "shared_intermediate_size", 0, "MiniMax-M2", "no shared expert");
  if (f.has("attn_type_list")) {
    const nlohmann::json& types = f.raw("attn_type_list");
    if (!types.is_array() || std::any_of(types.begin(), types.end(), [](const nlohmann::json& t) {
          return !t.is_number_integer() || t.get<int64_t>() != 1;
        })) {
      f.fail("attn_type_list", types.dump().substr(0, 60) +
                                   ": transformers' MiniMax-M2 runs full softmax attention (1) "
                                   "on every layer; expected a list of 1");
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kMinimaxM2Family.hf_class_prefix,
                                       .qk_norm_full_width = true,
                                       .moe = {.sigmoid_router = true}});
}

}  // namespace

const ModelFamily kMinimaxM2Family{
    .model_type = "minimax_m2",
    .hf_class_prefix = "MiniMaxM2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .moe = true,
    .experts_class = "MiniMaxM2Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnBlock,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
