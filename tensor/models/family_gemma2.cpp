// gemma2 (Gemma 2 2B, 9B, 27B): transformers' Gemma2Config (vocab 256000, head_dim 256, max
// positions 8192, rms_norm_eps 1e-6, tied embeddings, gelu_pytorch_tanh in hidden_activation, a
// sliding window of 4096 on the even layers unless layer_types says otherwise, logits softcapped
// at 30) and modeling_gemma2.py: the rotary decoder with Gemma's (1 + w) RMSNorm before and after
// each half of the layer and embeddings scaled by sqrt(hidden). query_pre_attn_scalar and the
// attention-logit softcap change no shape and no counted work (FlashAttention applies the cap in
// its kernel), so they are read and kept out of the model.
//
// vaultgemma (Google's VaultGemma 1B, trained with differential privacy), defined here as it is
// Gemma 2's model: VaultGemmaConfig (Gemma2Config's fields and defaults; hidden_size a multiple of
// the heads) and modular_vaultgemma.py: Gemma 2's layer without its post-attention and
// post-feedforward norms (deleted), so a pre-norm layer whose norms are input_layernorm and
// pre_feedforward_layernorm (Gemma's (1 + w) RMSNorm); the sliding, softcap and scaled-embedding
// settings as Gemma 2's.
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGemma2Family;      // listed in family_registry.cpp
extern const ModelFamily kVaultGemmaFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Gemma2RMSNorm", dim, eps, o);
}

// Gemma2Config: layer i slides when (i + 1) % 2 != 0.
AttentionType even_layers_slide(const ModelConfig& /*c*/, int64_t layer) {
  return (layer + 1) % 2 != 0 ? AttentionType::kSliding : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 8192,
                                .rms_norm_eps = 1e-6,
                                .tie_word_embeddings = true,
                                .act_key = "hidden_activation",
                                .hidden_act = "gelu_pytorch_tanh",
                                .head_dim = 256});
  // Gemma2Config's (and VaultGemmaConfig's) 4 key-value heads where the file has no such key.
  models::key_value_heads_or(f, c, 4);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.sliding_window = f.integer("sliding_window", 4096);
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, even_layers_slide, c);
  c.final_logit_softcapping = f.number("final_logit_softcapping", 30.0);
  if (c.final_logit_softcapping < 0) {
    f.fail("final_logit_softcapping", "must be positive (or 0 / null: none), got " +
                                          std::to_string(c.final_logit_softcapping));
  }
  f.number("attn_logit_softcapping", 50.0);
  f.number("query_pre_attn_scalar", 256.0);
}

void parse_vault(const ConfigFields& f, ModelConfig& c) {
  parse(f, c);
  // Non-positive counts are validate()'s to refuse, naming them.
  if (c.num_attention_heads > 0 &&
      c.hidden_size % c.num_attention_heads != 0) {  // VaultGemmaConfig.validate_architecture
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is not a multiple of the " +
                              std::to_string(c.num_attention_heads) + " attention heads");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j, "hidden_activation");  // with sliding_window
  j["attention_bias"] = c.qkv_bias;
  j["layer_types"] = models::layer_types_json(c);
  j["final_logit_softcapping"] = c.final_logit_softcapping;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGemma2Family.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .scale_embeddings = true,
                                       .norms = models::NormPlacement::kSandwich});
}

ModulePtr make_vault_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("VaultGemmaRMSNorm", dim, eps, o);
}

ModulePtr build_vault(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kVaultGemmaFamily.hf_class_prefix,
                                       .make_norm = make_vault_norm,
                                       .scale_embeddings = true,
                                       .post_attention_norm_name = "pre_feedforward_layernorm"});
}

// Gemma2PreTrainedModel._init_weights: Llama's, then every RMSNorm weight zero ((1 + w) form).
constexpr InitRule kGemma2InitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"Gemma2RMSNorm", "weight", InitFill::kZeros}};
constexpr InitRule kVaultGemmaInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"VaultGemmaRMSNorm", "weight", InitFill::kZeros}};

}  // namespace

const ModelFamily kGemma2Family{
    .model_type = "gemma2",
    .hf_class_prefix = "Gemma2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kGemma2InitRules,
};

const ModelFamily kVaultGemmaFamily{
    .model_type = "vaultgemma",
    .hf_class_prefix = "VaultGemma",
    .layers_path = "model.layers",
    .parse = parse_vault,
    .to_hf_json = to_hf_json,
    .build = build_vault,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kVaultGemmaInitRules,
};

}  // namespace shardplan::tensor
