// falcon_mamba: TII's Falcon Mamba (FalconMambaForCausalLM; tiiuae/falcon-mamba-7b and its
// instruct and quantized releases). transformers 5's FalconMambaConfig and modeling_falcon_mamba.py
// (generated from modular_falcon_mamba.py): Mamba-1 (tensor/models/mamba_lm.h, the `mamba`
// family's shell) whose mixer RMS-norms dt, B and C after x_proj without weights
// (FalconMambaWeightlessRMSNorm: dt_layernorm, b_layernorm, c_layernorm, eps mixer_rms_eps, their
// buffer of ones non-persistent and unused): the same parameters as MambaMixer, so the same
// names and shapes (family_mamba.cpp's head comment):
//   backbone.embeddings.weight [V, h]
//   backbone.layers.N.norm.weight [h]
//   backbone.layers.N.mixer.A_log [D, N], D [D], conv1d.weight [D, 1, K], conv1d.bias [D],
//   in_proj.weight [2 D, h], x_proj.weight [R + 2 N, D], dt_proj.weight [D, R], dt_proj.bias
//   [D], out_proj.weight [h, D]
//   backbone.norm_f.weight [h], lm_head.weight [V, h] (none when tied)
// Class defaults: MambaConfig's (vocabulary 50,280, h 768, 32 layers, N 16, K 4, expand 2,
// tied) and mixer_rms_eps 1e-6. The released 7B file unties lm_head and says expand 16 beside
// intermediate_size 8,192: the key wins (parse_mamba1_config).
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/mamba_lm.h"
#include "tensor/models/mamba_mixer.h"

namespace shardplan::tensor {

extern const ModelFamily kFalconMambaFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_mamba_lm(f, c,
                         {.vocab_size = 50280,
                          .hidden_size = 768,
                          .num_hidden_layers = 32,
                          .tie_word_embeddings = true});
  models::parse_mamba1_config(f, c);
  c.linear_norm_eps = f.number("mixer_rms_eps", 1e-6);
  if (!(c.linear_norm_eps > 0)) {
    f.fail("mixer_rms_eps", "must be positive, got " + f.raw("mixer_rms_eps").dump());
  }
  // As the mamba family: time_step_* and rescale_prenorm_residual are initialization,
  // use_mambapy (use_falcon_mambapy) and use_associative_scan pick implementations.
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::mamba_lm_to_hf_json(c, j);
  models::mamba1_config_to_hf_json(c, j);
  j["mixer_rms_eps"] = c.linear_norm_eps;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/) {
  return models::build_mamba_lm(
      c, o, "FalconMamba", [](const ModelConfig& cfg, const TensorOptions& opts) {
        return models::make_mamba_mixer(cfg, "FalconMambaMixer", opts,
                                        {.bcdt_norms = true, .bcdt_norm_weights = false});
      });
}

// The channels stand for the attention sizes (parse_mamba1_config): an error about them names
// the file's key.
constexpr FieldRename kRenames[] = {
    {"norm_eps", "layer_norm_epsilon"},           {"num_attention_heads", "intermediate_size"},
    {"num_key_value_heads", "intermediate_size"}, {"linear_num_value_heads", "intermediate_size"},
    {"linear_key_head_dim", "state_size"},        {"linear_conv_kernel_dim", "conv_kernel"},
    {"linear_conv_bias", "use_conv_bias"},        {"linear_proj_bias", "use_bias"},
    {"linear_dt_rank", "time_step_rank"},         {"linear_norm_eps", "mixer_rms_eps"}};

}  // namespace

// No init rules, as the mamba family (FalconMambaPreTrainedModel._init_weights is
// MambaPreTrainedModel's): materialize refuses the family by name (docs/models.md).
const ModelFamily kFalconMambaFamily{
    .model_type = "falcon_mamba",
    .hf_class_prefix = "FalconMamba",
    .layers_path = "backbone.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .linear_attention = true,
    .single_part_layers = true,
    .tp_plan = models::kMamba1LmTpPlan,
};

}  // namespace shardplan::tensor
