// gemma4_unified_text (the language model of Google's encoder-free Gemma 4 12B, published as the
// multimodal `gemma4_unified` file): transformers' Gemma4UnifiedTextConfig (vocab 262144, hidden
// 2304, 30 layers, 8 heads, 4 key-value heads, head_dim 256 on sliding layers and global_head_dim
// 512 on full ones, a window of 1024 on every layer but each sixth, the last layer always full,
// max positions 262144, rms_norm_eps 1e-6, tied, gelu_pytorch_tanh, use_bidirectional_attention
// "vision") and Gemma4UnifiedForCausalLM of modeling_gemma4_unified.py, which transformers' causal
// LM mapping registers for this model_type: parameters are named model.*, lm_head.* (the
// checkpoint's model.language_model.* by Note [Multimodal checkpoints] in
// tensor/safetensors_check.cpp).
// modular_gemma4_unified.py makes the text classes from Gemma 4's (family_gemma4_text.cpp): the
// same attention (per-layer-type head widths, attention_k_eq_v, q/k/v norms, softmax
// scale 1, key-value sharing), MLP (double-wide on shared layers), norms (Gemma4UnifiedRMSNorm,
// x / rms(x) * w, w started at one), RoPE keyed by layer type, scaled embeddings, soft-capped
// logits and `layer_scalar` buffer; the decoder layer is Gemma 2's sandwich without Gemma 4's
// per-layer-embedding gate, and the config drops the per-layer embeddings and the experts (its
// model never reads hidden_size_per_layer_input, enable_moe_block, num_experts, ...). So the
// config reading and the modules are Gemma 4's (tensor/models/gemma4_text_model.h) under these
// class names and defaults. A layer's parameters, in named_parameters order:
//   self_attn.q_proj [H d, h], self_attn.q_norm [d], self_attn.k_norm [d],
//   self_attn.k_proj [kv d, h], self_attn.v_proj [kv d, h] (none on a full layer with
//   attention_k_eq_v), self_attn.o_proj [h, H d]  (v_norm has no weight; d and kv the layer
//   type's: head_dim, num_key_value_heads on sliding layers, global_head_dim and with
//   attention_k_eq_v num_global_key_value_heads on full ones; a key-value-shared layer has no k
//   parts)
//   mlp.gate_proj, mlp.up_proj [I, h], mlp.down_proj [h, I]  (2 I on a shared layer with
//   use_double_wide_mlp)
//   input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
//   post_feedforward_layernorm [h]
// and the model's embed_tokens [V, h] (lm_head tied to it by default) and norm [h].
#include <nlohmann/json.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/gemma4_text_model.h"

namespace shardplan::tensor {

extern const ModelFamily kGemma4UnifiedTextFamily;  // listed in family_registry.cpp

namespace {

constexpr models::Gemma4TextSpec kSpec{.config = "Gemma4UnifiedTextConfig",
                                       .causal_lm = "Gemma4UnifiedForCausalLM",
                                       .model = "Gemma4UnifiedTextModel",
                                       .decoder_layer = "Gemma4UnifiedTextDecoderLayer",
                                       .attention = "Gemma4UnifiedTextAttention",
                                       .mlp = "Gemma4UnifiedTextMLP",
                                       .norm = "Gemma4UnifiedRMSNorm",
                                       .rotary = "Gemma4UnifiedTextRotaryEmbedding",
                                       .max_position_embeddings = 262144,
                                       .sliding_window = 1024,
                                       .per_layer_inputs_and_experts = false};

void parse(const ConfigFields& f, ModelConfig& c) { models::parse_gemma4_text(f, c, kSpec); }

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::gemma4_text_to_hf_json(c, j, kSpec);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_gemma4_text(c, o, training, kSpec);
}

constexpr FieldRename kGemma4UnifiedRenames[] = {
    {"hidden_act", "hidden_activation"},
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"global_num_key_value_heads", "num_global_key_value_heads"},
    {"rope_theta", "rope_parameters"},
    {"double_wide_shared_mlp", "use_double_wide_mlp"}};

// Megatron's split of the separate projections (transformers' own base_model_tp_plan: q, k, v,
// gate and up colwise, o and down rowwise), the token table by vocabulary rows and the output
// layer by vocabulary. Each projection's rows are whole heads in head order, so a column split by
// a tp dividing the heads hands a rank whole heads; q_norm and k_norm act within one head and are
// replicated. With attention_k_eq_v a full layer's values are its k_proj output, split with it.
// A full layer's single key-value head (Gemma 4 12B) under tp > 1 is split as multi-query
// attention's (parallel_dims.cpp checks the head counts).
constexpr TensorParallelRule kGemma4UnifiedTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// Gemma4UnifiedPreTrainedModel._init_weights: PreTrainedModel's (Linear normal, bias zero,
// Embedding normal with the padding row zero, every RMSNorm weight one); its own fills are
// buffers (the RoPE tables, embed_scale, layer_scalar) or outside the language model (the vision
// embedder's pos_embedding).
constexpr InitRule kGemma4UnifiedInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"Gemma4UnifiedRMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kGemma4UnifiedTextFamily{
    .model_type = "gemma4_unified_text",
    .hf_class_prefix = "Gemma4Unified",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGemma4UnifiedRenames,
    .rope_parameters_by_layer_type = true,
    .tp_plan = kGemma4UnifiedTpPlan,
    .init_rules = kGemma4UnifiedInitRules,
};

}  // namespace shardplan::tensor
