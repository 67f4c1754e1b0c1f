// jamba (AI21's Jamba: Jamba-v0.1, Jamba 1.5 Mini and Large, Jamba 1.6 and 1.7). transformers 5's
// JambaConfig and modeling_jamba.py: JambaForCausalLM's `model` holds embed_tokens (padding_idx
// pad_token_id, default 0), `layers` and final_layernorm, then lm_head (untied by default). Layer
// i attends when i % attn_layer_period == attn_layer_offset (JambaAttentionDecoderLayer:
// `self_attn`, q/k/v/o without biases and without any position encoding) and runs a Mamba-1
// mixer otherwise (JambaMambaDecoderLayer: `mamba`, tensor/models/mamba_mixer.h, with the
// dt/B/C RMSNorms). Its feed-forward, `feed_forward`, is routed experts when i %
// expert_layer_period == expert_layer_offset and num_experts > 1 (JambaSparseMoeBlock: `router`
// [E, h], then `experts` gate_up_proj [E, 2 F, h] and down_proj [E, h, F]; a softmax over the
// experts and its top k, not renormalized), a gated MLP otherwise (JambaMLP: gate_proj, up_proj
// [F, h], down_proj [h, F]). Each layer registers its mixer, `feed_forward`, `input_layernorm`
// and `pre_ff_layernorm`, and runs h = x + mixer(input_layernorm(x)), h +
// feed_forward(pre_ff_layernorm(h)). ModelConfig keeps the layers' mixers in layer_types (kFull,
// kLinear), the dense layers of an MoE stack in dense_layers, and the mixer in linear_* and
// linear_dt_rank (model_config.h). Class defaults: vocabulary 65,536, h 4,096, F 14,336, 32
// layers, 32 heads and 8 kv heads, rms_norm_eps 1e-6, 262,144 positions, 16 experts (top 2),
// mamba_d_state 16, mamba_d_conv 4, mamba_expand 2, mamba_dt_rank "auto" (ceil(h / 16)).
#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/mamba_mixer.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kJambaFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "Jamba";

// A (period, offset) pair of JambaConfig: layer i is chosen when i % period == offset, and
// validate_architecture requires offset < period (a negative offset, which chooses nothing, is
// refused as no file's).
std::pair<int64_t, int64_t> read_period(const ConfigFields& f, const char* period_key,
                                        const char* offset_key, int64_t period, int64_t offset) {
  const int64_t p = f.integer(period_key, period), o = f.integer(offset_key, offset);
  if (p <= 0) f.fail(period_key, "must be positive, got " + std::to_string(p));
  if (o < 0 || o >= p) {
    f.fail(offset_key, std::to_string(o) + ", expected 0 <= " + offset_key + " < " + period_key +
                           " = " + std::to_string(p));
  }
  return {p, o};
}

