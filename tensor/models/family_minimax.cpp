// minimax (MiniMax-Text-01, MiniMaxAI/MiniMax-Text-01-hf): transformers' MiniMaxConfig and
// modeling_minimax.py (generated from modular_minimax.py). A hybrid stack picked per layer by
// layer_types: lightning attention (a linear attention, tensor/models/lightning_attention.h) where
// it says linear_attention, Mixtral's softmax attention (MiniMaxAttention: q, k, v, o without
// biases, grouped-query heads, RoPE) where it says full_attention; the release has seven linear
// layers then one full, ten times over. Every layer is one MiniMaxDecoderLayer, registered
// self_attn, input_layernorm, post_attention_layernorm, mlp (self_attn is assigned first and
// replaced in place for a linear layer, which keeps its place), whose residual is each half's
// NORMED input (the release's postnorm), its two terms scaled:
//   n = input_layernorm(x);           h = n alpha_attn + self_attn(n) beta_attn
//   m = post_attention_layernorm(h);  y = m alpha_mlp + mlp(m) beta_mlp
// alpha_attn, beta_attn the full_attn_* or linear_attn_* factors by the layer's type, alpha_mlp,
// beta_mlp the mlp_* ones: plain floats, not parameters (the release: alpha (2 x 80)^(1/4) =
// 3.5566, beta 1), so read, checked and not kept; the trace runs the two products and the add of
// each half, whose work is the same at any value. mlp is Mixtral's sparse block
// (MiniMaxSparseMoeBlock): the router `gate` (MiniMaxTopKRouter, a bare weight [E, h], softmax over
// float32 logits, top k renormalized) before the fused experts. h hidden, H heads and kv key-value
// heads of d, E experts of width I, V vocabulary; in named_parameters order:
//   self_attn (full)    q_proj [H d, h], k_proj, v_proj [kv d, h], o_proj [h, H d]
//   self_attn (linear)  norm [H d], qkv_proj [3 H d, h], out_proj [h, H d], output_gate [H d, h]
//   input_layernorm, post_attention_layernorm [h]
//   mlp                 gate.weight [E, h], experts.gate_up_proj [E, 2 I, h],
//                       experts.down_proj [E, h, I]
// then model.embed_tokens [V, h] first and model.norm [h], lm_head [V, h] (untied by default)
// around the layers. The full-attention layers rotate all of head_dim: MiniMaxRotaryEmbedding's
// default type sizes its table by head_dim whatever partial_rotary_factor says (a scaled type reads
// the factor and its narrower table would not broadcast over the head: refused below 1), and the
// released file's rotary_dim (64, what MiniMax's own code rotates) is a key transformers ignores.
// sliding_window (none by default) bounds the full layers' keys, as MiniMaxAttention passes it.
// Defaults where a file is silent are MiniMaxConfig's: 131,072 positions, rms_norm_eps 1e-5,
// rope_theta 1e6 (its default_theta), 8 key-value heads (null: as many as the heads), 8 experts,
// top 2, block_size 256, and layer_types alternating from full_attention on layer 0. The sizes are
// required (Note [Strict config parsing]). The Hub files' own keys are checked against what
// transformers builds: postnorm true, shared_intermediate_size 0 (no shared expert), and
// attn_type_list, when present, the layer types (0 linear, 1 full).
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/lightning_attention.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/models/single_rope.h"

namespace shardplan::tensor {

extern const ModelFamily kMiniMaxFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "MiniMax";

// layer_types, one "linear_attention" or "full_attention" per layer (MiniMaxModel keys its masks
// by these two only), else MiniMaxConfig's default: full_attention on the even layers, linear on
// the odd ones. With a sliding_window the full layers attend that window (kSliding).
void parse_layer_types(const ConfigFields& f, ModelConfig& c) {
  if (f.has("layer_types")) {
    const nlohmann::json& types = f.raw("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_hidden_layers) {
      f.fail("layer_types",
             "expected a list of num_hidden_layers = " + std::to_string(c.num_hidden_layers) +
                 " entries, each \"linear_attention\" or \"full_attention\"");
    }
    for (const nlohmann::json& t : types) {
      if (t == "linear_attention") {
        c.layer_types.push_back(AttentionType::kLinear);
      } else if (t == "full_attention") {
        c.layer_types.push_back(AttentionType::kFull);
      } else {
        f.fail("layer_types", t.dump().substr(0, 60) +
                                  " is not a MiniMax layer type; expected \"linear_attention\" "
                                  "(lightning attention) or \"full_attention\"");
      }
    }
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layer_types.push_back((i + 1) % 2 != 0 ? AttentionType::kFull : AttentionType::kLinear);
    }
  }
  // MiniMax's own list (the original release's key): 0 lightning, 1 softmax. transformers reads
  // layer_types alone, so a file whose list says otherwise describes a model it does not build.
  if (f.has("attn_type_list")) {
    const nlohmann::json& list = f.raw("attn_type_list");
    bool agrees = list.is_array() && list.size() == c.layer_types.size();
    for (size_t i = 0; agrees && i < list.size(); ++i) {
      const bool linear = c.layer_types[i] == AttentionType::kLinear;
      agrees = list[i].is_number_integer() && list[i].get<int64_t>() == (linear ? 0 : 1);
    }
    if (!agrees) {
      f.fail("attn_type_list",
             list.dump().substr(0, 60) + " disagrees with the layer types transformers builds (" +
                 (f.has("layer_types") ? "layer_types" : "MiniMaxConfig's default, alternating") +
                 "); expected 0 where they say linear_attention and 1 where full_attention");
    }
  }
  c.sliding_window = f.opt_integer("sliding_window");  // MiniMaxConfig: none by default
  if (c.sliding_window) {
    if (*c.sliding_window <= 0) {
      f.fail("sliding_window",
             "must be a positive window (or null: none), got " + std::to_string(*c.sliding_window));
    }
    for (AttentionType& t : c.layer_types) {
      if (t == AttentionType::kFull) t = AttentionType::kSliding;
    }
  }
}

