// muse_glimmer_text: the language model of Muse Glimmer (model_type muse_glimmer, whose
// text_config it is: Note [Multimodal configs] in model_config.cpp; the vision tower, its adapter,
// the projection into the text width and their norm are not built). transformers'
// MuseGlimmerTextConfig (vocab 202048, hidden 6656, MLP 19968, 52 layers, 32 heads and 2
// key-value heads of 128, max positions 131072, rms_norm_eps 1e-5, post_norm_eps 1e-8, silu in
// hidden_activation, untied; a window of 2048 on every layer but each fourth counted back from
// the last, which attends in full and takes no RoPE; logits times output_multiplier, then capped
// at 20) and modeling_muse_glimmer.py.
//
// transformers registers no *ForCausalLM for muse_glimmer_text (AutoModel gives the bare
// MuseGlimmerTextModel), so the model is named as MuseGlimmerForConditionalGeneration holds its
// language model, as the checkpoints store it:
//   model.language_model.embed_tokens.weight                      [V, h]
//   model.language_model.layers.N.self_attn.q_proj.weight         [H d, h]  (bias: attention_bias)
//   model.language_model.layers.N.self_attn.{k,v}_proj.weight     [K d, h]  (bias: attention_bias)
//   model.language_model.layers.N.self_attn.o_proj.weight         [h, H d]  (bias: attention_bias)
//   model.language_model.layers.N.self_attn.gate_proj.weight      [H d, h]  (never a bias)
//   model.language_model.layers.N.mlp.{gate,up}_proj.weight       [F, h]
//   model.language_model.layers.N.mlp.down_proj.weight            [h, F]
//   model.language_model.layers.N.{input,post_attention,pre_feedforward,post_feedforward}_layernorm
//                                                       .weight   [h]
//   model.language_model.norm.weight                              [h]
//   lm_head.weight                                                [V, h]    (tied by the wrapper)
// What differs from Gemma 2's layer (its sandwich of four (1 + w) norms, MuseGlimmerTextCentered
// RMSNorm, the two after each half at post_norm_eps):
// - the token embedding is MuseGlimmerTextNormedEmbedding: the rows through a weightless RMSNorm
//   (its child embed_norm, no parameter), not scaled by sqrt(hidden);
// - the attention norms q and k per head with one weightless RMSNorm (qk_norm), multiplies q by
//   qk_scale_factor (ModelConfig::query_multiplier) on top of the softmax's 1/sqrt(head_dim), and
//   gates its output by a projection of its own, o_proj(out * sigmoid(gate_proj(x))) (AFMoE's);
// - which layers rotate is layer_rope_theta's: 0 is NoPE. The model builds one rotary table from
//   rope_parameters' base and hands it to every layer whose entry is nonzero, so a nonzero entry's
//   own value changes nothing (MuseGlimmerTextModel tests it for truth);
// - the final norm is MuseGlimmerRMSNorm, x / rms(x) times its weight (not 1 + w);
// - the logits are multiplied by output_multiplier (ModelConfig::logit_scale) before the cap.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kMuseGlimmerTextFamily;  // listed in family_registry.cpp