// The smallest (period, offset) choosing exactly the layers `chosen` says, offset < period as
// JambaConfig requires; no layer chosen: period layers + 1 and offset layers. nullopt when no
// period states them (a stack built in code).
std::optional<std::pair<int64_t, int64_t>> period_of(int64_t layers,
                                                     const std::function<bool(int64_t)>& chosen) {
  int64_t first = 0;
  while (first < layers && !chosen(first)) ++first;
  if (first == layers) return std::make_pair(layers + 1, layers);
  for (int64_t p = first + 1; p <= layers; ++p) {
    bool fits = true;
    for (int64_t i = 0; i < layers && fits; ++i) fits = chosen(i) == (i % p == first);
    if (fits) return std::make_pair(p, first);
  }
  return std::nullopt;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 65536);
  c.hidden_size = f.integer("hidden_size", 4096);
  c.intermediate_size = f.integer("intermediate_size", 14336);
  c.num_hidden_layers = f.integer("num_hidden_layers", 32);
  // Bounded before the per-layer lists are made (validate() would refuse it only afterwards).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  c.num_attention_heads = f.integer("num_attention_heads", 32);
  // JambaConfig.__post_init__: a null num_key_value_heads is the heads (multi-head attention).
  c.num_key_value_heads = f.is_null("num_key_value_heads") ? c.num_attention_heads
                                                           : f.integer("num_key_value_heads", 8);
  // JambaAttention takes config.head_dim when the file sets one (kept as an attribute), else
  // hidden_size / heads.
  if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim");
  } else {
    head_dim_from_hidden(f, c, "num_attention_heads", "hidden_size", " (and no head_dim is given)");
  }
  c.max_position_embeddings = f.integer("max_position_embeddings", 262144);
  c.hidden_act = f.string("hidden_act", "silu");
  // The Mamba layers' convolution runs it too, and causal-conv1d's kernel takes SiLU only.
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    f.fail("hidden_act", "'" + c.hidden_act +
                             "' is not built; expected \"silu\" (the Mamba layers' causal_conv1d "
                             "kernel applies it after the convolution)");
  }
  c.hidden_act = "silu";  // ACT2FN's "swish" is SiLU
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  models::pad_token_id_or(f, c, 0);
  // transformers 5's JambaAttention takes no window (the key of older files changes nothing), and
  // the kernel switches pick implementations of the same work.
  (void)f.has("sliding_window");
  for (const char* key : {"use_mamba_kernels", "use_mambapy", "use_associative_scan"}) {
    (void)f.boolean(key, key != std::string_view("use_mambapy"));
  }

  // The Mamba-1 mixer: d_inner = mamba_expand x hidden_size channels, one group of B and C.
  const int64_t expand = f.integer("mamba_expand", 2);
  int64_t inner = 0;
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("mamba_expand",
           std::to_string(expand) + " must be positive, with mamba_expand x hidden_size in int64");
  }
  int64_t rank = c.hidden_size / 16 + (c.hidden_size % 16 != 0 ? 1 : 0);  // "auto": ceil(h / 16)
  if (f.has("mamba_dt_rank")) {
    const nlohmann::json& v = f.raw("mamba_dt_rank");
    if (v.is_string() && v.get<std::string>() != "auto") {
      f.fail("mamba_dt_rank", v.dump().substr(0, 40) +
                                  " is not a rank; expected a positive integer or \"auto\" "
                                  "(ceil(hidden_size / 16))");
    }
    if (!v.is_string()) rank = f.integer("mamba_dt_rank");
    if (rank <= 0) f.fail("mamba_dt_rank", "must be positive, got " + std::to_string(rank));
  }
  c.linear_num_value_heads = inner;
  c.linear_value_head_dim = 1;
  c.linear_num_key_heads = 1;
  c.linear_key_head_dim = f.integer("mamba_d_state", 16);
  c.linear_conv_kernel_dim = f.integer("mamba_d_conv", 4);
  c.linear_conv_bias = f.boolean("mamba_conv_bias", true);
  c.linear_proj_bias = f.boolean("mamba_proj_bias", false);
  c.linear_dt_rank = rank;

  // Which layers attend and which route to experts.
  const auto [attn_period, attn_offset] =
      read_period(f, "attn_layer_period", "attn_layer_offset", 8, 4);
  const auto [expert_period, expert_offset] =
      read_period(f, "expert_layer_period", "expert_layer_offset", 2, 1);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back(i % attn_period == attn_offset ? AttentionType::kFull
                                                           : AttentionType::kLinear);
  }
  // JambaConfig's attribute_map: a num_local_experts key sets num_experts, and wins over it (set
  // after the fields).
  const char* experts_key = f.has("num_local_experts") ? "num_local_experts" : "num_experts";
  const int64_t experts = f.integer(experts_key, 16);
  (void)f.has("num_experts");
  const int64_t top_k = f.integer("num_experts_per_tok", 2);
  if (experts <= 0) {
    f.fail(experts_key,
           "must be positive (1: a dense MLP in every layer), got " + std::to_string(experts));
  }
  // One expert is no MoE: JambaSparseMoeBlock only where a layer has more (layers_num_experts).
  if (experts > 1) {
    c.num_local_experts = experts;
    c.num_experts_per_tok = top_k;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (i % expert_period != expert_offset) c.dense_layers.push_back(i);
    }
  }
}

