// exaone4 (EXAONE 4.0 32B and 1.2B): transformers' Exaone4Config (max positions 2048,
// rms_norm_eps 1e-5, a sliding window of 4096 on three layers of four: sliding_window_pattern 4)
// and modular_exaone4.py: OLMo 2's layer (norms after each half only) with Qwen3's per-head q/k
// norms and no biases. With a window, the full-attention layers take no RoPE (NoPE: "we use
// global NoPE for hybrid attention"); a null sliding_window makes every layer a full RoPE layer.
// Which layers slide: the file's layer_types, else sliding_window_pattern: an integer N slides
// all but every N-th layer; a string of L (local) and G (global) repeats over the layers with the
// last one global, as Exaone4Config documents (its code derives layer types from an integer
// only; the released files list layer_types beside their "LLLG").
//
// exaone_moe (K-EXAONE 236B-A23B), defined here as it shares that attention: ExaoneMoeConfig
// (Exaone4Config's fields with vocab 102400, and the MoE's: 64 experts of 1024, top 8, one shared
// expert, the first layer dense or as mlp_layer_types lists, pad_token_id 0) and
// modular_exaone_moe.py: EXAONE 4.0's attention in OLMoE's pre-norm layer (self_attn, mlp,
// input_layernorm, post_attention_layernorm) whose sparse feed-forward is DeepSeek-V3's block
// (experts, the sigmoid router "gate" with its score-correction buffer, shared_experts); the
// checkpoint's multi-token prediction layers (mtp.*) are not loaded.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/deepseek_config.h"
#include "tensor/models/named_experts.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kExaone4Family;    // listed in family_registry.cpp
extern const ModelFamily kExaoneMoeFamily;  // listed in family_registry.cpp

namespace {

std::vector<AttentionType> pattern_layer_types(const ConfigFields& f, int64_t layers) {
  std::vector<AttentionType> out;
  const char* key = "sliding_window_pattern";
  const nlohmann::json p = f.has(key) ? f.raw(key) : nlohmann::json(4);
  if (p.is_number_integer() && p.get<int64_t>() > 0) {
    const int64_t n = p.get<int64_t>();
    for (int64_t i = 0; i < layers; ++i) {
      out.push_back((i + 1) % n != 0 ? AttentionType::kSliding : AttentionType::kFull);
    }
    return out;
  }
  const bool letters = p.is_string() && !p.get<std::string>().empty() &&
                       p.get<std::string>().find_first_not_of("LG") == std::string::npos;
  if (!letters) {
    f.fail(key, p.dump().substr(0, 60) +
                    " is not a pattern; expected a positive integer or a string of L (local) and "
                    "G (global)");
  }
  const std::string s = p.get<std::string>();
  for (int64_t i = 0; i < layers; ++i) {
    const bool local = s[static_cast<size_t>(i) % s.size()] == 'L' && i + 1 < layers;
    out.push_back(local ? AttentionType::kSliding : AttentionType::kFull);
  }
  return out;
}

// EXAONE 4.0's attention: sizes, heads and which layers slide (the full ones NoPE with a window).
void parse_attention(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 32);
  c.sliding_window = models::sliding_window_or(f, 4096);
  // Without a window Exaone4Config sets the pattern to 0 and divides by it to derive the layer
  // types, so such a file builds only when it lists them (all layers then full, with RoPE).
  if (!c.sliding_window && !f.has("layer_types")) {
    f.fail("sliding_window",
           "is null and no layer_types are listed: Exaone4Config derives them "
           "by a pattern of 0 (a division by zero); expected a window or "
           "layer_types");
  }
  std::vector<AttentionType> types;
  if (f.has("layer_types")) {
    types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
    f.has("sliding_window_pattern");  // read: layer_types wins over it
  } else if (c.sliding_window) {
    types = pattern_layer_types(f, c.num_hidden_layers);
  }
  if (!c.sliding_window) {
    f.has("sliding_window_pattern");  // no window: every layer full, with RoPE
    return;
  }
  models::rope_on_windowed_layers_only(f, c, types, "EXAONE 4");  // global NoPE
  c.layer_types = std::move(types);
}

void parse(const ConfigFields& f, ModelConfig& c) { parse_attention(f, c); }

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;
    j["layer_types"] = nlohmann::json::array();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) j["layer_types"].push_back("full_attention");
    return;
  }
  j["layer_types"] = models::layer_types_json(c);
}

// ExaoneMoeConfig's MoE fields under its own names (num_experts, num_shared_experts), the dense
// layers from mlp_layer_types, else the first first_k_dense_replace (1).
void parse_moe(const ConfigFields& f, ModelConfig& c) {
  parse_attention(f, c);
  models::pad_token_id_or(f, c, 0);
  models::parse_named_experts(f, c, {.experts = 64, .top_k = 8, .width = 1024, .shared = 1});
  const int64_t dense = f.integer("first_k_dense_replace", 1);
  if (dense < 0) f.fail("first_k_dense_replace", std::to_string(dense) + ", expected >= 0");
  for (int64_t i = 0; i < std::min(dense, c.num_hidden_layers); ++i) c.dense_layers.push_back(i);
  models::parse_mlp_layer_types(f, c);
  models::check_expert_groups(f, c);
  f.number("routed_scaling_factor", 2.5);
  f.boolean("norm_topk_prob", true);
}

void moe_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  to_hf_json(c, j);
  models::named_experts_to_hf_json(c, j);
  j["mlp_layer_types"] = models::mlp_layer_types_json(c);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

ModulePtr build_moe(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = "ExaoneMoe", .qk_norm = true, .moe = models::kDeepseekMoeStyle});
}

constexpr FieldRename kExaoneMoeRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"num_local_experts", "num_experts"},
    {"intermediate_size", "moe_intermediate_size"},
    {"dense_intermediate_size", "intermediate_size"},
    {"dense_layers", "mlp_layer_types"},
    {"shared_expert_intermediate_size", "num_shared_experts"}};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kExaone4Family.hf_class_prefix,
                                       .qk_norm = true,
                                       .norms = models::NormPlacement::kPost});
}

}  // namespace

const ModelFamily kExaone4Family{
    .model_type = "exaone4",
    .hf_class_prefix = "Exaone4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kExaoneMoeFamily{
    .model_type = "exaone_moe",
    .hf_class_prefix = "ExaoneMoe",
    .layers_path = "model.layers",
    .parse = parse_moe,
    .to_hf_json = moe_to_hf_json,
    .build = build_moe,
    .renamed = kExaoneMoeRenames,
    .moe = true,
    .experts_class = "ExaoneMoeExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .unloaded_key = "mtp",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
