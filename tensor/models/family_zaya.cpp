// zaya (Zyphra's ZAYA1: ZAYA1-base, ZAYA1-8B): transformers' ZayaConfig (vocab 262272, hidden 2048,
// 40 layers, 8 heads and 2 key-value heads of 128, max positions 131072, rms_norm_eps 1e-5, tied;
// 16 experts of 2048, top 1, a router of width 256; convolutions of width 2 and 2; every layer
// "hybrid", RoPE base 5e6 on half of each head) and modeling_zaya.py. A pre-norm MoE decoder whose
// every part is ZAYA's own (h hidden, d head_dim, H and K heads, r router_hidden_size, E experts
// of width F):
//   model.input_hidden_states_{scale,bias}                [h]  (the embeddings' affine, first)
//   model.embed_tokens.weight                             [V, h]
//   model.layers.N.self_attn.*                            CCA: tensor/models/cca_attention.h
//   model.layers.N.mlp.gate.router_states_scale           [r]  (layers 1..: not on layer 0)
//   model.layers.N.mlp.gate.down_proj.{weight,bias}       [r, h], [r]
//   model.layers.N.mlp.gate.router_mlp.norm.weight        [r]
//   model.layers.N.mlp.gate.router_mlp.fc{1,2}.{weight,bias}  [r, r], [r]
//   model.layers.N.mlp.gate.router_mlp.out_proj.weight    [E + 1, r]  (E experts and a skip)
//   model.layers.N.mlp.experts.gate_up_proj, down_proj    [E, 2F, h], [E, h, F]
//   model.layers.N.{input,post_attention}_layernorm.weight                 [h]
//   model.layers.N.post_{attention,mlp}_residual_scale.{hidden_states,residual}_{scale,bias}  [h]
//   model.norm.weight [h], lm_head.weight [V, h] (tied) and lm_head.bias [V] by lm_head_bias
// Note [ZAYA1 layer]
// The residual stream is float32 (the original's residual_in_fp32): the embeddings, plus a bias
// and times a scale, are cast up once; each norm reads the stream cast back to the parameters'
// dtype; each half joins it through a residual scaling, (y + b) s + (x + b') s' with four vectors
// of its own, y the half's output (16-bit) and x the stream (float32, so the sum is float32). The
// router (ZayaRouter) projects the normed tokens to r channels, adds the previous layer's
// projection times router_states_scale (Zyphra's exponential depth averaging, EDA; layer 0 has
// none and no such vector), runs an MLP there (RMSNorm, two GELU layers, the logits of E + 1
// classes, the last a skip expert that computes nothing) and a softmax; the top 1 of the
// probabilities plus a balancing bias buffer [E + 1] (float32, persistent, -1 on the skip) picks
// the expert, its probability the weight. The trace takes the first probability (Note
// [Expected-load MoE] in models.h: every token reaches one computing expert; the skip's share is
// the balancing bias's to keep small) and passes the projection on to the next layer.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/cca_attention.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kZayaFamily;  // listed in family_registry.cpp