// What parse guarantees, checked again for a config built in code (the planner copies configs and
// cuts their layers; a field set by hand could ask for a layer JambaConfig cannot describe).
void check_layout(const ModelConfig& c) {
  for (const AttentionType t : c.layer_types) {
    SP_CHECK(t == AttentionType::kFull || t == AttentionType::kLinear, "jamba: a layer attends ",
             to_string(t), "; expected full_attention or a Mamba layer (linear_attention)");
  }
  SP_CHECK(c.shared_expert_intermediate_size == 0 &&
               (c.dense_intermediate_size == 0 || c.dense_intermediate_size == c.intermediate_size),
           "jamba: a shared expert of ", c.shared_expert_intermediate_size,
           " or dense layers of width ", c.dense_intermediate_size,
           "; expected none (Jamba's MLPs and experts are intermediate_size wide)");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  check_layout(c);
  const int64_t layers = c.num_hidden_layers, h = c.hidden_size;
  j["hidden_size"] = h;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  // JambaConfig has no head_dim field: written only where it is not hidden_size / heads.
  if (c.num_attention_heads <= 0 || c.head_dim * c.num_attention_heads != h) {
    j["head_dim"] = c.head_dim;
  }
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  const int64_t channels = c.linear_num_value_heads * c.linear_value_head_dim;
  SP_CHECK(h > 0 && channels % h == 0 && channels > 0, "jamba: ", channels,
           " Mamba channels are not mamba_expand x hidden_size ", h,
           ", which JambaConfig cannot state");
  j["mamba_expand"] = channels / h;
  j["mamba_d_state"] = c.linear_key_head_dim;
  j["mamba_d_conv"] = c.linear_conv_kernel_dim;
  j["mamba_dt_rank"] = c.linear_dt_rank;
  j["mamba_conv_bias"] = c.linear_conv_bias;
  j["mamba_proj_bias"] = c.linear_proj_bias;
  const auto attends = [&c](int64_t i) {
    return c.layer_types.empty() || c.layer_types[static_cast<size_t>(i)] == AttentionType::kFull;
  };
  const auto attention = period_of(layers, attends);
  SP_CHECK(attention.has_value(),
           "jamba: the attention layers are not one period and offset "
           "apart, which JambaConfig (attn_layer_period) cannot state");
  j["attn_layer_period"] = attention->first;
  j["attn_layer_offset"] = attention->second;
  if (c.num_local_experts == 0) {
    j["num_experts"] = 1;  // a dense MLP in every layer
    return;
  }
  const auto routes = [&c](int64_t i) {
    return !std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), i);
  };
  const auto experts = period_of(layers, routes);
  SP_CHECK(experts.has_value(),
           "jamba: the MoE layers are not one period and offset apart, which "
           "JambaConfig (expert_layer_period) cannot state");
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["expert_layer_period"] = experts->first;
  j["expert_layer_offset"] = experts->second;
}

// JambaSparseMoeBlock (Note [Expected-load MoE] in models.h): the router, then the experts. The
// routing weights are the top k of a softmax over every expert, in float32, not renormalized.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "SparseMoeBlock"), top_k_(c.num_experts_per_tok) {
    register_module("router",
                    std::make_shared<Linear>(c.hidden_size, c.num_local_experts, false, o));
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
    const Tensor probs = softmax(child("router")->call(flat), 1, DType::kFloat32);
    // narrow stands in for topk's values; cast back to the tokens' dtype as transformers does.
    const Tensor weights = to(narrow(probs, 1, 0, top_k_), x.dtype());
    return view(models::expected_load_experts(*experts_, flat, weights), {b, s, h});
  }

 private:
  int64_t top_k_;
  std::shared_ptr<GroupedExperts> experts_;
};

