// gemma: transformers' GemmaConfig (max_position_embeddings 8192, tied embeddings, the
// activation in hidden_activation) and modeling_gemma.py: the rotary decoder with GemmaRMSNorm
// and embeddings scaled by sqrt(hidden).
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGemmaFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("GemmaRMSNorm", dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // Gemma runs gelu with the tanh approximation whatever hidden_act says (GemmaMLP); the newer
  // hidden_activation field names it explicitly.
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 8192,
                                .rms_norm_eps = 1e-6,
                                .tie_word_embeddings = true,
                                .act_key = "hidden_activation",
                                .hidden_act = "gelu_pytorch_tanh"});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j, "hidden_activation");
  j["attention_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kGemmaFamily.hf_class_prefix, .make_norm = make_norm, .scale_embeddings = true});
}

// GemmaPreTrainedModel._init_weights: as Llama's (the pad_token_id row of the embedding zero), but
// GemmaRMSNorm scales by (1 + weight), so its weight starts at zero.
constexpr InitRule kGemmaInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                        {"Linear", "bias", InitFill::kZeros},
                                        {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                        {"GemmaRMSNorm", "weight", InitFill::kZeros}};

}  // namespace

const ModelFamily kGemmaFamily{
    .model_type = "gemma",
    .hf_class_prefix = "Gemma",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kGemmaInitRules,
};

}  // namespace shardplan::tensor