namespace {

// ZayaConfig.__post_init__'s rope_parameters when the file has none: both layer types rotate half
// of each head, the full ("hybrid") ones at base 5e6, the sliding ones at 1e4.
constexpr double kFullTheta = 5'000'000, kSlidingTheta = 10'000, kRotaryShare = 0.5;

// ---- config ----------------------------------------------------------------------------------

// transformers' names of ZAYA's layer types: attention over every earlier token, or a window.
const char* zaya_type_name(AttentionType t) {
  return t == AttentionType::kSliding ? "hybrid_sliding" : "hybrid";
}

bool zaya_uses(const std::vector<AttentionType>& types, AttentionType t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

// layer_types: "hybrid" or "hybrid_sliding" per layer (absent or null: every layer "hybrid").
// ZayaModel makes a mask for those two only, so any other name is refused.
std::vector<AttentionType> parse_zaya_layer_types(const ConfigFields& f, int64_t layers) {
  // A count validate() refuses builds no list (it would be negative or huge).
  if (layers <= 0 || layers > kMaxLayers) return {};
  std::vector<AttentionType> types(static_cast<size_t>(layers), AttentionType::kFull);
  if (!f.has("layer_types")) return types;
  const nlohmann::json& v = f.raw("layer_types");
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail("layer_types", "expected a list of num_hidden_layers = " + std::to_string(layers) +
                              " entries, \"hybrid\" or \"hybrid_sliding\"");
  }
  for (int64_t i = 0; i < layers; ++i) {
    const nlohmann::json& e = v[static_cast<size_t>(i)];
    if (e == "hybrid_sliding") {
      types[static_cast<size_t>(i)] = AttentionType::kSliding;
    } else if (e != "hybrid") {
      f.fail("layer_types", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                ": ZayaModel makes masks for \"hybrid\" (full attention) and "
                                "\"hybrid_sliding\" (a sliding window) layers only");
    }
  }
  return types;
}

// One layer type's rope_parameters entry, as ZayaRotaryEmbedding reads it: an object whose
// rope_theta is the base (read as rope_parameters[type]["rope_theta"], so required), rope_type
// "default" or one of transformers' scalings, partial_rotary_factor (absent: 1.0, the .get
// default) the share of head_dim rotated.
struct ZayaTypeRope {
  double theta;
  std::optional<RopeScaling> scaling;
  double share;
};

ZayaTypeRope parse_zaya_type_rope(const ConfigFields& f, const nlohmann::json& r, AttentionType t) {
  const std::string name = zaya_type_name(t);
  if (!r.contains(name) || !r.at(name).is_object()) {
    f.fail("rope_parameters",
           r.dump().substr(0, 80) +
               ": ZayaRotaryEmbedding reads an entry for every layer type in use; expected \"" +
               name + "\" as an object");
  }
  const nlohmann::json& set = r.at(name);
  const std::string where = "rope_parameters." + name;
  const ConfigFields s(set, f.source());
  if (!s.has("rope_theta")) {
    f.fail("rope_parameters", where +
                                  " has no rope_theta; ZayaRotaryEmbedding takes its base from "
                                  "the entry (a top-level rope_theta is not read)");
  }
  ZayaTypeRope out{s.number("rope_theta", kFullTheta), std::nullopt,
                   s.number("partial_rotary_factor", 1.0)};
  if (!(out.theta > 0)) {
    f.fail("rope_parameters",
           where + ".rope_theta " + std::to_string(out.theta) + ", expected > 0");
  }
  const std::string kind =
      s.has("rope_type") ? s.string("rope_type", "default") : s.string("type", "default");
  if (kind != "default") out.scaling = parse_rope_scaling(set, f, "rope_parameters");
  return out;
}

// RoPE keyed by layer type. The "hybrid" entry gives the model's base and scaling; the rotated
// share is that of the types in use, which must agree (ModelConfig holds one rotated width); the
// sliding layers' base and scaling change no shape (read and checked, not kept).
void parse_zaya_rope(const ConfigFields& f, ModelConfig& c,
                     const std::vector<AttentionType>& types) {
  c.rope_theta = kFullTheta;
  c.rope_scaling.reset();
  c.partial_rotary_factor = kRotaryShare;
  // ZayaConfig's rope_scaling is its rope_parameters (PreTrainedConfig's property), which a
  // top-level one would replace (None included: the model then reads no entry at all).
  if (f.has("rope_scaling") || f.is_null("rope_scaling")) {
    f.fail("rope_scaling",
           "ZayaConfig's rope_scaling is its rope_parameters (PreTrainedConfig's property), and "
           "this one would replace the per-layer-type rope_parameters the model reads; expected "
           "rope_parameters alone");
  }
  if (!f.has("rope_parameters")) return;  // the class's: 5e6 (hybrid), 1e4 (sliding), half
  const nlohmann::json& r = f.raw("rope_parameters");
  if (!r.is_object()) {
    f.fail("rope_parameters", r.dump().substr(0, 60) +
                                  ": ZayaRotaryEmbedding reads it by layer type; expected an "
                                  "object {\"hybrid\": {..}, \"hybrid_sliding\": {..}}");
  }
  const bool full = zaya_uses(types, AttentionType::kFull);
  const bool sliding = zaya_uses(types, AttentionType::kSliding);
  // The full entry is kept even when no layer is full (the model ignores it): it reads back.
  if (full || r.contains("hybrid")) {
    const ZayaTypeRope e = parse_zaya_type_rope(f, r, AttentionType::kFull);
    c.rope_theta = e.theta;
    c.rope_scaling = e.scaling;
    c.partial_rotary_factor = e.share;
  }
  if (sliding) {
    const ZayaTypeRope e = parse_zaya_type_rope(f, r, AttentionType::kSliding);
    if (!full) {
      c.partial_rotary_factor = e.share;
    } else if (e.share != c.partial_rotary_factor) {
      f.fail("rope_parameters", "rope_parameters.hybrid_sliding.partial_rotary_factor " +
                                    std::to_string(e.share) + " differs from the hybrid layers' " +
                                    std::to_string(c.partial_rotary_factor) +
                                    ": shardplan rotates one width in every layer; expected equal "
                                    "shares");
    }
  }
}

// Keys of ZAYA's legacy files (Zyphra/ZAYA1-8B-legacy: attention and MoE in alternating layers,
// num_hidden_layers counting both), which transformers' convert_zaya_weights_to_hf.py drops when
// it writes the file ZayaForCausalLM reads. transformers would read such a file as twice the
// layers; refused, naming the converter.
constexpr const char* kZayaLegacyKeys[] = {
    "cca",         "num_query_groups",    "ffn_hidden_size", "zaya_mlp_expansion",
    "swa_layers",  "swa_rotary_base",     "zaya_use_eda",    "zaya_use_mod",
    "kv_channels", "scale_residual_merge"};

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kZayaLegacyKeys) {
    if (f.has(key)) {
      f.fail(key,
             "a key of ZAYA's legacy alternating-layer files (num_hidden_layers counts the "
             "attention and the MoE layers apart); transformers' "
             "convert_zaya_weights_to_hf.py writes the file ZayaForCausalLM reads, expected "
             "that converted config.json");
    }
  }
  c.vocab_size = f.integer("vocab_size", 262272);
  c.hidden_size = f.integer("hidden_size", 2048);
  c.num_hidden_layers = f.integer("num_hidden_layers", 40);
  if (c.num_hidden_layers < 1) {
    f.fail("num_hidden_layers",
           "must be a positive integer, got " + std::to_string(c.num_hidden_layers));
  }
  c.num_attention_heads = f.integer("num_attention_heads", 8);
  c.num_key_value_heads = f.integer("num_key_value_heads", 2);
  // ZayaAttention reads config.head_dim itself (a class field, not hidden / heads).
  c.head_dim = f.integer("head_dim", 128);
  // v_proj_current and v_proj_delayed each make K d // 2 channels, concatenated and viewed as K
  // heads of d: an odd K d leaves one channel short and the view fails.
  if (c.num_key_value_heads % 2 != 0 && c.head_dim % 2 != 0) {
    f.fail("head_dim", std::to_string(c.num_key_value_heads) + " key-value heads of " +
                           std::to_string(c.head_dim) +
                           ": the values are two halves (v_proj_current, v_proj_delayed), "
                           "expected an even num_key_value_heads x head_dim");
  }
  c.max_position_embeddings = f.integer("max_position_embeddings", 131072);
  c.hidden_act = f.string("hidden_act", "silu");  // the experts' (the router's GELU is fixed)
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.lm_head_bias = f.boolean("lm_head_bias", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  models::pad_token_id_or(f, c, 0);
  // The MoE block in every layer: num_experts experts of moe_intermediate_size, one a token.
  c.num_local_experts = f.integer("num_experts", 16);
  c.intermediate_size = f.integer("moe_intermediate_size", 2048);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 1);
  if (c.num_experts_per_tok != 1) {
    f.fail("num_experts_per_tok",
           std::to_string(c.num_experts_per_tok) +
               ": ZayaConfig.validate_architecture raises (\"ZAYA "
               "currently supports num_experts_per_tok=1 only\"); expected 1");
  }
  c.router_hidden_size = f.integer("router_hidden_size", 256);
  if (c.router_hidden_size <= 0) {
    f.fail("router_hidden_size",
           std::to_string(c.router_hidden_size) + ", expected the router's positive width");
  }
  c.cca_time0 = f.integer("cca_time0", 2);
  c.cca_time1 = f.integer("cca_time1", 2);
  for (const char* key : {"cca_time0", "cca_time1"}) {
    const int64_t width = std::string_view(key) == "cca_time0" ? c.cca_time0 : c.cca_time1;
    if (width < 1) {
      f.fail(key, std::to_string(width) +
                      ", expected a convolution width >= 1 (nn.Conv1d's "
                      "kernel_size)");
    }
  }
  const std::vector<AttentionType> types = parse_zaya_layer_types(f, c.num_hidden_layers);
  // ZayaConfig.validate_architecture raises without a window when a layer slides.
  c.sliding_window = f.opt_integer("sliding_window");
  if (!c.sliding_window && zaya_uses(types, AttentionType::kSliding)) {
    f.fail("sliding_window",
           "unset, but layer_types has hybrid_sliding layers and ZayaConfig raises without a "
           "window; expected a positive window");
  }
  c.layer_types = types;
  parse_zaya_rope(f, c, types);
}

