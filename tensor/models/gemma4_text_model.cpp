#include "tensor/models/gemma4_text_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/gemma_text_blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor::models {
// A named namespace around the file-local names: the tensor library's unity batches share one
// anonymous namespace per batch (cmake/shardplan_helpers.cmake), and rotary_decoder.cpp has its
// own DecoderLayer.
namespace gemma4 {
namespace {

constexpr double kSlidingTheta = 1e4, kFullTheta = 1e6, kProportionalShare = 0.25;

// ---- config ----------------------------------------------------------------------------------

// One layer type's attention geometry: head width and key-value heads.
struct Geometry {
  int64_t head_dim;
  int64_t kv_heads;
  bool operator==(const Geometry&) const = default;
};

// The config class's per_layer_config (transformers' heterogeneous configs): {"<layer>":
// {"head_dim": .., "num_key_value_heads": ..}}. Gemma 4's modules read only those two per layer,
// and its rotary module asks one set per layer type, so every layer of a type must carry the same
// (an override equal to the global value is none). Returns the geometry of `type`'s layers.
Geometry per_layer_geometry(const ConfigFields& f, const ModelConfig& c, AttentionType type,
                            const Geometry& global) {
  const nlohmann::json& plc = f.raw("per_layer_config");
  if (!plc.is_object()) {
    f.fail("per_layer_config", plc.dump().substr(0, 60) +
                                   ": expected an object keyed by layer index, each entry "
                                   "{\"head_dim\": .., \"num_key_value_heads\": ..}");
  }
  std::map<int64_t, Geometry> by_layer;
  for (const auto& [key, entry] : plc.items()) {
    int64_t layer = -1;
    const bool digits =
        !key.empty() && key.size() <= 9 &&
        std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (digits) layer = std::stoll(key);
    if (layer < 0 || layer >= c.num_hidden_layers) {
      f.fail("per_layer_config", "key \"" + key.substr(0, 20) + "\" is not a layer; expected 0.." +
                                     std::to_string(c.num_hidden_layers - 1));
    }
    if (!entry.is_object()) {
      f.fail("per_layer_config", "layer " + key + ": " + entry.dump().substr(0, 40) +
                                     ", expected an object of overrides");
    }
    Geometry g = global;
    for (const auto& [name, value] : entry.items()) {
      if (name != "head_dim" && name != "num_key_value_heads") {
        f.fail("per_layer_config", "layer " + key + " overrides \"" + name.substr(0, 30) +
                                       "\": Gemma 4 reads only head_dim and "
                                       "num_key_value_heads per layer");
      }
      if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
        f.fail("per_layer_config", "layer " + key + ": " + name + " " + value.dump().substr(0, 30) +
                                       ", expected a positive integer");
      }
      (name == "head_dim" ? g.head_dim : g.kv_heads) = value.get<int64_t>();
    }
    by_layer[layer] = g;
  }
  std::optional<Geometry> of_type;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_types[static_cast<size_t>(i)] != type) continue;
    const auto it = by_layer.find(i);
    const Geometry g = it == by_layer.end() ? global : it->second;
    if (of_type && !(*of_type == g)) {
      f.fail("per_layer_config", "the " + std::string(to_string(type)) + " layers differ (layer " +
                                     std::to_string(i) +
                                     "); Gemma 4's rotary tables and attention expect one "
                                     "head_dim and num_key_value_heads per layer type");
    }
    of_type = g;
  }
  return of_type.value_or(global);
}

