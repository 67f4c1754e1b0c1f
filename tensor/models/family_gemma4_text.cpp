// gemma4_text (Gemma 4 E2B, E4B, 31B and 26B-A4B, and the language model of the multimodal
// `gemma4` files): transformers' Gemma4TextConfig (vocab 262144, hidden 2304, 30 layers, 8 heads, 4
// key-value heads, head_dim 256 on sliding layers and global_head_dim 512 on full ones, a window
// of 512 on every layer but each sixth, the last layer always full, max positions 131072,
// rms_norm_eps 1e-6, tied, gelu_pytorch_tanh) and modeling_gemma4.py. What differs from Gemma 3
// (docs/models.md "Gemma 4"):
// - a plain RMSNorm scaled by its weight (Gemma4RMSNorm, started at one), not Gemma's (1 + w);
// - per layer type: the full layers' own head width and, with attention_k_eq_v, their own
//   key-value heads and no v_proj (the values are the key projection before k_norm and RoPE);
//   RoPE keyed by layer type ("proportional" on full layers rotates the whole head, most of its
//   frequencies zero: no narrower table);
// - the attention: q_norm, k_norm and a weightless v_norm over each head, softmax scale 1;
// - with enable_moe_block every layer runs its dense MLP and 128-expert-style routed experts side
//   by side: a router (weightless norm, `scale`, `per_expert_scale`, `proj`) and the experts are
//   the layer's own children, each branch post-normed, then both by post_feedforward_layernorm;
// - each layer ends by multiplying by its `layer_scalar` (a persistent [1] buffer);
// - E2B and E4B: per-layer embeddings (hidden_size_per_layer_input, on by default): a second
//   table of every layer's slice of width P per token plus a projection of the embeddings, mixed
//   at the model's start, each layer gating its slice into the residual after its feed-forward;
//   and key-value sharing: the last num_kv_shared_layers layers have no k/v projections and
//   attend with the keys and values of the last earlier layer of their type (with
//   use_double_wide_mlp their MLPs are twice as wide).
// The config reading, the writing back and the modules are shared with gemma4_unified_text
// (tensor/models/gemma4_text_model.h).
#include <nlohmann/json.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/gemma4_text_model.h"

namespace shardplan::tensor {

extern const ModelFamily kGemma4TextFamily;  // listed in family_registry.cpp

namespace {

constexpr models::Gemma4TextSpec kSpec{.config = "Gemma4TextConfig",
                                       .causal_lm = "Gemma4ForCausalLM",
                                       .model = "Gemma4TextModel",
                                       .decoder_layer = "Gemma4TextDecoderLayer",
                                       .attention = "Gemma4TextAttention",
                                       .mlp = "Gemma4TextMLP",
                                       .norm = "Gemma4RMSNorm",
                                       .rotary = "Gemma4TextRotaryEmbedding",
                                       .max_position_embeddings = 131072,
                                       .sliding_window = 512,
                                       .per_layer_inputs_and_experts = true};

void parse(const ConfigFields& f, ModelConfig& c) { models::parse_gemma4_text(f, c, kSpec); }

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::gemma4_text_to_hf_json(c, j, kSpec);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_gemma4_text(c, o, training, kSpec);
}

constexpr FieldRename kGemma4Renames[] = {
    {"hidden_act", "hidden_activation"},
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"num_local_experts", "num_experts"},
    {"num_experts_per_tok", "top_k_experts"},
    {"global_num_key_value_heads", "num_global_key_value_heads"},
    {"rope_theta", "rope_parameters"},
    {"per_layer_input_size", "hidden_size_per_layer_input"},
    {"per_layer_input_vocab", "vocab_size_per_layer_input"},
    {"double_wide_shared_mlp", "use_double_wide_mlp"}};

// The Llama plan with the experts and the router the layer's own children: the dense MLP split
// as Llama's, each expert as a gated MLP (style "experts"), router and norms replicated; the
// per-layer table split by rows as the token table (half of E2B's parameters), its projection
// and each layer's gate replicated.
constexpr TensorParallelRule kGemma4TpPlan[] = {{"model.embed_tokens", "rowwise"},
                                                {"model.embed_tokens_per_layer", "rowwise"},
                                                {"model.layers.*.self_attn.q_proj", "colwise"},
                                                {"model.layers.*.self_attn.k_proj", "colwise"},
                                                {"model.layers.*.self_attn.v_proj", "colwise"},
                                                {"model.layers.*.self_attn.o_proj", "rowwise"},
                                                {"model.layers.*.mlp.gate_proj", "colwise"},
                                                {"model.layers.*.mlp.up_proj", "colwise"},
                                                {"model.layers.*.mlp.down_proj", "rowwise"},
                                                {"model.layers.*.experts", "experts"},
                                                {"lm_head", "colwise"}};

// Gemma4PreTrainedModel._init_weights: PreTrainedModel's (Linear normal, bias zero, Embedding
// normal with the padding row zero, every RMSNorm weight one: Gemma 4's is not an offset), the
// experts normal, the router's scale and per_expert_scale one (layer_scalar, one, is a buffer).
constexpr InitRule kGemma4InitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"Gemma4TextExperts", "gate_up_proj", InitFill::kNormal},
                                         {"Gemma4TextExperts", "down_proj", InitFill::kNormal},
                                         {"Gemma4TextRouter", "scale", InitFill::kOnes},
                                         {"Gemma4TextRouter", "per_expert_scale", InitFill::kOnes},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"Gemma4RMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kGemma4TextFamily{
    .model_type = "gemma4_text",
    .hf_class_prefix = "Gemma4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGemma4Renames,
    .rope_parameters_by_layer_type = true,
    .experts_class = "Gemma4TextExperts",
    .tp_plan = kGemma4TpPlan,
    .init_rules = kGemma4InitRules,
};

}  // namespace shardplan::tensor
