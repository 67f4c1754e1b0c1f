// arcee (Arcee AI's AFM-4.5B): transformers' ArceeConfig (vocab 32000, max positions 4096,
// rms_norm_eps 1e-5, hidden_act "relu2", biases by attention_bias and mlp_bias, untied, no pad
// token) and modeling_arcee.py: Llama's layer whose MLP has no gate, down_proj(relu(up_proj(x))^2)
// (ReLU squared), up_proj registered before down_proj. YaRN comes from the file's rope_scaling.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kArceeFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 4096, .rms_norm_eps = 1e-5, .hidden_act = "relu2"});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kArceeFamily.hf_class_prefix, .ungated_mlp = true});
}

constexpr FieldRename kArceeRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kArceeFamily{
    .model_type = "arcee",
    .hf_class_prefix = "Arcee",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kArceeRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
