// olmoe (AllenAI's OLMoE-1B-7B): transformers' OlmoeConfig (vocab 50304, max positions 4096,
// rms_norm_eps 1e-5, untied, pad_token_id 1, the experts' count num_experts and top-k required,
// as Mixtral's) and modeling_olmoe.py: Llama's pre-norm layer with q_norm over the whole query
// width [hidden] and k_norm over the key width, and Mixtral's sparse block (router "gate", a
// softmax over all experts, before the fused experts). clip_qkv (q, k and v clamped) is not
// built: a file that sets it is refused.
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kOlmoeFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096, .rms_norm_eps = 1e-5});
  // OlmoeAttention sizes q_norm by hidden_size and k_norm by (hidden / heads) kv heads: a head_dim
  // that is not hidden / heads would not fit the projections it norms.
  if (c.head_dim * c.num_attention_heads != c.hidden_size) {
    f.fail("head_dim", std::to_string(c.head_dim) + " x " + std::to_string(c.num_attention_heads) +
                           " heads is not hidden_size " + std::to_string(c.hidden_size) +
                           ", expected hidden_size / num_attention_heads (OLMoE norms q over "
                           "hidden_size)");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.num_local_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  f.boolean("norm_topk_prob", false);  // routing values only
  if (f.has("clip_qkv")) {
    f.fail("clip_qkv", f.raw("clip_qkv").dump() +
                           " clamps q, k and v, which shardplan does not build; expected null");
  }
  models::pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kOlmoeFamily.hf_class_prefix, .qk_norm_full_width = true});
}

constexpr FieldRename kOlmoeRenames[] = {{"norm_eps", "rms_norm_eps"},
                                         {"num_local_experts", "num_experts"},
                                         {"qkv_bias", "attention_bias"},
                                         {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kOlmoeFamily{
    .model_type = "olmoe",
    .hf_class_prefix = "Olmoe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kOlmoeRenames,
    .moe = true,
    .experts_class = "OlmoeExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
