// olmo_hybrid (AI2's OLMo Hybrid 7B, allenai/Olmo-Hybrid-7B): transformers' OlmoHybridConfig and
// modeling_olmo_hybrid.py (generated from modular_olmo_hybrid.py). A hybrid stack of two layer
// classes, picked per layer by layer_types (by default a full_attention layer every fourth, i % 4
// == 3, and the last layer when that leaves none):
//   OlmoHybridLinearAttentionDecoderLayer, pre-norm as Llama's, registered mlp, input_layernorm,
//     post_attention_layernorm, linear_attn:
//       x = x + linear_attn(input_layernorm(x));  x = x + mlp(post_attention_layernorm(x))
//     linear_attn is the Gated DeltaNet (tensor/models/gated_delta_net.h) with every projection
//     its own (GatedDeltaProjections::kSeparateQkv), h hidden, n / m linear key / value heads of
//     dk / dv channels, K taps:
//       A_log [m], dt_bias [m] (listed first: the module's own), q_proj, k_proj [n dk, h],
//       v_proj [m dv, h], a_proj, b_proj [m, h], g_proj [m dv, h], o_proj [h, m dv],
//       conv1d [2 n dk + m dv, 1, K], o_norm [dv] (RMSNormGated, eps 1e-5 always)
//   OlmoHybridAttentionDecoderLayer, OLMo 3's post-norm layer, registered self_attn, mlp,
//     post_attention_layernorm, post_feedforward_layernorm:
//       x = x + post_attention_layernorm(self_attn(x));  x = x + post_feedforward_layernorm(mlp(x))
//     self_attn: q, k, v, o projections (biases by attention_bias) and q_norm / k_norm over the
//     whole q and k widths, before the split into heads (OLMo 2's).
// Every MLP is SwiGLU without biases (gate_proj, up_proj, down_proj). The model: embed_tokens,
// layers, norm, and rotary_emb only when the config has a RoPE base: the released checkpoint has
// none (rope_theta null: no position encoding at all, "DRoPE"), so its attention layers are NoPE
// (ModelConfig::nope_layers lists them). With RoPE, OlmoHybridRotaryEmbedding keeps cos and sin
// in float32, so q and k rotate in float32 and are cast back. lm_head untied.
// OlmoHybridConfig's defaults (the 7B's): vocabulary 100,352, hidden 3,840, MLP 11,008, 32 layers,
// 30 heads (kv heads = heads), 65,536 positions, rms_norm_eps 1e-6, pad_token_id 100277; linear
// attention of linear_num_key_heads = linear_num_value_heads = heads, linear_key_head_dim
// int(0.75 hidden / key heads) (96), linear_value_head_dim twice that, 4 taps,
// linear_allow_neg_eigval true (beta doubled). Refused as transformers fails on them (config
// validation or forward): a stack without a linear_attention layer or without a full_attention
// one, a layer type other than those two, a rope_parameters keyed by layer type, and a
// partial_rotary_factor below 1 with a scaled RoPE type (its narrower table does not broadcast
// over the whole head; the default type ignores the factor); and, as shardplan's own rule, a
// hidden_act other than SiLU (the causal-conv1d kernel's activation, which the trace runs).
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/gated_delta_net.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/linear_attention_config.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/models/single_rope.h"

namespace shardplan::tensor {

extern const ModelFamily kOlmoHybridFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "OlmoHybrid";

// The class's default stack: a full_attention layer every fourth (i % 4 == 3), and the last one
// when that leaves none (fewer than four layers).
void default_layer_types(ModelConfig& c) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back(i % 4 == 3 ? AttentionType::kFull : AttentionType::kLinear);
  }
  if (c.num_hidden_layers < 4) c.layer_types.back() = AttentionType::kFull;
}

