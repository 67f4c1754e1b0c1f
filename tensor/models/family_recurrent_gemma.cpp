// recurrent_gemma (Google's RecurrentGemma 2B and 9B: the Griffin architecture, De et al. 2024,
// arXiv 2402.19427; Botev et al. 2024, "RecurrentGemma: Moving Past Transformers for Efficient
// Open Language Models", arXiv 2404.07839). transformers 5's RecurrentGemmaConfig and
// modeling_recurrent_gemma.py: RecurrentGemmaForCausalLM's `model` holds embed_tokens (padding_idx
// pad_token_id, default 0), `layers`, final_norm and the non-persistent bfloat16 scalar
// `normalizer` (sqrt(hidden), the embeddings' scale), then lm_head, tied to embed_tokens by
// default; the logits are soft-capped always, cap * tanh(logits / cap) with cap = logits_soft_cap.
// Layer i's temporal block follows block_types repeated (default recurrent, recurrent, attention):
// Griffin's recurrent block (tensor/models/rg_lru.h) or local multi-query attention
// (RecurrentGemmaAttention: q_proj [H d, h], k_proj and v_proj [kv d, h], their biases by
// attention_bias; o_proj [h, H d] always with a bias; its own rotary_emb rotating the first
// partial_rotary_factor of each head; a window of attention_window_size keys). Each
// RecurrentGemmaDecoderLayer registers temporal_pre_norm, temporal_block, channel_pre_norm and
// mlp_block (RecurrentGemmaMlp: gate_proj and up_proj [F, h], down_proj [h, F], all with biases,
// F = intermediate_size / 2, the activation hidden_activation) and runs
//   r = temporal_block(temporal_pre_norm(x)) + x,   mlp_block(channel_pre_norm(r)) + r,
// its norms Gemma's (1 + w) RMSNorm. ModelConfig keeps the layers in layer_types (recurrent:
// kLinear; attention: kSliding, sliding_window = attention_window_size), the RG-LRU in linear_*
// (its H = num_attention_heads heads as the key and value heads, lru_width / H as their width,
// conv1d_width as the convolution's; both biases always), intermediate_size as the MLP's width F
// (the file's halved), logits_soft_cap as final_logit_softcapping. Class defaults: vocabulary
// 256,000, h 2,560, intermediate_size 7,680, 26 layers, 10 heads (kv: the heads), lru_width h,
// window 2,048, conv1d_width 4, cap 30, rms_norm_eps 1e-6, RoPE base 10,000 on half of each head,
// gelu_pytorch_tanh, tied embeddings.
#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/mamba_lm.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rg_lru.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kRecurrentGemmaFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "RecurrentGemma";

// RecurrentGemmaConfig.layers_block_type: (block_types * 100)[:num_hidden_layers], so a list of n
// entries covers at most 100 n layers.
constexpr int64_t kBlockTypeRepeats = 100;

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>(std::string(kPrefix) + "RMSNorm", dim, eps, o);
}

// A block_types list as it names the layers: "recurrent" or "attention".
std::vector<std::string> read_block_types(const ConfigFields& f, const char* key) {
  const nlohmann::json& v = f.raw(key);
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const nlohmann::json& e : v) {
      if (!e.is_string() || (e != "recurrent" && e != "attention")) {
        f.fail(key,
               e.dump().substr(0, 40) +
                   " is not a block type; expected \"recurrent\" or \"attention\" (transformers' "
                   "TEMPORAL_BLOCK_CLASSES)");
      }
      out.push_back(e.get<std::string>());
    }
  }
  if (out.empty()) {
    f.fail(key, v.dump().substr(0, 60) +
                    ": expected a non-empty list of \"recurrent\" and \"attention\", repeated over "
                    "the layers");
  }
  return out;
}

