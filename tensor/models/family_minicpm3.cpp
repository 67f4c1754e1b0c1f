// minicpm3 (OpenBMB's MiniCPM3-4B): transformers' MiniCPM3Config (LlamaConfig with MiniCPM3-4B's
// defaults: max positions 32768, rms_norm_eps 1e-5, 40 key-value heads where the file has none,
// tied embeddings, initializer_range 0.1; q_lora_rank 768, kv_lora_rank 256, qk_nope_head_dim 64,
// qk_rope_head_dim 32, v_head_dim hidden / heads; scale_emb 12, scale_depth 1.4, dim_model_base
// 256; the heads must divide hidden_size) and modular_minicpm3.py: Llama's model, layer and MLP
// (biases by mlp_bias) around DeepSeek-V2's latent attention (MiniCPM3Attention: the same modules,
// plain rotate-half RoPE), with three multipliers applied always, which Granite's fields hold:
// the embeddings times scale_emb (MiniCPM3ScaledWordEmbedding), each residual branch times
// scale_depth / sqrt(layers) (null: 1), and the final hidden states divided by hidden_size /
// dim_model_base (null: 1) before lm_head. Elementwise ops on activations Llama has anyway; no
// parameter.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kMiniCPM3Family;  // listed in family_registry.cpp

namespace {

double sqrt_layers(const ModelConfig& c) {
  return std::sqrt(static_cast<double>(c.num_hidden_layers));  // math.sqrt: correctly rounded
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 32768, .rms_norm_eps = 1e-5, .tie_word_embeddings = true});
  // MiniCPM3Config.validate_architecture (LlamaConfig's): the heads divide hidden_size, whatever
  // head_dim the file states (parse_rotary_decoder checks it only without one). Checked here, not
  // left to validate(): v_head_dim's default divides by the heads.
  if (c.num_attention_heads <= 0) {
    f.fail("num_attention_heads",
           "must be a positive integer, got " + std::to_string(c.num_attention_heads));
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads",
           std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
               std::to_string(c.hidden_size) + " (MiniCPM3Config requires it)");
  }
  models::key_value_heads_or(f, c, 40);
  // The latent-attention fields with MiniCPM3Config's defaults (a null or absent v_head_dim is
  // hidden_size // heads, as its __post_init__ sets it; MiniCPM3 rotates halves, so a file's
  // rope_interleave changes nothing).
  models::parse_latent_attention(f, c,
                                 {.q_lora_rank = 768,
                                  .kv_lora_rank = 256,
                                  .qk_nope_head_dim = 64,
                                  .v_head_dim = c.hidden_size / c.num_attention_heads,
                                  .qk_rope_head_dim = 32});
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.initializer_range = 0.1;  // the class's; parse_model_config reads a file's
  // The multipliers (Granite's fields, applied always): scale_emb; scale_depth / sqrt(layers), a
  // null scale_depth being sqrt(layers); hidden_size / dim_model_base, a null one being hidden.
  c.embedding_multiplier = f.number("scale_emb", 12);
  c.residual_multiplier =
      f.is_null("scale_depth") ? 1.0 : f.number("scale_depth", 1.4) / sqrt_layers(c);
  const int64_t base =
      f.is_null("dim_model_base") ? c.hidden_size : f.integer("dim_model_base", 256);
  if (base <= 0) {
    f.fail("dim_model_base", std::to_string(base) +
                                 ", expected a positive width (the final hidden states are "
                                 "divided by hidden_size / dim_model_base)");
  }
  c.logits_scaling = static_cast<double>(c.hidden_size) / static_cast<double>(base);
}

// The scale_depth whose quotient by sqrt(layers) is exactly `residual` (the product may miss it by
// an ulp; one of its neighbours does not), so that the file reads back to the same config.
double scale_depth_of(const ModelConfig& c) {
  const double s = sqrt_layers(c);
  double depth = c.residual_multiplier * s;
  for (int i = 0; i < 4 && depth / s != c.residual_multiplier; ++i) {
    depth = std::nextafter(depth, depth / s < c.residual_multiplier ? HUGE_VAL : -HUGE_VAL);
  }
  return depth;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("head_dim");  // qk_rope_head_dim's
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["q_lora_rank"] = c.q_lora_rank > 0 ? nlohmann::json(c.q_lora_rank) : nlohmann::json();
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["scale_emb"] = c.embedding_multiplier;
  j["scale_depth"] = scale_depth_of(c);
  // dim_model_base is an integer in MiniCPM3Config: hidden_size / logits_scaling, rounded (exact
  // for every config read from a file).
  j["dim_model_base"] = std::llround(static_cast<double>(c.hidden_size) / c.logits_scaling);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kMiniCPM3Family.hf_class_prefix,
                                       .latent_attention = true,
                                       .granite_multipliers = true,
                                       .logits_scaling_on_hidden = true});
}

constexpr FieldRename kMiniCPM3Renames[] = {
    {"norm_eps", "rms_norm_eps"},           {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},           {"embedding_multiplier", "scale_emb"},
    {"residual_multiplier", "scale_depth"}, {"logits_scaling", "dim_model_base"}};

}  // namespace

const ModelFamily kMiniCPM3Family{
    .model_type = "minicpm3",
    .hf_class_prefix = "MiniCPM3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kMiniCPM3Renames,
    // Megatron's split of latent attention (kLatentMoeTpPlan); its expert rules match nothing in
    // this dense model and are dropped.
    .tp_plan = models::kLatentMoeTpPlan,
    // MiniCPM3PreTrainedModel._init_weights: PreTrainedModel's with initializer_range 0.1 by
    // default (Linear and Embedding normal, the padding row zero, biases zero, RMSNorms one); the
    // embed_scale buffer is scale_emb.
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
