#include "tensor/models/linear_attention_config.h"

#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor::models {
namespace {

// layer_types ("linear_attention" or "full_attention" per layer), else Qwen3NextConfig's rule:
// layer i attends in full when (i + 1) % full_attention_interval == 0.
void parse_layer_types(const ConfigFields& f, ModelConfig& c) {
  // Saved configs carry the interval beside the list it made: read either way, used without one.
  const int64_t interval = f.integer("full_attention_interval", 4);
  if (!f.has("layer_types")) {
    if (interval <= 0) {
      f.fail("full_attention_interval", "must be positive, got " + std::to_string(interval));
    }
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back((i + 1) % interval != 0 ? AttentionType::kLinear
                                                      : AttentionType::kFull);
    }
    return;
  }
  read_linear_layer_types(f, c);
}

}  // namespace

void read_linear_layer_types(const ConfigFields& f, ModelConfig& c) {
  const nlohmann::json& types = f.raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_hidden_layers) {
    f.fail("layer_types",
           "expected a list of num_hidden_layers = " + std::to_string(c.num_hidden_layers) +
               " entries, each \"linear_attention\" or \"full_attention\"");
  }
  // transformers' remap_legacy_layer_types reads "mamba" as linear_attention and "attention" as
  // full_attention.
  for (const nlohmann::json& t : types) {
    if (t == "linear_attention" || t == "mamba") {
      c.layer_types.push_back(AttentionType::kLinear);
    } else if (t == "full_attention" || t == "attention") {
      c.layer_types.push_back(AttentionType::kFull);
    } else {
      f.fail("layer_types", t.dump().substr(0, 60) +
                                " is not a layer type; expected \"linear_attention\" or "
                                "\"full_attention\"");
    }
  }
}

void parse_linear_attention(const ConfigFields& f, ModelConfig& c) {
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.25);
  c.linear_num_key_heads = f.integer("linear_num_key_heads", 16);
  c.linear_num_value_heads = f.integer("linear_num_value_heads", 32);
  c.linear_key_head_dim = f.integer("linear_key_head_dim", 128);
  c.linear_value_head_dim = f.integer("linear_value_head_dim", 128);
  c.linear_conv_kernel_dim = f.integer("linear_conv_kernel_dim", 4);
  parse_layer_types(f, c);
}

void parse_qwen35_text(const ConfigFields& f, ModelConfig& c, const RotaryDecoderSizes& sizes) {
  parse_rotary_decoder(
      f, c,
      {.sizes = sizes, .max_position_embeddings = 32768, .rms_norm_eps = 1e-6, .head_dim = 256});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  f.boolean("attn_output_gate", true);
  parse_linear_attention(f, c);
}

void linear_attention_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["linear_num_key_heads"] = c.linear_num_key_heads;
  j["linear_num_value_heads"] = c.linear_num_value_heads;
  j["linear_key_head_dim"] = c.linear_key_head_dim;
  j["linear_value_head_dim"] = c.linear_value_head_dim;
  j["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
  j["layer_types"] = layer_types_json(c);
}

}  // namespace shardplan::tensor::models