// The full layers' entry: the model's base, scaling and rotated share.
nlohmann::json zaya_full_rope_entry(const ModelConfig& c) {
  nlohmann::json e = c.rope_scaling ? rope_scaling_json(c.rope_scaling) : nlohmann::json::object();
  if (!c.rope_scaling) e["rope_type"] = "default";
  e["rope_theta"] = c.rope_theta;
  e["partial_rotary_factor"] = c.partial_rotary_factor;
  return e;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["lm_head_bias"] = c.lm_head_bias;
  j["attention_dropout"] = c.attention_dropout;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  j["num_experts"] = c.num_local_experts;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["router_hidden_size"] = c.router_hidden_size;
  j["cca_time0"] = c.cca_time0;
  j["cca_time1"] = c.cca_time1;
  j["sliding_window"] =
      c.sliding_window ? nlohmann::json(*c.sliding_window) : nlohmann::json(nullptr);
  nlohmann::json types = nlohmann::json::array();
  bool sliding = false;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t = layer_kind(c, i).attention;
    sliding = sliding || t == AttentionType::kSliding;
    types.push_back(zaya_type_name(t));
  }
  j["layer_types"] = types;
  j["rope_parameters"] = {{"hybrid", zaya_full_rope_entry(c)}};
  if (sliding) {
    j["rope_parameters"]["hybrid_sliding"] = {{"rope_type", "default"},
                                              {"rope_theta", kSlidingTheta},
                                              {"partial_rotary_factor", c.partial_rotary_factor}};
  }
}

