// hrm_text (Sapient's HRM-Text, sapientinc/HRM-Text-1B): transformers 5's HrmTextConfig and
// modeling_hrm_text.py (HrmTextForCausalLM). Two stacks of N pre-norm decoder layers, a low-level
// (L_module) and a high-level one (H_module), run in cycles with the same weights (Wang et al.
// 2025, "Hierarchical Reasoning Model", arXiv:2506.21734; Note [Layers run in cycles] in
// tensor/models/layer_kinds.h):
//   z_H = embed_tokens(ids) x embedding_scale;  z_L = z_L_init (zeros, frozen)
//   for each of H_cycles: L_cycles times z_L = L_module(z_L + z_H); then z_H = H_module(z_H + z_L)
//   logits = lm_head(z_H)
// In training the low-level passes of high cycle i before its last L_bp_cycles[i] (the list
// left-padded with 1s to H_cycles entries) run under torch.no_grad(). Names and shapes, h hidden,
// V vocabulary, n heads of d (head_dim: 128 by default, free of h / n), I the MLP width; the five
// attention projections biased by attention_bias, the MLP's by mlp_bias:
//   model.z_L_init [h]                   (the model's own parameter: listed first; frozen, zeros)
//   model.embed_tokens.weight [V, h]     (padding_idx pad_token_id)
//   model.{L,H}_module.layers.N.self_attn.{q,k,v}_proj [n d, h], o_proj [h, n d],
//     gate_proj [n d, h]               (registered last: q, k, v, o, gate)
//   model.{L,H}_module.layers.N.mlp.{gate,up}_proj [I, h], down_proj [h, I]
//   lm_head.weight [V, h]                (tied to embed_tokens only with tie_word_embeddings)
// Every norm (each layer's input_layernorm and post_attention_layernorm, each stack's final_norm)
// is an RMSNorm without a weight, computed in float32. The attention is multi-head (k and v have
// every head whatever num_key_value_heads says), RoPE over all of d, its output times
// sigmoid(gate_proj(x)) channel by channel before o_proj (Qwen3-Next's output gate, here its own
// projection).
// Config: num_hidden_layers is the per-stack count in a first construction; HrmTextConfig then
// keeps it as num_layers_per_stack and rewrites num_hidden_layers to N x H_cycles x (L_cycles +
// 1), the layer calls of a forward (one cache slot each), which is what saved files hold.
// ModelConfig::num_hidden_layers is N; to_hf_json writes the saved pair. Refused as transformers
// fails on them or builds something else: hidden_size not a multiple of num_attention_heads
// (validate_architecture), a null head_dim, initializer_range outside [0, 1] or 0 without an
// embedding_scale (1 / initializer_range), a FlashAttention attn_implementation with prefix_lm, a
// num_key_value_heads other than the heads, a saved num_hidden_layers other than that product,
// and partial_rotary_factor below 1 with a scaled RoPE type. prefix_lm changes the mask only
// (bidirectional instruction tokens when token_type_ids are given): no shape, and the fused
// attention's counted work is the full product either way.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/trace.h"

