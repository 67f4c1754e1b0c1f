// The pure state-space language models: Mamba-1's MambaForCausalLM and FalconMambaForCausalLM
// (tensor/models/mamba_mixer.h) and Mamba-2's Mamba2ForCausalLM (mamba2_mixer.h). No attention and
// no MLP: `backbone.embeddings`, `backbone.layers.N` each a pre-norm `norm` and one token `mixer`,
// `backbone.norm_f`, then lm_head (tied to the embeddings with tie_word_embeddings). Internal to
// tensor/models/; a family gives its class prefix, its config class's defaults and its mixer:
//   models::parse_mamba_lm(f, c, {.vocab_size = 50280, .hidden_size = 768, ...});
//   return models::build_mamba_lm(c, o, "Mamba", [](const ModelConfig& c, const TensorOptions& o) {
//     return models::make_mamba_mixer(c, "MambaMixer", o);
//   });
// Names and order are transformers' (modeling_mamba.py, modeling_falcon_mamba.py,
// modeling_mamba2.py), h hidden, V vocabulary:
//   backbone.embeddings.weight [V, h]
//   backbone.layers.N.norm.weight [h], backbone.layers.N.mixer.*   (the mixer's own)
//   backbone.norm_f.weight [h]
//   lm_head.weight [V, h]                                           (none when tied)
// ModelConfig keeps every layer kLinear and in no_ffn_layers (single-part blocks: Nemotron-H's,
// ModelFamily::single_part_layers), the mixer in its linear_* fields; the attention sizes it
// requires (num_attention_heads, num_key_value_heads, head_dim, intermediate_size) the family sets
// to the mixer's heads and channels, which nothing builds as attention.
//
// Note [Pure state-space blocks]
// MambaBlock / FalconMambaBlock / Mamba2Block: x + mixer(norm(x)), the norm's input cast to the
// norm's dtype and, with residual_in_fp32 (every class's default), the residual cast to float32
// before the add, so the block's output, the stream between blocks, is float32. norm_f then norms
// that stream as it is (the RMSNorms return weight x normed in the input's dtype: float32 out of a
// float32 stream), and *ForCausalLM.forward casts it to lm_head's dtype before the output layer.
// The logits' .float() there is left out, as every family leaves transformers' loss upcast out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// A state-space model has no positions and no limit on its length, and its config classes have
// no max_position_embeddings. This stands in for it, so that any --seq up to a million tokens
// plans without a note (beyond, plan says the model has no position encoding and plans it anyway).
inline constexpr int64_t kNoPositionLimit = int64_t{1} << 20;

// The config class's defaults of the keys the three classes share.
struct MambaLmDefaults {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  bool tie_word_embeddings = false;
};

// Reads what MambaConfig, FalconMambaConfig and Mamba2Config share: vocab_size, hidden_size,
// num_hidden_layers (bounded before the per-layer lists are made), layer_norm_epsilon (1e-5),
// tie_word_embeddings and residual_in_fp32 (true), with `d` where the file is silent; makes every
// layer a single-part mixer block (kLinear, in no_ffn_layers) without a position limit.
void parse_mamba_lm(const ConfigFields& f, ModelConfig& c, const MambaLmDefaults& d);
// What parse_mamba_lm reads back (vocab_size and tie_word_embeddings are to_hf_json's own).
void mamba_lm_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// One layer's token mixer, typed as the family names it.
using MixerFactory =
    std::function<std::shared_ptr<AttentionBlock>(const ModelConfig&, const TensorOptions&)>;

// <prefix>ForCausalLM of `c` (Note [Pure state-space blocks]): <prefix>Model under `backbone`,
// its <prefix>Block layers each with the mixer `make_mixer` builds. Nothing differs in training
// (no dropout).
ModulePtr build_mamba_lm(const ModelConfig& c, const TensorOptions& o, const std::string& prefix,
                         const MixerFactory& make_mixer);

// The Mamba-1 models' tensor-parallel split (mamba, falcon_mamba): the mixer as vLLM's
// MambaMixer splits it (Note [Mamba-1 trace] in tensor/models/mamba_mixer.h: in_proj
// column-parallel over its two halves [x; z], x_proj row-parallel, dt_proj column-parallel,
// out_proj row-parallel); the embedding by vocabulary rows and lm_head by vocabulary, as every
// family (tied, both lay the one weight out by vocabulary rows); the norms replicated.
inline constexpr TensorParallelRule kMamba1LmTpPlan[] = {
    {"backbone.embeddings", "rowwise"},
    {"backbone.layers.*.mixer.in_proj", "colwise", 2},
    {"backbone.layers.*.mixer.x_proj", "rowwise"},
    {"backbone.layers.*.mixer.dt_proj", "colwise"},
    {"backbone.layers.*.mixer.out_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace shardplan::tensor::models
