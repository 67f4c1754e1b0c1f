// The rotary decoder shaped like Llama, shared by the families whose transformers code is a copy
// of modeling_llama.py with small changes (llama, mistral, mixtral, qwen2, gemma): one parse of
// the LlamaConfig fields with the defaults each family's config class sets, its to_hf_json, and
// one builder taking the class prefix and the norm. Internal to tensor/models/; each family's own
// differences (extra fields, biases, defaults, norm) live in its family_<model_type>.cpp.
//   void parse(const ConfigFields& f, ModelConfig& c) {
//     parse_rotary_decoder(f, c, {.max_position_embeddings = 4096 * 32, .rms_norm_eps = 1e-6});
//     c.sliding_window = f.opt_integer("sliding_window");
//   }
//   ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
//     return build_rotary_decoder(c, o, training, {.prefix = "Mistral"});
//   }
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// The defaults of a family's config class where config.json leaves a field out.
struct RotaryDecoderDefaults {
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  bool tie_word_embeddings = false;
  const char* act_key = "hidden_act";  // Gemma: hidden_activation
  const char* hidden_act = "silu";
};

// The fields every such family reads: sizes, heads (num_key_value_heads defaults to heads,
// head_dim to hidden / heads), max positions, activation, rms_norm_eps, tied embeddings,
// rope_theta, rope_scaling, attention_dropout. Biases, sliding window and experts are the
// family's to read.
void parse_rotary_decoder(const ConfigFields& f, ModelConfig& c, const RotaryDecoderDefaults& d);
// What parse_rotary_decoder reads back, and sliding_window when set.
void rotary_decoder_to_hf_json(const ModelConfig& c, nlohmann::json& j,
                               const char* act_key = "hidden_act");

// These families spell norm_eps rms_norm_eps (ModelFamily::renamed).
inline constexpr FieldRename kRotaryDecoderRenames[] = {{"norm_eps", "rms_norm_eps"}};

struct RotaryDecoderStyle {
  std::string_view prefix;  // "Llama": LlamaForCausalLM, LlamaDecoderLayer, LlamaAttention, ...
  // The layer and final norms; unset: RMSNorm with a weight (LlamaRMSNorm).
  ModulePtr (*make_norm)(const ModelConfig& c, const TensorOptions& o) = nullptr;
  bool scale_embeddings = false;  // embeddings * sqrt(hidden) (Gemma's normalizer)
};

// <prefix>ForCausalLM of `c` (tensor/models/rotary_decoder.cpp lists its parameter names). A
// config with num_local_experts > 0 gets Mixtral's sparse MoE blocks.
ModulePtr build_rotary_decoder(const ModelConfig& c, const TensorOptions& o, bool training,
                               const RotaryDecoderStyle& style);

}  // namespace shardplan::tensor::models
