// mellum (JetBrains' Mellum2-12B-A2.5B): transformers' MellumConfig (vocab 98304, hidden 2304,
// dense MLP 7168, 28 layers, 32 heads and 4 key-value heads of 128, max positions 131072,
// rms_norm_eps 1e-6, untied; 64 experts of 896, top 8, norm_topk_prob; every layer sparse and
// full attention unless mlp_layer_types and layer_types say otherwise, with a window of 1024) and
// modular_mellum.py. Qwen3-MoE's attention and MoE block in Laguna's decoder layer and model:
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight   q [H d, h], k/v [K d, h], o [h, H d]
//                                                    (biases on all four with attention_bias)
//   model.layers.N.self_attn.{q,k}_norm.weight       [d] (RMSNorm per head, before RoPE)
//   model.layers.N.mlp.{gate,up,down}_proj.weight    the dense layers' MLP (intermediate_size)
//   model.layers.N.mlp.experts.gate_up_proj          [E, 2F, h]  (sparse layers: the experts,
//   model.layers.N.mlp.experts.down_proj             [E, h, F]    then the router `gate`, a
//   model.layers.N.mlp.gate.weight                   [E, h]       bare parameter; no shared one)
//   model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight, lm_head.weight
// The sliding layers (layer_types) attend the last sliding_window keys. RoPE is keyed by layer
// type (rope_parameters {"full_attention": .., "sliding_attention": ..}, each with its own base
// and scaling: the published file scales the full layers by YaRN), one table per type in use;
// MellumAttention's apply_rotary_pos_emb rotates the whole head. The router's scores are
// softmax(x W^T) in float32, the top k renormalized (norm_topk_prob) and cast back.
// The shared rotary decoder has one rotary table and a Linear router, so the layer is built here
// from the shared pieces (tensor/models/model_shell.h, blocks.h, GroupedExperts), as Laguna's.
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

extern const ModelFamily kMellumFamily;  // listed in family_registry.cpp

