// laguna (Poolside's Laguna XS.2, XS 2.1, S 2.1, M.1): transformers' LagunaConfig (vocab 100352,
// hidden 2048, dense MLP 8192, 40 layers, 48 heads and 8 key-value heads of 128, max positions
// 131072, rms_norm_eps 1e-6, untied; 256 experts of 512, top 8, one shared expert of 512; layer 0
// dense; every layer full attention unless layer_types says otherwise, with a window of 512) and
// modular_laguna.py. A pre-norm decoder (Llama's layer) whose parts are Laguna's own:
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight   q [H_l d, h], k/v [K d, h], o [h, H_l d]
//   model.layers.N.self_attn.{q,k}_norm.weight       [d] (RMSNorm per head, before RoPE)
//   model.layers.N.self_attn.g_proj.weight           [H_l, h] per head, [H_l d, h] per element
//   model.layers.N.mlp.{gate,up,down}_proj.weight    the dense layers' MLP (intermediate_size)
//   model.layers.N.mlp.experts.gate_up_proj          [E, 2F, h]  (sparse layers: experts, then
//   model.layers.N.mlp.experts.down_proj             [E, h, F]    the router `gate`, then the
//   model.layers.N.mlp.gate.weight                   [E, h]       shared expert)
//   model.layers.N.mlp.gate.e_score_correction_bias  [E], a frozen nn.Parameter: counted
//   model.layers.N.mlp.shared_experts.*_proj.weight  as the dense MLP's, shared_expert_intermediate
//   model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight, lm_head.weight
// H_l is the layer's query heads (num_attention_heads_per_layer, one count per layer type here:
// XS.2 has 48 on its full layers and 64 on its sliding ones). The attention output is gated,
// o_proj(out * softplus(g_proj(x))) with the softplus in float32, one gate per head broadcast
// over its channels (gating true or "per-head") or one per channel ("per-element"). RoPE is keyed
// by layer type: the full layers rotate the first int(d x partial_rotary_factor) channels (0.5 in
// the class defaults and XS.2, with YaRN there), the sliding ones the whole head. The router
// scores are sigmoid(x W^T) in float32, the per-expert bias added for the top-k choice only, the k
// scores renormalized; the routed output times moe_routed_scaling_factor, plus the shared expert.
// transformers' attention and MoE block do not fit the shared rotary decoder (per-type head counts
// and rotary widths, the softplus gate, a router holding a parameter bias), so the layer is built
// here from the shared pieces (tensor/models/model_shell.h, blocks.h, GroupedExperts).
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/deepseek_config.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/models/typed_rotary_model.h"

