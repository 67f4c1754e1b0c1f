// mimo_v2_flash (Xiaomi MiMo-V2-Flash: 309 B parameters, 15 B active): transformers'
// MiMoV2FlashConfig (vocab 152576, hidden 4096, 48 layers, 64 heads; head_dim 192 for q and k,
// v_head_dim 128 for v and o; 4 key-value heads on full layers, twice as many on sliding ones
// (hard-coded in MiMoV2FlashAttention); a window of 128 on every layer but layer 0 and each sixth
// (i + 1) % 6 == 0; max positions 131072, rms_norm_eps 1e-5, untied; 256 experts of width 2048,
// top 8, no shared expert; layer 0 dense (16384) unless mlp_layer_types says otherwise; v scaled
// by attention_value_scale 0.707 before attention) and modular_mimo_v2_flash.py: Llama's
// pre-norm layer; the sliding layers' attention has GPT-OSS's learned sink logit per head
// (`sinks`, the attention's own parameter); o_proj never has a bias; DeepSeek-V3's sigmoid router
// (experts, then `gate`, its e_score_correction_bias a buffer) without shared experts. RoPE is
// keyed by layer type (full: base 5e6, sliding: 1e4, each rotating int(head_dim * 0.334) = 64 of
// 192 channels); the class skips RoPE standardization, so a top-level rope_theta or
// partial_rotary_factor is not read by transformers: here they must agree with what it builds.
// The checkpoint's multi-token prediction layers (model.mtp.*) are not built.
//
// The published config.json is in Xiaomi's own format (hybrid_layer_pattern, moe_layer_freq,
// swa_* sizes, sink flags, layernorm_epsilon, ...), which transformers' class ignores and its
// converter maps onto the native keys: each is accepted when it says what transformers builds and
// refused, named, otherwise.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/deepseek_config.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMimoV2FlashFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kFamily = "MiMo-V2-Flash";
constexpr double kFullTheta = 5e6, kSlidingTheta = 1e4, kRotated = 0.334;

AttentionType mimo_layer_type(const ModelConfig&, int64_t i) {
  return i == 0 || (i + 1) % 6 == 0 ? AttentionType::kFull : AttentionType::kSliding;
}

// rope_parameters keyed by layer type (the class's default when absent); the sliding set's
// rotated share must be the full set's (one rotary width per head here), its base changes no
// shape.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.rope_theta = kFullTheta;
  c.partial_rotary_factor = kRotated;
  c.rope_scaling.reset();
  if (f.has("rope_scaling") && !f.is_null("rope_scaling")) {
    f.fail("rope_scaling", f.raw("rope_scaling").dump().substr(0, 60) +
                               ": MiMoV2FlashConfig keeps RoPE in rope_parameters keyed by layer "
                               "type; expected rope_parameters");
  }
  if (f.has("rope_parameters") && !f.is_null("rope_parameters")) {
    const nlohmann::json& r = f.raw("rope_parameters");
    if (!r.is_object() || !r.contains("full_attention")) {
      f.fail("rope_parameters", r.dump().substr(0, 80) +
                                    ": MiMoV2FlashRotaryEmbedding reads it by layer type; "
                                    "expected {\"full_attention\": {...}, ...}");
    }
    // transformers' default for a set without partial_rotary_factor is 0.334 ("default" RoPE).
    c.partial_rotary_factor = kRotated;
    parse_rope_parameters(f, c);
    if (r.contains("sliding_attention")) {
      const ConfigFields s(r.at("sliding_attention"), f.source());
      const double share = s.number("partial_rotary_factor", kRotated);
      if (share != c.partial_rotary_factor) {
        f.fail("rope_parameters",
               "sliding_attention rotates " + std::to_string(share) +
                   " of each head and "
                   "full_attention " +
                   std::to_string(c.partial_rotary_factor) +
                   "; expected one share for both (shardplan rotates one width per model)");
      }
    }
  }
  // Checked before the rotated width is computed from them (validate() runs later).
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
    f.fail("rope_parameters", "partial_rotary_factor " + std::to_string(c.partial_rotary_factor) +
                                  ", expected a share in (0, 1]");
  }
  if (c.head_dim <= 0) {
    f.fail("head_dim", "must be a positive integer, got " + std::to_string(c.head_dim));
  }
  const int64_t rotated = models::rotary_dim(c);
  if (rotated % 2 != 0) {
    f.fail("rope_parameters",
           "rotates int(head_dim x partial_rotary_factor) = " + std::to_string(rotated) +
               " channels, an odd width (transformers widens its tables by "
               "one); expected an even width");
  }
  // Xiaomi's own keys for the same, which transformers does not read.
  models::require_built_value(f, "rope_theta", c.rope_theta, kFamily,
                              "RoPE from rope_parameters (full layers' base)");
  models::require_built_value(f, "partial_rotary_factor", c.partial_rotary_factor, kFamily,
                              "RoPE from rope_parameters (the rotated share)");
  f.number("swa_rope_theta", kSlidingTheta);  // the sliding layers' base: no shape
}