// ---- model -----------------------------------------------------------------------------------

ModulePtr zaya_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
}

// The layer types in use, full first: ZayaRotaryEmbedding's tables, one per type.
std::vector<AttentionType> zaya_types_in_use(const ModelConfig& c) {
  std::vector<AttentionType> out;
  for (const AttentionType t : {AttentionType::kFull, AttentionType::kSliding}) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (layer_kind(c, i).attention == t) {
        out.push_back(t);
        break;
      }
    }
  }
  return out;
}

// ZayaRotaryEmbedding: per layer type in use, <type>_inv_freq of half the rotated width and its
// original copy (non-persistent float32 buffers).
class ZayaRotary : public Module {
 public:
  explicit ZayaRotary(const ModelConfig& c) : Module("ZayaRotaryEmbedding") {
    const int64_t half = models::rotary_dim(c) / 2;
    for (const AttentionType t : zaya_types_in_use(c)) {
      const std::string name = zaya_type_name(t);
      register_buffer(name + "_inv_freq", empty({half}, {.dtype = DType::kFloat32}), false);
      register_buffer(name + "_original_inv_freq", empty({half}, {.dtype = DType::kFloat32}),
                      false);
    }
  }
  // {cos, sin} [1, 1, S, rotated width] of `type`'s layers in `dtype`, as RotaryEmbedding::cos_sin
  // makes them (the attention_scaling factor, 1 for the default type, is not traced).
  std::pair<Tensor, Tensor> cos_sin(const Tensor& pos, AttentionType type, DType dtype) {
    CallScope scope(*this);
    const Tensor freqs = mul(unsqueeze(to(pos, DType::kFloat32), -1),
                             buffer(std::string(zaya_type_name(type)) + "_inv_freq"));
    const Tensor emb = cat({freqs, freqs}, -1);
    return {models::per_head(to(cos(emb), dtype)), models::per_head(to(sin(emb), dtype))};
  }
};

