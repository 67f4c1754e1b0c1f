// bamba (IBM's Bamba-9B). transformers 5's BambaConfig and modeling_bamba.py: each layer registers
// `feed_forward` (a gated MLP: gate_proj, up_proj, down_proj, biases by mlp_bias), the norms
// `input_layernorm` and `pre_ff_layernorm`, then its mixer: attention (`self_attn`, q/k/v/o with
// attention_bias) on the layers attn_layer_indices lists, a Mamba-2 mixer (`mamba`, BambaMixer,
// tensor/models/mamba2_mixer.h) on the others. Every attention layer rotates half of head_dim:
// BambaConfig hard-codes partial_rotary_factor 0.5 whatever the file says. The Mamba fields are
// Granite 4.0's (parse_mamba2_config). Class defaults: vocabulary 128,000, 262,144 positions,
// rms_norm_eps 1e-5, 8 kv heads, untied.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/models/class_defaults.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kBambaFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 262144, .rms_norm_eps = 1e-5});
  models::key_value_heads_or(f, c, 8);  // the class's default
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  // BambaConfig.__post_init__ passes partial_rotary_factor=0.5 over the file's (for BC).
  (void)f.has("partial_rotary_factor");
  c.partial_rotary_factor = 0.5;
  models::parse_mamba2_config(f, c);
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kLinear);
  if (f.has("attn_layer_indices")) {
    const nlohmann::json& list = f.raw("attn_layer_indices");
    if (!list.is_array()) {
      f.fail("attn_layer_indices",
             "expected a list of layer indices, got " + list.dump().substr(0, 60));
    }
    for (const nlohmann::json& v : list) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
          v.get<int64_t>() >= c.num_hidden_layers) {
        f.fail("attn_layer_indices", v.dump().substr(0, 40) + " is not a layer, expected 0.." +
                                         std::to_string(c.num_hidden_layers - 1));
      }
      c.layer_types[static_cast<size_t>(v.get<int64_t>())] = AttentionType::kFull;
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  models::mamba2_config_to_hf_json(c, j);
  nlohmann::json attention = nlohmann::json::array();
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    if (c.layer_types[i] != AttentionType::kLinear) attention.push_back(i);
  }
  j["attn_layer_indices"] = attention;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kBambaFamily.hf_class_prefix,
                                       .post_attention_norm_name = "pre_ff_layernorm",
                                       .linear_mixer = models::LinearMixer::kMamba2,
                                       .linear_mixer_name = "Mixer",
                                       .ffn_name = "feed_forward",
                                       .final_norm_name = "final_layernorm",  // BambaModel's
                                       .mixer_last = true});
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"qkv_bias", "attention_bias"},
                                    {"o_bias", "attention_bias"},
                                    {"linear_num_key_heads", "mamba_n_groups"},
                                    {"linear_num_value_heads", "mamba_n_heads"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_value_head_dim", "mamba_d_head"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"}};

}  // namespace

const ModelFamily kBambaFamily{
    .model_type = "bamba",
    .hf_class_prefix = "Bamba",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .linear_attention = true,
    .tp_plan = models::kMamba2HybridTpPlan,  // Megatron-LM's split (rotary_decoder.h)
    .init_rules = models::kMamba2DecoderInitRules,
};

}  // namespace shardplan::tensor