// Xiaomi's own config.json keys, accepted when they describe what transformers builds.
void check_hub_keys(const ConfigFields& f, const ModelConfig& c) {
  models::require_built_value(f, "swa_num_attention_heads", c.num_attention_heads, kFamily,
                              "num_attention_heads on sliding layers");
  models::require_built_value(f, "swa_num_key_value_heads", c.sliding_num_key_value_heads, kFamily,
                              "twice num_key_value_heads on sliding layers");
  models::require_built_value(f, "swa_head_dim", c.head_dim, kFamily, "head_dim on every layer");
  models::require_built_value(f, "swa_v_head_dim", c.v_head_dim, kFamily,
                              "v_head_dim on every layer");
  models::require_built_value(f, "add_swa_attention_sink_bias", true, kFamily,
                              "sinks on the sliding layers");
  models::require_built_value(f, "add_full_attention_sink_bias", false, kFamily,
                              "no sinks on the full layers");
  models::require_built_value(f, "scoring_func", "sigmoid", kFamily, "a sigmoid router");
  models::require_built_value(f, "layernorm_epsilon", c.norm_eps, kFamily, "norms of rms_norm_eps");
  models::require_built_value(f, "sliding_window_size", *c.sliding_window, kFamily,
                              "sliding_window's window");
  if (f.has("n_shared_experts") && !f.is_null("n_shared_experts") &&
      f.integer("n_shared_experts") != 0) {
    f.fail("n_shared_experts", std::to_string(f.integer("n_shared_experts")) +
                                   ": transformers' MiMo-V2-Flash builds no shared expert; "
                                   "expected 0 or null");
  }
  nlohmann::json pattern = nlohmann::json::array(), moe = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    pattern.push_back(c.layer_types[static_cast<size_t>(i)] == AttentionType::kSliding ? 1 : 0);
    moe.push_back(std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), i) ? 0 : 1);
  }
  models::require_built_value(f, "hybrid_layer_pattern", pattern, kFamily,
                              "these layer types (1 sliding, 0 full)");
  models::require_built_value(f, "moe_layer_freq", moe, kFamily,
                              "these feed-forwards (1 experts, 0 dense)");
  // Read and not used by transformers' class: no shape depends on them.
  f.has("attention_chunk_size");
  f.has("topk_method");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-5, .head_dim = 192});
  if (!f.has("num_key_value_heads")) c.num_key_value_heads = 4;  // the class's
  if (c.num_key_value_heads <= 0 ||
      c.num_key_value_heads > (int64_t{1} << 40)) {  // 2x must not wrap
    f.fail("num_key_value_heads", std::to_string(c.num_key_value_heads) +
                                      " key-value heads, expected a model's count (at most 2^40)");
  }
  c.sliding_num_key_value_heads = 2 * c.num_key_value_heads;
  c.v_head_dim = f.integer("v_head_dim", 128);
  if (c.v_head_dim <= 0) f.fail("v_head_dim", std::to_string(c.v_head_dim) + ", expected > 0");
  c.attention_value_scale =
      f.is_null("attention_value_scale") ? 1.0 : f.number("attention_value_scale", 0.707);
  c.qkv_bias = f.boolean("attention_bias", false);  // q, k and v; o_proj never has one
  c.o_bias = false;
  if (f.is_null("sliding_window")) {
    f.fail("sliding_window", "is null; MiMoV2FlashConfig's window is an integer (default 128)");
  }
  c.sliding_window = f.integer("sliding_window", 128);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
  }
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, mimo_layer_type, c);
  for (const AttentionType t : c.layer_types) {
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types",
             std::string(to_string(t)) +
                 ": MiMo-V2-Flash masks full_attention and sliding_attention layers only");
    }
  }
  parse_rope(f, c);
  c.num_local_experts = f.has("n_routed_experts") ? f.integer("n_routed_experts", 256)
                                                  : f.integer("num_local_experts", 256);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size", 2048);
  c.dense_layers = {0};  // MiMoV2FlashConfig: ["dense"] + ["sparse"] * (layers - 1)
  models::parse_mlp_layer_types(f, c);
  models::check_expert_groups(f, c);
  if (!f.is_null("routed_scaling_factor")) f.number("routed_scaling_factor", 1.0);
  f.boolean("norm_topk_prob", true);
  check_hub_keys(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rope_theta");
  j.erase("rope_scaling");
  nlohmann::json full = {{"rope_type", "default"}};
  if (c.rope_scaling) full = rope_scaling_json(c.rope_scaling);
  full["rope_theta"] = c.rope_theta;
  full["partial_rotary_factor"] = c.partial_rotary_factor;
  j["rope_parameters"] = {{"full_attention", full},
                          {"sliding_attention",
                           {{"rope_type", "default"},
                            {"rope_theta", kSlidingTheta},
                            {"partial_rotary_factor", c.partial_rotary_factor}}}};
  j["attention_bias"] = c.qkv_bias;
  j["v_head_dim"] = c.v_head_dim;
  j["attention_value_scale"] = c.attention_value_scale;
  j["layer_types"] = models::layer_types_json(c);
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["n_routed_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["mlp_layer_types"] = models::mlp_layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kMimoV2FlashFamily.hf_class_prefix,
                                       .attention_sinks = true,
                                       .sinks_on_sliding_layers_only = true,
                                       .scale_values = true,
                                       .moe = models::kDeepseekMoeStyle});
}