// ZayaResidualScaling (Note [ZAYA1 layer]): (y + hidden_states_bias) hidden_states_scale +
// (x + residual_bias) residual_scale.
class ZayaResidualScaling : public Module {
 public:
  ZayaResidualScaling(int64_t hidden, const TensorOptions& o) : Module("ZayaResidualScaling") {
    for (const char* name :
         {"hidden_states_scale", "hidden_states_bias", "residual_scale", "residual_bias"}) {
      register_parameter(name, empty({hidden}, o));
    }
  }
  Tensor run(const Tensor& y, const Tensor& x) {
    CallScope scope(*this);
    const Tensor scaled =
        mul(add(y, parameter("hidden_states_bias")), parameter("hidden_states_scale"));
    return add(scaled, mul(add(x, parameter("residual_bias")), parameter("residual_scale")));
  }
};

// ZayaRouterMLP: norm, fc1, fc2 (GELU after each, nn.GELU's exact form), out_proj to the E + 1
// classes.
class ZayaRouterMlp : public Module {
 public:
  ZayaRouterMlp(const ModelConfig& c, const TensorOptions& o) : Module("ZayaRouterMLP") {
    const int64_t r = c.router_hidden_size;
    register_module("norm", zaya_norm(r, c, o));
    register_module("fc1", std::make_shared<Linear>(r, r, /*bias=*/true, o));
    register_module("fc2", std::make_shared<Linear>(r, r, /*bias=*/true, o));
    register_module("out_proj",
                    std::make_shared<Linear>(r, c.num_local_experts + 1, /*bias=*/false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor a = gelu(child("fc1")->call(child("norm")->call(x)));
    return child("out_proj")->call(gelu(child("fc2")->call(a)));
  }
};

// ZayaRouter (Note [ZAYA1 layer]): down_proj, router_states_scale (not on layer 0), router_mlp,
// and the persistent float32 buffer balancing_biases [E + 1].
class ZayaRouter : public Module {
 public:
  ZayaRouter(const ModelConfig& c, int64_t layer, const TensorOptions& o)
      : Module("ZayaRouter"), eda_(layer != 0), top_k_(c.num_experts_per_tok) {
    const int64_t r = c.router_hidden_size;
    register_module("down_proj", std::make_shared<Linear>(c.hidden_size, r, /*bias=*/true, o));
    if (eda_) register_parameter("router_states_scale", empty({r}, o));
    register_module("router_mlp", std::make_shared<ZayaRouterMlp>(c, o));
    register_buffer("balancing_biases",
                    empty({c.num_local_experts + 1}, {.dtype = DType::kFloat32}));
  }
  // x [B, S, h] and the previous layer's projection (undefined on the first layer) -> the routing
  // weights [B S, k] and this layer's projection [B, S, r] for the next one.
  std::pair<Tensor, Tensor> run(const Tensor& x, const Tensor& previous) {
    CallScope scope(*this);
    Tensor projected = child("down_proj")->call(x);
    if (eda_ && previous.defined()) {
      projected = add(projected, mul(previous, parameter("router_states_scale")));
    }
    const Tensor next = to(projected, projected.dtype(), /*copy=*/true);  // .clone()
    const Tensor probs = softmax(child("router_mlp")->call(projected), -1);
    // topk of the detached probabilities plus balancing_biases picks the expert, gather its
    // probability: the first k stand in (Note [Expected-load MoE] in models.h).
    const Tensor weights = reshape(narrow(probs, -1, 0, top_k_), {x.size(0) * x.size(1), top_k_});
    return {weights, next};
  }

 private:
  bool eda_;
  int64_t top_k_;
};

// ZayaSparseMoeBlock: gate, experts.
class ZayaSparseMoe : public Module {
 public:
  ZayaSparseMoe(const ModelConfig& c, int64_t layer, const TensorOptions& o)
      : Module("ZayaSparseMoeBlock") {
    const std::string act = c.hidden_act;
    gate_ = register_module("gate", std::make_shared<ZayaRouter>(c, layer, o));
    experts_ = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       "ZayaExperts", c.num_local_experts, c.hidden_size, c.intermediate_size,
                       GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
  }
  // x [B, S, h]; `router_state` is the previous layer's projection in, this layer's out.
  Tensor run(const Tensor& x, Tensor& router_state) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    auto [weights, next] = gate_->run(x, router_state);
    router_state = next;
    const Tensor routed = models::expected_load_experts(*experts_, reshape(x, {b * s, h}), weights);
    return view(routed, {b, s, h});
  }

 private:
  std::shared_ptr<ZayaRouter> gate_;
  std::shared_ptr<GroupedExperts> experts_;
};

// Made empty and filled once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], tensor/models/blocks.h): self_attn, mlp, input_layernorm,
// post_attention_layernorm, post_attention_residual_scale, post_mlp_residual_scale.
class ZayaDecoderLayer : public Module {
 public:
  ZayaDecoderLayer() : Module("ZayaDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    kind_ = layer_kind(c, index);
    dtype_ = *o.dtype;
    self_attn_ =
        register_module("self_attn", models::make_cca_attention(c, kind_, "Zaya", o, training));
    mlp_ = register_module("mlp", std::make_shared<ZayaSparseMoe>(c, index, o));
    input_layernorm_ = register_module("input_layernorm", zaya_norm(c.hidden_size, c, o));
    post_attention_layernorm_ =
        register_module("post_attention_layernorm", zaya_norm(c.hidden_size, c, o));
    post_attention_scale_ = register_module(
        "post_attention_residual_scale", std::make_shared<ZayaResidualScaling>(c.hidden_size, o));
    post_mlp_scale_ = register_module("post_mlp_residual_scale",
                                      std::make_shared<ZayaResidualScaling>(c.hidden_size, o));
  }
  AttentionType attention() const { return kind_.attention; }
  // x: the float32 residual stream (Note [ZAYA1 layer]); `router_state` as ZayaSparseMoe::run.
  Tensor run(const Tensor& x, Tensor& router_state, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = self_attn_->run(input_layernorm_->call(to(x, dtype_)), cos_t, sin_t);
    const Tensor mid = post_attention_scale_->run(a, x);
    const Tensor m = mlp_->run(post_attention_layernorm_->call(to(mid, dtype_)), router_state);
    return post_mlp_scale_->run(m, mid);
  }