// The full and sliding layers' geometry, from per_layer_config or the legacy keys
// global_head_dim (default 512) and num_global_key_value_heads (read only with
// attention_k_eq_v, as both config classes do).
void parse_geometry(const ConfigFields& f, ModelConfig& c) {
  const Geometry global{c.head_dim, c.num_key_value_heads};
  c.attention_k_eq_v = f.boolean("attention_k_eq_v", false);
  // A per_layer_config key, even null, replaces the legacy keys: the config classes convert them
  // only when the key is absent, so null gives every layer the global geometry.
  if (f.is_null("per_layer_config")) {
    f.has("global_head_dim");
    f.has("num_global_key_value_heads");
    c.global_head_dim = c.head_dim;
    c.global_num_key_value_heads = c.num_key_value_heads;
    return;
  }
  if (f.has("per_layer_config")) {
    f.has("global_head_dim");  // ignored beside per_layer_config, as the classes do
    f.has("num_global_key_value_heads");
    const Geometry sliding = per_layer_geometry(f, c, AttentionType::kSliding, global);
    const Geometry full = per_layer_geometry(f, c, AttentionType::kFull, global);
    c.head_dim = sliding.head_dim;
    c.num_key_value_heads = sliding.kv_heads;
    c.global_head_dim = full.head_dim;
    c.global_num_key_value_heads = full.kv_heads;
    return;
  }
  c.global_head_dim = f.integer("global_head_dim", 512);
  c.global_num_key_value_heads = c.num_key_value_heads;
  if (c.attention_k_eq_v && f.has("num_global_key_value_heads") &&
      !f.is_null("num_global_key_value_heads")) {
    c.global_num_key_value_heads = f.integer("num_global_key_value_heads");
  } else {
    f.has("num_global_key_value_heads");  // read only with attention_k_eq_v
  }
  if (c.global_head_dim <= 0 || c.global_num_key_value_heads <= 0) {
    f.fail(
        c.global_head_dim <= 0 ? "global_head_dim" : "num_global_key_value_heads",
        std::to_string(c.global_head_dim <= 0 ? c.global_head_dim : c.global_num_key_value_heads) +
            ", expected a positive integer");
  }
}

// One layer type's rope_parameters: "default" (the whole head, the type's base) or
// "proportional" (the whole head too, only its first share of frequencies non-zero). Values
// change no shape; the full layers' base is kept as rope_theta.
void check_rope_set(const ConfigFields& f, const nlohmann::json& set, std::string_view type,
                    ModelConfig& c) {
  const std::string where = "rope_parameters." + std::string(type);
  if (!set.is_object()) {
    f.fail("rope_parameters", where + " is " + set.dump().substr(0, 40) + ", expected an object");
  }
  const ConfigFields s(set, f.source());
  const std::string kind =
      s.has("rope_type") ? s.string("rope_type", "default") : s.string("type", "default");
  if (kind != "default" && kind != "proportional") {
    f.fail("rope_parameters", where + ".rope_type \"" + kind.substr(0, 30) +
                                  "\": Gemma 4 builds \"default\" and \"proportional\" "
                                  "(full-width) tables only");
  }
  const double theta =
      s.number("rope_theta", type == "full_attention" ? kFullTheta : kSlidingTheta);
  if (!(theta > 0)) {
    f.fail("rope_parameters", where + ".rope_theta " + std::to_string(theta) + ", expected > 0");
  }
  const double share = s.number("partial_rotary_factor", kProportionalShare);
  if (!(share > 0 && share <= 1)) {
    f.fail("rope_parameters", where + ".partial_rotary_factor " + std::to_string(share) +
                                  ", expected a share in (0, 1]");
  }
  if (type == "full_attention") c.rope_theta = theta;
}

void parse_rope(const ConfigFields& f, ModelConfig& c, const Gemma4TextSpec& spec) {
  // The config classes have no attribute map and keep legacy rope keys as inert attributes:
  // rope_theta and rope_scaling at the top level are not read.
  c.rope_scaling.reset();
  c.rope_theta = kFullTheta;
  c.partial_rotary_factor = 1;
  if (!f.has("rope_parameters") || f.is_null("rope_parameters")) return;
  const nlohmann::json& r = f.raw("rope_parameters");
  for (const AttentionType t : {AttentionType::kSliding, AttentionType::kFull}) {
    if (std::find(c.layer_types.begin(), c.layer_types.end(), t) == c.layer_types.end()) continue;
    const std::string name(to_string(t));
    if (!r.is_object() || !r.contains(name)) {
      f.fail("rope_parameters", r.dump().substr(0, 60) + ": " + spec.rotary +
                                    " reads it by layer type; expected an entry \"" + name + "\"");
    }
    check_rope_set(f, r.at(name), name, c);
  }
}