// The linear attention's sizes with OlmoHybridConfig.__post_init__'s defaults, and which layers
// use it.
void parse_linear_attention(const ConfigFields& f, ModelConfig& c) {
  c.linear_num_key_heads = f.integer("linear_num_key_heads", c.num_attention_heads);
  c.linear_num_value_heads = f.integer("linear_num_value_heads", c.num_attention_heads);
  if (c.linear_num_key_heads <= 0) {  // the default key width divides by it
    f.fail("linear_num_key_heads",
           "must be a positive integer, got " + std::to_string(c.linear_num_key_heads));
  }
  // int(0.75 * hidden_size / linear_num_key_heads), in Python's double arithmetic.
  const int64_t key_width = c.hidden_size > 0
                                ? static_cast<int64_t>(0.75 * static_cast<double>(c.hidden_size) /
                                                       static_cast<double>(c.linear_num_key_heads))
                                : 0;
  c.linear_key_head_dim = f.integer("linear_key_head_dim", key_width);
  // Bounded before it is doubled into the value width's default (validate() bounds both again).
  if (c.linear_key_head_dim <= 0 || c.linear_key_head_dim > 65536) {
    f.fail("linear_key_head_dim",
           std::to_string(c.linear_key_head_dim) +
               (f.has("linear_key_head_dim")
                    ? ""
                    : " (0.75 hidden_size / linear_num_key_heads, the class's default)") +
               ", expected 1..65536");
  }
  c.linear_value_head_dim = f.integer("linear_value_head_dim", 2 * c.linear_key_head_dim);
  c.linear_conv_kernel_dim = f.integer("linear_conv_kernel_dim", 4);
  c.linear_allow_neg_eigval = f.boolean("linear_allow_neg_eigval", true);
  // The A_log and dt initialization ranges: read (numbers, as the class types them), used by
  // _init_weights only, which shardplan does not run for this family.
  for (const char* key : {"linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max",
                          "linear_dt_init_floor"}) {
    (void)f.number(key, 0.0);
  }
  if (f.has("layer_types")) {
    models::read_linear_layer_types(f, c);
  } else {
    default_layer_types(c);
  }
  // OlmoHybridConfig.validate_architecture raises on a stack of one kind.
  const char* derived = f.has("layer_types")
                            ? ""
                            : " (the default: a full_attention layer every fourth, the last one "
                              "when fewer than four)";
  for (const AttentionType t : {AttentionType::kLinear, AttentionType::kFull}) {
    if (std::find(c.layer_types.begin(), c.layer_types.end(), t) == c.layer_types.end()) {
      f.fail("layer_types", "has no " + std::string(to_string(t)) + " layer" + derived +
                                "; OLMo Hybrid expects at least one of each (transformers' "
                                "OlmoHybridConfig raises ValueError)");
    }
  }
}

