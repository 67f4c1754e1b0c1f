// hyperclovax (NAVER HyperCLOVA X SEED Think 14B): transformers' HyperCLOVAXConfig and
// modeling_hyperclovax.py, which is Granite's (modular_hyperclovax.py subclasses GraniteConfig and
// the Granite modules) with three changes:
//   - head_dim is a field of its own (hidden / heads when absent or null), and
//     attention_multiplier, the softmax scale, defaults to head_dim^-0.5 (Granite: 1.0);
//   - use_post_norm (default true), "Peri-Layer Normalization": an RMSNorm on each half's output,
//     post_norm1 after attention and post_norm2 after the MLP, before the residual multiplier and
//     the add;
//   - the logits are multiplied by logits_scaling (Granite divides by it).
// Defaults: vocab 32000, max positions 2048, rms_norm_eps 1e-6, RoPE base 10000, untied.
// attention_bias puts biases on q, k, v and o; mlp_bias on gate, up and down. The layer registers
// self_attn, mlp, input_layernorm, post_attention_layernorm (the norm before the MLP),
// post_norm1, post_norm2: GLM-4's order, under other names. Without use_post_norm the two are
// nn.Identity and the layer is Granite's.
// Refused as HyperCLOVAXConfig refuses it:
//   - hidden_size not a multiple of num_attention_heads, head_dim or not (validate_architecture);
//   - null multipliers or flags (@strict).
#include <cmath>
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kHyperClovaxFamily;  // listed in family_registry.cpp

namespace {

// Fields HyperCLOVAXConfig types without None: @strict refuses a null one.
constexpr const char* kNotNull[] = {"embedding_multiplier", "residual_multiplier", "logits_scaling",
                                    "use_post_norm",        "attention_bias",      "mlp_bias"};

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kNotNull) {
    if (f.is_null(key)) {
      f.fail(key,
             "is null; HyperCLOVAXConfig's field is a number or a boolean (strict): expected a "
             "value, or no key for the class's default");
    }
  }
  // head_dim and num_key_value_heads: absent or null, hidden / heads and the head count.
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  // HyperCLOVAXConfig.validate_architecture: whatever head_dim says.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is not a multiple of the " +
                              std::to_string(c.num_attention_heads) + " attention heads");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.embedding_multiplier = f.number("embedding_multiplier", 1);
  c.residual_multiplier = f.number("residual_multiplier", 1);
  c.logits_scaling = f.number("logits_scaling", 1);  // multiplies the logits here
  // None (absent or null): head_dim^-0.5, resolved after the rest as __post_init__ does. Stored
  // as the number, so the builder passes it as the softmax scale like Granite's.
  if (f.has("attention_multiplier")) {
    c.attention_multiplier = f.number("attention_multiplier", 0);
    if (!(c.attention_multiplier > 0)) {
      f.fail("attention_multiplier",
             "expected a positive softmax scale, got " + f.raw("attention_multiplier").dump());
    }
  } else {
    c.attention_multiplier = c.head_dim > 0 ? std::pow(static_cast<double>(c.head_dim), -0.5) : 0;
  }
  c.use_post_norm = f.boolean("use_post_norm", true);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  models::granite_multipliers_to_hf_json(c, j);  // attention_multiplier as the resolved number
  j["use_post_norm"] = c.use_post_norm;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kHyperClovaxFamily.hf_class_prefix,
       // Peri-LN: input_layernorm and post_attention_layernorm before each half, post_norm1 and
       // post_norm2 after it, registered in that order (GLM-4's layout).
       .norms = c.use_post_norm ? models::NormPlacement::kGlmSandwich : models::NormPlacement::kPre,
       .post_self_attn_norm_name = "post_norm1",
       .post_mlp_norm_name = "post_norm2",
       .granite_multipliers = true,
       .logits_scaling_multiplies = true});
}

constexpr FieldRename kHyperClovaxRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kHyperClovaxFamily{
    .model_type = "hyperclovax",
    .hf_class_prefix = "HyperCLOVAX",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kHyperClovaxRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
