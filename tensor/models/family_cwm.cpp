// cwm (Meta's Code World Model, CWM 32B): transformers' CwmConfig and modeling_cwm.py, which is
// Llama's decoder layer with Qwen2's attention stripped of its biases (q, k, v and o never have
// one; the config has no attention_bias) and a window per layer. CwmConfig (a strict dataclass)
// defaults: vocab 128256, h 6144, F 21504, 64 layers of 48 heads, 8 kv heads, head_dim 128 (not
// hidden / heads), max positions 131072, rms_norm_eps 1e-5, mlp_bias false, sliding_window 8192.
// Without layer_types, layer i attends in full when i % 4 == 0 (the first of every four) and
// slides otherwise. Without rope_parameters or rope_scaling, the RoPE is llama3 scaling by 16 from
// 8192 positions at base 1e6, and a top-level rope_theta does not replace that base
// (convert_rope_params_to_dict's setdefault). Every layer rotates q and k. The sliding layers see
// the last sliding_window positions, the query included.
// Refused as CwmConfig refuses them:
//   - null head_dim, num_key_value_heads or mlp_bias (plain int / bool fields under @strict);
//   - a null or 0 sliding_window (__post_init__ turns 0 into None, which @strict refuses);
//   - hidden_size not a multiple of num_attention_heads, even with head_dim given
//     (LlamaConfig.validate_architecture).
// Also refused: chunked_attention layers. CwmModel masks only full_attention and
// sliding_attention layers (KeyError otherwise).
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kCwmFamily;  // listed in family_registry.cpp

namespace {

// CwmConfig.__post_init__'s layer_types: window_pattern 4, the first layer of each four full.
AttentionType first_of_four_full(const ModelConfig& /*c*/, int64_t layer) {
  return layer % 4 == 0 ? AttentionType::kFull : AttentionType::kSliding;
}

// Fields CwmConfig types as a plain int or bool: @strict refuses None for them.
constexpr const char* kNotNull[] = {"head_dim", "num_key_value_heads", "sliding_window",
                                    "mlp_bias"};

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kNotNull) {
    if (f.is_null(key)) {
      f.fail(key,
             "is null; CwmConfig's field is an integer or a boolean (strict): expected a value, "
             "or no key for the class's default");
    }
  }
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 1e6,
                                .head_dim = 128});
  models::key_value_heads_or(f, c, 8);
  // LlamaConfig.validate_architecture, which CwmConfig inherits; it ignores head_dim.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is not a multiple of the " +
                              std::to_string(c.num_attention_heads) + " attention heads");
  }
  models::class_rope_unless_given(f, c, 1e6,
                                  {.rope_type = "llama3",
                                   .factor = 16,
                                   .low_freq_factor = 1.0,
                                   .high_freq_factor = 4.0,
                                   .original_max_position_embeddings = 8192});
  c.mlp_bias = f.boolean("mlp_bias", false);
  // attention_bias is no CwmConfig field: a file's key is an attribute nothing reads.
  c.sliding_window = f.integer("sliding_window", 8192);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) +
                                 ", expected > 0 (CwmConfig turns 0 into None, which its "
                                 "strict int field refuses)");
  }
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, first_of_four_full, c);
  for (const AttentionType t : c.layer_types) {
    if (t == AttentionType::kChunked) {
      f.fail("layer_types",
             "has chunked_attention, which CwmModel does not mask; expected "
             "\"full_attention\" or \"sliding_attention\"");
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window, always set here
  models::say_when_rope_is_unscaled(c, j);  // else the class's llama3 scaling would apply
  j["mlp_bias"] = c.mlp_bias;
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kCwmFamily.hf_class_prefix});
}

}  // namespace

const ModelFamily kCwmFamily{
    .model_type = "cwm",
    .hf_class_prefix = "Cwm",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