// RoPE or none, as OlmoHybridModel decides: rotary_emb exists when the standardized
// rope_parameters hold a rope_theta that is not null. transformers' convert_rope_params_to_dict
// takes a legacy rope_scaling in place of rope_parameters, then its rope_theta, else the file's
// top-level rope_theta (null counts: OLMo-core's converter writes "rope_theta": null for NoPE),
// else 10,000. Read here, not by the shared reading (ModelFamily::rope_parameters_by_layer_type).
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  const models::SingleRope r = models::find_single_rope(f, "OlmoHybridRotaryEmbedding");
  if (r.theta && r.theta->is_null()) {  // NoPE: no rotary_emb, no layer rotates
    c.rope_scaling.reset();
    c.partial_rotary_factor = 1;
    c.nope_layers.clear();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (c.layer_types[static_cast<size_t>(i)] == AttentionType::kFull) c.nope_layers.push_back(i);
    }
    return;
  }
  if (r.theta) {
    if (!r.theta->is_number() || !(r.theta->get<double>() > 0)) {
      f.fail(r.theta_key, "rope_theta " + r.theta->dump().substr(0, 40) +
                              ", expected a positive base or null (no RoPE)");
    }
    c.rope_theta = r.theta->get<double>();
  } else {
    c.rope_theta = 10000;  // RotaryEmbeddingConfigMixin.default_theta
  }
  models::read_full_width_scaling(f, c, r, "OLMo Hybrid's");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // OlmoHybridConfig gives every size a default (the 7B's); num_key_value_heads None is heads.
  models::parse_rotary_decoder(
      f, c,
      {.sizes = models::RotaryDecoderSizes{100352, 3840, 11008, 32, 30, 30},
       .max_position_embeddings = 65536,
       .rms_norm_eps = 1e-6});
  if (!f.has("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  // The MLP's activation is also the convolution's (causal_conv1d_fn(activation=hidden_act)),
  // whose fused kernel takes SiLU only.
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    f.fail("hidden_act", "'" + c.hidden_act +
                             "' is not built; expected \"silu\" (the Gated DeltaNet's "
                             "convolution runs it in the causal-conv1d kernel)");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);  // q, k, v and o
  models::pad_token_id_or(f, c, 100277);
  // nn.Embedding(vocab, h, padding_idx=pad_token_id) refuses a row the table does not have. The
  // shared check (parse_model_config) covers only the families that zero that row at init, which
  // this one does not (no init rules), so the file's id, else the class's, is checked here.
  const std::optional<int64_t> pad =
      f.has("pad_token_id") ? std::optional<int64_t>(f.integer("pad_token_id")) : c.pad_token_id;
  if (pad && c.vocab_size > 0 && (*pad < -c.vocab_size || *pad >= c.vocab_size)) {
    f.fail("pad_token_id", "expected a token id in [-vocab_size, vocab_size) = [" +
                               std::to_string(-c.vocab_size) + ", " + std::to_string(c.vocab_size) +
                               ") (nn.Embedding's padding_idx), got " + std::to_string(*pad) +
                               (f.has("pad_token_id") ? "" : " (the config class's default)"));
  }
  parse_linear_attention(f, c);
  parse_rope(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rope_scaling");
  if (!c.nope_layers.empty()) {  // NoPE, as the released file says it
    j["rope_parameters"] = nullptr;
    j["rope_theta"] = nullptr;
  } else {
    j.erase("rope_theta");
    nlohmann::json r = c.rope_scaling ? rope_scaling_json(c.rope_scaling)
                                      : nlohmann::json{{"rope_type", "default"}};
    r["rope_theta"] = c.rope_theta;
    j["rope_parameters"] = r;
  }
  j["attention_bias"] = c.qkv_bias;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 100277
  j["layer_types"] = models::layer_types_json(c);
  j["linear_num_key_heads"] = c.linear_num_key_heads;
  j["linear_num_value_heads"] = c.linear_num_value_heads;
  j["linear_key_head_dim"] = c.linear_key_head_dim;
  j["linear_value_head_dim"] = c.linear_value_head_dim;
  j["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
  j["linear_allow_neg_eigval"] = c.linear_allow_neg_eigval;
}

ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
}

ModulePtr make_mlp(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<models::GatedMlp>(std::string(kPrefix) + "MLP", c.hidden_size,
                                            c.intermediate_size, false, c.hidden_act, o);
}

// A decoder layer of either class, made empty and filled by build() once it sits in its
// ModuleList (Note [Filling repeated blocks after registration], blocks.h).
class Layer : public Module {
 public:
  using Module::Module;
  virtual void build(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o,
                     bool training) = 0;
  virtual Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) = 0;
};

// OlmoHybridLinearAttentionDecoderLayer: pre-norm, the Gated DeltaNet registered last.
class LinearAttentionLayer : public Layer {
 public:
  LinearAttentionLayer() : Layer(std::string(kPrefix) + "LinearAttentionDecoderLayer") {}
  void build(const ModelConfig& c, const LayerKind& /*kind*/, const TensorOptions& o,
             bool /*training*/) override {
    mlp_ = register_module("mlp", make_mlp(c, o));
    input_norm_ = register_module("input_layernorm", make_norm(c, o));
    post_attention_norm_ = register_module("post_attention_layernorm", make_norm(c, o));
    mixer_ = register_module(
        "linear_attn",
        models::make_gated_delta_net(c, kPrefix, o, models::GatedDeltaProjections::kSeparateQkv));
  }
  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const Tensor h = add(x, mixer_->run(input_norm_->call(x), Tensor(), Tensor()));
    return add(h, mlp_->call(post_attention_norm_->call(h)));
  }

 private:
  ModulePtr mlp_, input_norm_, post_attention_norm_;
  std::shared_ptr<models::AttentionBlock> mixer_;
};