constexpr FieldRename kMimoRenames[] = {{"norm_eps", "rms_norm_eps"},
                                        {"num_local_experts", "n_routed_experts"},
                                        {"intermediate_size", "moe_intermediate_size"},
                                        {"dense_intermediate_size", "intermediate_size"},
                                        {"dense_layers", "mlp_layer_types"},
                                        {"qkv_bias", "attention_bias"},
                                        {"sliding_num_key_value_heads", "num_key_value_heads"},
                                        {"rope_theta", "rope_parameters"},
                                        {"partial_rotary_factor", "rope_parameters"}};

// MiMoV2FlashPreTrainedModel._init_weights: the sinks normal(0, initializer_range) as GPT-OSS's;
// the rest as the Llama-shaped decoders (the score-correction buffer, zeros, is not a parameter).
constexpr InitRule kSinkInitRules[] = {{"*", "sinks", InitFill::kNormal}};
constexpr auto kMimoInitRules =
    models::concat_init_rules(kSinkInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kMimoV2FlashFamily{
    .model_type = "mimo_v2_flash",
    .hf_class_prefix = "MiMoV2Flash",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kMimoRenames,
    .moe = true,
    .experts_class = "MiMoV2FlashExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .unloaded_key = "model.mtp.",
    .attention_sinks = true,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = kMimoInitRules,
};

}  // namespace shardplan::tensor