namespace shardplan::tensor {

extern const ModelFamily kLagunaFamily;  // listed in family_registry.cpp

namespace {

// LagunaConfig.__post_init__'s rope_parameters when the file has none.
constexpr double kFullTheta = 500000, kSlidingTheta = 10000, kFullShare = 0.5;

// ---- config ----------------------------------------------------------------------------------

AttentionType every_layer_full(const ModelConfig&, int64_t) { return AttentionType::kFull; }

using models::types_in_use;  // tensor/models/typed_rotary_model.h
using models::uses;

// One layer type's rope_parameters entry, as LagunaRotaryEmbedding reads it: an object whose
// rope_theta is the base (read as rope_parameters[type]["rope_theta"], so required), rope_type
// "default" or one of transformers' scalings, partial_rotary_factor (absent: 1.0, the .get
// default) the share of head_dim rotated.
struct TypeRope {
  double theta;
  std::optional<RopeScaling> scaling;
  double share;
};

TypeRope parse_type_rope(const ConfigFields& f, const nlohmann::json& r, AttentionType t) {
  const std::string name(to_string(t));
  if (!r.contains(name) || !r.at(name).is_object()) {
    f.fail("rope_parameters",
           r.dump().substr(0, 80) +
               ": LagunaRotaryEmbedding reads an entry for every layer type in use; expected \"" +
               name + "\" as an object");
  }
  const nlohmann::json& set = r.at(name);
  const std::string where = "rope_parameters." + name;
  const ConfigFields s(set, f.source());
  if (!s.has("rope_theta")) {
    f.fail("rope_parameters", where +
                                  " has no rope_theta; LagunaRotaryEmbedding takes its base "
                                  "from the entry (the top-level rope_theta is not read)");
  }
  TypeRope out{s.number("rope_theta", kFullTheta), std::nullopt,
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

// RoPE keyed by layer type. LagunaConfig's rope_scaling is its rope_parameters (PreTrainedConfig's
// property): a top-level one would replace the per-type entries, so it is refused; a top-level
// rope_theta is an inert attribute (convert_rope_params_to_dict leaves it in kwargs). The full
// entry gives the model's base, scaling and rotated share; the sliding layers' base and scaling
// change no shape (read and checked, not kept) and their share must be 1.
void parse_rope(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types) {
  c.rope_theta = kFullTheta;
  c.rope_scaling.reset();
  c.partial_rotary_factor = kFullShare;
  if (!f.has("rope_parameters")) return;  // the class's: full base 5e5, half rotated; sliding 1e4
  const nlohmann::json& r = f.raw("rope_parameters");
  if (!r.is_object()) {
    f.fail("rope_parameters", r.dump().substr(0, 60) +
                                  ": LagunaRotaryEmbedding reads it by layer type; expected an "
                                  "object {\"full_attention\": .., \"sliding_attention\": ..}");
  }
  // The full entry is kept even when no layer is full (the model ignores it): it reads back.
  if (uses(types, AttentionType::kFull) || r.contains("full_attention")) {
    const TypeRope full = parse_type_rope(f, r, AttentionType::kFull);
    c.rope_theta = full.theta;
    c.rope_scaling = full.scaling;
    c.partial_rotary_factor = full.share;
  }
  if (uses(types, AttentionType::kSliding)) {
    const TypeRope sliding = parse_type_rope(f, r, AttentionType::kSliding);
    if (sliding.share != 1) {
      f.fail("rope_parameters",
             "rope_parameters.sliding_attention.partial_rotary_factor " +
                 std::to_string(sliding.share) +
                 ": shardplan rotates Laguna's sliding layers over the whole head (every released "
                 "Laguna does); expected 1");
    }
  }
}

// num_attention_heads_per_layer (null or absent: num_attention_heads everywhere), each a positive
// multiple of the key-value heads. ModelConfig holds one count per layer type (the full layers'
// as num_attention_heads, the sliding layers' as sliding_num_attention_heads when it differs).
void parse_heads(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types) {
  const int64_t layers = c.num_hidden_layers, kv = c.num_key_value_heads;
  std::vector<int64_t> heads(static_cast<size_t>(layers), c.num_attention_heads);
  if (f.has("num_attention_heads_per_layer")) {
    const nlohmann::json& v = f.raw("num_attention_heads_per_layer");
    if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
      f.fail("num_attention_heads_per_layer",
             "expected a list of num_hidden_layers = " + std::to_string(layers) + " head counts");
    }
    for (int64_t i = 0; i < layers; ++i) {
      const nlohmann::json& e = v[static_cast<size_t>(i)];
      const int64_t n = e.is_number_integer() ? e.get<int64_t>() : 0;
      if (n <= 0 || kv <= 0 || n % kv != 0) {
        f.fail("num_attention_heads_per_layer",
               "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                   ", expected a positive multiple of num_key_value_heads " + std::to_string(kv));
      }
      heads[static_cast<size_t>(i)] = n;
    }
  }
  std::optional<int64_t> full, sliding;
  for (int64_t i = 0; i < layers; ++i) {
    const AttentionType t = types[static_cast<size_t>(i)];
    std::optional<int64_t>& seen = t == AttentionType::kSliding ? sliding : full;
    const int64_t n = heads[static_cast<size_t>(i)];
    if (seen && *seen != n) {
      f.fail("num_attention_heads_per_layer",
             "layer " + std::to_string(i) + " (" + std::string(to_string(t)) + ") has " +
                 std::to_string(n) + " heads where an earlier layer of its type has " +
                 std::to_string(*seen) +
                 "; shardplan builds one head count per layer type (as every released Laguna "
                 "has), expected equal counts within a type");
    }
    seen = n;
  }
  if (full) c.num_attention_heads = *full;
  if (sliding && *sliding != c.num_attention_heads) c.sliding_num_attention_heads = *sliding;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  if (f.has("rope_scaling") || f.is_null("rope_scaling")) {
    f.fail("rope_scaling",
           "LagunaConfig's rope_scaling is its rope_parameters (PreTrainedConfig's property), and "
           "this one would replace the per-layer-type rope_parameters the model reads; expected "
           "rope_parameters alone");
  }
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 100352,
                                                                    .hidden_size = 2048,
                                                                    .intermediate_size = 8192,
                                                                    .num_hidden_layers = 40,
                                                                    .num_attention_heads = 48,
                                                                    .num_key_value_heads = 8},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6,
                                .head_dim = 128});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);  // g_proj never has one
  // LagunaAttention.gate_per_head = gating is True or gating == "per-head": false (and any other
  // value) builds the per-element gate. A misspelt word is refused rather than read so.
  c.attention_gate_per_head = true;
  if (f.has("gating")) {
    const nlohmann::json& g = f.raw("gating");
    if (g.is_boolean()) {
      c.attention_gate_per_head = g.get<bool>();
    } else if (g == "per-head" || g == "per-element") {
      c.attention_gate_per_head = g == "per-head";
    } else {
      f.fail("gating", g.dump().substr(0, 40) +
                           ", expected true or \"per-head\" (a gate per head) or \"per-element\" "
                           "(a gate per channel)");
    }
  }
  const std::vector<AttentionType> types =
      models::parse_layer_types(f, c.num_hidden_layers, every_layer_full, c);
  if (uses(types, AttentionType::kChunked)) {
    f.fail("layer_types",
           "has chunked_attention, for which LagunaModel makes no mask; expected "
           "\"full_attention\" or \"sliding_attention\"");
  }
  // create_sliding_window_causal_mask raises without a window when a layer slides.
  if (f.is_null("sliding_window") && uses(types, AttentionType::kSliding)) {
    f.fail("sliding_window",
           "null, but layer_types has sliding_attention layers and transformers raises without a "
           "window; expected a positive window");
  }
  c.sliding_window = models::sliding_window_or(f, 512);
  if (c.sliding_window && *c.sliding_window <= 0) {
    if (uses(types, AttentionType::kSliding)) {
      f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
    }
    c.sliding_window.reset();  // a window no layer uses (an all-full file may say 0): none
  }
  c.layer_types = types;
  parse_heads(f, c, types);
  parse_rope(f, c, types);
  // The MoE block: num_experts experts of moe_intermediate_size, one shared expert of
  // shared_expert_intermediate_size (always built), dense layers of intermediate_size.
  c.dense_intermediate_size = c.intermediate_size;
  if (c.dense_intermediate_size <= 0) {
    f.fail("intermediate_size",
           std::to_string(c.dense_intermediate_size) + ", expected a positive MLP width");
  }
  c.intermediate_size = f.integer("moe_intermediate_size", 512);
  c.num_local_experts = f.integer("num_experts", 256);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size", 512);
  if (c.shared_expert_intermediate_size <= 0) {
    f.fail("shared_expert_intermediate_size",
           std::to_string(c.shared_expert_intermediate_size) +
               ": LagunaSparseMoeBlock always builds its shared expert; expected a positive width");
  }
  c.dense_layers = {0};                 // absent or null: layer 0 dense, the rest sparse
  models::parse_mlp_layer_types(f, c);  // tensor/models/deepseek_config.h
  // Qwen2MoeConfig fields LagunaConfig deletes: inert attributes of the released files
  // (mlp_layer_types decides the dense layers, the top k are always renormalized).
  for (const char* key : {"mlp_only_layers", "decoder_sparse_step", "norm_topk_prob"}) f.has(key);
  f.number("moe_routed_scaling_factor", 1.0);  // a multiply of the routed output, traced at 1
  if (f.boolean("moe_apply_router_weight_on_input", false)) {
    f.fail("moe_apply_router_weight_on_input",
           "true: LagunaConfig raises NotImplementedError (the router weights are applied to the "
           "experts' output); expected false");
  }
  if (f.number("moe_router_logit_softcapping", 0.0) > 0) {
    f.fail("moe_router_logit_softcapping",
           f.raw("moe_router_logit_softcapping").dump() +
               ": the router's tanh soft-capping is not built (no released Laguna caps); "
               "expected 0");
  }
}