namespace shardplan::tensor {

extern const ModelFamily kHrmTextFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "HrmText";

// HrmTextConfig's sizes where the file omits them (the class documents HRM-Text-1B's).
constexpr int64_t kVocab = 151808, kHidden = 1536, kIntermediate = 4096, kLayers = 16, kHeads = 12,
                  kHeadDim = 128;

// A FlashAttention implementation as transformers tells one ("flash" in the name, after an
// optional "paged|" prefix: is_flash_attention_requested).
bool flash_attention(const std::string& impl) { return impl.find("flash") != std::string::npos; }

// RoPE as transformers 5 reads it (convert_rope_params_to_dict): a top-level rope_theta and a
// legacy rope_scaling, then rope_parameters over them (Note [rope_parameters]; the family reads it
// itself: ModelFamily::rope_parameters_by_layer_type). HrmTextRotaryEmbedding's default type
// builds a table of all of head_dim whatever partial_rotary_factor says; a scaled type's table
// would be narrower than the head apply_rotary_pos_emb rotates (a forward error), so a factor
// other than 1 is refused there.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.rope_theta = f.number("rope_theta", 10000.0);
  if (f.has("rope_scaling")) {
    const nlohmann::json& r = f.raw("rope_scaling");
    bool unscaled = false;  // rope_type (or the older type) "default" scales nothing
    for (const char* key : {"rope_type", "type"}) {
      if (r.is_object() && r.contains(key)) {
        unscaled = r.at(key).is_string() && r.at(key).get<std::string>() == "default";
        break;
      }
    }
    if (!unscaled) c.rope_scaling = parse_rope_scaling(f);
  }
  if (f.has("rope_parameters")) parse_rope_parameters(f, c);
  const char* key = "rope_parameters";
  double factor = c.partial_rotary_factor;
  if (f.has("partial_rotary_factor") && factor == 1) {
    factor = f.number("partial_rotary_factor", 1.0);
    key = "partial_rotary_factor";
  }
  if (c.rope_scaling && factor != 1) {
    f.fail(key, "partial_rotary_factor " + nlohmann::json(factor).dump() + " with rope type '" +
                    c.rope_scaling->rope_type +
                    "': HrmTextAttention rotates all of head_dim, which that narrower table does "
                    "not cover; expected 1");
  }
  c.partial_rotary_factor = 1;
}

// The cycles (Note [Layers run in cycles]): H_cycles (2), L_cycles (3), L_bp_cycles ([2] when
// absent or null: upstream's hrm_nocarry_more_bp_no_x), a list of integers.
void parse_cycles(const ConfigFields& f, ModelConfig& c) {
  c.h_cycles = f.integer("H_cycles", 2);
  c.l_cycles = f.integer("L_cycles", 3);
  c.l_bp_cycles = {2};
  if (!f.has("L_bp_cycles")) return;
  const nlohmann::json& list = f.raw("L_bp_cycles");
  if (!list.is_array()) {
    f.fail("L_bp_cycles",
           "expected a list of integers (or null: [2]), got " + list.dump().substr(0, 60));
  }
  c.l_bp_cycles.clear();
  for (const nlohmann::json& n : list) {
    if (!n.is_number_integer()) {
      f.fail("L_bp_cycles", n.dump().substr(0, 60) +
                                " is not an integer; expected the low-level cycles with a graph "
                                "in each high-level cycle");
    }
    c.l_bp_cycles.push_back(n.get<int64_t>());
  }
}

