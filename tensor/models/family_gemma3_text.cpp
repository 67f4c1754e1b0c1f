// gemma3_text (Gemma 3 1B and the text stack of 4B, 12B, 27B): transformers' Gemma3TextConfig
// (vocab 262208, head_dim 256, max positions 131072, rms_norm_eps 1e-6, tied embeddings,
// gelu_pytorch_tanh, a sliding window of 4096 on every layer but each sliding_window_pattern-th
// (6) unless layer_types says otherwise) and modeling_gemma3.py: Gemma 2's layer with q_norm and
// k_norm ((1 + w) RMSNorms over head_dim, before RoPE) and no logit softcapping by default. The
// sliding layers' own RoPE base (rope_local_base_freq) changes no shape or count.
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGemma3TextFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Gemma3RMSNorm", dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // Gemma3TextConfig's sizes (the 1B-like default): the text_config of Gemma 3 4B's config.json
  // states neither vocab_size nor the head counts.
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 262208,
                                                                    .hidden_size = 2304,
                                                                    .intermediate_size = 9216,
                                                                    .num_hidden_layers = 26,
                                                                    .num_attention_heads = 8,
                                                                    .num_key_value_heads = 4},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6,
                                .rope_theta = 1e6,
                                .tie_word_embeddings = true,
                                .act_key = "hidden_activation",
                                .hidden_act = "gelu_pytorch_tanh",
                                .head_dim = 256});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.sliding_window = f.integer("sliding_window", 4096);
  const int64_t pattern = f.integer("sliding_window_pattern", 6);
  if (pattern <= 0) {
    f.fail("sliding_window_pattern", "must be positive, got " + std::to_string(pattern));
  }
  if (!f.has("layer_types")) {
    // Gemma3TextConfig: layer i slides unless (i + 1) % sliding_window_pattern == 0.
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back((i + 1) % pattern != 0 ? AttentionType::kSliding
                                                     : AttentionType::kFull);
    }
  } else {
    c.layer_types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
  }
  c.final_logit_softcapping = f.number("final_logit_softcapping", 0.0);
  if (c.final_logit_softcapping < 0) {
    f.fail("final_logit_softcapping", "must be positive (or 0 / null: none), got " +
                                          std::to_string(c.final_logit_softcapping));
  }
  f.number("attn_logit_softcapping", 0.0);  // stored by transformers, never applied
  f.number("query_pre_attn_scalar", 256.0);
  f.number("rope_local_base_freq", 10000.0);
  if (f.boolean("use_bidirectional_attention", false)) {
    f.fail("use_bidirectional_attention",
           "true: bidirectional attention is not a causal language model, expected false");
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
                                      {.prefix = kGemma3TextFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .scale_embeddings = true,
                                       .qk_norm = true,
                                       .norms = models::NormPlacement::kSandwich});
}

// Gemma3PreTrainedModel._init_weights: Llama's, then every RMSNorm weight zero ((1 + w) form),
// q_norm and k_norm included.
constexpr InitRule kGemma3InitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"Gemma3RMSNorm", "weight", InitFill::kZeros}};

}  // namespace

const ModelFamily kGemma3TextFamily{
    .model_type = "gemma3_text",
    .hf_class_prefix = "Gemma3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kGemma3InitRules,
};

}  // namespace shardplan::tensor