// A rope_scaling or rope_parameters object of any type but "default": RecurrentGemmaRotaryEmbedding
// raises on it.
void refuse_scaled_rope(const ConfigFields& f, const char* key) {
  if (!f.has(key)) return;
  const nlohmann::json& r = f.raw(key);
  if (!r.is_object()) f.fail(key, "expected an object or null, got " + r.dump().substr(0, 60));
  // One set for every layer: the config class has no layer types to key it by.
  for (const char* type : {"full_attention", "sliding_attention", "chunked_attention"}) {
    if (r.contains(type)) {
      f.fail(key, r.dump().substr(0, 60) +
                      ": keyed by layer type, which RecurrentGemmaConfig does not read; expected "
                      "one set of RoPE values");
    }
  }
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (!r.contains(type_key) || r.at(type_key) == "default") return;
  f.fail(key, "rope type " + r.at(type_key).dump().substr(0, 40) +
                  ": RecurrentGemmaRotaryEmbedding runs the default RoPE only (it raises on any "
                  "other); expected \"default\"");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 256000);
  c.hidden_size = f.integer("hidden_size", 2560);
  c.num_hidden_layers = f.integer("num_hidden_layers", 26);
  // Bounded before the per-layer lists are made (validate() would refuse it only afterwards).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  // RecurrentGemmaMlp is intermediate_size // 2 wide (gate and up each half of it).
  const int64_t intermediate = f.integer("intermediate_size", 3 * 2560);
  c.intermediate_size = intermediate / 2;
  if (c.intermediate_size <= 0) {
    f.fail("intermediate_size",
           std::to_string(intermediate) +
               " makes an MLP of intermediate_size // 2 = " + std::to_string(c.intermediate_size) +
               " (RecurrentGemmaMlp halves it), expected at least 2");
  }
  c.num_attention_heads = f.integer("num_attention_heads", 10);
  const int64_t heads = c.num_attention_heads;
  // __post_init__: a null or absent num_key_value_heads is the heads; more is refused.
  c.num_key_value_heads = f.has("num_key_value_heads") ? f.integer("num_key_value_heads") : heads;
  if (c.num_key_value_heads > heads) {
    f.fail("num_key_value_heads",
           std::to_string(c.num_key_value_heads) + ", expected at most num_attention_heads " +
               std::to_string(heads) + " (RecurrentGemmaConfig.validate_architecture)");
  }
  // __post_init__ sets hidden_size // heads, then a file's head_dim (a leftover key of its
  // transformers 4 export) replaces it, and the attention reads it.
  if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim");
  } else if (heads > 0) {
    c.head_dim = c.hidden_size / heads;
  }
  c.hidden_act = f.string("hidden_activation", "gelu_pytorch_tanh");
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.qkv_bias = f.boolean("attention_bias", false);
  c.o_bias = true;    // o_proj: nn.Linear(..., bias=True) whatever attention_bias says
  c.mlp_bias = true;  // gate_proj, up_proj, down_proj: bias=True
  c.max_position_embeddings = models::kNoPositionLimit;  // no such key: RoPE and a recurrence
  models::pad_token_id_or(f, c, 0);
  // nn.Embedding(vocab, h, padding_idx=pad_token_id) refuses a row the table does not have. The
  // shared check covers only the families with init rules, which this one has not.
  const std::optional<int64_t> pad =
      f.has("pad_token_id") ? std::optional<int64_t>(f.integer("pad_token_id")) : c.pad_token_id;
  if (pad && c.vocab_size > 0 && (*pad < -c.vocab_size || *pad >= c.vocab_size)) {
    f.fail("pad_token_id", "expected a token id in [-vocab_size, vocab_size) = [" +
                               std::to_string(-c.vocab_size) + ", " + std::to_string(c.vocab_size) +
                               ") (nn.Embedding's padding_idx), got " + std::to_string(*pad) +
                               (f.has("pad_token_id") ? "" : " (the config class's default)"));
  }

  // RoPE: the default type only, on partial_rotary_factor (0.5, __post_init__'s default) of each
  // head; a rope_parameters object is read after this by parse_model_config (Note
  // [rope_parameters]).
  refuse_scaled_rope(f, "rope_scaling");
  refuse_scaled_rope(f, "rope_parameters");
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);

  // The softcap divides the logits: RecurrentGemmaForCausalLM applies it always.
  if (f.is_null("logits_soft_cap")) {
    f.fail("logits_soft_cap", "null, expected a positive cap (the logits are always capped)");
  }
  c.final_logit_softcapping = f.number("logits_soft_cap", 30.0);
  if (!(c.final_logit_softcapping > 0) || !std::isfinite(c.final_logit_softcapping)) {
    f.fail("logits_soft_cap", std::to_string(c.final_logit_softcapping) +
                                  ", expected a positive cap: RecurrentGemmaForCausalLM always "
                                  "computes cap * tanh(logits / cap)");
  }
  // The local attention's window; sliding_window is its attribute_map name.
  const char* window_key = f.has("attention_window_size") ? "attention_window_size"
                           : f.has("sliding_window")      ? "sliding_window"
                                                          : "attention_window_size";
  const int64_t window = f.integer(window_key, 2048);
  if (window <= 0) {
    f.fail(window_key, std::to_string(window) + ", expected a positive window of keys");
  }
  if (f.has("attention_window_size") && f.has("sliding_window") &&
      f.integer("sliding_window") != window) {
    f.fail("sliding_window", std::to_string(f.integer("sliding_window")) +
                                 " beside attention_window_size " + std::to_string(window) +
                                 ": RecurrentGemmaConfig maps one onto the other; expected one "
                                 "window");
  }
  c.sliding_window = window;
  // Embeddings are always scaled (RecurrentGemmaModel's normalizer): the transformers 4 key that
  // said so must not say otherwise.
  models::require_built_value(f, "embeddings_scale_by_sqrt_dim", true, "recurrent_gemma",
                              "embeddings scaled by sqrt(hidden_size) (the model's normalizer)");

  // The RG-LRU: lru_width (null: hidden_size) in heads of lru_width / heads channels; transformers
  // reshapes the channels into the heads, so they must divide.
  const int64_t lru = f.has("lru_width") ? f.integer("lru_width") : c.hidden_size;
  if (lru <= 0 || (heads > 0 && lru % heads != 0)) {
    f.fail("lru_width", std::to_string(lru) +
                            ", expected a positive multiple of num_attention_heads " +
                            std::to_string(heads) + " (the RG-LRU's blocks, RecurrentGemmaRglru)");
  }
  c.linear_num_key_heads = c.linear_num_value_heads = heads;
  c.linear_key_head_dim = c.linear_value_head_dim = heads > 0 ? lru / heads : 0;
  c.linear_conv_kernel_dim = f.integer("conv1d_width", 4);
  if (c.linear_conv_kernel_dim <= 0) {
    f.fail("conv1d_width",
           std::to_string(c.linear_conv_kernel_dim) + ", expected a positive number of taps");
  }
  c.linear_conv_bias = c.linear_proj_bias = true;  // nn.Conv1d's and nn.Linear's defaults

  // The layers: block_types repeated. transformers 4 saved the list as _block_types, which
  // transformers 5 does not read (it builds block_types, default recurrent, recurrent,
  // attention): a file whose two lists differ would be built otherwise than it says.
  if (f.is_null("block_types")) {
    f.fail("block_types",
           "null, expected a list of \"recurrent\" and \"attention\" (the config "
           "class makes a list of it)");
  }
  std::vector<std::string> pattern = {"recurrent", "recurrent", "attention"};
  if (f.has("block_types")) pattern = read_block_types(f, "block_types");
  if (f.has("_block_types") && read_block_types(f, "_block_types") != pattern) {
    f.fail("_block_types", f.raw("_block_types").dump().substr(0, 80) +
                               ": transformers 5 builds block_types (" +
                               nlohmann::json(pattern).dump() +
                               ") and ignores _block_types, transformers 4's name for it; "
                               "expected the same list in both, or block_types alone");
  }
  const int64_t n = static_cast<int64_t>(pattern.size());
  if (c.num_hidden_layers > kBlockTypeRepeats * n) {
    f.fail("block_types", std::to_string(n) + " block types cover at most " +
                              std::to_string(kBlockTypeRepeats * n) +
                              " layers (RecurrentGemmaConfig repeats them 100 times), not " +
                              std::to_string(c.num_hidden_layers));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back(pattern[static_cast<size_t>(i % n)] == "recurrent"
                                ? AttentionType::kLinear
                                : AttentionType::kSliding);
  }
  // Read, changing nothing that is built: initialization scales and the cache switch.
  for (const char* key : {"w_init_variance_scale", "final_w_init_variance_scale"}) {
    (void)f.number(key, 0.0);
  }
  (void)f.boolean("use_cache", true);
}