// The per-stack layer count (Config above): num_layers_per_stack when the file has one (a saved
// config), num_hidden_layers then being the layer calls N x H x (L + 1); else num_hidden_layers.
void parse_layers(const ConfigFields& f, ModelConfig& c) {
  const int64_t hidden_layers = f.integer("num_hidden_layers", kLayers);
  const char* key = f.has("num_layers_per_stack") ? "num_layers_per_stack" : "num_hidden_layers";
  c.num_hidden_layers = f.has("num_layers_per_stack") ? f.integer(key) : hidden_layers;
  // Named by the key the count came from (validate() would name num_layers_per_stack).
  if (c.num_hidden_layers <= 0) {
    f.fail(key, "must be a positive integer, got " + std::to_string(c.num_hidden_layers));
  }
  if (!f.has("num_layers_per_stack")) return;
  int64_t calls = 0;
  const bool fits = c.h_cycles > 0 && c.l_cycles > 0 &&
                    mul_into(c.num_hidden_layers, c.h_cycles, calls) &&
                    mul_into(calls, c.l_cycles + 1, calls);
  if (f.has("num_hidden_layers") && fits && calls != hidden_layers) {
    f.fail("num_hidden_layers",
           std::to_string(hidden_layers) + " beside num_layers_per_stack " +
               std::to_string(c.num_hidden_layers) +
               ": HrmTextConfig saves num_layers_per_stack "
               "x H_cycles x (L_cycles + 1) = " +
               std::to_string(calls) +
               " there (one cache slot per layer call); expected that, or no "
               "num_layers_per_stack (num_hidden_layers is then the per-stack count)");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", kVocab);
  c.hidden_size = f.integer("hidden_size", kHidden);
  c.intermediate_size = f.integer("intermediate_size", kIntermediate);
  c.num_attention_heads = f.integer("num_attention_heads", kHeads);
  // HrmTextConfig.validate_architecture, whatever head_dim is.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads",
           std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
               std::to_string(c.hidden_size) +
               " (HrmTextConfig.validate_architecture refuses it, head_dim apart)");
  }
  // Multi-head: HrmTextAttention gives k and v every head (num_key_value_groups 1).
  c.num_key_value_heads = c.num_attention_heads;
  if (f.has("num_key_value_heads") && f.integer("num_key_value_heads") != c.num_attention_heads) {
    f.fail("num_key_value_heads",
           std::to_string(f.integer("num_key_value_heads")) +
               ": HrmTextAttention is multi-head (k_proj and v_proj of num_attention_heads x "
               "head_dim) whatever it says; expected " +
               std::to_string(c.num_attention_heads) + " or no key");
  }
  if (f.is_null("head_dim")) {
    f.fail("head_dim", "is null; expected a width (HrmTextConfig's head_dim is an int, 128)");
  }
  c.head_dim = f.integer("head_dim", kHeadDim);
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.hidden_act = f.string("hidden_act", "silu");
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);  // and gate_proj's
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  parse_rope(f, c);
  parse_cycles(f, c);
  parse_layers(f, c);
  // embedding_scale: 1 / initializer_range when absent or null (HrmTextConfig.__post_init__);
  // initializer_range is interval(0, 1) in the class.
  const double range = f.number("initializer_range", 0.02);
  if (!(range >= 0 && range <= 1)) {
    f.fail("initializer_range", nlohmann::json(range).dump() +
                                    ", expected a standard deviation in [0, 1] (HrmTextConfig's "
                                    "interval)");
  }
  if (f.has("embedding_scale")) {
    c.embedding_multiplier = f.number("embedding_scale", 1.0);
  } else if (range > 0) {
    c.embedding_multiplier = 1.0 / range;
  } else {
    f.fail("embedding_scale",
           "is not set and initializer_range is 0: HrmTextConfig divides 1 by it; expected an "
           "embedding_scale");
  }
  // FlashAttention cannot take the prefix-LM mask: transformers refuses the pair.
  const bool prefix_lm = f.boolean("prefix_lm", true);
  for (const char* key : {"attn_implementation", "_attn_implementation"}) {
    if (prefix_lm && f.has(key) && flash_attention(f.string(key, ""))) {
      f.fail(key, "'" + f.string(key, "") +
                      "' with prefix_lm true: transformers refuses FlashAttention for the "
                      "prefix-LM mask; expected \"sdpa\", \"flex_attention\" or \"eager\", or "
                      "prefix_lm false");
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  // The saved pair (Config above): the layer calls, and the per-stack count.
  j["num_hidden_layers"] = c.num_hidden_layers * c.h_cycles * (c.l_cycles + 1);
  j["num_layers_per_stack"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["attention_dropout"] = c.attention_dropout;
  j["H_cycles"] = c.h_cycles;
  j["L_cycles"] = c.l_cycles;
  j["L_bp_cycles"] = c.l_bp_cycles;
  j["embedding_scale"] = c.embedding_multiplier;
  // A FlashAttention implementation was accepted with prefix_lm false only.
  if (flash_attention(c.attn_implementation)) j["prefix_lm"] = false;
}

// HrmTextRMSNorm: x * rsqrt(mean(x^2) + eps) over h, no weight, on x.float() cast back (one traced
// rms_norm, as nanochat's; the casts add no FLOP of note).
class Norm : public Module {
 public:
  Norm(int64_t dim, double eps) : Module(std::string(kPrefix) + "RMSNorm"), dim_(dim), eps_(eps) {}
  Tensor forward(const Tensor& x) override { return rms_norm(x, {dim_}, Tensor(), eps_); }

 private:
  int64_t dim_;
  double eps_;
};

// HrmTextAttention: q, k, v, o and the output gate, in transformers' registration and op order
// (the four input projections, RoPE on q and k, attention, the gate's sigmoid, o_proj).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size, q = heads_ * head_dim_;
    q_proj_ = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj_ = register_module("k_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    v_proj_ = register_module("v_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    o_proj_ = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    gate_proj_ = register_module("gate_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor q = models::split_heads(q_proj_->call(x), heads_, head_dim_);
    Tensor k = models::split_heads(k_proj_->call(x), heads_, head_dim_);
    const Tensor v = models::split_heads(v_proj_->call(x), heads_, head_dim_);
    const Tensor gate = gate_proj_->call(x);
    q = models::apply_rotary(q, cos_t, sin_t);
    k = models::apply_rotary(k, cos_t, sin_t);
    // Causal: without token_type_ids the prefix-LM mask is the causal one, and with them the
    // fused kernel's counted work is the same full product (docs/models.md, leave-outs).
    const Tensor out = models::merge_heads(
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true));
    const Tensor gate_open = sigmoid(gate);
    return o_proj_->call(mul(gate_open, out));
  }

 private:
  int64_t heads_, head_dim_;
  double dropout_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_, gate_proj_;
};

// HrmTextDecoderLayer: self_attn, mlp, input_layernorm, post_attention_layernorm (registration
// order); x + attn(norm(x)), then + mlp(norm(.)). Empty until build() (Note [Filling repeated
// blocks after registration], blocks.h).
class Layer : public Module {
 public:
  Layer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    attn_ = register_module("self_attn", std::make_shared<Attention>(c, o, training));
    mlp_ = register_module("mlp", std::make_shared<models::GatedMlp>(
                                      std::string(kPrefix) + "MLP", c.hidden_size,
                                      c.intermediate_size, c.mlp_bias, c.hidden_act, o));
    norm1_ = register_module("input_layernorm", std::make_shared<Norm>(c.hidden_size, c.norm_eps));
    norm2_ = register_module("post_attention_layernorm",
                             std::make_shared<Norm>(c.hidden_size, c.norm_eps));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = add(x, attn_->run(norm1_->call(x), cos_t, sin_t));
    return add(a, mlp_->call(norm2_->call(a)));
  }

 private:
  std::shared_ptr<Attention> attn_;
  ModulePtr mlp_, norm1_, norm2_;
};

