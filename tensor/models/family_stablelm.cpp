// stablelm (Stability AI's StableLM-3B-4E1T, StableLM Zephyr, StableLM 2 1.6B and 12B):
// transformers' StableLmConfig (vocab 50304, max positions 4096, layer_norm_eps 1e-5, silu,
// num_key_value_heads 32 when absent (an int: not the head count, never null), head_dim always
// hidden / heads, partial_rotary_factor 0.25 when neither rope_parameters nor the file gives one,
// untied, use_qkv_bias, qk_layernorm and use_parallel_residual false, hidden_dropout 0) and
// modeling_stablelm.py: Llama's layer with nn.LayerNorm norms (weight and bias), biases on q, k
// and v by use_qkv_bias (never on o_proj), RoPE on the first int(head_dim * factor) channels; with
// qk_layernorm one bias-free nn.LayerNorm per head of q and of k (StableLmLayerNormPerHead:
// q_layernorm.norms.<head>.weight), before RoPE; with use_parallel_residual GPT-NeoX's
// x + attn(ln(x)) + mlp(ln(x)) on one input_layernorm (no post_attention_layernorm). hidden_dropout
// drops out the MLP's output only, in both forms.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kStablelmFamily;  // listed in family_registry.cpp

namespace {

// nn.LayerNorm with weight and bias: input_layernorm, post_attention_layernorm, model.norm.
ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, true, true, o);
}

// StableLmLayerNormPerHead: a ModuleList `norms` of one bias-free nn.LayerNorm(head_dim) per head;
// x [B, heads, S, head_dim] split into heads (views), each head normed by its own LayerNorm, and
// the heads concatenated back on dim 1.
class LayerNormPerHead : public Module {
 public:
  LayerNormPerHead(int64_t heads, int64_t head_dim, double eps, const TensorOptions& o)
      : Module("StableLmLayerNormPerHead"), heads_(heads) {
    norms_ = register_module("norms", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < heads; ++i) {
      norms_->push_back(
          std::make_shared<LayerNorm>(DimVector{head_dim}, eps, true, /*bias=*/false, o));
    }
  }
  Tensor forward(const Tensor& x) override {
    std::vector<Tensor> heads;
    heads.reserve(static_cast<size_t>(heads_));
    for (int64_t i = 0; i < heads_; ++i) {
      heads.push_back((*norms_)[static_cast<size_t>(i)].call(narrow(x, 1, i, 1)));
    }
    return cat(heads, 1);
  }

 private:
  int64_t heads_;
  std::shared_ptr<ModuleList> norms_;
};

ModulePtr make_head_norm(int64_t heads, int64_t head_dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNormPerHead>(heads, head_dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096});
  // StableLmConfig types num_key_value_heads `int = 32`: absent is 32, null fails its check.
  if (f.is_null("num_key_value_heads")) {
    f.fail("num_key_value_heads", "is null; StableLmConfig expects an integer (32 when absent)");
  }
  models::key_value_heads_or(f, c, 32);
  // StableLmAttention's head width is hidden / heads whatever the file says (and it raises unless
  // heads divide hidden); StableLmRotaryEmbedding would size its tables by a file's head_dim.
  // Non-positive head counts are validate()'s to refuse, naming them.
  if (c.num_attention_heads > 0 && (c.hidden_size % c.num_attention_heads != 0 ||
                                    c.head_dim != c.hidden_size / c.num_attention_heads)) {
    f.fail("head_dim", std::to_string(c.head_dim) + " x " + std::to_string(c.num_attention_heads) +
                           " heads is not hidden_size " + std::to_string(c.hidden_size) +
                           "; StableLmAttention uses hidden_size / num_attention_heads");
  }
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  // StableLmConfig.__post_init__'s kwargs.setdefault: the file's key, else 0.25;
  // rope_parameters' partial_rotary_factor, read after this by parse_model_config, wins.
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.25);
  c.qkv_bias = f.boolean("use_qkv_bias", false);
  c.o_bias = c.mlp_bias = false;
  c.qk_norm_per_head = f.boolean("qk_layernorm", false);
  c.use_parallel_residual = f.boolean("use_parallel_residual", false);
  c.resid_dropout = f.number("hidden_dropout", 0.0);  // the MLP half's output only
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // head_dim = hidden / heads, which parse accepts
  j.erase("rms_norm_eps");
  j["layer_norm_eps"] = c.norm_eps;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["use_qkv_bias"] = c.qkv_bias;
  j["qk_layernorm"] = c.qk_norm_per_head;
  j["use_parallel_residual"] = c.use_parallel_residual;
  j["hidden_dropout"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kStablelmFamily.hf_class_prefix,
       .make_norm = make_norm,
       .qk_norm = c.qk_norm_per_head,
       .make_head_norm = make_head_norm,
       .qk_norm_names = {"q_layernorm", "k_layernorm"},
       .norms =
           c.use_parallel_residual ? models::NormPlacement::kParallel : models::NormPlacement::kPre,
       .resid_dropout_ffn_only = true});
}

constexpr FieldRename kStablelmRenames[] = {{"norm_eps", "layer_norm_eps"},
                                            {"qkv_bias", "use_qkv_bias"},
                                            {"qk_norm_per_head", "qk_layernorm"},
                                            {"resid_dropout", "hidden_dropout"}};

}  // namespace

// StableLmPreTrainedModel has no _init_weights of its own: PreTrainedModel's (Linear normal with
// zero biases, nn.LayerNorm weight one and bias zero, each per-head norm's weight one, the
// embedding normal with its pad_token_id row zero when set): the Llama-shaped decoders' rules.
// StableLmConfig has no tensor-parallel plan; Megatron-LM's split of Llama's names fits it (the
// per-head q/k norms replicated, as Cohere's per-head norm weights).
const ModelFamily kStablelmFamily{
    .model_type = "stablelm",
    .hf_class_prefix = "StableLm",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kStablelmRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
