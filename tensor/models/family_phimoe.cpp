// phimoe (Microsoft Phi-3.5-MoE: 41.9 B parameters, 6.6 B active): transformers' PhimoeConfig
// (vocab 32064, hidden 4096, 32 layers, 32 heads and 8 key-value heads, 16 experts of 6400, top
// 2, max positions 131072, rms_norm_eps 1e-5 (the LayerNorms' eps), rope_theta 1e6, untied, no
// window unless sliding_window says one) and modular_phimoe.py: Mixtral's pre-norm MoE layer with
// nn.LayerNorm norms (weight and bias), q/k/v/o biases by attention_bias, the router a Linear
// named `router` before the fused experts, and an output layer with a bias by lm_head_bias.
// Routing is SparseMixer (two rounds of a masked softmax over the experts, Gumbel sampling in
// training): it picks two experts a token, priced as the softmax top-k of the expected-load trace
// (Note [Expected-load MoE] in models.h); the jitter noise changes no shape. The "longrope"
// scaling of the published file (short and long factors, mscales) changes no shape either.
#include <nlohmann/json.hpp>

#include "tensor/layers.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kPhimoeFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, true, true, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 32064,
                                                                    .hidden_size = 4096,
                                                                    .intermediate_size = 6400,
                                                                    .num_hidden_layers = 32,
                                                                    .num_attention_heads = 32,
                                                                    .num_key_value_heads = 8},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 1e6});
  // PhimoeConfig: num_key_value_heads None means the head count.
  if (f.is_null("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.lm_head_bias = f.boolean("lm_head_bias", false);
  c.sliding_window = f.opt_integer("sliding_window");  // none by default
  if (c.sliding_window) {
    c.layer_types =
        models::parse_layer_types(f, c.num_hidden_layers, models::every_layer_sliding, c);
  }
  c.num_local_experts = f.integer("num_local_experts", 16);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  for (const char* key : {"router_jitter_noise", "input_jitter_noise"}) {
    const double noise = f.number(key, key[0] == 'r' ? 0.01 : 0.0);
    if (!(noise >= 0 && noise < 1)) {
      f.fail(key, std::to_string(noise) + ", expected a jitter in [0, 1)");
    }
  }
  f.number("router_aux_loss_coef", 0.001);
  f.integer("original_max_position_embeddings", 4096);  // longrope's switch point: no shape
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["attention_bias"] = c.qkv_bias;
  j["lm_head_bias"] = c.lm_head_bias;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kPhimoeFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .moe = {.router = "router"}});
}

constexpr FieldRename kPhimoeRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

// PhimoePreTrainedModel._init_weights (Mixtral's): Linear normal with zero biases (the router, a
// Linear subclass, and lm_head's bias included), the experts normal, the embedding normal with the
// padding row zero, nn.LayerNorm weight one and bias zero: the Llama-shaped decoders' rules.
const ModelFamily kPhimoeFamily{
    .model_type = "phimoe",
    .hf_class_prefix = "Phimoe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kPhimoeRenames,
    .moe = true,
    .experts_class = "PhimoeExperts",
    .tp_plan = models::kMoeTpPlan,  // its router `router` matches none: replicated
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
