// helium (Kyutai's Helium 1, 2B): transformers' HeliumConfig (vocab 48000, hidden 2560, 24 layers,
// 20 heads and 20 key-value heads of 128, MLP 7040, max positions 4096, rms_norm_eps 1e-8,
// rope_theta 1e5, untied, pad_token_id 3) and modular_helium.py: Llama's layer, its RoPE on
// interleaved pairs of channels (the same work as rotate_half's halves), q, k and v biased by
// attention_bias and o_proj never, o_proj [hidden, hidden] (so heads x head_dim must be
// hidden_size, or transformers' forward fails), the MLP biased by mlp_bias.
#include <nlohmann/json.hpp>
#include <string>

#include "base/checked.h"
#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kHeliumFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c,
      {.max_position_embeddings = 4096, .rms_norm_eps = 1e-8, .rope_theta = 1e5, .head_dim = 128});
  models::key_value_heads_or(f, c, 20);  // HeliumConfig's
  int64_t width = 0;
  if (!mul_into(c.num_attention_heads, c.head_dim, width) || width != c.hidden_size) {
    f.fail("head_dim", std::to_string(c.head_dim) + " x " + std::to_string(c.num_attention_heads) +
                           " heads is not hidden_size " + std::to_string(c.hidden_size) +
                           ": HeliumAttention's o_proj reads hidden_size; expected them equal");
  }
  c.qkv_bias = f.boolean("attention_bias", false);
  c.o_bias = false;
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::pad_token_id_or(f, c, 3);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 3
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kHeliumFamily.hf_class_prefix});
}

constexpr FieldRename kHeliumRenames[] = {{"norm_eps", "rms_norm_eps"},
                                          {"qkv_bias", "attention_bias"}};

}  // namespace

const ModelFamily kHeliumFamily{
    .model_type = "helium",
    .hf_class_prefix = "Helium",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kHeliumRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
