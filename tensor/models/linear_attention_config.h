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
// The file's layer_types into c.layer_types: one entry per layer, "linear_attention" (or
// "mamba", transformers' legacy name) or "full_attention" (or "attention").
void read_linear_layer_types(const ConfigFields& f, ModelConfig& c);
void linear_attention_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// What Qwen3.5's two text configs share (Qwen3_5TextConfig, Qwen3_5MoeTextConfig): the rotary
// decoder's fields with the class's `sizes` where the file is silent (a multimodal file's
// text_config may lean on them), head_dim 256, 32768 positions, rms_norm_eps 1e-6,
// attention_bias, attn_output_gate (read; the attention gates whatever it says, as transformers'
// does), and parse_linear_attention.
void parse_qwen35_text(const ConfigFields& f, ModelConfig& c, const RotaryDecoderSizes& sizes);

// The tensor-parallel plan of the three families: kMoeTpPlan's rules (the planner applies those
// that match the model at hand: Qwen3.5's dense MLP, the MoE families' experts and gated shared
// expert), and the Gated DeltaNet split by key-head groups (Note [Gated DeltaNet trace] in
// tensor/models/gated_delta_net.h): its input projections column-parallel in either layout
// (Qwen3-Next's fused in_proj_qkvz / in_proj_ba, Qwen3.5's four; each of in_proj_qkv's three
// parts split over the ranks, as Megatron-LM does), out_proj row-parallel. The gated q_proj's
// rows are [query | gate] per head, so its column split is a split by heads too.
inline constexpr TensorParallelRule kLinearAttentionTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.linear_attn.in_proj_qkvz", "colwise"},
    {"model.layers.*.linear_attn.in_proj_ba", "colwise"},
    {"model.layers.*.linear_attn.in_proj_qkv", "colwise"},
    {"model.layers.*.linear_attn.in_proj_z", "colwise"},
    {"model.layers.*.linear_attn.in_proj_b", "colwise"},
    {"model.layers.*.linear_attn.in_proj_a", "colwise"},
    {"model.layers.*.linear_attn.out_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_expert.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_expert.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_expert.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace shardplan::tensor::models
