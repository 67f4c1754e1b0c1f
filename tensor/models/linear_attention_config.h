// The config fields of the hybrid Gated DeltaNet families (qwen3_next, qwen3_5_text,
// qwen3_5_moe_text; internal to tensor/models/), which share Qwen3NextConfig's: the linear
// attention's heads and widths, and which layers attend through it.
//   parse_linear_attention(f, c);      // linear_* fields, layer_types or full_attention_interval
//   linear_attention_to_hf_json(c, j); // what it reads back
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor::models {

// linear_num_key_heads (16), linear_num_value_heads (32), linear_key_head_dim (128),
// linear_value_head_dim (128), linear_conv_kernel_dim (4), and partial_rotary_factor (0.25), the
// config classes' defaults where the file is silent; then the layer types: the file's
// layer_types ("linear_attention" or "full_attention" per layer), else layer i attends in full
// when (i + 1) % full_attention_interval (4) == 0, as the config classes derive them.
void parse_linear_attention(const ConfigFields& f, ModelConfig& c);
void linear_attention_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// What Qwen3.5's two text configs share (Qwen3_5TextConfig, Qwen3_5MoeTextConfig): the rotary
// decoder's fields with the class's `sizes` where the file is silent (a multimodal file's
// text_config may lean on them), head_dim 256, 32768 positions, rms_norm_eps 1e-6,
// attention_bias, attn_output_gate (read; the attention gates whatever it says, as transformers'
// does), and parse_linear_attention.
void parse_qwen35_text(const ConfigFields& f, ModelConfig& c, const RotaryDecoderSizes& sizes);

}  // namespace shardplan::tensor::models
