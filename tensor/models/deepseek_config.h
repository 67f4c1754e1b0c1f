// The config fields of the DeepSeek-shaped families (multi-head latent attention with DeepSeek's
// MoE block): deepseek_v2, deepseek_v3 and kimi_k2, glm4_moe_lite (GLM-4.7-Flash), deepseek_v32
// (DeepSeek-V3.2), glm_moe_dsa (GLM-5) and mistral4 (Mistral Small 4). Internal to tensor/models/:
// each family's file passes its config class's defaults.
//   parse_deepseek(f, c, {.moe = {.first_k_dense_replace = 3, .n_shared_experts = 1}});
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor::models {

// The latent-attention sizes a config class defaults (DeepseekV3Config's; Glm4MoeLiteConfig's
// and GlmMoeDsaConfig's are wider, Mistral4Config's narrower).
struct LatentDefaults {
  int64_t q_lora_rank = 1536;
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t v_head_dim = 128;
  int64_t qk_rope_head_dim = 64;  // MiniCPM3, A.X K2: 32
};

// The latent-attention fields as DeepseekV2Config and its heirs name them (attention_bias,
// q_lora_rank (null: no query latent), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
// v_head_dim), with `d` for the absent ones; head_dim becomes the rotated width, as the config
// classes set it. For the dense families built around that attention (Youtu, MiniCPM3) too.
void parse_latent_attention(const ConfigFields& f, ModelConfig& c, const LatentDefaults& d);

// What the config classes default differently, and the router's scores.
struct DeepseekDefaults {
  int64_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6;
  DeepseekMoeDefaults moe = {};
  LatentDefaults latent = {};
  std::string_view scoring_func = "sigmoid";
};

// The fields every such family reads: the rotary decoder's, the latent attention's (q_lora_rank
// null: no query latent), the MoE block's; DeepSeek's own config.json names what transformers
// infers (scoring_func): its value must be the family's.
void parse_deepseek(const ConfigFields& f, ModelConfig& c, const DeepseekDefaults& d);
void deepseek_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// mlp_layer_types (Glm4MoeLiteConfig and its heirs): "dense" or "sparse" per layer. When the file
// lists it, it decides which layers are dense, as the config's __post_init__ lets it; else the
// layers parse_deepseek derived from first_k_dense_replace stay.
void parse_mlp_layer_types(const ConfigFields& f, ModelConfig& c);
nlohmann::json mlp_layer_types_json(const ModelConfig& c);

// DeepSeek Sparse Attention (DeepseekV32Config, GlmMoeDsaConfig): index_n_heads (the config
// class's `index_heads`), index_head_dim 128, index_topk 2048; every layer
// "deepseek_sparse_attention" (a file's layer_types may say so, and nothing else); a query latent
// required (the indexer reads it).
void parse_sparse_attention(const ConfigFields& f, ModelConfig& c, int64_t index_heads);
void sparse_attention_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// Megatron-LM's split of latent attention: the down projections (q_a_proj, kv_a_proj_with_mqa)
// and their norms replicated, the up projections column-parallel by heads, o_proj row-parallel;
// the MoE block as the other MoE families. The lightning indexer (DSA) stays replicated: its
// scores are summed over its heads per query, which split heads would all-reduce.
inline constexpr TensorParallelRule kLatentMoeTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.q_b_proj", "colwise"},
    {"model.layers.*.self_attn.q_gate_proj", "colwise"},  // A.X K2's [query | gate] per head
    {"model.layers.*.self_attn.kv_b_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace shardplan::tensor::models