namespace {

// ---- config ----------------------------------------------------------------------------------

// MuseGlimmerTextConfig's rule for both layer_types and layer_rope_theta: every fourth layer
// counted back from the last (the last itself, then the fourth before it, ...) attends in full
// and takes no RoPE, the others slide and rotate.
bool every_fourth_from_the_last(int64_t layers, int64_t layer) {
  return (layers - 1 - layer) % 4 == 0;
}

AttentionType class_layer_type(const ModelConfig& c, int64_t layer) {
  return every_fourth_from_the_last(c.num_hidden_layers, layer) ? AttentionType::kFull
                                                                : AttentionType::kSliding;
}

// MuseGlimmerTextConfig is a strict dataclass: these fields are a number, never None.
constexpr const char* kNotNull[] = {
    "head_dim",        "num_key_value_heads", "final_logit_softcapping",
    "qk_scale_factor", "output_multiplier",   "post_norm_eps",
    "rms_norm_eps"};

// layer_rope_theta: one base per layer, 0 for a NoPE layer (absent or null: the class's rule).
// Returns the NoPE layers, sorted (ModelConfig::nope_layers).
std::vector<int64_t> parse_nope_layers(const ConfigFields& f, int64_t layers) {
  std::vector<int64_t> nope;
  if (!f.has("layer_rope_theta")) {
    for (int64_t i = 0; i < layers; ++i) {
      if (every_fourth_from_the_last(layers, i)) nope.push_back(i);
    }
    return nope;
  }
  const nlohmann::json& v = f.raw("layer_rope_theta");
  // The model indexes the list by layer: a shorter one fails there, a longer one is a file made
  // for another depth.
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail("layer_rope_theta", "expected a list of num_hidden_layers = " + std::to_string(layers) +
                                   " numbers, each a RoPE base or 0 (no RoPE)");
  }
  for (int64_t i = 0; i < layers; ++i) {
    const nlohmann::json& e = v[static_cast<size_t>(i)];
    if (!e.is_number()) {
      f.fail("layer_rope_theta", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                     ", expected a number (a RoPE base, or 0: no RoPE)");
    }
    if (e.get<double>() == 0) nope.push_back(i);
  }
  return nope;
}

// Whether a partial_rotary_factor other than 1 is asked, at the top level or in rope_parameters
// (convert_rope_params_to_dict moves the former into the latter).
bool partial_rotary_asked(const ConfigFields& f) {
  auto partial = [](const nlohmann::json& v) { return !v.is_number() || v.get<double>() != 1.0; };
  if (f.has("partial_rotary_factor") && partial(f.raw("partial_rotary_factor"))) return true;
  if (!f.has("rope_parameters")) return false;
  const nlohmann::json& r = f.raw("rope_parameters");
  return r.is_object() && r.contains("partial_rotary_factor") &&
         !r.at("partial_rotary_factor").is_null() && partial(r.at("partial_rotary_factor"));
}

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kNotNull) {
    if (f.is_null(key)) {
      f.fail(key,
             "is null; MuseGlimmerTextConfig's field is a number (strict): expected a value, or "
             "no key for the class's default");
    }
  }
  // The class's sizes are the released checkpoint's, and the wrapper builds them when its file
  // has no text_config keys.
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 202048,
                                                                    .hidden_size = 6656,
                                                                    .intermediate_size = 19968,
                                                                    .num_hidden_layers = 52,
                                                                    .num_attention_heads = 32,
                                                                    .num_key_value_heads = 2},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .tie_word_embeddings = false,
                                .act_key = "hidden_activation",
                                .hidden_act = "silu",
                                .head_dim = 128});
  // MuseGlimmerTextConfig.validate_architecture, although head_dim is its own field.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is not a multiple of the " +
                              std::to_string(c.num_attention_heads) +
                              " attention heads (MuseGlimmerTextConfig.validate_architecture)");
  }
  // xIELU is the one activation with parameters of its own, which MuseGlimmerTextMLP would hold.
  if (c.hidden_act == "xielu") {
    f.fail("hidden_activation",
           "\"xielu\": its learned parameters inside MuseGlimmerTextMLP are not built; expected "
           "an activation without parameters (silu)");
  }
  if (partial_rotary_asked(f)) {
    f.fail("partial_rotary_factor",
           "MuseGlimmerTextRotaryEmbedding rotates the whole head_dim (its default RoPE reads no "
           "factor); expected 1 or none");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  // The model builds the sliding mask whatever the layer types, and
  // create_sliding_window_causal_mask raises without a window.
  if (f.is_null("sliding_window")) {
    f.fail("sliding_window",
           "is null; MuseGlimmerTextModel always builds the sliding-window mask, which needs a "
           "window; expected a size (default 2048)");
  }
  c.sliding_window = f.integer("sliding_window", 2048);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
  }
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, class_layer_type, c);
  for (const AttentionType t : c.layer_types) {
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types", std::string(to_string(t)) +
                                ": MuseGlimmerTextModel masks full_attention and sliding_attention "
                                "layers only");
    }
  }
  // Independent of layer_types: a file may slide on a NoPE layer or rotate a full one.
  c.nope_layers = parse_nope_layers(f, c.num_hidden_layers);
  // MuseGlimmerForConditionalGeneration divides the logits by the cap: it is never "none".
  c.final_logit_softcapping = f.number("final_logit_softcapping", 20.0);
  if (!(c.final_logit_softcapping > 0)) {
    f.fail("final_logit_softcapping",
           "must be positive (the logits are divided by it, then capped), got " +
               std::to_string(c.final_logit_softcapping));
  }
  c.query_multiplier = f.number("qk_scale_factor", 3.87);
  c.logit_scale = f.number("output_multiplier", 0.19611613513818404);  // 1 / sqrt(6656 / 256)
  c.post_norm_eps = f.number("post_norm_eps", 1e-8);
  if (!(c.post_norm_eps > 0)) {
    f.fail("post_norm_eps", "must be positive, got " + std::to_string(c.post_norm_eps));
  }
  // Gemma 2's fields that MuseGlimmerTextConfig deletes (AttributeError) and its model never
  // reads, and the reference config's sliding_window_pattern (layer_types replaces it): a file
  // holding them builds the same model.
  f.has("attn_logit_softcapping");
  f.has("query_pre_attn_scalar");
  f.has("sliding_window_pattern");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j, "hidden_activation");  // with sliding_window
  j["attention_bias"] = c.qkv_bias;
  j["layer_types"] = models::layer_types_json(c);
  nlohmann::json theta = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool nope = std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i);
    theta.push_back(nope ? 0.0 : c.rope_theta);
  }
  j["layer_rope_theta"] = theta;
  j["final_logit_softcapping"] = c.final_logit_softcapping;
  j["qk_scale_factor"] = c.query_multiplier;
  j["output_multiplier"] = c.logit_scale;
  j["post_norm_eps"] = c.post_norm_eps > 0 ? c.post_norm_eps : c.norm_eps;
}