// JambaAttentionDecoderLayer or JambaMambaDecoderLayer, empty until build() (Note [Filling
// repeated blocks after registration] in blocks.h).
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(bool mamba)
      : Module(std::string(kPrefix) + (mamba ? "MambaDecoderLayer" : "AttentionDecoderLayer")),
        mamba_(mamba) {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    if (mamba_) {
      mixer_ =
          register_module("mamba", models::make_mamba_mixer(c, std::string(kPrefix) + "MambaMixer",
                                                            o, {.bcdt_norms = true}));
    } else {
      LayerKind nope = kind;  // the family has no position encoding at all
      nope.rope = false;
      mixer_ = register_module(
          "self_attn",
          models::make_rotary_attention(c, nope, {.prefix = kPrefix}, kPrefix, o, training));
    }
    if (kind.ffn == FfnKind::kMoe) {
      ffn_ = register_module("feed_forward", std::make_shared<SparseMoe>(c, o));
    } else {
      ffn_ = register_module("feed_forward", std::make_shared<models::GatedMlp>(
                                                 std::string(kPrefix) + "MLP", c.hidden_size,
                                                 c.intermediate_size, false, c.hidden_act, o));
    }
    auto norm = [&] {
      return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
    };
    input_norm_ = register_module("input_layernorm", norm());
    pre_ff_norm_ = register_module("pre_ff_layernorm", norm());
  }
  Tensor run(const Tensor& x) {
    CallScope scope(*this);
    const Tensor h = add(x, mixer_->run(input_norm_->call(x), Tensor(), Tensor()));
    return add(h, ffn_->call(pre_ff_norm_->call(h)));
  }

 private:
  bool mamba_;
  std::shared_ptr<models::AttentionBlock> mixer_;
  ModulePtr ffn_, input_norm_, pre_ff_norm_;
};

// JambaModel: embed_tokens, layers, final_layernorm.
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_tokens_ = register_module("embed_tokens",
                                    std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(
          std::make_shared<DecoderLayer>(layer_kind(c, i).attention == AttentionType::kLinear)));
    }
    final_norm_ =
        register_module("final_layernorm",
                        std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens_->call(ids);
    for (const auto& layer : layers_) h = layer->run(h);
    return final_norm_->call(h);
  }

 private:
  ModulePtr embed_tokens_, final_norm_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"num_local_experts", "num_experts"},
                                    {"layer_types", "attn_layer_period"},
                                    {"dense_layers", "expert_layer_period"},
                                    {"linear_num_value_heads", "mamba_expand"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"},
                                    {"linear_dt_rank", "mamba_dt_rank"}};

// Megatron-LM's split of the attention (q, k, v column-parallel, o row-parallel), the MLP (gate and
// up column-parallel, down row-parallel) and the experts (style "experts": each expert split as a
// gated MLP, or whole experts by expert parallelism); the router and the norms replicated. The
// Mamba-1 mixer as vLLM's MambaMixer splits it (Note [Mamba-1 trace] in mamba_mixer.h): in_proj
// column-parallel over its two halves [x; z] (fused_parts 2: each rank the same channels of x and
// of the gate), x_proj row-parallel (dt, B and C summed over the ranks' channels), dt_proj
// column-parallel (its bias with its rows) and out_proj row-parallel; the convolution, A_log and D
// follow the sharded channels (held whole here, as bamba's).
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.q_proj", "colwise"},
                                          {"model.layers.*.self_attn.k_proj", "colwise"},
                                          {"model.layers.*.self_attn.v_proj", "colwise"},
                                          {"model.layers.*.self_attn.o_proj", "rowwise"},
                                          {"model.layers.*.mamba.in_proj", "colwise", 2},
                                          {"model.layers.*.mamba.x_proj", "rowwise"},
                                          {"model.layers.*.mamba.dt_proj", "colwise"},
                                          {"model.layers.*.mamba.out_proj", "rowwise"},
                                          {"model.layers.*.feed_forward.gate_proj", "colwise"},
                                          {"model.layers.*.feed_forward.up_proj", "colwise"},
                                          {"model.layers.*.feed_forward.down_proj", "rowwise"},
                                          {"model.layers.*.feed_forward.experts", "experts"},
                                          {"lm_head", "colwise"}};

// JambaPreTrainedModel._init_weights: PreTrainedModel's (Linear and nn.Conv1d weights normal,
// biases zero, so dt_proj's bias too; the embedding normal with its padding row zero; the RMSNorms
// one), the experts' gate_up_proj and down_proj normal, and in each mixer A_log = log(1 .. N) along
// every channel's row and D one.
constexpr InitRule kMambaInitRules[] = {{"*", "mamba.A_log", InitFill::kLogArangePerRow},
                                        {"*", "mamba.D", InitFill::kOnes},
                                        {"Conv1d", "weight", InitFill::kNormal},
                                        {"Conv1d", "bias", InitFill::kZeros}};
constexpr auto kInitRules =
    models::concat_init_rules(kMambaInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kJambaFamily{
    .model_type = "jamba",
    .hf_class_prefix = "Jamba",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .experts_class = "JambaExperts",
    .linear_attention = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