namespace {

// MellumConfig.__post_init__'s rope_parameters when the file has none (no partial_rotary_factor:
// the whole head rotates).
constexpr double kFullTheta = 500000, kSlidingTheta = 10000;

// ---- config ----------------------------------------------------------------------------------

AttentionType every_layer_full(const ModelConfig&, int64_t) { return AttentionType::kFull; }

using models::types_in_use;  // tensor/models/typed_rotary_model.h
using models::uses;

// One layer type's rope_parameters entry, as MellumRotaryEmbedding reads it: an object (a null
// one is skipped there, and the layers of that type then find no table) whose rope_theta is the
// base (read as rope_parameters[type]["rope_theta"], so required), rope_type "default" or one of
// transformers' scalings. partial_rotary_factor (absent: 1.0) sizes the inverse frequencies, but
// MellumAttention's apply_rotary_pos_emb multiplies the whole head by the table, which only
// broadcasts at 1: any other share fails in transformers.
struct TypeRope {
  double theta;
  std::optional<RopeScaling> scaling;
};

TypeRope parse_type_rope(const ConfigFields& f, const nlohmann::json& r, AttentionType t) {
  const std::string name(to_string(t));
  if (!r.contains(name) || !r.at(name).is_object()) {
    f.fail("rope_parameters",
           r.dump().substr(0, 80) +
               ": MellumRotaryEmbedding reads an entry for every layer type in use; expected \"" +
               name + "\" as an object");
  }
  const nlohmann::json& set = r.at(name);
  const std::string where = "rope_parameters." + name;
  const ConfigFields s(set, f.source());
  if (!s.has("rope_theta")) {
    f.fail("rope_parameters", where +
                                  " has no rope_theta; MellumRotaryEmbedding takes its base "
                                  "from the entry (the top-level rope_theta is not read)");
  }
  TypeRope out{s.number("rope_theta", kFullTheta), std::nullopt};
  if (!(out.theta > 0)) {
    f.fail("rope_parameters",
           where + ".rope_theta " + std::to_string(out.theta) + ", expected > 0");
  }
  const double share = s.number("partial_rotary_factor", 1.0);
  if (share != 1) {
    f.fail("rope_parameters", where + ".partial_rotary_factor " + std::to_string(share) +
                                  ": MellumAttention rotates the whole head (its "
                                  "apply_rotary_pos_emb takes no narrower table); expected 1");
  }
  const std::string kind =
      s.has("rope_type") ? s.string("rope_type", "default") : s.string("type", "default");
  if (kind != "default") out.scaling = parse_rope_scaling(set, f, "rope_parameters");
  return out;
}

// RoPE keyed by layer type. MellumConfig's rope_scaling is its rope_parameters (PreTrainedConfig's
// property): a top-level one would replace the per-type entries, so it is refused; a top-level
// rope_theta is an inert attribute (convert_rope_params_to_dict leaves it in kwargs). ModelConfig
// keeps one base and scaling: the full layers' when any layer is full, else the sliding layers'.
// The other type's entry is read and checked, its base and scaling not kept (no shape or count
// depends on them).
void parse_rope(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types) {
  c.partial_rotary_factor = 1;
  c.rope_scaling.reset();
  const bool full = uses(types, AttentionType::kFull);
  c.rope_theta = full ? kFullTheta : kSlidingTheta;
  if (!f.has("rope_parameters")) return;  // the class's: full base 5e5, sliding 1e4, unscaled
  const nlohmann::json& r = f.raw("rope_parameters");
  if (!r.is_object()) {
    f.fail("rope_parameters", r.dump().substr(0, 60) +
                                  ": MellumRotaryEmbedding reads it by layer type; expected an "
                                  "object {\"full_attention\": .., \"sliding_attention\": ..}");
  }
  std::optional<TypeRope> kept;
  for (const AttentionType t : {AttentionType::kFull, AttentionType::kSliding}) {
    if (!uses(types, t)) continue;
    const TypeRope e = parse_type_rope(f, r, t);
    if (!kept) kept = e;
  }
  c.rope_theta = kept->theta;
  c.rope_scaling = kept->scaling;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  if (f.has("rope_scaling") || f.is_null("rope_scaling")) {
    f.fail("rope_scaling",
           "MellumConfig's rope_scaling is its rope_parameters (PreTrainedConfig's property), and "
           "this one would replace the per-layer-type rope_parameters the model reads; expected "
           "rope_parameters alone");
  }
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 98304,
                                                                    .hidden_size = 2304,
                                                                    .intermediate_size = 7168,
                                                                    .num_hidden_layers = 28,
                                                                    .num_attention_heads = 32,
                                                                    .num_key_value_heads = 4},
                                .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6,
                                .head_dim = 128});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  const std::vector<AttentionType> types =
      models::parse_layer_types(f, c.num_hidden_layers, every_layer_full, c);
  if (uses(types, AttentionType::kChunked)) {
    f.fail("layer_types",
           "has chunked_attention, for which MellumModel makes no mask; expected "
           "\"full_attention\" or \"sliding_attention\"");
  }
  // create_sliding_window_causal_mask raises without a window when a layer slides.
  if (f.is_null("sliding_window") && uses(types, AttentionType::kSliding)) {
    f.fail("sliding_window",
           "null, but layer_types has sliding_attention layers and transformers raises without a "
           "window; expected a positive window");
  }
  c.sliding_window = models::sliding_window_or(f, 1024);
  if (c.sliding_window && *c.sliding_window <= 0) {
    if (uses(types, AttentionType::kSliding)) {
      f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
    }
    c.sliding_window.reset();  // a window no layer uses: none
  }
  c.layer_types = types;
  parse_rope(f, c, types);
  // The MoE block: num_experts experts of moe_intermediate_size and no shared expert; the dense
  // layers' MLP of intermediate_size.
  c.dense_intermediate_size = c.intermediate_size;
  if (c.dense_intermediate_size <= 0) {
    f.fail("intermediate_size",
           std::to_string(c.dense_intermediate_size) + ", expected a positive MLP width");
  }
  c.intermediate_size = f.integer("moe_intermediate_size", 896);
  c.num_local_experts = f.integer("num_experts", 64);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  models::parse_mlp_layer_types(f, c);  // tensor/models/deepseek_config.h
  // norm_topk_prob false skips the renormalization of the top k (a sum and a divide of [T, k]);
  // the trace renormalizes always, as for Qwen3-MoE. Read, not kept.
  f.boolean("norm_topk_prob", true);
  // Attributes of the released file that MellumConfig drops (Qwen3MoeConfig's sliding-window and
  // sparse-step keys; layer_types and mlp_layer_types decide): read, inert.
  for (const char* key :
       {"use_sliding_window", "max_window_layers", "mlp_only_layers", "decoder_sparse_step"}) {
    f.has(key);
  }
}

