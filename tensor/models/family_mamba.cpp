// mamba: a pure Mamba-1 language model (MambaForCausalLM; state-spaces' mamba-130m-hf to
// mamba-2.8b-hf). transformers 5's MambaConfig and modeling_mamba.py: no attention and no MLP,
// each `backbone.layers.N` (MambaBlock) a pre-norm `norm` and one Mamba-1 `mixer`
// (tensor/models/mamba_mixer.h, MambaMixer without dt/B/C norms), then `backbone.norm_f` and
// lm_head, tied to the embeddings by default (MambaConfig's tie_word_embeddings true). h hidden,
// V vocabulary, D = intermediate_size (else expand x h) channels, N = state_size, R =
// time_step_rank ("auto": ceil(h / 16)), K = conv_kernel:
//   backbone.embeddings.weight [V, h]
//   backbone.layers.N.norm.weight [h]
//   backbone.layers.N.mixer.A_log [D, N], D [D], conv1d.weight [D, 1, K], conv1d.bias [D],
//   in_proj.weight [2 D, h], x_proj.weight [R + 2 N, D], dt_proj.weight [D, R], dt_proj.bias
//   [D], out_proj.weight [h, D]   (biases of in_proj/out_proj: use_bias; conv1d's: use_conv_bias)
//   backbone.norm_f.weight [h], lm_head.weight [V, h] (none when tied)
// The shell is tensor/models/mamba_lm.h (Note [Pure state-space blocks]); the mixer's keys read
// as parse_mamba1_config says. Class defaults: vocabulary 50,280, h 768, 32 layers, N 16, K 4,
// expand 2, layer_norm_epsilon 1e-5, residual_in_fp32 true, tied.
#include <nlohmann/json.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/mamba_lm.h"
#include "tensor/models/mamba_mixer.h"

namespace shardplan::tensor {

extern const ModelFamily kMambaFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_mamba_lm(f, c,
                         {.vocab_size = 50280,
                          .hidden_size = 768,
                          .num_hidden_layers = 32,
                          .tie_word_embeddings = true});
  models::parse_mamba1_config(f, c);
  // time_step_scale, _min, _max, _floor, _init_scheme and rescale_prenorm_residual are
  // initialization; use_mambapy and use_associative_scan pick implementations of the same work
  // (the fused kernels in training, Note [Mamba-1 trace]); the original checkpoints' keys
  // (d_model, n_layer, rms_norm, fused_add_norm, pad_vocab_size_multiple) transformers ignores.
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::mamba_lm_to_hf_json(c, j);
  models::mamba1_config_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/) {
  return models::build_mamba_lm(c, o, "Mamba",
                                [](const ModelConfig& cfg, const TensorOptions& opts) {
                                  return models::make_mamba_mixer(cfg, "MambaMixer", opts);
                                });
}

// The channels stand for the attention sizes (parse_mamba1_config): an error about them names
// the file's key.
constexpr FieldRename kRenames[] = {
    {"norm_eps", "layer_norm_epsilon"},           {"num_attention_heads", "intermediate_size"},
    {"num_key_value_heads", "intermediate_size"}, {"linear_num_value_heads", "intermediate_size"},
    {"linear_key_head_dim", "state_size"},        {"linear_conv_kernel_dim", "conv_kernel"},
    {"linear_conv_bias", "use_conv_bias"},        {"linear_proj_bias", "use_bias"},
    {"linear_dt_rank", "time_step_rank"}};

}  // namespace

// No init rules: MambaPreTrainedModel._init_weights draws dt_proj's weight uniform in
// +-time_step_rank^-0.5, its bias as the inverse softplus of a log-uniform draw, and conv1d and
// out_proj kaiming-uniform, fills shardplan's kernels do not have, so materialize refuses the
// family by name (docs/models.md).
const ModelFamily kMambaFamily{
    .model_type = "mamba",
    .hf_class_prefix = "Mamba",
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
