// glm (GLM-4-9B, the first release; see kGlmFamily below) and glm4 (GLM-4-9B-0414, GLM-4-32B-0414
// and their Z1 reasoning variants): transformers' Glm4Config (vocab 151552, head_dim 128, max
// positions 131072, rms_norm_eps 1.5625e-7, biases on q, k and v (attention_bias true; o_proj never
// has one), half of each head rotated (partial_rotary_factor 0.5), pad_token_id 151329) and
// modeling_glm4.py: GlmAttention, Phi-3's MLP (one gate_up_proj, [gate; up]) and four norms per
// layer: input_layernorm before the attention, post_self_attn_layernorm after it,
// post_attention_layernorm before the MLP, post_mlp_layernorm after it. GLM's RoPE rotates
// interleaved channel pairs, which changes no shape or count. Tensor parallelism: the rotary
// decoder's split with gate_up_proj column-parallel over its two halves (each rank holds its slice
// of the gate and of the up projection, as Megatron-LM splits its fused linear_fc1), so the MLP
// needs no gather; transformers' own plan gathers the output of gate_up_proj before chunking it,
// which a trainer would not.
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGlm4Family;  // listed in family_registry.cpp
extern const ModelFamily kGlmFamily;

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1.5625e-7,
                                .head_dim = f.is_null("head_dim") ? 0 : 128});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 2);
  c.qkv_bias = f.boolean("attention_bias", true);
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);
  models::pad_token_id_or(f, c, 151329);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 151329
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kGlm4Family.hf_class_prefix,
                                       .norms = models::NormPlacement::kGlmSandwich,
                                       .fused_gate_up = true});
}

void parse_glm(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : {"head_dim", "num_key_value_heads"}) {
    if (f.is_null(key)) {
      f.fail(key,
             "is null; GlmConfig keeps None and GlmAttention cannot be built from it: expected "
             "an integer, or no key for the class's default");
    }
  }
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1.5625e-7, .head_dim = 128});
  models::key_value_heads_or(f, c, 2);  // GlmConfig's, not the head count
  c.qkv_bias = f.boolean("attention_bias", true);
  // kwargs.setdefault("partial_rotary_factor", 0.5): an explicit null stays None and no factor
  // reaches rope_parameters, so the rotary init uses 1.0.
  c.partial_rotary_factor =
      f.is_null("partial_rotary_factor") ? 1.0 : f.number("partial_rotary_factor", 0.5);
  models::pad_token_id_or(f, c, 151329);
}

void glm_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 151329
}

ModulePtr build_glm(const ModelConfig& c, const TensorOptions& o, bool training) {
  // Llama's pre-norm layer (NormPlacement::kPre, the default) with Phi-3's fused gate_up_proj.
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kGlmFamily.hf_class_prefix, .fused_gate_up = true});
}

constexpr FieldRename kGlm4Renames[] = {{"norm_eps", "rms_norm_eps"},
                                        {"qkv_bias", "attention_bias"}};

constexpr TensorParallelRule kGlm4TpPlan[] = {{"model.embed_tokens", "rowwise"},
                                              {"model.layers.*.self_attn.q_proj", "colwise"},
                                              {"model.layers.*.self_attn.k_proj", "colwise"},
                                              {"model.layers.*.self_attn.v_proj", "colwise"},
                                              {"model.layers.*.self_attn.o_proj", "rowwise"},
                                              {"model.layers.*.mlp.gate_up_proj", "colwise", 2},
                                              {"model.layers.*.mlp.down_proj", "rowwise"},
                                              {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kGlm4Family{
    .model_type = "glm4",
    .hf_class_prefix = "Glm4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGlm4Renames,
    .tp_plan = kGlm4TpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

// glm (GLM-4-9B and GLM-4-9B-chat in the HF format of convert_glm_weights_to_hf.py): GlmConfig
// has glm4's defaults and modeling_glm.py glm4's attention and fused MLP, in Llama's layer: two
// norms (input_layernorm, post_attention_layernorm) before each half, none after. A null head_dim
// or num_key_value_heads is refused: GlmConfig keeps None for both (int | None, no fallback) and
// GlmAttention then fails on None ** -0.5 or heads // None. A null top-level
// partial_rotary_factor sets no factor, so every channel rotates.
const ModelFamily kGlmFamily{
    .model_type = "glm",
    .hf_class_prefix = "Glm",
    .layers_path = "model.layers",
    .parse = parse_glm,
    .to_hf_json = glm_to_hf_json,
    .build = build_glm,
    .renamed = kGlm4Renames,
    .tp_plan = kGlm4TpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