// Layer i slides unless (i + 1) % 6 == 0 (both config classes' rule; a file's
// sliding_window_pattern is not read); the last layer is made full whatever the list says.
AttentionType layer_type_rule(const ModelConfig&, int64_t i) {
  return (i + 1) % 6 != 0 ? AttentionType::kSliding : AttentionType::kFull;
}

void parse_layer_types(const ConfigFields& f, ModelConfig& c) {
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, layer_type_rule, c);
  c.layer_types.back() = AttentionType::kFull;  // before the check, as the config classes do
  for (const AttentionType t : c.layer_types) {
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types", std::string(to_string(t)) +
                                ": Gemma 4 masks full_attention and sliding_attention layers only");
    }
  }
  f.has("sliding_window_pattern");
}

// Gemma 4 E2B's and E4B's per-layer embeddings (hidden_size_per_layer_input, 256 when absent; 0:
// none).
void parse_per_layer_inputs(const ConfigFields& f, ModelConfig& c) {
  const int64_t ple = f.integer("hidden_size_per_layer_input", 256);
  if (ple < 0) {
    f.fail("hidden_size_per_layer_input",
           std::to_string(ple) + ", expected >= 0 (0: no per-layer embeddings)");
  }
  const int64_t vocab = f.integer("vocab_size_per_layer_input", 262144);
  if (ple > 0) {
    if (vocab <= 0) {
      f.fail("vocab_size_per_layer_input", std::to_string(vocab) + ", expected > 0");
    }
    c.per_layer_input_size = ple;
    c.per_layer_input_vocab = vocab;
    c.per_layer_input_layers = c.num_hidden_layers;
  }
}

void parse_moe(const ConfigFields& f, ModelConfig& c, const Gemma4TextSpec& spec) {
  if (!f.boolean("enable_moe_block", false)) {
    f.has("num_experts");  // None unless the block is enabled: no shape then
    f.has("top_k_experts");
    f.has("moe_intermediate_size");
    return;
  }
  for (const char* key : {"num_experts", "top_k_experts", "moe_intermediate_size"}) {
    if (!f.has(key) || f.is_null(key)) {
      f.fail(key,
             std::string("is required with enable_moe_block (") + spec.config + " leaves it None)");
    }
  }
  c.num_local_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("top_k_experts");
  // The dense MLP runs beside the experts on every token: priced and split as a shared expert.
  c.shared_expert_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size");
}

// The per-layer-embedding and expert keys a Gemma4UnifiedTextConfig file may hold (its
// conversion script writes hidden_size_per_layer_input 0, enable_moe_block false and the rest
// null "for BC"): attributes its model never reads, whatever their values.
constexpr const char* kUnreadByUnified[] = {"hidden_size_per_layer_input",
                                            "vocab_size_per_layer_input",
                                            "enable_moe_block",
                                            "num_experts",
                                            "top_k_experts",
                                            "moe_intermediate_size"};

// Both config classes are strict dataclasses: these fields are an int or a bool, never None
// (global_head_dim is a keyword both read as an integer).
constexpr const char* kNotNull[] = {
    "head_dim",         "num_key_value_heads", "global_head_dim", "num_kv_shared_layers",
    "attention_k_eq_v", "use_double_wide_mlp", "attention_bias"};
// Gemma4TextConfig's own strict fields besides.
constexpr const char* kNotNullPerLayerAndExperts[] = {
    "hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block"};

void refuse_null(const ConfigFields& f, const char* key, const Gemma4TextSpec& spec) {
  if (f.is_null(key)) {
    f.fail(key, std::string("is null; ") + spec.config +
                    "'s field is an integer or a boolean (strict): expected a value, or no key "
                    "for the class's default");
  }
}

// ---- modules ---------------------------------------------------------------------------------