// The full layers' entry: the model's base, scaling and rotated share.
nlohmann::json full_rope_entry(const ModelConfig& c) {
  nlohmann::json e = c.rope_scaling ? rope_scaling_json(c.rope_scaling) : nlohmann::json::object();
  if (!c.rope_scaling) e["rope_type"] = "default";
  e["rope_theta"] = c.rope_theta;
  e["partial_rotary_factor"] = c.partial_rotary_factor;
  return e;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);               // with sliding_window when set
  j.erase("rope_theta");                                 // inert in LagunaConfig
  j.erase("rope_scaling");                               // would replace rope_parameters
  if (!c.sliding_window) j["sliding_window"] = nullptr;  // absent would read as the class's 512
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  j["attention_bias"] = c.qkv_bias;
  j["gating"] = c.attention_gate_per_head ? nlohmann::json(true) : nlohmann::json("per-element");
  nlohmann::json types = nlohmann::json::array(), heads = nlohmann::json::array(),
                 mlp = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    types.push_back(std::string(to_string(k.attention)));
    heads.push_back(attention_heads_of(c, k));
    mlp.push_back(k.ffn == FfnKind::kMoe ? "sparse" : "dense");
  }
  j["layer_types"] = types;
  j["num_attention_heads_per_layer"] = heads;
  j["mlp_layer_types"] = mlp;
  j["rope_parameters"] = {
      {"full_attention", full_rope_entry(c)},
      {"sliding_attention",
       {{"rope_type", "default"}, {"rope_theta", kSlidingTheta}, {"partial_rotary_factor", 1.0}}}};
}