// What parse guarantees, checked again for a config built in code (the planner copies configs and
// cuts their layers; a field set by hand could ask for what RecurrentGemma does not build).
void check_layout(const ModelConfig& c) {
  SP_CHECK(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
           "recurrent_gemma: ", c.layer_types.size(), " layer types for ", c.num_hidden_layers,
           " layers; expected one per layer (block_types)");
  for (const AttentionType t : c.layer_types) {
    SP_CHECK(t == AttentionType::kLinear || t == AttentionType::kSliding,
             "recurrent_gemma: a layer attends ", to_string(t),
             "; expected a recurrent block (linear_attention) or the local attention "
             "(sliding_attention)");
  }
  SP_CHECK(c.sliding_window && *c.sliding_window > 0,
           "recurrent_gemma: no attention window; expected attention_window_size > 0");
  const int64_t heads = c.num_attention_heads;
  SP_CHECK(c.linear_num_key_heads == heads && c.linear_num_value_heads == heads &&
               c.linear_key_head_dim == c.linear_value_head_dim && c.linear_value_head_dim > 0,
           "recurrent_gemma: an RG-LRU of ", c.linear_num_value_heads, " heads of ",
           c.linear_value_head_dim, " (key heads ", c.linear_num_key_heads, " of ",
           c.linear_key_head_dim, "); expected num_attention_heads ", heads,
           " heads of lru_width / heads channels");
  SP_CHECK(c.linear_conv_bias && c.linear_proj_bias && c.o_bias && c.mlp_bias,
           "recurrent_gemma: a projection or the convolution without its bias; RecurrentGemma "
           "has them all (only q, k and v follow attention_bias)");
  SP_CHECK(c.final_logit_softcapping > 0, "recurrent_gemma: logits_soft_cap ",
           c.final_logit_softcapping, "; expected a positive cap (the logits are always capped)");
  SP_CHECK(c.num_local_experts == 0 && !c.rope_scaling && c.nope_layers.empty(),
           "recurrent_gemma: experts, a scaled RoPE or NoPE layers; RecurrentGemma has none");
}