// A type's rope_parameters entry of base `theta` and `c`'s scaling (none: "default").
nlohmann::json rope_entry(const ModelConfig& c, double theta, bool scaled) {
  nlohmann::json e =
      scaled && c.rope_scaling ? rope_scaling_json(c.rope_scaling) : nlohmann::json::object();
  if (!scaled || !c.rope_scaling) e["rope_type"] = "default";
  e["rope_theta"] = theta;
  return e;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);               // with sliding_window when set
  j.erase("rope_theta");                                 // inert in MellumConfig
  j.erase("rope_scaling");                               // would replace rope_parameters
  if (!c.sliding_window) j["sliding_window"] = nullptr;  // absent would read as the class's 1024
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["attention_bias"] = c.qkv_bias;
  nlohmann::json types = nlohmann::json::array(), mlp = nlohmann::json::array();
  bool any_full = false;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    any_full = any_full || k.attention == AttentionType::kFull;
    types.push_back(std::string(to_string(k.attention)));
    mlp.push_back(k.ffn == FfnKind::kMoe ? "sparse" : "dense");
  }
  j["layer_types"] = types;
  j["mlp_layer_types"] = mlp;
  // ModelConfig's base and scaling are the full layers' when any layer is full: the sliding entry
  // then gets that base unscaled (the published file's); otherwise they are the sliding layers'.
  j["rope_parameters"] = {{"full_attention", rope_entry(c, c.rope_theta, true)},
                          {"sliding_attention", rope_entry(c, c.rope_theta, /*scaled=*/!any_full)}};
}

// ---- model -----------------------------------------------------------------------------------

ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
}

// MellumRotaryEmbedding: a table per layer type, each over the whole head.
class Rotary : public models::TypedRotaryTables {
 public:
  explicit Rotary(const ModelConfig& c)
      : TypedRotaryTables("MellumRotaryEmbedding", c, [&c](AttentionType) { return c.head_dim; }) {}
};

// MellumAttention (Qwen3-MoE's): q_proj, k_proj, v_proj, o_proj, q_norm, k_norm (the order of its
// __init__).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("MellumAttention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    if (kind.window > 0) window_ = kind.window;
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    q_norm = register_module("q_norm", norm(head_dim_, c, o));
    k_norm = register_module("k_norm", norm(head_dim_, c, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // Normed per head over head_dim, then rotated over the whole head.
    const Tensor q = models::apply_rotary(
        q_norm->call(models::split_heads(q_proj->call(x), heads_, head_dim_)), cos_t, sin_t);
    const Tensor k = models::apply_rotary(
        k_norm->call(models::split_heads(k_proj->call(x), kv_heads_, head_dim_)), cos_t, sin_t);
    const Tensor v = models::split_heads(v_proj->call(x), kv_heads_, head_dim_);
    // The sliding window bounds the keys of each query on a sliding layer.
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    return o_proj->call(models::merge_heads(out));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  ModulePtr q_norm, k_norm;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::optional<int64_t> window_;
};

// MellumTopKRouter: a bare weight [E, h] (an nn.Parameter, not an nn.Linear). Returns the routing
// weights [T, k] of tokens `flat` [T, h] in their dtype.
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module("MellumTopKRouter"), top_k_(c.num_experts_per_tok) {
    register_parameter("weight", empty({c.num_local_experts, c.hidden_size}, o));
  }
  Tensor forward(const Tensor& flat) override {
    // F.linear(x, weight) in the model's dtype, softmax in float32; narrow stands in for topk's
    // values (Note [Expected-load MoE] in models.h), which are renormalized and cast back.
    const Tensor probs = softmax(linear(flat, parameter("weight")), 1, DType::kFloat32);
    Tensor w = narrow(probs, 1, 0, top_k_);
    w = div(w, sum(w, {-1}, /*keepdim=*/true));
    return to(w, flat.dtype());
  }

 private:
  int64_t top_k_;
};