// RoPE as MiniMaxRotaryEmbedding builds it (ModelFamily::rope_parameters_by_layer_type: read here,
// not by the shared reading). transformers' convert_rope_params_to_dict takes a legacy rope_scaling
// in place of rope_parameters, their rope_theta, else the file's top-level one, else
// default_theta 1e6. The default type rotates all of head_dim whatever partial_rotary_factor says.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  const models::SingleRope r = models::find_single_rope(f, "MiniMaxRotaryEmbedding");
  c.rope_theta = 1e6;  // MiniMaxConfig.default_theta
  if (r.theta) {
    if (!r.theta->is_number() || !(r.theta->get<double>() > 0)) {
      f.fail(r.theta_key,
             "rope_theta " + r.theta->dump().substr(0, 40) + ", expected a positive base");
    }
    c.rope_theta = r.theta->get<double>();
  }
  models::read_full_width_scaling(f, c, r, "MiniMax's");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096 * 32, .rms_norm_eps = 1e-5});
  // MiniMaxConfig: 8 key-value heads when the key is absent, as many as the heads when null.
  c.num_key_value_heads = f.is_null("num_key_value_heads") ? c.num_attention_heads
                                                           : f.integer("num_key_value_heads", 8);
  // head_dim 0 is falsy: `getattr(config, "head_dim", None) or hidden_size // heads`.
  if (c.head_dim == 0 && c.num_attention_heads > 0) {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.num_local_experts = f.integer("num_local_experts", 8);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  c.linear_block_size = f.integer("block_size", 256);
  if (c.linear_block_size <= 0 || c.linear_block_size > 65536) {
    f.fail("block_size", std::to_string(c.linear_block_size) +
                             " is not a lightning attention block, expected 1..65536 tokens");
  }
  parse_layer_types(f, c);
  // The residual factors: floats, applied always (their values change no shape or count).
  for (const char* key :
       {"full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor",
        "linear_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor"}) {
    if (!std::isfinite(f.number(key, 1.0))) f.fail(key, "expected a finite number");
  }
  // Routing only: the training-time jitter of the router's input (not traced) and the auxiliary
  // loss's weight.
  const double jitter = f.number("router_jitter_noise", 0.0);
  if (!(jitter >= 0 && jitter < 1)) {
    f.fail("router_jitter_noise", std::to_string(jitter) + ", expected a jitter in [0, 1)");
  }
  f.number("router_aux_loss_coef", 0.001);
  models::require_built_value(f, "postnorm", true, "MiniMax",
                              "each half's residual from its normed input");
  models::require_built_value(f, "shared_intermediate_size", 0, "MiniMax", "no shared expert");
  parse_rope(f, c);
}

nlohmann::json layer_types_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::array();
  for (const AttentionType t : c.layer_types) {
    j.push_back(t == AttentionType::kLinear ? "linear_attention" : "full_attention");
  }
  return j;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["block_size"] = c.linear_block_size;
  j["layer_types"] = layer_types_json(c);
}

ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
}

// MiniMaxTopKRouter: a bare weight [E, h]; its logits are F.linear(x, weight).
class TopKRouter : public Module {
 public:
  TopKRouter(int64_t experts, int64_t hidden, const TensorOptions& o)
      : Module(std::string(kPrefix) + "TopKRouter") {
    register_parameter("weight", empty({experts, hidden}, o));
  }
  Tensor forward(const Tensor& x) override { return linear(x, parameter("weight")); }
};

// MiniMaxSparseMoeBlock (Note [Expected-load MoE] in models.h): the router before the fused
// experts, softmax over float32 logits, the top k renormalized (Mixtral's).
class SparseMoeBlock : public Module {
 public:
  SparseMoeBlock(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "SparseMoeBlock"), top_k_(c.num_experts_per_tok) {
    register_module("gate", std::make_shared<TopKRouter>(c.num_local_experts, c.hidden_size, o));
    const std::string act = c.hidden_act;
    experts_ = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       std::string(kPrefix) + "Experts", c.num_local_experts, c.hidden_size,
                       c.intermediate_size, GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    const Tensor probs = softmax(child("gate")->call(flat), 1, DType::kFloat32);
    const Tensor top = narrow(probs, 1, 0, top_k_);  // stands in for topk's values
    const Tensor weights = to(div(top, sum(top, {-1}, /*keepdim=*/true)), x.dtype());
    return view(models::expected_load_experts(*experts_, flat, weights), {b, s, h});
  }

