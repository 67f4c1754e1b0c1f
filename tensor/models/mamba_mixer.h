// The Mamba-1 mixer (Gu and Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State
// Spaces"), the token mixer of Jamba's mamba layers (kLinear: transformers 5 reads Jamba's "mamba"
// layers as linear_attention). Internal to tensor/models/; a family builds it for its kLinear
// layers:
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
// (model_config.h). transformers' MambaMixer and FalconMambaMixer (mamba, falcon_mamba) are this
// module without the norms (FalconMamba: the same three RMSNorms without weights), for families to
// come.
//
// Note [Mamba-1 trace]
// Traced as trainers run it in training (transformers' path with the kernels installed:
// causal-conv1d's causal_conv1d_fn and mamba_ssm's selective_scan_fn): in_proj, its [B, 2 D, T]
// view split into x and the gate z; A = -exp(A_log) in fp32; the causal depthwise convolution
// with SiLU over x; x_proj on its [B, T, D] view and the split into dt, B and C, each normed
// (Jamba); dt_proj's weight times dt, [B, D, T] (transformers reads dt_proj.weight, and passes
// dt_proj.bias in fp32 to the scan as delta_bias; the product is traced inside dt_proj's call so
// that the tensor-parallel plan's rule on dt_proj names it); the copies the scan makes of its
// inputs whose last dim is not contiguous (B and C transposed, z); the selective scan (D in fp32,
// Note [Mamba-1 scan work] in tensor/ops.h); out_proj on the [B, T, D] view of its output.
// Under tensor parallelism (vLLM's MambaMixer, the split Jamba is served with) in_proj is
// column-parallel over its two halves, the convolution, A_log, D and the scan follow the sharded
// channels, x_proj is row-parallel (its output, dt, B and C, reduced to every rank), dt_proj
// column-parallel and out_proj row-parallel: tp must divide D
// (planner/candidate/parallel_dims.cpp).
#pragma once

#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// What differs in a family's Mamba-1 mixer beyond ModelConfig's linear_* fields.
struct MambaMixerStyle {
  // Jamba: RMSNorms with a weight on dt, B and C after x_proj (dt_layernorm, b_layernorm,
  // c_layernorm, eps ModelConfig::norm_eps), registered after out_proj.
  bool bcdt_norms = false;
};

// The Mamba-1 mixer of `c` (linear_dt_rank > 0, linear_value_head_dim 1, linear_num_key_heads 1),
// typed `type_name` ("JambaMambaMixer").
std::shared_ptr<AttentionBlock> make_mamba_mixer(const ModelConfig& c, const std::string& type_name,
                                                 const TensorOptions& o,
                                                 const MambaMixerStyle& style = {});

}  // namespace shardplan::tensor::models
