// cohere (Command R, Command R+): transformers' CohereConfig (vocab 256000, max positions 8192,
// layer_norm_eps 1e-5, tied embeddings, rope_theta 500000 when the file has none (transformers 5;
// 10000 in 4.x), biases on q, k, v and o by attention_bias, pad_token_id 0, logit_scale 0.0625,
// use_qk_norm false) and modeling_cohere.py: one LayerNorm with a weight and no bias
// (CohereLayerNorm) before attention and MLP side by side, x + attn(n) + mlp(n); with use_qk_norm
// a norm on q and k per head whose weight is per head, [heads, head_dim] and [kv_heads,
// head_dim]; the logits times logit_scale. Cohere rotates q and k in float32 (cast up and back
// around RoPE, traced so); its RoPE pairs interleaved channels, which changes no shape or count.
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kCohereFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::WeightOnlyLayerNorm>("CohereLayerNorm", 0, dim, eps, o);
}

ModulePtr make_head_norm(int64_t heads, int64_t head_dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::WeightOnlyLayerNorm>("CohereLayerNorm", heads, head_dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 8192, .rope_theta = 500000, .tie_word_embeddings = true});
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.qk_norm_per_head = f.boolean("use_qk_norm", false);
  models::parse_logit_scale(f, c);
  models::pad_token_id_or(f, c, 0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");
  j["layer_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["use_qk_norm"] = c.qk_norm_per_head;
  j["logit_scale"] = c.logit_scale;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kCohereFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .qk_norm = c.qk_norm_per_head,
                                       .make_head_norm = make_head_norm,
                                       .rope_in_float32 = true,
                                       .norms = models::NormPlacement::kParallel,
                                       .logit_scale = true});
}

constexpr FieldRename kCohereRenames[] = {{"norm_eps", "layer_norm_eps"},
                                          {"qkv_bias", "attention_bias"},
                                          {"o_bias", "attention_bias"},
                                          {"qk_norm_per_head", "use_qk_norm"}};

// The generic PreTrainedModel._init_weights (Cohere has none of its own): Linear weights and
// Embedding rows normal(0, initializer_range), the pad_token_id row zero, biases zero, the
// LayerNorms' weights one.
constexpr InitRule kCohereInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"CohereLayerNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kCohereFamily{
    .model_type = "cohere",
    .hf_class_prefix = "Cohere",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kCohereRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kCohereInitRules,
};

}  // namespace shardplan::tensor