// HrmTextStack (L_module, H_module): layers, final_norm; the layers in turn, then the norm.
class Stack : public Module {
 public:
  Stack() : Module(std::string(kPrefix) + "Stack") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<Layer>()));
    }
    norm_ = register_module("final_norm", std::make_shared<Norm>(c.hidden_size, c.norm_eps));
    for (const auto& layer : layers_) layer->build(c, o, training);
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor h = x;
    for (const auto& layer : layers_) h = layer->run(h, cos_t, sin_t);
    return norm_->call(h);
  }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
  ModulePtr norm_;
};

// HrmTextModel: embed_tokens, rotary_emb (over all of head_dim), L_module, H_module, and its own
// frozen parameter z_L_init [h]; forward runs the cycles (Note [Layers run in cycles]).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    config_ = c;
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    rotary_ = register_module(
        "rotary_emb", std::make_shared<models::RotaryEmbedding>(
                          std::string(kPrefix) + "RotaryEmbedding", c.head_dim, c.rope_theta));
    low_ = register_module("L_module", std::make_shared<Stack>());
    high_ = register_module("H_module", std::make_shared<Stack>());
    // nn.Parameter(requires_grad=False): transformers counts it, no optimizer updates it.
    register_parameter("z_L_init", empty({c.hidden_size}, o)).set_requires_grad(false);
    low_->build(c, o, training);
    high_->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    // The embeddings times embedding_scale, always (HrmTextModel.forward).
    Tensor z_h = mul(embed_->call(ids), config_.embedding_multiplier);
    Tensor cos_h, sin_h, z_l;
    {
      // HrmTextRotaryEmbedding.forward runs under @torch.no_grad(), and z_L_init requires no
      // grad: no graph either way (Note [No-grad regions] in tensor/trace.h).
      const NoGradGuard no_grad;
      const auto [cos_t, sin_t] = rotary_->cos_sin(models::position_ids(ids.size(1)), z_h.dtype());
      cos_h = models::per_head(cos_t);
      sin_h = models::per_head(sin_t);
      z_l = contiguous(expand(parameter("z_L_init"), z_h.sizes()));
    }
    for (int64_t i = 0; i < config_.h_cycles; ++i) {
      // The low-level passes before the last l_grad_cycles run under torch.no_grad(): their
      // forward only, keeping nothing (the sum z_L + z_H inside the region too).
      const int64_t graph_from = config_.l_cycles - l_grad_cycles(config_, i);
      for (int64_t l = 0; l < config_.l_cycles; ++l) {
        std::optional<NoGradGuard> no_grad;
        if (l < graph_from) no_grad.emplace();
        z_l = low_->run(add(z_l, z_h), cos_h, sin_h);
      }
      z_h = high_->run(add(z_h, z_l), cos_h, sin_h);
    }
    return z_h;
  }

 private:
  ModelConfig config_;
  ModulePtr embed_;
  std::shared_ptr<models::RotaryEmbedding> rotary_;
  std::shared_ptr<Stack> low_, high_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"num_hidden_layers", "num_layers_per_stack"},
                                    {"norm_eps", "rms_norm_eps"},
                                    {"qkv_bias", "attention_bias"},
                                    {"o_bias", "attention_bias"},
                                    {"embedding_multiplier", "embedding_scale"},
                                    {"h_cycles", "H_cycles"},
                                    {"l_cycles", "L_cycles"},
                                    {"l_bp_cycles", "L_bp_cycles"}};

