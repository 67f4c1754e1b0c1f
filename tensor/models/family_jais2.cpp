// jais2 (Inception / MBZUAI / Cerebras Jais 2, 8B and 70B): transformers' Jais2Config (LlamaConfig
// without rms_norm_eps and pretraining_tp: vocab 150272, max positions 8192, layer_norm_eps 1e-5,
// hidden_act "relu2", biases on q, k, v and o by attention_bias and on the MLP by mlp_bias, both
// TRUE by default, untied, no pad token, rope_theta 10000; validate_architecture refuses a
// hidden_size that the heads do not divide, even beside an explicit head_dim) and
// modeling_jais2.py: Llama's pre-norm layer with nn.LayerNorm (weight and bias) for both layer
// norms and the final one, and NemotronMLP: no gate, down_proj(relu(up_proj(x))^2), up_proj
// registered before down_proj. Every layer full causal attention, RoPE over the whole head_dim.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kJais2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 8192, .hidden_act = "relu2"});
  // Jais2Config has no rms_norm_eps (deleted from LlamaConfig): its norms read layer_norm_eps.
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", true);
  c.mlp_bias = f.boolean("mlp_bias", true);
  // Jais2Config.validate_architecture (LlamaConfig's): the heads must divide hidden_size whatever
  // head_dim says. Non-positive counts are validate()'s to refuse, naming them.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is not a multiple of the " +
                              std::to_string(c.num_attention_heads) + " attention heads");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");
  j["layer_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
}

// nn.LayerNorm(hidden_size, eps=layer_norm_eps): weight and bias.
ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, true, true, o);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kJais2Family.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .ungated_mlp = true});  // up_proj, down_proj
}

constexpr FieldRename kJais2Renames[] = {
    {"norm_eps", "layer_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

// Tensor parallelism: the rotary decoder's plan (q, k, v and up_proj column-parallel, o_proj and
// down_proj row-parallel; its gate_proj rule matches no Jais2 module and drops out), which is
// Jais2Config.base_model_tp_plan. Init: PreTrainedModel._init_weights (Jais2 has no override):
// Linear normal(0, initializer_range) and biases zero, the embedding normal with the pad row zero,
// the LayerNorms weight 1 and bias 0: kRotaryDecoderInitRules.
const ModelFamily kJais2Family{
    .model_type = "jais2",
    .hf_class_prefix = "Jais2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kJais2Renames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
