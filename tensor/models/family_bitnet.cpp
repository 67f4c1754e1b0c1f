// bitnet (Microsoft's BitNet b1.58 2B4T): transformers' BitNetConfig (its defaults are the 2B4T
// sizes: vocab 128256, hidden 2560, MLP 6912, 30 layers of 20 heads and 5 key-value heads; max
// positions 2048, rms_norm_eps 1e-5, rope_theta 500000, hidden_act "relu2", untied, no pad
// token) and modeling_bitnet.py: Llama's pre-norm layer with two more RMSNorms, Sub-LN
// (RotaryDecoderStyle::sub_norms):
//   self_attn  q_proj [H d, h], k_proj, v_proj [K d, h], o_proj [h, H d] (biases by
//              attention_bias), attn_sub_norm [h] on the merged heads before o_proj
//   mlp        gate_proj, up_proj [I, h], down_proj [h, I] (never a bias), ffn_sub_norm [I] on
//              relu(gate)^2 * up before down_proj
// The published checkpoint holds ternary weights packed four to a byte (Note [BitNet's
// quantization_config]); shardplan plans training, so the model is the unquantized one
// transformers builds from the config, its weights in the config's dtype.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/checked.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kBitnetFamily;  // listed in family_registry.cpp

namespace {

// Note [BitNet's quantization_config]
// BitNet's files carry {"quant_method": "bitnet", "linear_class": "autobitlinear",
// "quantization_mode": "offline"} (microsoft/bitnet-b1.58-2B-4T; its -bf16 master weights say
// "online"). transformers' quantizer then swaps every nn.Linear but lm_head for a BitLinear
// (a uint8 buffer [out / 4, in] of packed ternary values: no parameter) or an AutoBitLinear (the
// nn.Linear's own weight, ternarized on each forward when "online", the quantization-aware
// training of the paper). Neither changes the model the config describes: the same projections of
// the same shapes, which shardplan builds in torch_dtype as an unquantized BitNet, so the keys are
// read and checked as BitNetQuantConfig checks them, and otherwise ignored (the per-token
// activation and per-tensor weight quantization are elementwise passes, not traced). One key does
// change the parameters: use_rms_norm puts an RMSNorm [in] inside every converted linear layer,
// which transformers' BitNet model does not have; it is refused.
void check_quantization_config(const ConfigFields& f) {
  if (!f.has("quantization_config")) return;
  const nlohmann::json& q = f.raw("quantization_config");
  if (!q.is_object() || q.value("quant_method", nlohmann::json()) != "bitnet") return;
  const auto one_of = [&](const char* key, const char* dflt, const char* a, const char* b) {
    const nlohmann::json v = q.value(key, nlohmann::json(dflt));
    if (v != a && v != b) {
      f.fail("quantization_config", std::string(key) + " " + v.dump().substr(0, 40) +
                                        ": BitNetQuantConfig raises; expected \"" + a + "\" or \"" +
                                        b + "\"");
    }
  };
  one_of("linear_class", "bitlinear", "bitlinear", "autobitlinear");
  one_of("quantization_mode", "offline", "online", "offline");
  const nlohmann::json norm = q.value("use_rms_norm", nlohmann::json(false));
  if (!norm.is_null() && norm != false) {
    f.fail("quantization_config",
           "use_rms_norm " + norm.dump().substr(0, 40) +
               ": transformers' BitNet quantizer then adds an RMSNorm before every converted "
               "linear layer, which shardplan does not build; expected false");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 128256,
                                                                    .hidden_size = 2560,
                                                                    .intermediate_size = 6912,
                                                                    .num_hidden_layers = 30,
                                                                    .num_attention_heads = 20,
                                                                    .num_key_value_heads = 5},
                                .max_position_embeddings = 2048,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 500000,
                                .hidden_act = "relu2"});
  // BitNetConfig.__post_init__: a null num_key_value_heads is one per query head.
  if (f.is_null("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  // attn_sub_norm is BitNetRMSNorm(hidden_size) applied to the merged heads, H d wide: with any
  // other head_dim the forward fails on the norm's weight.
  const std::optional<int64_t> width = checked_mul(c.num_attention_heads, c.head_dim);
  if (c.num_attention_heads > 0 && c.head_dim > 0 && width != c.hidden_size) {
    f.fail("head_dim", std::to_string(c.head_dim) + " x " + std::to_string(c.num_attention_heads) +
                           " heads is not hidden_size " + std::to_string(c.hidden_size) +
                           ", which BitNet's attn_sub_norm spans; expected " +
                           (c.hidden_size % c.num_attention_heads == 0
                                ? std::to_string(c.hidden_size / c.num_attention_heads)
                                : "heads dividing hidden_size"));
  }
  check_quantization_config(f);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kBitnetFamily.hf_class_prefix, .sub_norms = true});
}

constexpr FieldRename kBitnetRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

// Megatron's split (kRotaryDecoderTpPlan): q, k, v and gate, up column-parallel, o_proj and
// down_proj row-parallel. The sub-norms sit between them, on each rank's heads (channels of the
// MLP): sharded work, their weights whole on every rank (docs/models.md, what BitNet leaves out).
// BitNetPreTrainedModel has no _init_weights of its own: PreTrainedModel's, the Llama rules.
const ModelFamily kBitnetFamily{
    .model_type = "bitnet",
    .hf_class_prefix = "BitNet",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kBitnetRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
