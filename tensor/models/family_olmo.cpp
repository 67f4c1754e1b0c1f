// olmo (AllenAI's OLMo v1: OLMo-1B, OLMo-7B, OLMo-7B-Twin-2T, OLMo-7B-0424): transformers'
// OlmoConfig (vocab 50304, max positions 2048, num_key_value_heads = heads when absent or null,
// silu, untied, pad_token_id 1, attention_bias false on q, k, v and o, clip_qkv null) and
// modeling_olmo.py: Llama's pre-norm layer whose norms (input_layernorm, post_attention_layernorm
// and the final norm) are OlmoLayerNorm, a layer norm with no weight and no bias at a fixed eps
// 1e-5, computed in float32 and cast back (no config key sets its eps); a bias-free SwiGLU MLP;
// RoPE over the whole head. With clip_qkv the q, k and v projections' outputs are clamped to
// [-clip_qkv, clip_qkv] in place before the split into heads (OLMo 1.7: 8.0).
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kOlmoFamily;  // listed in family_registry.cpp

namespace {

// OlmoLayerNorm: F.layer_norm of x in float32 over the last dimension, no affine parameters, eps
// 1e-5 whatever the config says, cast back to x's dtype (two casts around it in a bfloat16 model;
// none in a float32 one, as PyTorch's .to of the same dtype returns the tensor itself).
class OlmoLayerNorm : public Module {
 public:
  explicit OlmoLayerNorm(int64_t dim) : Module("OlmoLayerNorm"), dim_(dim) {}
  Tensor forward(const Tensor& x) override {
    return to(layer_norm(to(x, DType::kFloat32), {dim_}, Tensor(), Tensor(), kOlmoNormEps),
              x.dtype());
  }
  static constexpr double kOlmoNormEps = 1e-5;

 private:
  int64_t dim_;
};

ModulePtr make_norm(int64_t dim, double /*eps: fixed at 1e-5*/, const TensorOptions& /*o*/) {
  return std::make_shared<OlmoLayerNorm>(dim);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  // OlmoConfig has no eps field: OlmoLayerNorm hard-codes 1e-5 and a file's rms_norm_eps (read
  // above, unused) changes nothing.
  c.norm_eps = OlmoLayerNorm::kOlmoNormEps;
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  if (f.has("clip_qkv")) {
    const double clip = f.number("clip_qkv", 0.0);
    if (!(clip > 0) || !std::isfinite(clip)) {
      f.fail("clip_qkv", f.raw("clip_qkv").dump() +
                             ", expected a positive bound for |q|, |k| and |v| (or null: none)");
    }
    c.clip_qkv = clip;
  }
  models::pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");  // not an OlmoConfig field
  j["attention_bias"] = c.qkv_bias;
  j["clip_qkv"] = c.clip_qkv ? nlohmann::json(*c.clip_qkv) : nlohmann::json(nullptr);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  // The shared attention clamps q, k and v when c.clip_qkv is set; the rest is Llama's
  // layer with OLMo's norms.
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kOlmoFamily.hf_class_prefix, .make_norm = make_norm});
}

constexpr FieldRename kOlmoRenames[] = {{"qkv_bias", "attention_bias"},
                                        {"o_bias", "attention_bias"}};

}  // namespace

// OlmoPreTrainedModel has no _init_weights of its own: PreTrainedModel's (Linear normal with zero
// biases, the embedding normal with its pad_token_id row zero; OlmoLayerNorm has nothing to
// fill), which are the Llama-shaped decoders' rules. The tensor-parallel plan is OlmoConfig's
// base_model_tp_plan, Llama's.
const ModelFamily kOlmoFamily{
    .model_type = "olmo",
    .hf_class_prefix = "Olmo",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kOlmoRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