 private:
  LayerKind kind_;
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<models::AttentionBlock> self_attn_;
  std::shared_ptr<ZayaSparseMoe> mlp_;
  ModulePtr input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<ZayaResidualScaling> post_attention_scale_, post_mlp_scale_;
};

// ZayaModel: embed_tokens (padding_idx = pad_token_id), layers, norm, rotary_emb, then its own
// input_hidden_states_scale and input_hidden_states_bias (listed first, as a module's own
// parameters are); empty until build(), like ZayaDecoderLayer.
class ZayaModel : public Module {
 public:
  ZayaModel() : Module("ZayaModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    dtype_ = *o.dtype;
    embed_tokens_ = register_module("embed_tokens",
                                    std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto list = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(list->push_back(std::make_shared<ZayaDecoderLayer>()));
    }
    norm_ = register_module("norm", zaya_norm(c.hidden_size, c, o));
    rotary_emb_ = register_module("rotary_emb", std::make_shared<ZayaRotary>(c));
    register_parameter("input_hidden_states_scale", empty({c.hidden_size}, o));
    register_parameter("input_hidden_states_bias", empty({c.hidden_size}, o));
    types_ = zaya_types_in_use(c);
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens_->call(ids);
    // The tables of every layer type in use, made before the layers as ZayaModel makes them.
    const Tensor pos = models::position_ids(ids.size(1));
    std::vector<std::pair<AttentionType, std::pair<Tensor, Tensor>>> tables;
    for (const AttentionType t : types_) {
      tables.emplace_back(t, rotary_emb_->cos_sin(pos, t, h.dtype()));
    }
    // The embeddings' affine, then the float32 residual stream (Note [ZAYA1 layer]).
    h = to(
        mul(add(h, parameter("input_hidden_states_bias")), parameter("input_hidden_states_scale")),
        DType::kFloat32);
    Tensor router_state;  // none before the first layer
    for (const auto& layer : layers_) {
      const auto it = std::find_if(tables.begin(), tables.end(),
                                   [&](const auto& e) { return e.first == layer->attention(); });
      h = layer->run(h, router_state, it->second.first, it->second.second);
    }
    return norm_->call(to(h, dtype_));
  }