// Gemma4RMSNorm, Gemma4UnifiedRMSNorm (tensor/models/gemma_text_blocks.h): x / rms(x), times the
// weight where it has one (with_scale), computed in float32.
ModulePtr norm(const Gemma4TextSpec& spec, int64_t dim, const ModelConfig& c,
               const TensorOptions& o, bool with_scale = true) {
  return std::make_shared<ScaledRmsNorm>(spec.norm, dim, c.norm_eps, with_scale, o);
}

// Gemma4TextRouter (gemma4_text only): the weightless-normed tokens times `scale` and
// hidden^-0.5 projected to expert logits, softmax in float32 over every expert, the top k
// renormalized and multiplied by their `per_expert_scale`. Its own parameters precede its
// children's (named_parameters).
class Router : public Module {
 public:
  Router(const Gemma4TextSpec& spec, const ModelConfig& c, const TensorOptions& o)
      : Module("Gemma4TextRouter"), top_k_(c.num_experts_per_tok), hidden_(c.hidden_size) {
    norm_ = register_module("norm", norm(spec, c.hidden_size, c, o, /*with_scale=*/false));
    register_module("proj", std::make_shared<Linear>(c.hidden_size, c.num_local_experts, false, o));
    register_parameter("scale", empty({c.hidden_size}, o));
    register_parameter("per_expert_scale", empty({c.num_local_experts}, o));
  }
  // The routing weights [T, k] of tokens `flat` [T, h], in the tokens' dtype.
  Tensor forward(const Tensor& flat) override {
    const Tensor n = mul(mul(norm_->call(flat), parameter("scale")),
                         1.0 / std::sqrt(static_cast<double>(hidden_)));
    const Tensor probs = softmax(child("proj")->call(n), 1, DType::kFloat32);
    Tensor w = narrow(probs, 1, 0, top_k_);  // stands in for topk's values
    w = div(w, sum(w, {-1}, /*keepdim=*/true));
    // per_expert_scale[top_k_index]: narrow stands in for the gather.
    w = mul(w, narrow(parameter("per_expert_scale"), 0, 0, top_k_));
    return to(w, flat.dtype());
  }

 private:
  ModulePtr norm_;
  int64_t top_k_, hidden_;
};

