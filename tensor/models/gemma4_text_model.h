// Gemma 4's language model, as two families build it: gemma4_text (Gemma4ForCausalLM: E2B, E4B,
// 31B, 26B-A4B) and gemma4_unified_text (Gemma4UnifiedForCausalLM: the encoder-free Gemma 4 12B),
// whose text classes are Gemma 4's renamed, without the per-layer embeddings and the experts, and
// with other defaults (transformers' modular_gemma4_unified.py). The config reading, the writing
// back and the Module tree are this file's; each family's file holds its class names, defaults,
// tensor-parallel plan and init rules. Internal to tensor/models/.
//   constexpr models::Gemma4TextSpec kSpec{.config = "Gemma4TextConfig", ...};
//   void parse(const ConfigFields& f, ModelConfig& c) { models::parse_gemma4_text(f, c, kSpec); }
//   ModulePtr build(...) { return models::build_gemma4_text(c, o, training, kSpec); }
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// What tells the two Gemma 4 text families apart: transformers' class names (the Module types,
// which the init rules match) and their config class's defaults.
struct Gemma4TextSpec {
  const char* config;               // "Gemma4TextConfig": named in errors
  const char* causal_lm;            // "Gemma4ForCausalLM"
  const char* model;                // "Gemma4TextModel"
  const char* decoder_layer;        // "Gemma4TextDecoderLayer"
  const char* attention;            // "Gemma4TextAttention"
  const char* mlp;                  // "Gemma4TextMLP"
  const char* norm;                 // "Gemma4RMSNorm"
  const char* rotary;               // "Gemma4TextRotaryEmbedding"
  int64_t max_position_embeddings;  // Gemma4TextConfig 131072, Gemma4UnifiedTextConfig 262144
  int64_t sliding_window;           // 512, 1024
  // Gemma4TextConfig's per-layer embeddings (hidden_size_per_layer_input, on by default) and
  // experts (enable_moe_block). Gemma4UnifiedTextConfig has neither field: a file's keys of
  // them are attributes its model never reads (the conversion script writes them "for BC").
  bool per_layer_inputs_and_experts;
};

// Reads the config class's fields into `c` (sizes, per-layer-type geometry, RoPE keyed by layer
// type, soft-capping, key-value sharing, and with spec.per_layer_inputs_and_experts the per-layer
// embeddings and experts), refusing what the family cannot build, naming the key.
void parse_gemma4_text(const ConfigFields& f, ModelConfig& c, const Gemma4TextSpec& spec);
// What parse_gemma4_text reads back to an equal ModelConfig.
void gemma4_text_to_hf_json(const ModelConfig& c, nlohmann::json& j, const Gemma4TextSpec& spec);
// spec.causal_lm of a validated `c` on meta: model (embed_tokens, layers, norm, rotary_emb; with
// per-layer embeddings embed_tokens_per_layer, per_layer_model_projection,
// per_layer_projection_norm) and lm_head, tied when c.tie_word_embeddings.
ModulePtr build_gemma4_text(const ModelConfig& c, const TensorOptions& o, bool training,
                            const Gemma4TextSpec& spec);

}  // namespace shardplan::tensor::models
