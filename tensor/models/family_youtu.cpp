// youtu (Tencent's Youtu-LLM 2B, "1.96B"): transformers' YoutuConfig (DeepseekV3Config without its
// MoE fields: max positions 131072, rms_norm_eps 1e-6, 16 key-value heads where the file has none,
// tied embeddings; q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
// v_head_dim 128; initializer_range 2 / sqrt(5 hidden) and embedding_initializer_range twice
// initializer_range when absent) and modular_youtu.py: Llama's model, layer and head (YoutuModel,
// YoutuDecoderLayer, YoutuForCausalLM) around DeepSeek-V3's latent attention (YoutuAttention,
// tensor/models/latent_attention.h) and Qwen3's MLP (no biases). No experts: the class deletes
// DeepSeek's MoE fields (n_routed_experts, first_k_dense_replace, ...), and a file holding one
// that would build experts is refused (Note [Architecture fields nobody read]) rather than built
// dense in silence.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kYoutuFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  // head_dim 64 only stands in until parse_latent sets the rotated width: the heads need not
  // divide hidden_size (YoutuConfig does not check it).
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6,
                                .tie_word_embeddings = true,
                                .head_dim = 64});
  models::key_value_heads_or(f, c, 16);
  // DeepseekV3Config's latent-attention fields and defaults (YoutuConfig's parent).
  models::parse_latent_attention(f, c, {});
  // YoutuConfig.__post_init__: a null or absent initializer_range is 2 / sqrt(5 hidden) (written
  // as transformers computes it, ** 0.5); the embedding's std is embedding_initializer_range, or
  // twice initializer_range when it is absent, null or 0 (Python's `or`).
  c.initializer_range =
      f.number("initializer_range", 2.0 / std::pow(5.0 * static_cast<double>(c.hidden_size), 0.5));
  const double embedding = f.number("embedding_initializer_range", 0.0);
  if (!std::isfinite(embedding) || embedding < 0) {
    f.fail("embedding_initializer_range",
           "expected a finite standard deviation >= 0, got " + std::to_string(embedding));
  }
  c.embedding_initializer_range = embedding != 0 ? embedding : 2.0 * c.initializer_range;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("head_dim");  // qk_rope_head_dim's
  j["attention_bias"] = c.qkv_bias;
  j["q_lora_rank"] = c.q_lora_rank > 0 ? nlohmann::json(c.q_lora_rank) : nlohmann::json();
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["embedding_initializer_range"] = c.embedding_initializer_range;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kYoutuFamily.hf_class_prefix, .latent_attention = true});
}

}  // namespace

const ModelFamily kYoutuFamily{
    .model_type = "youtu",
    .hf_class_prefix = "Youtu",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    // Megatron's split of latent attention (kLatentMoeTpPlan); its expert rules match nothing in
    // this dense model and are dropped.
    .tp_plan = models::kLatentMoeTpPlan,
    // YoutuPreTrainedModel._init_weights: PreTrainedModel's (Linear normal(0, initializer_range),
    // biases zero, RMSNorms one), then every nn.Embedding normal(0, embedding_initializer_range)
    // with its padding row zero (kNormalPaddingRowZero reads ModelConfig::
    // embedding_initializer_range). A tied lm_head keeps the embedding's values (tie_weights runs
    // after the init).
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