// The shortest block_types whose repetition makes the layer types (at least ceil(layers / 100)
// long, as transformers repeats it 100 times).
std::vector<std::string> block_types_of(const ModelConfig& c) {
  const int64_t layers = c.num_hidden_layers;
  const auto name = [&c](int64_t i) {
    return c.layer_types[static_cast<size_t>(i)] == AttentionType::kLinear ? "recurrent"
                                                                           : "attention";
  };
  int64_t period = std::max<int64_t>(1, (layers + kBlockTypeRepeats - 1) / kBlockTypeRepeats);
  for (;; ++period) {
    bool repeats = true;
    for (int64_t i = period; i < layers && repeats; ++i) {
      repeats =
          c.layer_types[static_cast<size_t>(i)] == c.layer_types[static_cast<size_t>(i % period)];
    }
    if (repeats || period >= layers) break;
  }
  std::vector<std::string> out;
  for (int64_t i = 0; i < std::min(period, layers); ++i) out.emplace_back(name(i));
  return out;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  check_layout(c);
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = 2 * c.intermediate_size;  // RecurrentGemmaMlp halves it
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["lru_width"] = c.linear_num_value_heads * c.linear_value_head_dim;
  j["conv1d_width"] = c.linear_conv_kernel_dim;
  j["attention_window_size"] = *c.sliding_window;
  j["logits_soft_cap"] = c.final_logit_softcapping;
  j["rms_norm_eps"] = c.norm_eps;
  j["hidden_activation"] = c.hidden_act;
  j["rope_theta"] = c.rope_theta;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["attention_dropout"] = c.attention_dropout;
  j["attention_bias"] = c.qkv_bias;
  j["block_types"] = block_types_of(c);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

// RecurrentGemmaAttention: q, k, v, o and its own rotary_emb; the window of the layer's kind
// (Note [What the traced forward counts] in models.h: one fused attention op, its keys bounded).
class LocalAttention : public models::TemporalBlock {
 public:
  LocalAttention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : TemporalBlock(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        window_(kind.window),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj_ = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj_ = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    v_proj_ = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    o_proj_ = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    rotary_emb_ = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                                    std::string(kPrefix) + "RotaryEmbedding",
                                                    models::rotary_dim(c), c.rope_theta));
  }
  Tensor run(const Tensor& x, const Tensor& position_ids) override {
    CallScope scope(*this);
    Tensor q = models::split_heads(q_proj_->call(x), heads_, head_dim_);
    Tensor k = models::split_heads(k_proj_->call(x), kv_heads_, head_dim_);
    const Tensor v = models::split_heads(v_proj_->call(x), kv_heads_, head_dim_);
    // Each attention layer makes its own tables from the position ids, as transformers does;
    // the first rotary_dim channels of each head rotate, the rest pass.
    const auto [cos_t, sin_t] = rotary_emb_->cos_sin(position_ids, x.dtype());
    q = models::apply_rotary(q, cos_t, sin_t);
    k = models::apply_rotary(k, cos_t, sin_t);
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true,
                                                    std::nullopt, kv_heads_ != heads_, window_);
    return o_proj_->call(models::merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_, head_dim_, window_;
  double dropout_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<models::RotaryEmbedding> rotary_emb_;
};