// Made empty and filled once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const Gemma4TextSpec& spec) : Module(spec.decoder_layer), spec_(spec) {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    kind_ = layer_kind(c, index);
    const int64_t h = c.hidden_size, p = c.per_layer_input_size;
    // Gemma4TextAttention: q_proj, q_norm, k_norm, v_norm, k_proj, v_proj, o_proj; with
    // attention_k_eq_v no v_proj on the full layers.
    const KvSharingAttention::Style style{spec_.attention, spec_.norm,
                                          KvSharingAttention::Order::kNormsFirst};
    self_attn = register_module("self_attn",
                                std::make_shared<KvSharingAttention>(style, c, kind_, o, training));
    const bool moe = kind_.ffn == FfnKind::kMoe;
    // The dense MLP (intermediate_size; ModelConfig keeps it as the shared expert beside experts),
    // twice as wide on a key-value-shared layer with use_double_wide_mlp.
    const int64_t width = (moe ? c.shared_expert_intermediate_size : c.intermediate_size) *
                          (kind_.kv_shared && c.double_wide_shared_mlp ? 2 : 1);
    // Gemma4TextMLP: down(gelu_tanh(gate(x)) * up(x)), no biases.
    mlp = register_module("mlp", std::make_shared<models::GatedMlp>(spec_.mlp, c.hidden_size, width,
                                                                    false, c.hidden_act, o));
    input_layernorm = register_module("input_layernorm", norm(spec_, h, c, o));
    post_attention_layernorm = register_module("post_attention_layernorm", norm(spec_, h, c, o));
    pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", norm(spec_, h, c, o));
    post_feedforward_layernorm =
        register_module("post_feedforward_layernorm", norm(spec_, h, c, o));
    if (p > 0) {  // per-layer embeddings: gate h -> P, projection P -> h, its norm
      act_ = c.hidden_act;
      per_layer_input_gate =
          register_module("per_layer_input_gate", std::make_shared<Linear>(h, p, false, o));
      per_layer_projection =
          register_module("per_layer_projection", std::make_shared<Linear>(p, h, false, o));
      post_per_layer_input_norm =
          register_module("post_per_layer_input_norm", norm(spec_, h, c, o));
    }
    if (moe) {
      router = register_module("router", std::make_shared<Router>(spec_, c, o));
      const std::string act = c.hidden_act;
      experts =
          register_module("experts", std::make_shared<GroupedExperts>(
                                         "Gemma4TextExperts", c.num_local_experts, h,
                                         c.intermediate_size, GroupedExperts::Layout::kOutIn, false,
                                         [act](const Tensor& x) { return activation(act, x); }, o));
      post_feedforward_layernorm_1 =
          register_module("post_feedforward_layernorm_1", norm(spec_, h, c, o));
      post_feedforward_layernorm_2 =
          register_module("post_feedforward_layernorm_2", norm(spec_, h, c, o));
      pre_feedforward_layernorm_2 =
          register_module("pre_feedforward_layernorm_2", norm(spec_, h, c, o));
    }
    register_buffer("layer_scalar", empty({1}, o));  // persistent: a checkpoint tensor
  }
  const LayerKind& kind() const { return kind_; }
  KvSharingAttention& attention() { return static_cast<KvSharingAttention&>(*self_attn); }
  // x [B, S, h]; per_layer [B, S, P], this layer's slice of the per-layer embeddings (undefined
  // without them).
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, const Tensor& per_layer) {
    CallScope scope(*this);
    const Tensor a = self_attn->run(input_layernorm->call(x), cos_t, sin_t);
    const Tensor r = add(x, post_attention_layernorm->call(a));
    Tensor f = mlp->call(pre_feedforward_layernorm->call(r));
    if (experts) {
      // The router reads the residual stream itself, the experts its own norm of it.
      const int64_t b = r.size(0), s = r.size(1), h = r.size(2);
      const Tensor flat = reshape(r, {b * s, h});
      const Tensor weights = router->call(flat);
      const Tensor e =
          expected_load_experts(*experts, pre_feedforward_layernorm_2->call(flat), weights);
      f = add(post_feedforward_layernorm_1->call(f),
              post_feedforward_layernorm_2->call(view(e, {b, s, h})));
    }
    Tensor out = add(r, post_feedforward_layernorm->call(f));
    if (per_layer_input_gate) {
      out = add(out, per_layer_gate(out, per_layer, *per_layer_input_gate, *per_layer_projection,
                                    *post_per_layer_input_norm, act_));
    }
    return mul(out, buffer("layer_scalar"));
  }
  std::shared_ptr<AttentionBlock> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm, per_layer_input_gate, per_layer_projection,
      post_per_layer_input_norm, router, post_feedforward_layernorm_1, post_feedforward_layernorm_2,
      pre_feedforward_layernorm_2;
  std::shared_ptr<GroupedExperts> experts;

 private:
  const Gemma4TextSpec& spec_;
  LayerKind kind_;
  std::string act_;
};

