// granite_swa (IBM's granite-swash-2b) and granitemoe_swa (granite-swash-3b-a600m): Granite and
// GraniteMoeShared with sliding-window attention and a learned sink per head. transformers'
// GraniteSWAConfig (vocab 100352, hidden 2560, 24 layers, 20 heads and 4 key-value heads, MLP
// 8192, max positions 8192, rms_norm_eps 1e-5, tied) and GraniteMoeSWAConfig (GraniteMoeShared's
// defaults: vocab 32000, hidden 4096, 32 layers of 32 heads, MLP 11008, 8 experts, top 2, no
// shared MLP), both with a window of 128 on every layer but each fourth (i % 4 == 0 attends in
// full) unless layer_types says otherwise, and layer_rope_theta: a RoPE base per layer, 0 for a
// layer without RoPE (the non-zero bases change no shape). modular_granite_swa.py and
// modular_granitemoe_swa.py: Granite's layer and multipliers (the MoE one GraniteMoeShared's:
// block_sparse_moe after the norms, shared_mlp beside it), the attention LlamaAttention's
// projections plus `sinks` [heads], which rescale each head's output by sigmoid(logsumexp(scores) -
// sink): GPT-OSS's extra softmax logit, so priced as the unfused (math) attention as GPT-OSS's
// (transformers itself refuses SDPA for it). _init_weights starts the sinks at zero.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGraniteSwaFamily;     // listed in family_registry.cpp
extern const ModelFamily kGraniteMoeSwaFamily;  // listed in family_registry.cpp

namespace {

AttentionType every_fourth_full(const ModelConfig&, int64_t i) {
  return i % 4 == 0 ? AttentionType::kFull : AttentionType::kSliding;
}

// The window, the layer types and the layers layer_rope_theta leaves without RoPE.
void parse_swa(const ConfigFields& f, ModelConfig& c) {
  c.sliding_window = models::sliding_window_or(f, 128);
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, every_fourth_full, c);
  for (const AttentionType t : c.layer_types) {
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types", std::string(to_string(t)) +
                                ": GraniteSWA masks full_attention and sliding_attention only");
    }
    if (t == AttentionType::kSliding && !c.sliding_window) {
      f.fail("sliding_window",
             "is null, but layer_types has sliding_attention layers (the sliding mask needs a "
             "window); expected a window");
    }
  }
  if (f.has("layer_rope_theta")) {
    const nlohmann::json& thetas = f.raw("layer_rope_theta");
    if (!thetas.is_array() || static_cast<int64_t>(thetas.size()) != c.num_hidden_layers) {
      f.fail("layer_rope_theta", "expected one RoPE base per layer (" +
                                     std::to_string(c.num_hidden_layers) + " numbers, 0 for none)");
    }
    for (size_t i = 0; i < thetas.size(); ++i) {
      const nlohmann::json& t = thetas[i];
      if (!t.is_number() || t.get<double>() < 0) {
        f.fail("layer_rope_theta", t.dump().substr(0, 40) + " at layer " + std::to_string(i) +
                                       " is not a RoPE base; expected a number >= 0");
      }
      if (t.get<double>() == 0) c.nope_layers.push_back(static_cast<int64_t>(i));
    }
  }
}

void swa_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  if (!c.sliding_window) j["sliding_window"] = nullptr;  // absent would mean 128
  j["layer_types"] = models::layer_types_json(c);
  nlohmann::json thetas = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool nope = std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i);
    thetas.push_back(nope ? 0.0 : c.rope_theta);
  }
  j["layer_rope_theta"] = thetas;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 8192, .rms_norm_eps = 1e-5, .tie_word_embeddings = true});
  models::key_value_heads_or(f, c, 4);  // GraniteSWAConfig's (null: the head count)
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::parse_granite_multipliers(f, c);
  parse_swa(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  models::granite_multipliers_to_hf_json(c, j);
  swa_to_hf_json(c, j);
}

void parse_moe(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.num_local_experts = f.integer("num_local_experts", 8);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  c.shared_expert_intermediate_size = f.integer("shared_intermediate_size", 0);
  models::parse_granite_multipliers(f, c);
  parse_swa(f, c);
}

void moe_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["shared_intermediate_size"] = c.shared_expert_intermediate_size;
  models::granite_multipliers_to_hf_json(c, j);
  swa_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGraniteSwaFamily.hf_class_prefix,
                                       .attention_sinks = true,
                                       .granite_multipliers = true});
}

ModulePtr build_moe(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kGraniteMoeSwaFamily.hf_class_prefix,
       .attention_sinks = true,
       .ffn_name = "block_sparse_moe",
       .norms_before_ffn = true,
       .granite_multipliers = true,
       .moe = {.router = "router", .shared_in_layer = true, .softmax_after_top_k = true}});
}

constexpr FieldRename kGraniteSwaRenames[] = {{"norm_eps", "rms_norm_eps"},
                                              {"qkv_bias", "attention_bias"},
                                              {"o_bias", "attention_bias"},
                                              {"nope_layers", "layer_rope_theta"}};
constexpr FieldRename kGraniteMoeSwaRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"nope_layers", "layer_rope_theta"},
    {"shared_expert_intermediate_size", "shared_intermediate_size"}};

// GraniteSWAPreTrainedModel._init_weights and GraniteMoeSWAPreTrainedModel's: PreTrainedModel's
// (the Llama-shaped decoders' rules), then the sinks zero.
constexpr InitRule kSinkInitRules[] = {{"*", "sinks", InitFill::kZeros}};
constexpr auto kGraniteSwaInitRules =
    models::concat_init_rules(kSinkInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kGraniteSwaFamily{
    .model_type = "granite_swa",
    .hf_class_prefix = "GraniteSWA",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGraniteSwaRenames,
    .attention_sinks = true,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kGraniteSwaInitRules,
};

const ModelFamily kGraniteMoeSwaFamily{
    .model_type = "granitemoe_swa",
    .hf_class_prefix = "GraniteMoeSWA",
    .layers_path = "model.layers",
    .parse = parse_moe,
    .to_hf_json = moe_to_hf_json,
    .build = build_moe,
    .renamed = kGraniteMoeSwaRenames,
    .moe = true,
    .experts_class = "GraniteMoeSWAExperts",
    .attention_sinks = true,
    .tp_plan = models::kGraniteMoeTpPlan,
    .init_rules = kGraniteSwaInitRules,
};

}  // namespace shardplan::tensor
