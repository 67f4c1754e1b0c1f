// LFM2's short-convolution token mixer (Liquid AI's LFM2 and LFM2-MoE "conv" layers, transformers'
// Lfm2ShortConv): a gated depthwise causal convolution in place of attention. Internal to
// tensor/models/: the rotary decoder builds it, as "conv", for the layers that attend kLinear when
// its style asks for it (RotaryDecoderStyle::linear_mixer). h hidden, K the convolution's width
// (conv_L_cache, ModelConfig::linear_conv_kernel_dim); in named_parameters order:
//   conv.weight [h, 1, K] (+ conv.bias [h])       nn.Conv1d(h, h, K, groups = h), depthwise
//   in_proj.weight [3 h, h] (+ bias [3 h])         [B | C | x], one projection
//   out_proj.weight [h, h] (+ bias [h])            (all three biases by conv_bias:
//                                                   ModelConfig::linear_conv_bias)
// Note [Short convolution trace]
// Per token: in_proj; B * x (the input gate); the causal convolution over the K - 1 earlier
// tokens, without an activation (causal_conv1d_fn with activation None, one kernel, as trainers
// run it with the causal-conv1d package; transformers' fallback computes K - 1 extra outputs and
// drops them); C * that (the output gate); out_proj. No state, no keys: under context
// parallelism a rank needs only the K - 1 tokens before its chunk (not priced, as the Gated
// DeltaNet's chunk state is not).
#pragma once

#include <memory>
#include <string>

#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// The short convolution of `c` (linear_conv_kernel_dim set), typed `type_name` ("Lfm2ShortConv").
std::shared_ptr<AttentionBlock> make_short_conv(const ModelConfig& c, const std::string& type_name,
                                                const TensorOptions& o);

}  // namespace shardplan::tensor::models
