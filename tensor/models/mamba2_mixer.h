// The Mamba-2 mixer (Dao and Gu 2024, "Transformers are SSMs: Generalized Models and Efficient
// Algorithms Through Structured State Space Duality"), the token mixer of Granite 4.0's mamba
// layers (kLinear, transformers 5 reads their "mamba" layer type as linear_attention). Internal
// to tensor/models/: the rotary decoder builds it, as "mamba", for the layers that attend kLinear
// when its style asks for Mamba-2 (RotaryDecoderStyle::linear_mixer). Names and shapes are
// transformers' GraniteMoeHybridMambaLayer (modeling_granitemoehybrid.py), h hidden, H heads of
// width P (d_inner = H P = mamba_expand h), g groups of state width N, K the convolution width,
// conv_dim = d_inner + 2 g N; in named_parameters order (the module's own first):
//   dt_bias [H], A_log [H], D [H]
//   conv1d.weight [conv_dim, 1, K], conv1d.bias [conv_dim]      (bias: mamba_conv_bias)
//   in_proj.weight [2 d_inner + 2 g N + H, h] (+ bias)          ([z | x B C | dt])
//   norm.weight [d_inner]                                        (the gated RMSNorm)
//   out_proj.weight [h, d_inner] (+ bias)                        (bias: mamba_proj_bias)
// ModelConfig keeps g, N, H, P and K in its linear_* fields (model_config.h). Falcon-H1's
// FalconH1Mixer is the same module with d_inner its own (mamba_d_ssm), the norm optional
// (ModelConfig::linear_gated_norm: none without mamba_rms_norm, nn.Identity there), out_proj's
// bias its own (linear_out_proj_bias: projectors_bias), and its muP multipliers
// (Mamba2MixerStyle::mup_multipliers) around in_proj.
// Note [Mamba-2 trace]
// Traced as trainers run it in training (transformers' cuda_kernels_forward with mamba_ssm
// installed, Megatron-LM's MambaMixer): in_proj; A = -exp(A_log) in fp32; the split, the causal
// convolution, the chunked scan and the gated norm as one fused op
// (mamba_split_conv1d_scan_combined, Note [Mamba-2 scan work] in tensor/ops.h); out_proj.
// (transformers hands out_proj to the fused function too; Megatron-LM runs it apart, as a
// row-parallel linear: the same product.) Without the gated norm the fused op gates y * silu(z)
// inside the scan and writes no rstd. Under tensor parallelism Megatron-LM splits the heads
// and groups over the ranks and requires tp to divide both (the planner's rule, ParallelDim tp).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tensor/models/config_fields.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// nn.Conv1d's parameters for a module whose forward is a fused op reading them: weight [channels,
// 1, width] (depthwise) and bias [channels] (None without `bias`, as nn.Conv1d registers it),
// typed "Conv1d".
ModulePtr make_conv1d_parameters(int64_t channels, int64_t width, bool bias,
                                 const TensorOptions& o);

// What differs in a family's mixer beyond ModelConfig's linear_* fields.
struct Mamba2MixerStyle {
  // Falcon-H1 (FalconH1Mixer.forward): the input times ModelConfig::ssm_in_multiplier before
  // in_proj, and in_proj's output times `mup_vector` [1, 1, 2 d_inner + 2 g N + H], a
  // non-persistent buffer in the parameters' dtype (ModelConfig::ssm_multipliers over the z, x,
  // B, C and dt segments; not in checkpoints): two multiplies, even at 1.
  bool mup_multipliers = false;
};

// The Mamba-2 mixer of `c` (linear_* fields set), typed `type_name` ("GraniteMoeHybridMambaLayer",
// "NemotronHMamba2Mixer", "FalconH1Mixer"), its gated norm `norm_type_name` (none when
// c.linear_gated_norm is false).
std::shared_ptr<AttentionBlock> make_mamba2_mixer(const ModelConfig& c,
                                                  const std::string& type_name,
                                                  const std::string& norm_type_name,
                                                  const TensorOptions& o,
                                                  const Mamba2MixerStyle& style = {});

// The Mamba-2 fields of the Mamba2Config-style families (granitemoehybrid, bamba) into
// ModelConfig's linear_* fields, with the classes' defaults where the file is silent:
// mamba_n_heads 128, mamba_expand 2 (d_inner = mamba_expand x hidden_size, which mamba_n_heads
// must divide), mamba_d_head "auto" (d_inner / mamba_n_heads; any other value must equal it),
// mamba_n_groups 1, mamba_d_state 256, mamba_d_conv 4, mamba_conv_bias true, mamba_proj_bias
// false; mamba_chunk_size read (positive) and time_step_limit read.
void parse_mamba2_config(const ConfigFields& f, ModelConfig& c);
// What parse_mamba2_config reads back.
void mamba2_config_to_hf_json(const ModelConfig& c, nlohmann::json& j);

}  // namespace shardplan::tensor::models
