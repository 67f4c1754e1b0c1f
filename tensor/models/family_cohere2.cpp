// cohere2 (Command R7B, Command A): transformers' Cohere2Config (Cohere's defaults, rope_theta
// 10000 when the file has none, no q/k norms (a use_qk_norm key is read and ignored, as the
// class keeps it as a plain attribute), a sliding window of 4096) and modeling_cohere2.py:
// Cohere's parallel layer, whose sliding layers rotate q and k while its full layers take no
// position encoding (NoPE); a null sliding_window leaves every layer full and so without RoPE, as
// Cohere2Attention rotates only where it has a window. Which layers slide: the file's layer_types,
// else sliding_window_pattern (default 4): layer i is full when (i + 1) % pattern == 0.
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kCohere2Family;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::WeightOnlyLayerNorm>("Cohere2LayerNorm", 0, dim, eps, o);
}

std::vector<AttentionType> pattern_layer_types(const ConfigFields& f, int64_t layers) {
  const char* key = "sliding_window_pattern";
  const int64_t p = f.integer(key, 4);
  if (p <= 0) f.fail(key, "expected a positive integer, got " + f.raw(key).dump());
  std::vector<AttentionType> out;
  for (int64_t i = 0; i < layers; ++i) {
    out.push_back((i + 1) % p != 0 ? AttentionType::kSliding : AttentionType::kFull);
  }
  return out;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 8192, .tie_word_embeddings = true});
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  f.has("use_qk_norm");  // an attribute Cohere2Attention never reads
  models::parse_logit_scale(f, c);
  models::pad_token_id_or(f, c, 0);
  c.sliding_window = models::sliding_window_or(f, 4096);
  std::vector<AttentionType> types;
  if (f.has("layer_types")) {
    types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
    f.has("sliding_window_pattern");  // read: layer_types wins over it
  } else {
    types = pattern_layer_types(f, c.num_hidden_layers);
  }
  models::rope_on_windowed_layers_only(f, c, types, "Cohere2");  // rotated where windowed only
  if (c.sliding_window) c.layer_types = std::move(types);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  j.erase("rms_norm_eps");
  j["layer_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["logit_scale"] = c.logit_scale;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;
    return;
  }
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kCohere2Family.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .rope_in_float32 = true,
                                       .norms = models::NormPlacement::kParallel,
                                       .logit_scale = true});
}

constexpr FieldRename kCohere2Renames[] = {
    {"norm_eps", "layer_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

// As Cohere's (the generic _init_weights), under Cohere2's norm class.
constexpr InitRule kCohere2InitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                          {"Linear", "bias", InitFill::kZeros},
                                          {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                          {"Cohere2LayerNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kCohere2Family{
    .model_type = "cohere2",
    .hf_class_prefix = "Cohere2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kCohere2Renames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kCohere2InitRules,
};

}  // namespace shardplan::tensor