 private:
  int64_t top_k_;
  std::shared_ptr<GroupedExperts> experts_;
};

// MiniMaxDecoderLayer, made empty and filled by build() once it sits in its ModuleList (Note
// [Filling repeated blocks after registration], blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    // A config built in code with a kind neither attention class builds, or a dense layer.
    SP_CHECK(kind.attention == AttentionType::kLinear || kind.attention == AttentionType::kFull ||
                 kind.attention == AttentionType::kSliding,
             "minimax: layer ", index, " attends ", to_string(kind.attention),
             ", expected linear_attention or full_attention");
    SP_CHECK(kind.ffn == FfnKind::kMoe, "minimax: layer ", index, " has a ", to_string(kind.ffn),
             " feed-forward, expected MiniMax's sparse block in every layer");
    if (kind.attention == AttentionType::kLinear) {
      self_attn_ = register_module("self_attn", models::make_lightning_attention(c, kPrefix, o));
    } else {
      self_attn_ = register_module(
          "self_attn",
          models::make_rotary_attention(c, kind, {.prefix = kPrefix}, kPrefix, o, training));
    }
    input_norm_ = register_module("input_layernorm", make_norm(c, o));
    post_attention_norm_ = register_module("post_attention_layernorm", make_norm(c, o));
    mlp_ = register_module("mlp", std::make_shared<SparseMoeBlock>(c, o));
  }
  // The factors' values change no work: the trace multiplies by 1 in their place.
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor n = input_norm_->call(x);
    const Tensor a = self_attn_->run(n, cos_t, sin_t);
    const Tensor kept = mul(n, kFactor);
    const Tensor h = add(kept, mul(a, kFactor));
    const Tensor m = post_attention_norm_->call(h);
    const Tensor f = mlp_->call(m);
    const Tensor kept_m = mul(m, kFactor);
    return add(kept_m, mul(f, kFactor));
  }

 private:
  static constexpr double kFactor = 1.0;  // stands in for the alpha and beta factors
  std::shared_ptr<models::AttentionBlock> self_attn_;
  ModulePtr input_norm_, post_attention_norm_, mlp_;
};

// MiniMaxModel: embed_tokens (padding_idx pad_token_id), layers, norm, rotary_emb (always: the
// model computes the tables whatever its layers are).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module("norm", make_norm(c, o));
    rope_ = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                              std::string(kPrefix) + "RotaryEmbedding",
                                              models::rotary_dim(c), c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_->call(ids);
    const auto [cos_t, sin_t] = rope_->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm_->call(h);
  }

 private:
  ModulePtr embed_, norm_;
  std::shared_ptr<models::RotaryEmbedding> rope_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"linear_block_size", "block_size"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3). Softmax attention: q, k, v column-parallel by
// heads, o row-parallel. Lightning attention (Note [Lightning attention trace] in
// lightning_attention.h): qkv_proj, whose rows run head by head ([q | k | v] per head, so one
// contiguous split is whole heads, fused_parts 1 not 3), and output_gate column-parallel,
// out_proj row-parallel; the full-width norm's weight replicated. Experts by expert tensor
// parallelism (gate_up_proj's two halves each split), the router replicated; the embedding by
// vocabulary rows, lm_head by vocabulary. transformers' own plan (base_model_tp_plan) names the
// softmax attention and the experts only: its lightning layers would stay whole on every rank.
constexpr TensorParallelRule kMiniMaxTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.self_attn.qkv_proj", "colwise"},
    {"model.layers.*.self_attn.output_gate", "colwise"},
    {"model.layers.*.self_attn.out_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"lm_head", "colwise"}};

// MiniMaxPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and the embedding's rows
// normal(0, initializer_range), the padding row zero, RMSNorm weights one), the fused experts and
// the router's weight normal(0, initializer_range); the lightning decays are buffers, which
// materialize does not fill.
constexpr InitRule kRouterInitRules[] = {{"MiniMaxTopKRouter", "weight", InitFill::kNormal}};
constexpr auto kMiniMaxInitRules =
    models::concat_init_rules(kRouterInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kMiniMaxFamily{
    .model_type = "minimax",
    .hf_class_prefix = "MiniMax",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rope_parameters_by_layer_type = true,  // parse_rope reads rope_parameters and rope_theta
    .moe = true,
    .experts_class = "MiniMaxExperts",
    .linear_attention = true,
    .lightning_mixer = true,
    .tp_plan = kMiniMaxTpPlan,
    .init_rules = kMiniMaxInitRules,
};

}  // namespace shardplan::tensor