// RecurrentGemmaDecoderLayer, empty until build() (Note [Filling repeated blocks after
// registration] in blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    temporal_pre_norm_ =
        register_module("temporal_pre_norm", make_norm(c.hidden_size, c.norm_eps, o));
    if (kind.attention == AttentionType::kLinear) {
      temporal_ = register_module("temporal_block", models::make_rg_lru_block(c, kPrefix, o));
    } else {
      temporal_ =
          register_module("temporal_block", std::make_shared<LocalAttention>(c, kind, o, training));
    }
    channel_pre_norm_ =
        register_module("channel_pre_norm", make_norm(c.hidden_size, c.norm_eps, o));
    mlp_block_ = register_module(
        "mlp_block",
        std::make_shared<models::GatedMlp>(std::string(kPrefix) + "Mlp", c.hidden_size,
                                           c.intermediate_size, c.mlp_bias, c.hidden_act, o));
  }
  Tensor run(const Tensor& x, const Tensor& position_ids) {
    CallScope scope(*this);
    const Tensor r = add(temporal_->run(temporal_pre_norm_->call(x), position_ids), x);
    return add(mlp_block_->call(channel_pre_norm_->call(r)), r);
  }

 private:
  std::shared_ptr<models::TemporalBlock> temporal_;
  ModulePtr temporal_pre_norm_, channel_pre_norm_, mlp_block_;
};