// HrmTextConfig.base_model_tp_plan in Megatron-LM's split (Shoeybi et al. 2019, §3), in both
// stacks: q, k, v and the output gate column-parallel (each rank the same heads of all four: the
// gate's channels are [head, d] as q's, so its column shard multiplies the rank's heads of the
// attention output), o_proj row-parallel over those heads; the MLP's gate and up projections
// column-parallel, down_proj row-parallel. The embedding by vocabulary rows and lm_head by
// vocabulary, as every family; z_L_init and the weightless norms replicated.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.L_module.layers.*.self_attn.q_proj", "colwise"},
    {"model.L_module.layers.*.self_attn.k_proj", "colwise"},
    {"model.L_module.layers.*.self_attn.v_proj", "colwise"},
    {"model.L_module.layers.*.self_attn.gate_proj", "colwise"},
    {"model.L_module.layers.*.self_attn.o_proj", "rowwise"},
    {"model.L_module.layers.*.mlp.gate_proj", "colwise"},
    {"model.L_module.layers.*.mlp.up_proj", "colwise"},
    {"model.L_module.layers.*.mlp.down_proj", "rowwise"},
    {"model.H_module.layers.*.self_attn.q_proj", "colwise"},
    {"model.H_module.layers.*.self_attn.k_proj", "colwise"},
    {"model.H_module.layers.*.self_attn.v_proj", "colwise"},
    {"model.H_module.layers.*.self_attn.gate_proj", "colwise"},
    {"model.H_module.layers.*.self_attn.o_proj", "rowwise"},
    {"model.H_module.layers.*.mlp.gate_proj", "colwise"},
    {"model.H_module.layers.*.mlp.up_proj", "colwise"},
    {"model.H_module.layers.*.mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// HrmTextPreTrainedModel._init_weights: PreTrainedModel's (Linear weights normal(0,
// initializer_range), biases zero, the embedding normal with the pad_token_id row zero; the norms
// have no weight), then z_L_init zeros.
constexpr InitRule kInitRules[] = {{"HrmTextModel", "z_L_init", InitFill::kZeros},
                                   {"Linear", "weight", InitFill::kNormal},
                                   {"Linear", "bias", InitFill::kZeros},
                                   {"Embedding", "weight", InitFill::kNormalPaddingRowZero}};

}  // namespace

const ModelFamily kHrmTextFamily{
    .model_type = "hrm_text",
    .hf_class_prefix = "HrmText",
    .layers_path = "model.L_module.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = true,
    .rope_parameters_by_layer_type = true,  // parse_rope reads it, then checks the factor
    .paired_layers_path = "model.H_module.layers",
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