// ---- modules ---------------------------------------------------------------------------------

// MuseGlimmerRMSNorm (Gemma 4's): x / rms(x) in float32, times the weight where it has one
// (with_scale; started at one). Weightless, it is the attention's qk_norm and the embeddings'
// embed_norm.
class Norm : public Module {
 public:
  Norm(int64_t dim, double eps, bool with_scale, const TensorOptions& o)
      : Module("MuseGlimmerRMSNorm"), dim_(dim), eps_(eps), with_scale_(with_scale) {
    if (with_scale) register_parameter("weight", empty({dim}, o));
  }
  Tensor forward(const Tensor& x) override {
    return rms_norm(x, {dim_}, with_scale_ ? parameter("weight") : Tensor(), eps_);
  }
  void reset_parameters(uint64_t /*seed*/) override {
    if (with_scale_) init_member_constant("weight", 1.0);
  }

 private:
  int64_t dim_;
  double eps_;
  bool with_scale_;
};

// MuseGlimmerTextCenteredRMSNorm: Gemma's x / rms(x) * (1 + w), the layer's four norms.
ModulePtr centered_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("MuseGlimmerTextCenteredRMSNorm", dim, eps, o);
}

class Attention : public models::AttentionBlock {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : AttentionBlock("MuseGlimmerTextAttention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0),
        query_scale_(c.query_multiplier),
        rope_(kind.rope) {
    if (kind.window > 0) window_ = kind.window;
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    // MuseGlimmerTextAttention's order: q_proj, k_proj, v_proj, o_proj, gate_proj, qk_norm.
    q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    gate_proj = register_module("gate_proj", std::make_shared<Linear>(h, q, false, o));
    qk_norm = register_module(
        "qk_norm", std::make_shared<Norm>(head_dim_, c.norm_eps, /*with_scale=*/false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    Tensor q = models::split_heads(q_proj->call(x), heads_, head_dim_);
    Tensor k = models::split_heads(k_proj->call(x), kv_heads_, head_dim_);
    const Tensor v = models::split_heads(v_proj->call(x), kv_heads_, head_dim_);
    // One weightless norm per head of q and of k; q then times qk_scale_factor (even at 1).
    q = mul(qk_norm->call(q), query_scale_);
    k = qk_norm->call(k);
    if (rope_) {  // a NoPE layer is handed no tables
      q = models::apply_rotary(q, cos_t, sin_t);
      k = models::apply_rotary(k, cos_t, sin_t);
    }
    // The softmax scale stays 1/sqrt(head_dim); a sliding layer's window bounds each query's keys.
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    return o_proj->call(mul(models::merge_heads(out), sigmoid(gate_proj->call(x))));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj, gate_proj;
  ModulePtr qk_norm;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_, query_scale_;
  bool rope_;
  std::optional<int64_t> window_;
};

// Made empty and filled once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("MuseGlimmerTextDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const int64_t h = c.hidden_size;
    const double post_eps = c.post_norm_eps > 0 ? c.post_norm_eps : c.norm_eps;
    self_attn = register_module("self_attn",
                                std::make_shared<Attention>(c, layer_kind(c, index), o, training));
    // MuseGlimmerTextMLP (Gemma 2's): down(act(gate(x)) * up(x)), no biases.
    mlp = register_module(
        "mlp", std::make_shared<models::GatedMlp>("MuseGlimmerTextMLP", h, c.intermediate_size,
                                                  false, c.hidden_act, o));
    input_layernorm = register_module("input_layernorm", centered_norm(h, c.norm_eps, o));
    post_attention_layernorm =
        register_module("post_attention_layernorm", centered_norm(h, post_eps, o));
    pre_feedforward_layernorm =
        register_module("pre_feedforward_layernorm", centered_norm(h, c.norm_eps, o));
    post_feedforward_layernorm =
        register_module("post_feedforward_layernorm", centered_norm(h, post_eps, o));
  }
  // Each half normed on its way in and on its way out, then added to the residual stream.
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = self_attn->run(input_layernorm->call(x), cos_t, sin_t);
    const Tensor r = add(x, post_attention_layernorm->call(a));
    const Tensor m = mlp->call(pre_feedforward_layernorm->call(r));
    return add(r, post_feedforward_layernorm->call(m));
  }
  std::shared_ptr<models::AttentionBlock> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
};

// MuseGlimmerTextModel, empty until build(), like DecoderLayer.
class TextModel : public Module {
 public:
  TextModel() : Module("MuseGlimmerTextModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    hidden_ = c.hidden_size;
    eps_ = c.norm_eps;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm = register_module("norm", std::make_shared<Norm>(c.hidden_size, c.norm_eps, true, o));
    // One table for every rotating layer, of the whole head_dim at rope_parameters' base; built
    // even when every layer is NoPE, as the model builds it.
    rotary_emb = register_module(
        "rotary_emb", std::make_shared<models::RotaryEmbedding>("MuseGlimmerTextRotaryEmbedding",
                                                                c.head_dim, c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    // MuseGlimmerTextNormedEmbedding: the rows through its weightless embed_norm. That child holds
    // no parameter and is applied here, after the lookup's call, so that a vocabulary-parallel
    // lookup is reduced before the norm reads it (Megatron's VocabParallelEmbedding).
    Tensor h = rms_norm(embed_tokens->call(ids), {hidden_}, Tensor(), eps_);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens;
  ModulePtr norm;
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  int64_t hidden_ = 0;
  double eps_ = 0;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

// MuseGlimmerModel without its vision tower, vision_adapter, vision_projection and
// perception_emb_norm: the language model alone (text tokens only).
class Model : public Module {
 public:
  Model() : Module("MuseGlimmerModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    language_model = register_module("language_model", std::make_shared<TextModel>());
    language_model->build(c, o, training);  // under its final name: no renaming of the tree
  }
  Tensor forward(const Tensor& ids) override { return language_model->call(ids); }
  std::shared_ptr<TextModel> language_model;
};

class ForConditionalGeneration : public Module {
 public:
  ForConditionalGeneration(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("MuseGlimmerForConditionalGeneration"),
        output_multiplier_(c.logit_scale),
        softcap_(c.final_logit_softcapping) {
    model = register_module("model", std::make_shared<Model>());
    lm_head =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, o, training);
    // _tied_weights_keys, applied when the wrapper's config ties (kWrapperTies).
    if (c.tie_word_embeddings) {
      tie_parameters(*this, "lm_head.weight", "model.language_model.embed_tokens.weight");
    }
  }
  // cap * tanh(logits * output_multiplier / cap): the multiply, the division, tanh and the
  // multiply back, as the forward runs them.
  Tensor forward(const Tensor& ids) override {
    const Tensor logits = mul(lm_head->call(model->call(ids)), output_multiplier_);
    return mul(tanh(div(logits, softcap_)), softcap_);
  }
  std::shared_ptr<Model> model;
  std::shared_ptr<Linear> lm_head;

 private:
  double output_multiplier_, softcap_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<ForConditionalGeneration>(c, o, training);
}

constexpr FieldRename kMuseGlimmerRenames[] = {
    {"hidden_act", "hidden_activation"}, {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},      {"o_bias", "attention_bias"},
    {"nope_layers", "layer_rope_theta"}, {"query_multiplier", "qk_scale_factor"},
    {"logit_scale", "output_multiplier"}};

// MuseGlimmerTextConfig.base_model_tp_plan under the wrapper's names, with Megatron's vocabulary
// split of the embedding and the output layer: q, k, v and the output gate column-parallel (each
// rank whole heads of each, so the per-head qk_norm, RoPE and attention run on its own heads and
// the gate's columns meet the same heads' outputs), o_proj row-parallel; the MLP's gate and up
// column-parallel, down_proj row-parallel; every norm replicated (the weightless qk_norm and the
// embeddings' norm have nothing to split).
constexpr TensorParallelRule kMuseGlimmerTpPlan[] = {
    {"model.language_model.embed_tokens", "rowwise"},
    {"model.language_model.layers.*.self_attn.q_proj", "colwise"},
    {"model.language_model.layers.*.self_attn.k_proj", "colwise"},
    {"model.language_model.layers.*.self_attn.v_proj", "colwise"},
    {"model.language_model.layers.*.self_attn.gate_proj", "colwise"},
    {"model.language_model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.language_model.layers.*.mlp.gate_proj", "colwise"},
    {"model.language_model.layers.*.mlp.up_proj", "colwise"},
    {"model.language_model.layers.*.mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// MuseGlimmerPreTrainedModel has no _init_weights of its own (its modular file deletes Gemma 2's),
// so PreTrainedModel's applies: Linear weights normal(0, initializer_range) and biases zero, the
// embedding normal with the pad_token_id row zero (padding_idx), and every module whose class
// name holds "RMSNorm" filled with ones. That includes the four
// MuseGlimmerTextCenteredRMSNorm of each layer, whose constructor starts them at zero for their
// (1 + w): transformers' fresh model scales by 2 there, and so does this.
constexpr InitRule kMuseGlimmerInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"MuseGlimmerTextCenteredRMSNorm", "weight", InitFill::kOnes},
    {"MuseGlimmerRMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kMuseGlimmerTextFamily{
    .model_type = "muse_glimmer_text",
    .hf_class_prefix = "MuseGlimmer",
    .layers_path = "model.language_model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kMuseGlimmerRenames,
    .tp_plan = kMuseGlimmerTpPlan,
    .init_rules = kMuseGlimmerInitRules,
};

}  // namespace shardplan::tensor