// OlmoHybridAttentionDecoderLayer: OLMo 3's post-norm layer without a window.
class AttentionLayer : public Layer {
 public:
  AttentionLayer() : Layer(std::string(kPrefix) + "AttentionDecoderLayer") {}
  void build(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o,
             bool training) override {
    attn_ = register_module(
        "self_attn",
        models::make_rotary_attention(
            c, kind, {.prefix = kPrefix, .rope_in_float32 = true, .qk_norm_full_width = true},
            kPrefix, o, training));
    mlp_ = register_module("mlp", make_mlp(c, o));
    post_attention_norm_ = register_module("post_attention_layernorm", make_norm(c, o));
    post_feedforward_norm_ = register_module("post_feedforward_layernorm", make_norm(c, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    const Tensor h = add(x, post_attention_norm_->call(attn_->run(x, cos_t, sin_t)));
    return add(h, post_feedforward_norm_->call(mlp_->call(h)));
  }

 private:
  std::shared_ptr<models::AttentionBlock> attn_;
  ModulePtr mlp_, post_attention_norm_, post_feedforward_norm_;
};

// OlmoHybridModel: embed_tokens (padding_idx pad_token_id), layers, norm, rotary_emb when some
// attention layer rotates.
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<LayerKind> kinds;
    bool rotates = false;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const LayerKind kind = layer_kind(c, i);
      // A config built in code with another layer type: neither class builds it.
      SP_CHECK(kind.attention == AttentionType::kLinear || kind.attention == AttentionType::kFull,
               "olmo_hybrid: layer ", i, " attends ", to_string(kind.attention),
               ", expected linear_attention or full_attention");
      rotates = rotates || (kind.attention == AttentionType::kFull && kind.rope);
      kinds.push_back(kind);
      if (kind.attention == AttentionType::kLinear) {
        layers_.push_back(layers->push_back(std::make_shared<LinearAttentionLayer>()));
      } else {
        layers_.push_back(layers->push_back(std::make_shared<AttentionLayer>()));
      }
    }
    norm_ = register_module("norm", make_norm(c, o));
    if (rotates) {
      rope_ = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                                std::string(kPrefix) + "RotaryEmbedding",
                                                models::rotary_dim(c), c.rope_theta));
    }
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->build(c, kinds[i], o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_->call(ids);
    Tensor cos_h, sin_h;  // undefined without RoPE: no layer reads them
    if (rope_) {
      // float32 tables (OlmoHybridRotaryEmbedding does not cast them to the activations' dtype).
      const auto [cos_t, sin_t] =
          rope_->cos_sin(models::position_ids(ids.size(1)), DType::kFloat32);
      cos_h = models::per_head(cos_t);
      sin_h = models::per_head(sin_t);
    }
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm_->call(h);
  }

 private:
  ModulePtr embed_, norm_;
  std::shared_ptr<models::RotaryEmbedding> rope_;
  std::vector<std::shared_ptr<Layer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3). Attention: q, k, v column-parallel by heads, o
// row-parallel; q_norm and k_norm span every head (docs/models.md: the all-reduce of their sum of
// squares is not priced, as for OLMo 2 and 3), which is why transformers' own plan gathers q, k
// and v instead. Gated DeltaNet: q_proj, k_proj, v_proj, a_proj, b_proj and g_proj
// column-parallel, each an unfused projection whose rows are whole heads in head order, so a
// contiguous split hands every rank whole key heads with the value heads they serve (tp must
// divide linear_num_key_heads: planner/candidate/parallel_dims.cpp); the convolution, rule and
// gated norm of those heads stay on the rank, o_proj row-parallel. The MLP as Llama's; the
// embedding by vocabulary rows, lm_head by vocabulary.
constexpr TensorParallelRule kOlmoHybridTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.linear_attn.q_proj", "colwise"},
    {"model.layers.*.linear_attn.k_proj", "colwise"},
    {"model.layers.*.linear_attn.v_proj", "colwise"},
    {"model.layers.*.linear_attn.a_proj", "colwise"},
    {"model.layers.*.linear_attn.b_proj", "colwise"},
    {"model.layers.*.linear_attn.g_proj", "colwise"},
    {"model.layers.*.linear_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

// No init rules: OlmoHybridPreTrainedModel._init_weights draws A_log as log(uniform(a_log_min,
// a_log_max)) and dt_bias as the inverse softplus of a log-uniform dt, fills kernels/ does not
// make, so materialize refuses the family (plan, estimate, compare and inspect work).
const ModelFamily kOlmoHybridFamily{
    .model_type = "olmo_hybrid",
    .hf_class_prefix = "OlmoHybrid",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rope_parameters_by_layer_type = true,  // parse_rope reads rope_parameters and rope_theta
    .linear_attention = true,
    .tp_plan = kOlmoHybridTpPlan,
};

}  // namespace shardplan::tensor