// ---- model -----------------------------------------------------------------------------------

ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
}

// The channels of each head a layer of type `t` rotates.
int64_t rotated_width(const ModelConfig& c, AttentionType t) {
  return t == AttentionType::kSliding ? c.head_dim : models::rotary_dim(c);
}

// LagunaRotaryEmbedding: a table per layer type, of that type's rotated width.
class Rotary : public models::TypedRotaryTables {
 public:
  explicit Rotary(const ModelConfig& c)
      : TypedRotaryTables("LagunaRotaryEmbedding", c,
                          [&c](AttentionType t) { return rotated_width(c, t); }) {}
};

// LagunaAttention: q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, g_proj (the order of its
// __init__).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("LagunaAttention"),
        heads_(attention_heads_of(c, kind)),
        kv_heads_(kv_heads_of(c, kind)),
        head_dim_(c.head_dim),
        per_head_gate_(c.attention_gate_per_head),
        dropout_(training ? c.attention_dropout : 0.0) {
    if (kind.window > 0) window_ = kind.window;
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    q_norm = register_module("q_norm", norm(head_dim_, c, o));
    k_norm = register_module("k_norm", norm(head_dim_, c, o));
    g_proj = register_module(
        "g_proj", std::make_shared<Linear>(h, per_head_gate_ ? heads_ : q, /*bias=*/false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // Normed per head over head_dim, then rotated (the first channels of the full layers' heads).
    const Tensor q = models::apply_rotary(
        q_norm->call(models::split_heads(q_proj->call(x), heads_, head_dim_)), cos_t, sin_t);
    const Tensor k = models::apply_rotary(
        k_norm->call(models::split_heads(k_proj->call(x), kv_heads_, head_dim_)), cos_t, sin_t);
    const Tensor v = models::split_heads(v_proj->call(x), kv_heads_, head_dim_);
    // The sliding window bounds the keys of each query on a sliding layer.
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    Tensor merged = models::merge_heads(out);
    // softplus(g_proj(x).float()) cast back (softplus as log(1 + exp), as the traces of the other
    // softplus users are written).
    const Tensor gate = to(log(add(exp(to(g_proj->call(x), DType::kFloat32)), 1.0)), x.dtype());
    if (per_head_gate_) {  // [B, S, H, d] x [B, S, H, 1], back to [B, S, H d]
      const int64_t b = merged.size(0), s = merged.size(1);
      merged = view(mul(view(merged, {b, s, heads_, head_dim_}), unsqueeze(gate, -1)),
                    {b, s, heads_ * head_dim_});
    } else {
      merged = mul(merged, gate);
    }
    return o_proj->call(merged);
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj, g_proj;
  ModulePtr q_norm, k_norm;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  bool per_head_gate_;
  double dropout_;
  std::optional<int64_t> window_;
};

// LagunaTopKRouter: weight [E, h] and e_score_correction_bias [E], an nn.Parameter with
// requires_grad False (updated outside autograd; transformers counts it, unlike DeepSeek-V3's
// buffer). Returns the routing weights [T, k] of tokens `flat` [T, h] in their dtype.
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module("LagunaTopKRouter"), top_k_(c.num_experts_per_tok) {
    register_parameter("weight", empty({c.num_local_experts, c.hidden_size}, o));
    register_parameter("e_score_correction_bias", empty({c.num_local_experts}, o))
        .set_requires_grad(false);
  }
  Tensor forward(const Tensor& flat) override {
    // F.linear(x, weight).float(), then sigmoid scores. The bias joins them for the top-k choice
    // only, and narrow stands in for topk's gather (Note [Expected-load MoE] in models.h).
    const Tensor scores = sigmoid(to(linear(flat, parameter("weight")), DType::kFloat32));
    Tensor w = narrow(scores, 1, 0, top_k_);
    w = div(w, sum(w, {-1}, /*keepdim=*/true));
    return to(w, flat.dtype());
  }

 private:
  int64_t top_k_;
};

// LagunaSparseMoeBlock: experts, gate, shared_experts. Its forward runs the shared expert first,
// then the router and the routed experts, their output times moe_routed_scaling_factor (traced as
// a multiply by 1: the factor changes no shape or count and is not kept), plus the shared output.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o) : Module("LagunaSparseMoeBlock") {
    const std::string act = c.hidden_act;
    experts = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       "LagunaExperts", c.num_local_experts, c.hidden_size, c.intermediate_size,
                       GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
    gate = register_module("gate", std::make_shared<Router>(c, o));
    shared_experts = register_module(
        "shared_experts",
        std::make_shared<models::GatedMlp>("LagunaMLP", c.hidden_size,
                                           c.shared_expert_intermediate_size, false, act, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    const Tensor shared = shared_experts->call(flat);
    const Tensor routed = models::expected_load_experts(*experts, flat, gate->call(flat));
    return view(add(mul(routed, 1.0), shared), {b, s, h});
  }
  std::shared_ptr<GroupedExperts> experts;
  ModulePtr gate, shared_experts;
};

// LagunaModel and its decoder layers (tensor/models/typed_rotary_model.h): embed_tokens
// (padding_idx = pad_token_id), layers, norm, rotary_emb with a table per layer type.
struct ModelParts {
  static constexpr const char* kName = "LagunaModel";
  static constexpr const char* kLayerName = "LagunaDecoderLayer";
  static constexpr const char* kMlpName = "LagunaMLP";
  using Attn = Attention;
  using Moe = SparseMoe;
  using Tables = Rotary;
  static ModulePtr make_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
    return norm(dim, c, o);
  }
  static bool mlp_bias(const ModelConfig&) { return false; }
};
using Model = models::TypedRotaryModel<ModelParts>;

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Model>>("LagunaForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

constexpr FieldRename kLagunaRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"num_local_experts", "num_experts"},
    {"intermediate_size", "moe_intermediate_size"},
    {"dense_intermediate_size", "intermediate_size"},
    {"dense_layers", "mlp_layer_types"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"rope_theta", "rope_parameters"},
    {"partial_rotary_factor", "rope_parameters"},
    {"sliding_num_attention_heads", "num_attention_heads_per_layer"},
    {"attention_gate_per_head", "gating"}};