// MellumSparseMoeBlock (Qwen3-MoE's): experts, then gate; the routed experts' weighted sum alone.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o) : Module("MellumSparseMoeBlock") {
    const std::string act = c.hidden_act;
    experts = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       "MellumExperts", c.num_local_experts, c.hidden_size, c.intermediate_size,
                       GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
    gate = register_module("gate", std::make_shared<Router>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    return view(models::expected_load_experts(*experts, flat, gate->call(flat)), {b, s, h});
  }
  std::shared_ptr<GroupedExperts> experts;
  ModulePtr gate;
};

// MellumModel and its decoder layers (tensor/models/typed_rotary_model.h): embed_tokens
// (padding_idx = pad_token_id), layers, norm, rotary_emb with a table per layer type.
struct ModelParts {
  static constexpr const char* kName = "MellumModel";
  static constexpr const char* kLayerName = "MellumDecoderLayer";
  static constexpr const char* kMlpName = "MellumMLP";
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
  return std::make_shared<models::CausalLm<Model>>("MellumForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

constexpr FieldRename kMellumRenames[] = {{"norm_eps", "rms_norm_eps"},
                                          {"num_local_experts", "num_experts"},
                                          {"intermediate_size", "moe_intermediate_size"},
                                          {"dense_intermediate_size", "intermediate_size"},
                                          {"dense_layers", "mlp_layer_types"},
                                          {"qkv_bias", "attention_bias"},
                                          {"o_bias", "attention_bias"},
                                          {"rope_theta", "rope_parameters"},
                                          {"partial_rotary_factor", "rope_parameters"}};

// MellumConfig.base_model_tp_plan in Megatron's terms: q, k and v column-parallel by heads (three
// separate projections, each one part: a contiguous split is whole heads), o_proj row-parallel;
// the dense MLP as Llama's; each routed expert split as a gated MLP (style "experts": the
// [gate; up] halves of gate_up_proj each over the ranks, down_proj on its input features, as
// transformers' packed_colwise and rowwise); the router and the q/k norms (one [d] weight for
// every head) replicated; the embedding by vocabulary rows and lm_head by vocabulary.
constexpr TensorParallelRule kMellumTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                                {"model.layers.*.self_attn.q_proj", "colwise"},
                                                {"model.layers.*.self_attn.k_proj", "colwise"},
                                                {"model.layers.*.self_attn.v_proj", "colwise"},
                                                {"model.layers.*.self_attn.o_proj", "rowwise"},
                                                {"model.layers.*.mlp.gate_proj", "colwise"},
                                                {"model.layers.*.mlp.up_proj", "colwise"},
                                                {"model.layers.*.mlp.down_proj", "rowwise"},
                                                {"model.layers.*.mlp.experts", "experts"},
                                                {"lm_head", "colwise"}};

// MellumPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the pad_token_id row zero, Linear biases zero, RMSNorm weights
// one), the fused experts normal and the router's weight normal.
constexpr InitRule kMellumOwnInitRules[] = {{"MellumTopKRouter", "weight", InitFill::kNormal}};
constexpr auto kMellumInitRules =
    models::concat_init_rules(kMellumOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kMellumFamily{
    .model_type = "mellum",
    .hf_class_prefix = "Mellum",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kMellumRenames,
    .rope_parameters_by_layer_type = true,
    .moe = true,
    .experts_class = "MellumExperts",
    .tp_plan = kMellumTpPlan,
    .init_rules = kMellumInitRules,
};

}  // namespace shardplan::tensor