// Empty until build(), like DecoderLayer.
class TextModel : public Module {
 public:
  explicit TextModel(const Gemma4TextSpec& spec) : Module(spec.model), spec_(spec) {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    hidden_ = c.hidden_size;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>(spec_)));
    }
    norm_ = register_module("norm", norm(spec_, c.hidden_size, c, o));
    rotary_emb = register_module("rotary_emb", std::make_shared<LayerTypeRotary>(spec_.rotary, c));
    per_layer_ = c.per_layer_input_size;
    if (per_layer_ > 0) {
      // The table and projection cover the full model's layers (per_layer_input_layers), also in
      // a one-layer model of a kind: they run once, at the model's start.
      table_layers_ = c.per_layer_input_layers;
      const int64_t width = table_layers_ * per_layer_;
      embed_tokens_per_layer = register_module(
          "embed_tokens_per_layer", std::make_shared<Embedding>(c.per_layer_input_vocab, width, o));
      per_layer_model_projection = register_module(
          "per_layer_model_projection", std::make_shared<Linear>(c.hidden_size, width, false, o));
      per_layer_projection_norm =
          register_module("per_layer_projection_norm", norm(spec_, per_layer_, c, o));
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    // Gemma4TextScaledWordEmbedding: the rows times sqrt(hidden).
    Tensor h = mul(embed_tokens->call(ids), std::sqrt(static_cast<double>(hidden_)));
    const int64_t b = ids.size(0), s = ids.size(1);
    Tensor per_layer;  // [B, S, layers, P]
    if (per_layer_ > 0) {
      per_layer = per_layer_inputs(ids, h, *embed_tokens_per_layer, *per_layer_model_projection,
                                   *per_layer_projection_norm, table_layers_, per_layer_);
    }
    std::map<AttentionType, std::pair<Tensor, Tensor>> tables;  // RoPE, one per layer type
    SharedKeysAndValues kv;
    const Tensor pos = position_ids(s);
    for (size_t i = 0; i < layers_.size(); ++i) {
      DecoderLayer& layer = *layers_[i];
      const AttentionType type = layer.kind().attention;
      auto it = tables.find(type);
      if (it == tables.end()) {
        it = tables.emplace(type, rotary_emb->cos_sin(pos, type, h.dtype())).first;
      }
      kv.before(layer.attention(), layer.kind(), b, s, h.dtype());
      const Tensor slice =
          per_layer_ > 0 ? per_layer_slice(per_layer, static_cast<int64_t>(i)) : Tensor();
      h = layer.run(h, it->second.first, it->second.second, slice);
      kv.after(layer.attention(), layer.kind());
    }
    return norm_->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens, embed_tokens_per_layer;
  std::shared_ptr<LayerTypeRotary> rotary_emb;
  ModulePtr per_layer_model_projection, per_layer_projection_norm;

 private:
  const Gemma4TextSpec& spec_;
  int64_t hidden_ = 0, per_layer_ = 0, table_layers_ = 0;
  ModulePtr norm_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

}  // namespace
}  // namespace gemma4

void parse_gemma4_text(const ConfigFields& f, ModelConfig& c, const Gemma4TextSpec& spec) {
  for (const char* key : gemma4::kNotNull) gemma4::refuse_null(f, key, spec);
  if (spec.per_layer_inputs_and_experts) {
    for (const char* key : gemma4::kNotNullPerLayerAndExperts) gemma4::refuse_null(f, key, spec);
  }
  parse_rotary_decoder(f, c,
                       {.sizes = RotaryDecoderSizes{.vocab_size = 262144,
                                                    .hidden_size = 2304,
                                                    .intermediate_size = 9216,
                                                    .num_hidden_layers = 30,
                                                    .num_attention_heads = 8,
                                                    .num_key_value_heads = 4},
                        .max_position_embeddings = spec.max_position_embeddings,
                        .rms_norm_eps = 1e-6,
                        .rope_theta = gemma4::kFullTheta,
                        .tie_word_embeddings = true,
                        .act_key = "hidden_activation",
                        .hidden_act = "gelu_pytorch_tanh",
                        .head_dim = 256});
  pad_token_id_or(f, c, 0);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  if (f.is_null("sliding_window")) {
    f.fail("sliding_window", std::string("is null; ") + spec.config +
                                 "'s window is an integer (default " +
                                 std::to_string(spec.sliding_window) + ")");
  }
  c.sliding_window = f.integer("sliding_window", spec.sliding_window);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
  }
  gemma4::parse_layer_types(f, c);
  gemma4::parse_geometry(f, c);
  gemma4::parse_rope(f, c, spec);
  // Gemma 4 divides the logits by any non-null cap: 0 is not "none" there.
  c.final_logit_softcapping =
      f.is_null("final_logit_softcapping") ? 0.0 : f.number("final_logit_softcapping", 0.0);
  if (f.has("final_logit_softcapping") && !(c.final_logit_softcapping > 0)) {
    f.fail("final_logit_softcapping",
           "must be positive (null: none), got " + std::to_string(c.final_logit_softcapping));
  }
  // "vision" (Gemma4UnifiedTextConfig's default) lets image tokens attend both ways: text
  // tokens, all a language-model run has, stay causal. "all" makes every layer bidirectional.
  if (f.has("use_bidirectional_attention") && !f.is_null("use_bidirectional_attention")) {
    const std::string mode = f.string("use_bidirectional_attention", "");
    if (mode != "vision") {
      f.fail("use_bidirectional_attention",
             "\"" + mode.substr(0, 20) +
                 "\": only image tokens may attend both ways in a causal language model; "
                 "expected null or \"vision\"");
    }
  }
  if (spec.per_layer_inputs_and_experts) gemma4::parse_per_layer_inputs(f, c);
  // Key-value sharing (num_kv_shared_layers, fewer than the layers: with more, the attention's
  // search for a source layer fails, and with all no layer makes keys) and the shared layers'
  // double-wide MLPs: both classes build them.
  parse_kv_shared_layers(f, c, 0);
  c.double_wide_shared_mlp = f.boolean("use_double_wide_mlp", false);
  if (spec.per_layer_inputs_and_experts) {
    gemma4::parse_moe(f, c, spec);
  } else {
    for (const char* key : gemma4::kUnreadByUnified) f.has(key);
  }
}