// RecurrentGemmaModel: embed_tokens, layers, final_norm, the normalizer buffer.
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_tokens_ = register_module("embed_tokens",
                                    std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    final_norm_ = register_module("final_norm", make_norm(c.hidden_size, c.norm_eps, o));
    // sqrt(hidden) as a bfloat16 scalar whatever the model's dtype (not in checkpoints).
    register_buffer("normalizer", empty({}, {.dtype = DType::kBFloat16}), /*persistent=*/false);
    hidden_scale_ = std::sqrt(static_cast<double>(c.hidden_size));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens_->call(ids);
    const Tensor pos = models::position_ids(ids.size(1));
    // hidden_states * normalizer: traced as a product by a number, as Gemma's, since the scalar
    // does not require grad and autograd saves only it (a 0-d operand's product would save the
    // embeddings too, Note [Saved-tensor rules]); its bfloat16 rounding is a value, not work.
    h = mul(h, hidden_scale_);
    for (const auto& layer : layers_) h = layer->run(h, pos);
    return final_norm_->call(h);
  }

 private:
  ModulePtr embed_tokens_, final_norm_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  double hidden_scale_ = 1;
};

// RecurrentGemmaForCausalLM: the shell, then the soft cap on the logits.
class ForCausalLm : public models::CausalLm<Backbone> {
 public:
  ForCausalLm(const ModelConfig& c, const TensorOptions& o, bool training)
      : CausalLm(std::string(kPrefix) + "ForCausalLM", c, o, training, "model.embed_tokens.weight"),
        cap_(c.final_logit_softcapping) {}
  Tensor forward(const Tensor& ids) override {
    const Tensor logits = CausalLm::forward(ids);
    return mul(tanh(div(logits, cap_)), cap_);
  }

 private:
  double cap_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<ForCausalLm>(c, o, training);
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"hidden_act", "hidden_activation"},
                                    {"qkv_bias", "attention_bias"},
                                    {"sliding_window", "attention_window_size"},
                                    {"final_logit_softcapping", "logits_soft_cap"},
                                    {"layer_types", "block_types"},
                                    {"linear_num_key_heads", "num_attention_heads"},
                                    {"linear_num_value_heads", "num_attention_heads"},
                                    {"linear_key_head_dim", "lru_width"},
                                    {"linear_value_head_dim", "lru_width"},
                                    {"linear_conv_kernel_dim", "conv1d_width"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3): the attention's q, k and v column-parallel and
// o_proj row-parallel (k and v are one head: a rank holds a slice of its channels, the
// multi-query case the planner prices approximately, as gpt_bigcode's); the MLP's gate and up
// column-parallel, down row-parallel; the recurrent block by heads (Note [RG-LRU trace] in
// tensor/models/rg_lru.h): linear_x and linear_y column-parallel, each rank whole heads of the
// lru_width channels, the convolution, gates and scan on them, linear_out row-parallel; the
// embedding by vocabulary rows, lm_head (tied to it) by vocabulary; the norms replicated.
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.temporal_block.q_proj", "colwise"},
                                          {"model.layers.*.temporal_block.k_proj", "colwise"},
                                          {"model.layers.*.temporal_block.v_proj", "colwise"},
                                          {"model.layers.*.temporal_block.o_proj", "rowwise"},
                                          {"model.layers.*.temporal_block.linear_y", "colwise"},
                                          {"model.layers.*.temporal_block.linear_x", "colwise"},
                                          {"model.layers.*.temporal_block.linear_out", "rowwise"},
                                          {"model.layers.*.mlp_block.gate_proj", "colwise"},
                                          {"model.layers.*.mlp_block.up_proj", "colwise"},
                                          {"model.layers.*.mlp_block.down_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

// No init rules: RecurrentGemmaPreTrainedModel._init_weights draws recurrent_param from
// uniform(0.9^2, 0.999^2) put through log(1 / sqrt(u) - 1), and scales every other draw by the
// layer's widths (q, k, v, linear_x, linear_y: sqrt(1 / h); o_proj and linear_out: sqrt(2 / (L h))
// and sqrt(2 / (L W)); the gates sqrt(w_init_variance_scale / w); the convolution, the other
// Linears and the embedding sqrt(w_init_variance_scale / conv1d_width)): fills kernels/ does not
// make, so materialize refuses the family (plan, estimate, compare and inspect work).
const ModelFamily kRecurrentGemmaFamily{
    .model_type = "recurrent_gemma",
    .hf_class_prefix = "RecurrentGemma",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .linear_attention = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
