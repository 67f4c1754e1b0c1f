// granitemoehybrid (IBM Granite 4.0: granite-4.0-h-small, -h-tiny, -h-micro; granite-4.0-micro
// without mamba layers). transformers 5's GraniteMoeHybridConfig and
// modeling_granitemoehybrid.py: each layer registers input_layernorm, post_attention_layernorm,
// block_sparse_moe (GraniteMoe's router and fused experts, only when num_local_experts > 0),
// shared_mlp (input_linear [2 S, h] = [gate; up], output_linear [h, S], S =
// shared_intermediate_size; always), then its token mixer: `mamba`, a Mamba-2 mixer
// (tensor/models/mamba2_mixer.h), on the layers whose layer_types entry is "mamba" (transformers
// 5 reads it as linear_attention; no list: every layer), else `self_attn`. The feed-forward is the
// routed experts plus the shared MLP, or the shared MLP alone without experts. Granite's four
// multipliers apply; RoPE only with position_embedding_type "rope" (the released files say
// "nope": no position encoding at all, the mamba layers carry position).
// Where the file is silent, the class's defaults: 8 experts of top 2, shared_intermediate_size
// 1024, mamba_n_heads 128, mamba_n_groups 1, mamba_d_state 256, mamba_d_head "auto" (mamba_expand
// h / mamba_n_heads), mamba_d_conv 4, mamba_expand 2, conv bias on, projection biases off.
// Without experts, shardplan keeps the shared MLP's width in intermediate_size (the file's
// intermediate_size sizes nothing then) and writes it back as shared_intermediate_size.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/linear_attention_config.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGraniteMoeHybridFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_granite_multipliers(f, c);
  const int64_t experts = f.integer("num_local_experts", 8);
  const int64_t shared = f.integer("shared_intermediate_size", 1024);
  if (shared <= 0) {
    f.fail("shared_intermediate_size",
           "must be positive (every layer has a shared MLP), got " + std::to_string(shared));
  }
  if (experts != 0) {
    c.num_local_experts = experts;
    c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
    c.shared_expert_intermediate_size = shared;
  } else {
    f.has("num_experts_per_tok");  // no experts to route to
    c.intermediate_size = shared;
  }
  const std::string position = f.string("position_embedding_type", "nope");
  if (position != "rope" && position != "nope") {
    f.fail("position_embedding_type",
           "'" + position + "' is not a position encoding; expected \"rope\" or null (\"nope\")");
  }
  models::parse_mamba2_config(f, c);
  if (f.has("layer_types")) {
    models::read_linear_layer_types(f, c);
  } else {
    c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kLinear);
  }
  if (position != "rope") {  // the attention layers take no position encoding
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (c.layer_types[static_cast<size_t>(i)] != AttentionType::kLinear)
        c.nope_layers.push_back(i);
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  models::granite_multipliers_to_hf_json(c, j);
  j["num_local_experts"] = c.num_local_experts;
  if (c.num_local_experts > 0) {
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["shared_intermediate_size"] = c.shared_expert_intermediate_size;
  } else {
    j["shared_intermediate_size"] = c.intermediate_size;
  }
  j["position_embedding_type"] = c.nope_layers.empty() ? "rope" : "nope";
  models::mamba2_config_to_hf_json(c, j);
  nlohmann::json types = nlohmann::json::array();
  for (AttentionType t : c.layer_types)
    types.push_back(t == AttentionType::kLinear ? "mamba" : "attention");
  j["layer_types"] = types;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kGraniteMoeHybridFamily.hf_class_prefix,
       .linear_mixer = models::LinearMixer::kMamba2,
       .ffn_name = "block_sparse_moe",
       .norms_before_ffn = true,
       .mixer_last = true,
       .rotary_module_only_with_rope = true,
       .granite_multipliers = true,
       .moe = {.router = "router", .shared_in_layer = true, .softmax_after_top_k = true}});
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"qkv_bias", "attention_bias"},
                                    {"o_bias", "attention_bias"},
                                    {"shared_expert_intermediate_size", "shared_intermediate_size"},
                                    {"linear_num_key_heads", "mamba_n_groups"},
                                    {"linear_num_value_heads", "mamba_n_heads"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_value_head_dim", "mamba_d_head"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"}};

// GraniteMoe's rules: the routed experts and the shared MLP split as there, attention's q, k, v
// and o as Megatron-LM's; the Mamba-2 mixer's in_proj column-parallel and out_proj row-parallel
// (Megatron-LM's MambaMixer: heads and groups split over the ranks, which the planner holds to
// tp dividing the groups).
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.q_proj", "colwise"},
                                          {"model.layers.*.self_attn.k_proj", "colwise"},
                                          {"model.layers.*.self_attn.v_proj", "colwise"},
                                          {"model.layers.*.self_attn.o_proj", "rowwise"},
                                          {"model.layers.*.mamba.in_proj", "colwise"},
                                          {"model.layers.*.mamba.out_proj", "rowwise"},
                                          {"model.layers.*.block_sparse_moe.experts", "experts"},
                                          {"model.layers.*.shared_mlp.input_linear", "colwise", 2},
                                          {"model.layers.*.shared_mlp.output_linear", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kGraniteMoeHybridFamily{
    .model_type = "granitemoehybrid",
    .hf_class_prefix = "GraniteMoeHybrid",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .experts_class = "GraniteMoeHybridExperts",
    .linear_attention = true,
    .tp_plan = kTpPlan,
    .init_rules = models::kMamba2DecoderInitRules,
};

}  // namespace shardplan::tensor
