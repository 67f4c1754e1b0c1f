// mamba2: a pure Mamba-2 language model (Mamba2ForCausalLM; Mistral's Mamba-Codestral-7B,
// state-spaces' mamba2-* checkpoints). transformers 5's Mamba2Config and modeling_mamba2.py: no
// attention and no MLP, each `backbone.layers.N` (Mamba2Block) a pre-norm `norm` and one Mamba-2
// `mixer` (tensor/models/mamba2_mixer.h, Mamba2Mixer: H = num_heads heads of P = head_dim,
// d_inner = expand x hidden_size = H P, n_groups groups of state_size, conv_kernel taps, its gated
// norm MambaRMSNormGated over d_inner), then `backbone.norm_f` and lm_head (untied by default):
//   backbone.embeddings.weight [vocab, h]
//   backbone.layers.N.norm.weight [h]
//   backbone.layers.N.mixer.{dt_bias, A_log, D} [H], conv1d.weight [conv, 1, K], conv1d.bias
//   [conv], in_proj.weight [d_inner + conv + H, h], norm.weight [d_inner], out_proj.weight
//   [h, d_inner]   (conv = d_inner + 2 n_groups state_size; biases of in/out_proj: use_bias)
//   backbone.norm_f.weight [h], lm_head.weight [vocab, h]
// The backbone, its blocks and lm_head are the shell the Mamba-1 families share
// (tensor/models/mamba_lm.h, Note [Pure state-space blocks]). ModelConfig keeps the mixer in its
// linear_* fields, every layer kLinear and in no_ffn_layers (the single-part layers of
// Nemotron-H). The model has no attention: num_attention_heads, num_key_value_heads and head_dim
// hold the mixer's heads and head width and intermediate_size d_inner, so that the sizes
// ModelConfig requires describe the mixer (nothing builds them).
#include <nlohmann/json.hpp>
#include <string>

#include "base/checked.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/mamba_lm.h"

namespace shardplan::tensor {

extern const ModelFamily kMamba2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_mamba_lm(f, c,
                         {.vocab_size = 32768,
                          .hidden_size = 4096,
                          .num_hidden_layers = 64,
                          .tie_word_embeddings = false});
  if (f.string("hidden_act", "silu") != "silu") {
    f.fail("hidden_act", "'" + f.string("hidden_act", "") +
                             "' is not built; expected \"silu\" (the fused scan's SiLU)");
  }
  const int64_t heads = f.integer("num_heads", 128);
  const int64_t head_dim = f.integer("head_dim", 64);
  const int64_t expand = f.integer("expand", 2);
  // Mamba2Config.validate_architecture: expand x hidden_size must be num_heads x head_dim.
  int64_t inner = 0, by_heads = 0;
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("expand",
           std::to_string(expand) + " must be positive, with expand x hidden_size in int64");
  }
  if (heads <= 0 || head_dim <= 0 || !mul_into(heads, head_dim, by_heads) || by_heads != inner) {
    f.fail("num_heads", std::to_string(heads) + " heads of head_dim " + std::to_string(head_dim) +
                            " must be expand x hidden_size = " + std::to_string(inner) +
                            " wide (Mamba2Config's validate_architecture)");
  }
  c.hidden_act = "silu";  // the mixer's gate (no MLP)
  c.linear_num_value_heads = heads;
  c.linear_value_head_dim = head_dim;
  c.linear_num_key_heads = f.integer("n_groups", 8);
  c.linear_key_head_dim = f.integer("state_size", 128);
  c.linear_conv_kernel_dim = f.integer("conv_kernel", 4);
  c.linear_conv_bias = f.boolean("use_conv_bias", true);
  c.linear_proj_bias = f.boolean("use_bias", false);
  // The scan's chunk changes the kernels' tiling, not the model (Note [Mamba-2 scan work] in
  // tensor/ops.h); time_step_* and rescale_prenorm_residual are initialization, time_step_limit
  // a clamp at run time, time_step_rank sizes nothing in Mamba-2.
  if (f.integer("chunk_size", 256) <= 0) {
    f.fail("chunk_size", "must be positive, got " + f.raw("chunk_size").dump());
  }
  c.num_attention_heads = heads;
  c.num_key_value_heads = heads;
  c.head_dim = head_dim;
  c.intermediate_size = inner;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::mamba_lm_to_hf_json(c, j);
  j["hidden_act"] = "silu";
  j["num_heads"] = c.linear_num_value_heads;
  j["head_dim"] = c.linear_value_head_dim;
  j["expand"] = c.linear_num_value_heads * c.linear_value_head_dim / c.hidden_size;
  j["n_groups"] = c.linear_num_key_heads;
  j["state_size"] = c.linear_key_head_dim;
  j["conv_kernel"] = c.linear_conv_kernel_dim;
  j["use_conv_bias"] = c.linear_conv_bias;
  j["use_bias"] = c.linear_proj_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/) {
  return models::build_mamba_lm(
      c, o, "Mamba2", [](const ModelConfig& cfg, const TensorOptions& opts) {
        return models::make_mamba2_mixer(cfg, "Mamba2Mixer", "MambaRMSNormGated", opts);
      });
}

constexpr FieldRename kRenames[] = {
    {"norm_eps", "layer_norm_epsilon"},        {"num_attention_heads", "num_heads"},
    {"linear_num_key_heads", "n_groups"},      {"linear_num_value_heads", "num_heads"},
    {"linear_key_head_dim", "state_size"},     {"linear_value_head_dim", "head_dim"},
    {"linear_conv_kernel_dim", "conv_kernel"}, {"linear_conv_bias", "use_conv_bias"},
    {"linear_proj_bias", "use_bias"}};

// Megatron-LM's split of a Mamba-2 mixer (its MambaMixer): in_proj column-parallel and out_proj
// row-parallel, the heads and groups over the ranks (the planner requires tp to divide both);
// the embedding by vocabulary rows and lm_head by vocabulary, as every family.
constexpr TensorParallelRule kTpPlan[] = {{"backbone.embeddings", "rowwise"},
                                          {"backbone.layers.*.mixer.in_proj", "colwise"},
                                          {"backbone.layers.*.mixer.out_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

// No init rules: dt_bias is the inverse softplus of a log-uniform draw and conv1d / out_proj are
// kaiming_uniform_ (Mamba2PreTrainedModel._init_weights), fills shardplan's kernels do not have,
// so materialize refuses the family by name (docs/models.md).
const ModelFamily kMamba2Family{
    .model_type = "mamba2",
    .hf_class_prefix = "Mamba2",
    .layers_path = "backbone.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .linear_attention = true,
    .single_part_layers = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