// LagunaConfig.base_model_tp_plan in Megatron's terms: q, k, v and the output gate g_proj
// column-parallel by heads (a per-head gate [H_l, h] splits with its heads, a per-element one
// [H_l d, h] with their channels), o_proj row-parallel; the dense MLP and the shared expert as
// Llama's MLP, each routed expert split as a gated MLP (style "experts"); the router (its weight
// and bias) and the q/k norms (one [d] weight for every head) replicated.
constexpr TensorParallelRule kLagunaTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.g_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// LagunaPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the pad_token_id row zero, RMSNorm weights one), the fused
// experts normal, the router's weight normal and its e_score_correction_bias zero.
constexpr InitRule kLagunaOwnInitRules[] = {
    {"LagunaTopKRouter", "weight", InitFill::kNormal},
    {"LagunaTopKRouter", "e_score_correction_bias", InitFill::kZeros}};
constexpr auto kLagunaInitRules =
    models::concat_init_rules(kLagunaOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

// router_score_bias stays kNone: the score-correction bias is a parameter the model builds and
// counts (as ERNIE 4.5's frozen statics and AFMoE's expert_bias), not a buffer held beside it.
const ModelFamily kLagunaFamily{
    .model_type = "laguna",
    .hf_class_prefix = "Laguna",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kLagunaRenames,
    .rope_parameters_by_layer_type = true,
    .moe = true,
    .experts_class = "LagunaExperts",
    .tp_plan = kLagunaTpPlan,
    .init_rules = kLagunaInitRules,
};

}  // namespace shardplan::tensor