 private:
  DType dtype_ = DType::kFloat32;
  std::shared_ptr<Embedding> embed_tokens_;
  std::shared_ptr<ZayaRotary> rotary_emb_;
  ModulePtr norm_;
  std::vector<AttentionType> types_;
  std::vector<std::shared_ptr<ZayaDecoderLayer>> layers_;
};

// ZayaForCausalLM: model, lm_head [V, h] (a bias [V] by lm_head_bias), its weight tied to the
// token embedding by tie_word_embeddings.
class ZayaForCausalLM : public Module {
 public:
  ZayaForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("ZayaForCausalLM") {
    auto model = register_module("model", std::make_shared<ZayaModel>());
    register_module("lm_head",
                    std::make_shared<Linear>(c.hidden_size, c.vocab_size, c.lm_head_bias, o));
    model->build(c, o, training);
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "model.embed_tokens.weight");
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(child("model")->call(ids));
  }
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  SP_CHECK(c.router_hidden_size > 0, "zaya: router_hidden_size ", c.router_hidden_size,
           ", expected the router's positive width");
  return std::make_shared<ZayaForCausalLM>(c, o, training);
}

constexpr FieldRename kZayaRenames[] = {{"norm_eps", "rms_norm_eps"},
                                        {"num_local_experts", "num_experts"},
                                        {"intermediate_size", "moe_intermediate_size"},
                                        {"qkv_bias", "attention_bias"},
                                        {"o_bias", "attention_bias"},
                                        {"rope_theta", "rope_parameters"},
                                        {"partial_rotary_factor", "rope_parameters"}};

// Megatron's split of the CCA attention (Shoeybi et al. 2019, §3): q_proj, k_proj and the two
// value halves column-parallel, o_proj row-parallel, each routed expert split as a gated MLP
// (style "experts"); the router, the norms, the residual scalings and qk_norm.temp replicated. With
// tp dividing the key-value heads, a rank's query heads are its key heads' groups, so the
// residual paths (repeat_kv, the group mean) and both convolutions (per channel; per head of d
// channels) stay local: their taps are counted whole on every rank (replicated, 1 + d of C
// channels' weights a layer), where Megatron would keep the rank's channels only. The values' two
// halves are concatenated before they are viewed as heads, so head j < K/2 is v_proj_current's
// and the rest v_proj_delayed's: whole value heads per rank would split [current; delayed] as one
// matrix, which no style here names; splitting each half instead gives every rank the same work,
// bytes and collectives (what the planner prices), not the same heads.
constexpr TensorParallelRule kZayaTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.qkv_proj.q_proj", "colwise"},
    {"model.layers.*.self_attn.qkv_proj.k_proj", "colwise"},
    {"model.layers.*.self_attn.qkv_proj.v_proj_current", "colwise"},
    {"model.layers.*.self_attn.qkv_proj.v_proj_delayed", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"lm_head", "colwise"}};

// ZayaPreTrainedModel._init_weights: PreTrainedModel's (Linear and nn.Conv1d weights normal(0,
// initializer_range) and biases zero, the embedding normal with its pad_token_id row zero,
// RMSNorm weights one), the residual scalings' and the embeddings' scales one and biases zero,
// qk_norm.temp zero, router_states_scale one, the fused experts normal. (balancing_biases, zero
// but -1 on the skip, is a buffer.)
constexpr InitRule kZayaOwnInitRules[] = {
    {"ZayaResidualScaling", "hidden_states_scale", InitFill::kOnes},
    {"ZayaResidualScaling", "hidden_states_bias", InitFill::kZeros},
    {"ZayaResidualScaling", "residual_scale", InitFill::kOnes},
    {"ZayaResidualScaling", "residual_bias", InitFill::kZeros},
    {"ZayaModel", "input_hidden_states_scale", InitFill::kOnes},
    {"ZayaModel", "input_hidden_states_bias", InitFill::kZeros},
    {"ZayaQKNorm", "temp", InitFill::kZeros},
    {"ZayaRouter", "router_states_scale", InitFill::kOnes},
    {"Conv1d", "weight", InitFill::kNormal},
    {"Conv1d", "bias", InitFill::kZeros}};
constexpr auto kZayaInitRules =
    models::concat_init_rules(kZayaOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kZayaFamily{
    .model_type = "zaya",
    .hf_class_prefix = "Zaya",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kZayaRenames,
    .rope_parameters_by_layer_type = true,
    .moe = true,
    .experts_class = "ZayaExperts",
    .tp_plan = kZayaTpPlan,
    .init_rules = kZayaInitRules,
};

}  // namespace shardplan::tensor
