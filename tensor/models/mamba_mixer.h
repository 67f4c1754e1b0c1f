// The Mamba-1 mixer (Gu and Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State
// Spaces"), the token mixer of Jamba's mamba layers and of the pure Mamba-1 models (MambaMixer,
// FalconMambaMixer; kLinear: transformers 5 reads their layers as linear_attention). Internal to
// tensor/models/; a family builds it for its kLinear layers:
//   register_module("mamba", make_mamba_mixer(c, "JambaMambaMixer", o, {.bcdt_norms = true}));
// Names and shapes are transformers' JambaMambaMixer (modeling_jamba.py), h hidden, D = d_inner
// channels, N the state width, R the time-step rank, K the convolution width; in named_parameters
// order (the module's own first):
//   A_log [D, N], D [D]
//   conv1d.weight [D, 1, K], conv1d.bias [D]              (bias: ModelConfig::linear_conv_bias)
//   in_proj.weight [2 D, h] (+ bias [2 D])                 ([x | z]; bias: linear_proj_bias)
//   x_proj.weight [R + 2 N, D]                             ([dt | B | C], no bias)
//   dt_proj.weight [D, R], dt_proj.bias [D]
//   out_proj.weight [h, D] (+ bias [h])                    (bias: linear_proj_bias)
//   dt_layernorm.weight [R], b_layernorm.weight [N],      (MambaMixerStyle::bcdt_norms: Jamba's
//   c_layernorm.weight [N]                                  RMSNorms)
// ModelConfig keeps D as linear_num_value_heads heads of width 1 (linear_value_head_dim), N as
// linear_key_head_dim of one group (linear_num_key_heads 1), K, R in linear_dt_rank
// (model_config.h). transformers' MambaMixer (modeling_mamba.py) is this module without the norms;
// FalconMambaMixer (modeling_falcon_mamba.py) has the same three RMSNorms without weights
// (FalconMambaWeightlessRMSNorm: a non-persistent buffer of ones, unused, so no parameters), eps
// mixer_rms_eps (ModelConfig::linear_norm_eps).
//
// Note [Mamba-1 trace]
// Traced as trainers run it in training (transformers' path with the kernels installed:
// causal-conv1d's causal_conv1d_fn and mamba_ssm's selective_scan_fn): in_proj, its [B, 2 D, T]
// view split into x and the gate z; A = -exp(A_log) in fp32; the causal depthwise convolution
// with SiLU over x; x_proj on its [B, T, D] view and the split into dt, B and C, each normed
// (Jamba, FalconMamba); dt_proj's weight times dt, [B, D, T] (transformers reads dt_proj.weight,
// and passes dt_proj.bias in fp32 to the scan as delta_bias; the product is traced inside dt_proj's
// call so that the tensor-parallel plan's rule on dt_proj names it); the copies the scan makes of
// its inputs whose last dim is not contiguous (B and C transposed, z); the selective scan (D in
// fp32, Note [Mamba-1 scan work] in tensor/ops.h); out_proj on the [B, T, D] view of its output.
// MambaMixer and FalconMambaMixer in training call mamba_ssm's mamba_inner_fn instead: the same
// kernels (causal_conv1d_fwd, x_proj's and dt_proj's products, selective_scan_cuda.fwd, out_proj)
// in one autograd function with the same FLOPs, but it keeps less for backward: in_proj's output
// (made contiguous: one [B, 2 D, T] copy), x_proj's output, B, C and the scan's output before the
// gate, and recomputes the convolution's output and delta in backward (checkpoint_lvl 1). The trace
// keeps the unfused path's saved tensors (u, delta, the gate's copy and the gated output besides):
// about 7 D against 3 D values per token and layer, an over-count of the mixer's kept activations
// (docs/models.md, the Mamba leave-outs). mamba_inner_fn norms FalconMamba's dt after dt_proj
// (D wide) where transformers' eager path norms it before (R wide, as traced here).
// Under tensor parallelism (vLLM's MambaMixer, the split Jamba is served with) in_proj is
// column-parallel over its two halves, the convolution, A_log, D and the scan follow the sharded
// channels, x_proj is row-parallel (its output, dt, B and C, reduced to every rank), dt_proj
// column-parallel and out_proj row-parallel: tp must divide D
// (planner/candidate/parallel_dims.cpp).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tensor/models/config_fields.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// What differs in a family's Mamba-1 mixer beyond ModelConfig's linear_* fields.
struct MambaMixerStyle {
  // Jamba, FalconMamba: RMSNorms on dt, B and C after x_proj (dt_layernorm, b_layernorm,
  // c_layernorm), registered after out_proj, eps ModelConfig::linear_norm_eps (0: norm_eps).
  bool bcdt_norms = false;
  // Jamba's norms have a weight each ([R], [N], [N]); FalconMamba's none.
  bool bcdt_norm_weights = true;
};

// The Mamba-1 mixer of `c` (linear_dt_rank > 0, linear_value_head_dim 1, linear_num_key_heads 1),
// typed `type_name` ("JambaMambaMixer", "MambaMixer", "FalconMambaMixer").
std::shared_ptr<AttentionBlock> make_mamba_mixer(const ModelConfig& c, const std::string& type_name,
                                                 const TensorOptions& o,
                                                 const MambaMixerStyle& style = {});

// The mixer keys of MambaConfig and FalconMambaConfig (mamba, falcon_mamba) into ModelConfig's
// linear_* fields and linear_dt_rank, hidden_size already read: d_inner = the file's
// intermediate_size when it has one (transformers sets the file's keys after __post_init__
// computes expand x hidden_size, so the key wins: falcon-mamba-7b's expand 16 beside
// intermediate_size 8,192), else expand (2) x hidden_size; state_size 16, conv_kernel 4,
// use_conv_bias true, use_bias false, time_step_rank "auto" (ceil(hidden_size / 16)) or a positive
// integer, hidden_act "silu" ("swish" the same; others refused: causal-conv1d's kernel applies
// SiLU). The channels are also the attention sizes ModelConfig requires (num_attention_heads and
// num_key_value_heads D of head_dim 1, intermediate_size D), which nothing builds.
void parse_mamba1_config(const ConfigFields& f, ModelConfig& c);
// What parse_mamba1_config reads back.
void mamba1_config_to_hf_json(const ModelConfig& c, nlohmann::json& j);

}  // namespace shardplan::tensor::models