void gemma4_text_to_hf_json(const ModelConfig& c, nlohmann::json& j, const Gemma4TextSpec& spec) {
  rotary_decoder_to_hf_json(c, j, "hidden_activation");  // with sliding_window
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", gemma4::kSlidingTheta}}},
      {"full_attention",
       {{"rope_type", "proportional"},
        {"partial_rotary_factor", gemma4::kProportionalShare},
        {"rope_theta", c.rope_theta}}}};
  j["attention_bias"] = c.qkv_bias;
  j["layer_types"] = layer_types_json(c);
  j["final_logit_softcapping"] = c.final_logit_softcapping > 0
                                     ? nlohmann::json(c.final_logit_softcapping)
                                     : nlohmann::json(nullptr);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // not the class's 0
  j["attention_k_eq_v"] = c.attention_k_eq_v;
  j["num_kv_shared_layers"] = c.num_kv_shared_layers;
  j["use_double_wide_mlp"] = c.double_wide_shared_mlp;
  // The legacy keys every transformers version reads; full layers' own key-value heads without
  // attention_k_eq_v only through per_layer_config.
  j["global_head_dim"] = c.global_head_dim;
  if (c.attention_k_eq_v) {
    j["num_global_key_value_heads"] = c.global_num_key_value_heads;
  } else if (c.global_num_key_value_heads != c.num_key_value_heads) {
    j.erase("global_head_dim");
    nlohmann::json plc = nlohmann::json::object();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (c.layer_types[static_cast<size_t>(i)] != AttentionType::kFull) continue;
      plc[std::to_string(i)] = {{"head_dim", c.global_head_dim},
                                {"num_key_value_heads", c.global_num_key_value_heads}};
    }
    j["per_layer_config"] = plc;
  }
  if (!spec.per_layer_inputs_and_experts) return;
  j["hidden_size_per_layer_input"] = c.per_layer_input_size;
  if (c.per_layer_input_size > 0) j["vocab_size_per_layer_input"] = c.per_layer_input_vocab;
  j["enable_moe_block"] = c.num_local_experts > 0;
  if (c.num_local_experts > 0) {
    j["intermediate_size"] = c.shared_expert_intermediate_size;
    j["moe_intermediate_size"] = c.intermediate_size;
    j["num_experts"] = c.num_local_experts;
    j["top_k_experts"] = c.num_experts_per_tok;
  }
}

ModulePtr build_gemma4_text(const ModelConfig& c, const TensorOptions& o, bool training,
                            const Gemma4TextSpec& spec) {
  return std::make_shared<SoftcappedCausalLm<gemma4::TextModel>>(spec.causal_lm, c, o, training,
                                                                 spec);
}

}  // namespace shardplan::tensor::models
