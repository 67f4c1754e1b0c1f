// axk2 (SK Telecom's A.X-K2): transformers' AXK2Config and modular_axk2.py. It is DeepSeek-V3.2
// (latent attention with a lightning indexer in every layer, DeepSeek's MoE block) with three
// changes:
//  * no q_b_proj. One q_gate_proj [heads (d + r + v), 2 q_lora_rank] reads the normed query latent
//    beside the raw one, [q_a_layernorm(q_a); q_a], and makes per head the query and an output
//    gate as wide as the value: o_proj(out * sigmoid(gate)), the gate in float32
//    (RotaryDecoderStyle::latent_query_gate). The indexer reads the normed latent, as in V3.2;
//  * gated norms (ModelConfig::gated_norm_rank, default 16). Every layer's input_layernorm, and the
//    post_attention_layernorm of MoE layers, is AXK2GatedRMSNorm: y = RMSNorm(x), then
//    y * sigmoid(fc2(silu(fc1(y)))) with fc1 [rank, h] and fc2 [h, rank] (AXK2GateMLP). Dense
//    layers keep a plain RMSNorm before their MLP;
//  * routing without expert groups unless n_group and topk_group are both set (both null by
//    default: setting only one is refused).
// Defaults (the class's, "A.X-K2-Light" by its docstring): vocab 163840, max positions 131072,
// rms_norm_eps 1e-6, q_lora_rank 384 (required positive), kv_lora_rank 128, qk_nope_head_dim 64,
// qk_rope_head_dim 32, v_head_dim 64, 128 routed experts of 512 with top 8 and one shared expert,
// routed_scaling_factor 2.5, a 16-head indexer of 128 channels keeping 2048 keys.
// Which layers are dense: mlp_layer_types when listed. Otherwise layer i is sparse when
// i >= first_k_dense_replace (1) and i % moe_layer_freq (1) == 0. The transformers model builds
// no multi-token-prediction layer (AXK2Config has no num_nextn_predict_layers). A file's count is
// read into ModelConfig::mtp_layers for the checkpoint's prediction layers, as for DeepSeek-V3.
// The Hub checkpoints name q_gate_proj q_b_proj and the gate's fc1/fc2 W_down/W_up
// (conversion_mapping.py), which transformers renames on load, as the checkpoint check does.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kAxk2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(f, c,
                         {.max_position_embeddings = 131072,
                          .rms_norm_eps = 1e-6,
                          .moe = {.first_k_dense_replace = 1,
                                  .n_shared_experts = 1,
                                  .n_routed_experts = 128,
                                  .num_experts_per_tok = 8,
                                  .moe_intermediate_size = 512,
                                  .moe_layer_freq_period = true},
                          .latent = {.q_lora_rank = 384,
                                     .kv_lora_rank = 128,
                                     .qk_nope_head_dim = 64,
                                     .v_head_dim = 64,
                                     .qk_rope_head_dim = 32}});
  // AXK2Config.validate_architecture: groups both set or both null (null: no grouping, which
  // check_expert_groups reads as one group).
  if (f.has("n_group") != f.has("topk_group")) {
    f.fail(f.has("n_group") ? "topk_group" : "n_group",
           "is null while the other is set; A.X-K2 takes n_group and topk_group together (both "
           "null: routing over every expert)");
  }
  f.string("topk_method", "noaux_tc");  // DeepSeek's name for this routing: read, no shape
  // DeepseekV32Config's legacy num_experts (its n_routed_experts) is not re-routed by AXK2Config,
  // whose __post_init__ skips V3.2's: an attribute nobody reads.
  f.has("num_experts");
  models::parse_mlp_layer_types(f, c);
  models::parse_sparse_attention(f, c, 16);  // also refuses a null q_lora_rank
  c.gated_norm_rank = f.integer("gated_norm_rank", 16);
  if (c.gated_norm_rank <= 0) {
    f.fail("gated_norm_rank", std::to_string(c.gated_norm_rank) +
                                  ", expected a positive rank (the gated norms' bottleneck)");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::deepseek_to_hf_json(c, j);
  models::sparse_attention_to_hf_json(c, j);  // with mlp_layer_types, which decide on reading
  j["gated_norm_rank"] = c.gated_norm_rank;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kAxk2Family.hf_class_prefix,
                                       .latent_attention = true,
                                       .latent_query_gate = true,
                                       .moe = models::kDeepseekMoeStyle});
}

constexpr FieldRename kAxk2Renames[] = {{"norm_eps", "rms_norm_eps"},
                                        {"num_local_experts", "n_routed_experts"},
                                        {"intermediate_size", "moe_intermediate_size"},
                                        {"dense_intermediate_size", "intermediate_size"},
                                        {"dense_layers", "mlp_layer_types"},
                                        {"shared_expert_intermediate_size", "n_shared_experts"}};

}  // namespace

// AXK2PreTrainedModel._init_weights: PreTrainedModel's (Linear and Embedding normal, biases zero,
// RMSNorm weights one, the indexer's LayerNorm one and zero), the router's weight normal and its
// bias buffer zero, the experts normal: the Llama-shaped decoders' rules.
const ModelFamily kAxk2Family{
    .model_type = "axk2",
    .hf_class_prefix = "AXK2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kAxk2Renames,
    .moe = true,
    .experts_class = "AXK2Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    // kLatentMoeTpPlan: q_gate_proj column-parallel by heads (each head's [query | gate] block is
    // contiguous, so a head's query stays with its gate); the gated norms' fc1/fc2 replicated.
    .tp_plan = models::kLatentMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
