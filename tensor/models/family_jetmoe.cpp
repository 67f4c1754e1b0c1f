// jetmoe (JetMoE-8B: jetmoe/jetmoe-8b, "8B parameters in total, 2.2B active"): transformers 5's
// JetMoeConfig and modeling_jetmoe.py. Each layer holds two sparse layers (Shen et al. 2024,
// "JetMoE: Reaching Llama2 Performance with 0.1M Dollars", §2, after ModuleFormer): a mixture of
// attention heads (MoA) whose query and output projections are experts a top-k router picks per
// token, the keys and values one projection all experts share, and a mixture of MLP experts.
// h hidden_size, E num_local_experts, k num_experts_per_tok, K num_key_value_heads of d
// kv_channels (D = K d), F intermediate_size, V vocab_size; in named_parameters order:
//   model.embed_tokens.weight                                  [V, h]  (padding_idx pad_token_id)
//   model.layers.N.mlp.bias                                    [h]      after the experts' sum
//   model.layers.N.mlp.input_linear.weight                     [E, 2F, h]  [gate; up] per expert
//   model.layers.N.mlp.output_linear.weight                    [E, h, F]
//   model.layers.N.mlp.router.layer.weight                     [E, h]
//   model.layers.N.input_layernorm.weight                      [h]
//   model.layers.N.post_attention_layernorm.weight             [h]
//   model.layers.N.self_attention.experts.bias                 [h]      after the experts' sum
//   model.layers.N.self_attention.experts.input_linear.weight  [E, D, h]   the queries
//   model.layers.N.self_attention.experts.output_linear.weight [E, h, D]
//   model.layers.N.self_attention.experts.router.layer.weight  [E, h]
//   model.layers.N.self_attention.kv_proj.weight               [2 D, h]    [k; v]
//   model.norm.weight [h]; lm_head.weight [V, h], tied by default (JetMoeConfig)
// The decoder layer registers mlp, the two norms, then self_attention; both blocks' `bias` is a
// parameter of the block itself, so it comes before the block's children. A token's k attention
// experts each make K query heads: the attention runs k K heads (JetMoeConfig.__post_init__ sets
// num_attention_heads = K k) against the K key and value heads repeated k times in turn (query
// head j K + i reads key head i: Tensor.repeat, not grouped-query attention's interleaving), RoPE
// on every channel of q and k. Each slot's output passes through its expert's output projection,
// weighted by the router's gate, the k summed, plus the bias. A router takes its logits in
// float32, the top k of them and their softmax (no softmax over all E). The layers' two norms are
// JetMoeRMSNorm at its default eps 1e-6; only the final norm takes rms_norm_eps.
// Both sets of experts are transformers' JetMoeParallelExperts, one module per projection:
// GroupedExperts projections (tensor/layers.h), traced at their expected load (Note [Expected-load
// MoE] in models.h), so the planner sees each token's k experts' work, splits them by expert
// parallelism and, with the style "experts", by tensor parallelism (Note [JetMoE tensor
// parallelism] below).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/checked.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kJetMoeFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kFamily = "JetMoe";
// JetMoeRMSNorm's default eps: JetMoeDecoderLayer builds input_layernorm and
// post_attention_layernorm without passing rms_norm_eps.
constexpr double kLayerNormEps = 1e-6;
// The parameter count shardplan counts exactly (validate()'s bound), here for the attention
// experts, which validate()'s attention term (4 h x heads x head_dim) does not bound by E.
constexpr double kMaxCount = 1e18;
using Projection = GroupedExperts::Projection;

// ---- modules ---------------------------------------------------------------------------------

// JetMoeTopKGating: the Linear `layer` [E, h] on every token; its logits cast to float32, the top
// k (narrow stands in for topk's values, Note [Expected-load MoE]) and their softmax, cast back.
// The routing bookkeeping (expert sizes, sort, gathered gates) is integer work, not traced.
class TopKGating : public Module {
 public:
  TopKGating(const ModelConfig& c, const TensorOptions& o)
      : Module("JetMoeTopKGating"), top_k_(c.num_experts_per_tok) {
    register_module("layer",
                    std::make_shared<Linear>(c.hidden_size, c.num_local_experts, false, o));
  }
  // flat [T, h] -> the gates of each token's top k [T, k], in flat's dtype.
  Tensor forward(const Tensor& flat) override {
    const Tensor logits = to(child("layer")->call(flat), DType::kFloat32);
    return to(softmax(narrow(logits, 1, 0, top_k_), 1), flat.dtype());
  }

 private:
  int64_t top_k_;
};

// Note [Expected-load MoE] in models.h: `rows` [R, w] routed to `experts` experts k times a token
// (`picks` = tokens x k assignments), each expert on ceil(picks / E) of them: the permuted copy
// the grouped GEMM reads (transformers' layer_input[batch_index] gather), [E, n, w].
Tensor dispatch(const Tensor& rows, int64_t picks, int64_t experts) {
  const int64_t per_expert = (picks + experts - 1) / experts;
  return contiguous(
      expand(unsqueeze(narrow(rows, 0, 0, per_expert), 0), {experts, per_expert, rows.size(1)}));
}

// The experts' outputs [E, n, w] back as the tokens' k picks [T, k, w] (the un-permuting
// index_add, a view of the expected-load rows).
Tensor picks_of(const Tensor& out, int64_t tokens, int64_t top_k) {
  const int64_t w = out.size(2);
  return view(narrow(reshape(out, {out.size(0) * out.size(1), w}), 0, 0, tokens * top_k),
              {tokens, top_k, w});
}

// JetMoeMoE: the routed MLP experts, act(gate) * up from one input_linear, then output_linear;
// the k outputs weighted by their gates and summed, plus `bias`.
class Moe : public Module {
 public:
  Moe(const ModelConfig& c, const TensorOptions& o)
      : Module("JetMoeMoE"),
        experts_(c.num_local_experts),
        top_k_(c.num_experts_per_tok),
        width_(c.intermediate_size),
        act_(c.hidden_act) {
    register_parameter("bias", empty({c.hidden_size}, o));
    const int64_t h = c.hidden_size;
    input_linear = register_module(
        "input_linear", std::make_shared<GroupedExperts>("JetMoeParallelExperts", experts_, h,
                                                         2 * width_, Projection::kFirst, 2, o));
    output_linear = register_module(
        "output_linear", std::make_shared<GroupedExperts>("JetMoeParallelExperts", experts_, width_,
                                                          h, Projection::kSecond, 1, o));
    router = register_module("router", std::make_shared<TopKGating>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    const Tensor gates = router->call(flat);
    // [E, n, 2F]: chunk(2) gives the gate, then the up projection.
    const Tensor gate_up = input_linear->call(dispatch(flat, tokens * top_k_, experts_));
    const Tensor gate = models::activation(act_, narrow(gate_up, 2, 0, width_));
    const Tensor act = mul(gate, narrow(gate_up, 2, width_, width_));
    const Tensor out = picks_of(output_linear->call(act), tokens, top_k_);
    const Tensor y = sum(mul(out, unsqueeze(gates, -1)), {1});
    return add(view(y, {b, s, h}), parameter("bias"));
  }
  std::shared_ptr<GroupedExperts> input_linear, output_linear;
  std::shared_ptr<TopKGating> router;

 private:
  int64_t experts_, top_k_, width_;
  std::string act_;
};

// JetMoeMoA: the attention experts. transformers calls map() and reduce(), never forward: map
// routes the tokens and makes each pick's query, reduce projects each pick's attention output
// back, weighted by its gate, the k summed, plus `bias`.
class Moa : public Module {
 public:
  Moa(const ModelConfig& c, const TensorOptions& o)
      : Module("JetMoeMoA"),
        experts_(c.num_local_experts),
        top_k_(c.num_experts_per_tok),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim) {
    const int64_t h = c.hidden_size, width = kv_heads_ * head_dim_;
    register_parameter("bias", empty({h}, o));
    input_linear = register_module(
        "input_linear", std::make_shared<GroupedExperts>("JetMoeParallelExperts", experts_, h,
                                                         width, Projection::kFirst, 1, o));
    output_linear = register_module(
        "output_linear", std::make_shared<GroupedExperts>("JetMoeParallelExperts", experts_, width,
                                                          h, Projection::kSecond, 1, o));
    router = register_module("router", std::make_shared<TopKGating>(c, o));
  }
  // x [B, S, h] -> {the queries [B, k K, S, d] (pick j's heads j K .. j K + K - 1), the gates}.
  std::pair<Tensor, Tensor> map(const Tensor& x) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, x.size(2)});
    const Tensor gates = router->call(flat);
    const Tensor q = input_linear->call(dispatch(flat, tokens * top_k_, experts_));  // [E, n, D]
    const Tensor picks = picks_of(q, tokens, top_k_);                                // [T, k, D]
    return {transpose(view(picks, {b, s, top_k_ * kv_heads_, head_dim_}), 1, 2), gates};
  }
  // out [B, S, k D] (the attention's heads merged) -> [B, S, h].
  Tensor reduce(const Tensor& out, const Tensor& gates) {
    CallScope scope(*this);
    const int64_t b = out.size(0), s = out.size(1), tokens = b * s;
    const Tensor rows = view(out, {tokens * top_k_, kv_heads_ * head_dim_});
    const Tensor y = picks_of(output_linear->call(dispatch(rows, tokens * top_k_, experts_)),
                              tokens, top_k_);  // [T, k, h]
    const Tensor summed = sum(mul(y, unsqueeze(gates, -1)), {1});
    return add(view(summed, {b, s, summed.size(1)}), parameter("bias"));
  }
  std::shared_ptr<GroupedExperts> input_linear, output_linear;
  std::shared_ptr<TopKGating> router;

 private:
  int64_t experts_, top_k_, kv_heads_, head_dim_;
};

// [B, K, S, d] -> [B, k K, S, d], the heads repeated k times in turn: Tensor.repeat(1, k, 1, 1),
// a copy (the expanded view cannot be flattened without one).
Tensor repeat_heads(const Tensor& t, int64_t times) {
  const int64_t b = t.size(0), heads = t.size(1), s = t.size(2), d = t.size(3);
  return reshape(expand(unsqueeze(t, 1), {b, times, heads, s, d}), {b, times * heads, s, d});
}

// JetMoeAttention: the MoA experts' queries, kv_proj's keys and values, RoPE on q and k, the
// fused attention (causal, scale d^-1/2) over k K heads, the experts' output projections.
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("JetMoeAttention"),
        top_k_(c.num_experts_per_tok),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t width = kv_heads_ * head_dim_;
    experts = register_module("experts", std::make_shared<Moa>(c, o));
    register_module("kv_proj", std::make_shared<Linear>(c.hidden_size, 2 * width, false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const auto [queries, gates] = experts->map(x);
    const int64_t width = kv_heads_ * head_dim_;
    const Tensor kv = child("kv_proj")->call(x);  // chunk(2): [k; v]
    const Tensor k = models::split_heads(narrow(kv, -1, 0, width), kv_heads_, head_dim_);
    const Tensor v = models::split_heads(narrow(kv, -1, width, width), kv_heads_, head_dim_);
    const Tensor q = models::apply_rotary(queries, cos_t, sin_t);
    const Tensor k_rep = repeat_heads(models::apply_rotary(k, cos_t, sin_t), top_k_);
    const Tensor v_rep = repeat_heads(v, top_k_);
    const Tensor out =
        scaled_dot_product_attention(q, k_rep, v_rep, Tensor(), dropout_, /*is_causal=*/true);
    return experts->reduce(models::merge_heads(out), gates);
  }
  std::shared_ptr<Moa> experts;

 private:
  int64_t top_k_, kv_heads_, head_dim_;
  double dropout_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("JetMoeDecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    mlp = register_module("mlp", std::make_shared<Moe>(c, o));
    input_layernorm = register_module(
        "input_layernorm",
        std::make_shared<RMSNorm>(DimVector{c.hidden_size}, kLayerNormEps, true, o));
    post_attention_layernorm = register_module(
        "post_attention_layernorm",
        std::make_shared<RMSNorm>(DimVector{c.hidden_size}, kLayerNormEps, true, o));
    self_attention = register_module("self_attention", std::make_shared<Attention>(c, o, training));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor h = add(x, self_attention->run(input_layernorm->call(x), cos_t, sin_t));
    return add(h, mlp->call(post_attention_layernorm->call(h)));
  }
  ModulePtr mlp, input_layernorm, post_attention_layernorm;
  std::shared_ptr<Attention> self_attention;
};

// JetMoeModel: embed_tokens, layers, norm, then rotary_emb (its non-persistent inv_freq alone);
// filled once it sits under the root.
class Model : public Module {
 public:
  Model() : Module("JetMoeModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    register_module("norm",
                    std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    rotary_emb =
        register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                          "JetMoeRotaryEmbedding", c.head_dim, c.rope_theta));
    for (const auto& layer : layers_) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_tokens")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return child("norm")->call(h);
  }
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

// ---- config ----------------------------------------------------------------------------------

// A key of the original JetMoE code's JetMoEConfig (myshell-ai/JetMoE) that transformers'
// JetMoeConfig no longer reads: a file stating it with another value than the one built
// describes a model transformers does not build.
void legacy_key(const ConfigFields& f, const char* key, const nlohmann::json& built,
                const std::string& what) {
  models::require_built_value(f, key, built, kFamily, what.c_str());
}

// RoPE's share of each head: JetMoeRotaryEmbedding's default tables are head_dim wide and
// apply_rotary_pos_emb rotates every channel, so a partial_rotary_factor (top level, or in
// rope_parameters, which the shared reading takes after this) is not built.
void refuse_partial_rotary(const ConfigFields& f) {
  auto refuse = [&](const ConfigFields& in, const char* key) {
    if (!in.has("partial_rotary_factor")) return;
    if (in.number("partial_rotary_factor", 1.0) == 1.0) return;
    f.fail(key, "partial_rotary_factor " + in.raw("partial_rotary_factor").dump() +
                    ": JetMoeAttention rotates every channel of q and k; expected 1 (or none)");
  };
  refuse(f, "partial_rotary_factor");
  if (f.has("rope_parameters") && f.raw("rope_parameters").is_object()) {
    refuse(ConfigFields(f.raw("rope_parameters"), f.source()), "rope_parameters");
  }
}

// A legacy rope_scaling of type "default": no scaling.
bool default_rope(const nlohmann::json& r) {
  for (const char* key : {"rope_type", "type"}) {
    if (r.is_object() && r.contains(key) && r.at(key).is_string()) return r.at(key) == "default";
  }
  return false;
}

// The attention experts' parameters, 2 E h D a layer, bounded as validate() bounds the rest.
bool attention_experts_countable(const ModelConfig& c) {
  const double count = 2.0 * static_cast<double>(c.num_hidden_layers) *
                       static_cast<double>(c.num_local_experts) *
                       static_cast<double>(c.hidden_size) *
                       static_cast<double>(c.num_key_value_heads) * static_cast<double>(c.head_dim);
  return count < kMaxCount;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // JetMoeConfig's defaults for every key (its class is the JetMoE-4B-like default model).
  c.vocab_size = f.integer("vocab_size", 32000);
  c.hidden_size = f.integer("hidden_size", 2048);
  c.num_hidden_layers = f.integer("num_hidden_layers", 12);
  c.num_key_value_heads = f.integer("num_key_value_heads", 16);
  // attribute_map {"head_dim": "kv_channels"}: a head_dim key sets kv_channels after the fields,
  // so it wins.
  c.head_dim = f.has("head_dim") ? f.integer("head_dim") : f.integer("kv_channels", 128);
  c.intermediate_size = f.integer("intermediate_size", 5632);
  c.max_position_embeddings = f.integer("max_position_embeddings", 4096);
  c.hidden_act = f.string("activation_function", "silu");
  if (c.hidden_act == "xielu") {
    // ACT2FN's XIELUActivation would be a module of JetMoeMoE with two learned scalars.
    f.fail("activation_function",
           "'xielu' has learned parameters, which JetMoE's experts do not build; expected an "
           "activation without parameters (silu, gelu, ...)");
  }
  c.num_local_experts = f.integer("num_local_experts", 8);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  // __post_init__: num_attention_heads = num_key_value_heads x num_experts_per_tok, the query
  // heads the attention runs (k experts' K heads a token); validate() checks the experts' range.
  if (c.num_key_value_heads <= 0) {
    f.fail("num_key_value_heads",
           "must be a positive integer, got " + std::to_string(c.num_key_value_heads));
  }
  if (c.num_experts_per_tok <= 0) {
    f.fail("num_experts_per_tok",
           "must be a positive integer, got " + std::to_string(c.num_experts_per_tok));
  }
  if (!mul_into(c.num_key_value_heads, c.num_experts_per_tok, c.num_attention_heads)) {
    f.fail("num_experts_per_tok", "times num_key_value_heads overflows the query heads");
  }
  if (!attention_experts_countable(c)) {
    f.fail("num_local_experts",
           std::to_string(c.num_local_experts) +
               " attention experts of num_key_value_heads x kv_channels = " +
               std::to_string(c.num_key_value_heads) + " x " + std::to_string(c.head_dim) +
               " query channels hold beyond what shardplan counts exactly (1e18 parameters)");
  }
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.initializer_range = 0.01;  // the class's; parse_model_config reads the file's over it
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.rope_theta = f.number("rope_theta", 10000.0);
  if (f.has("rope_scaling") && !default_rope(f.raw("rope_scaling"))) {
    c.rope_scaling = parse_rope_scaling(f);
  }
  refuse_partial_rotary(f);
  // The router's loss (aux_loss_coef x the load-balancing loss of output_router_logits) is a few
  // elementwise ops on the logits: read for its type, not traced.
  (void)f.number("aux_loss_coef", 0.01);
  (void)f.boolean("output_router_logits", false);
  // A stated num_attention_heads is set beside the derived one and read by nothing that makes a
  // shape: it must agree with what is built. So must the original code's keys (JetMoEConfig:
  // ffn_hidden_size, moe_num_experts, moe_top_k, glu, bias), which transformers ignores.
  legacy_key(f, "num_attention_heads", c.num_attention_heads,
             "num_key_value_heads x num_experts_per_tok = " +
                 std::to_string(c.num_attention_heads) + " query heads");
  legacy_key(f, "ffn_hidden_size", c.intermediate_size,
             "experts of intermediate_size " + std::to_string(c.intermediate_size));
  legacy_key(f, "moe_num_experts", c.num_local_experts,
             "num_local_experts = " + std::to_string(c.num_local_experts) + " experts");
  legacy_key(f, "moe_top_k", c.num_experts_per_tok,
             "num_experts_per_tok = " + std::to_string(c.num_experts_per_tok) + " picks a token");
  legacy_key(f, "glu", true, "gated MLP experts (act(gate) x up)");
  legacy_key(f, "bias", true, "an output bias on both sparse blocks");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["kv_channels"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["activation_function"] = c.hidden_act;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
}

// What parse guarantees, checked again for a config built in code (the planner copies configs
// and cuts their layers).
void check_layout(const ModelConfig& c) {
  int64_t heads = 0;
  SP_CHECK(mul_into(c.num_key_value_heads, c.num_experts_per_tok, heads) &&
               heads == c.num_attention_heads,
           "jetmoe: ", c.num_attention_heads, " query heads, expected num_key_value_heads x ",
           "num_experts_per_tok = ", c.num_key_value_heads, " x ", c.num_experts_per_tok,
           " (JetMoeConfig derives them)");
  SP_CHECK(c.partial_rotary_factor == 1.0, "jetmoe: partial_rotary_factor ",
           c.partial_rotary_factor, ", expected 1 (JetMoeAttention rotates every channel)");
  SP_CHECK(c.layer_types.empty() && c.nope_layers.empty() && c.dense_layers.empty() &&
               c.shared_expert_intermediate_size == 0 && !c.sliding_window,
           "jetmoe: every layer is full attention with RoPE and both sparse blocks; expected no "
           "layer types, NoPE, dense layers, shared expert or window");
  SP_CHECK(attention_experts_countable(c), "jetmoe: ", c.num_local_experts,
           " attention experts of ", c.num_key_value_heads, " x ", c.head_dim,
           " query channels hold beyond what shardplan counts exactly (1e18 parameters)");
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<models::CausalLm<Model>>("JetMoeForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

constexpr FieldRename kRenamed[] = {{"norm_eps", "rms_norm_eps"},
                                    {"hidden_act", "activation_function"},
                                    {"head_dim", "kv_channels"}};

// Note [JetMoE tensor parallelism]
// Megatron's split (Shoeybi et al. 2019, §3) by heads, with the style "experts" on each of the
// four JetMoeParallelExperts (GroupedExperts projections, mesh/parallel_style.h): the attention
// experts' input_linear [E, D, h] on its D output features, so each rank holds the same K / tp
// heads of every expert's query (a contiguous split of D is whole heads when tp divides K), and
// kv_proj [k; v] column-parallel over its two halves (fused_parts 2), the same K / tp key and
// value heads. Query head j K + i reads key head i, so a rank's queries (i in its slice, every
// pick j) read only its own keys and values, repeated locally: the attention runs on the rank's
// k K / tp heads. output_linear [E, h, D] splits its D input features, its output a partial sum
// reduced before the gates, the sum over picks and the bias (replicated). The MLP experts split as
// a gated MLP: input_linear [E, 2F, h] over its two halves (_StridedShard(1, 2), gate and up
// each over the ranks), output_linear [E, h, F] on F. Routers, norms and both biases replicated;
// the embedding by vocabulary rows and lm_head by vocabulary. Expert parallelism splits dim 0 of
// all four projections (GroupedExperts), the attention experts with the MLP ones.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attention.experts.input_linear", "experts"},
    {"model.layers.*.self_attention.experts.output_linear", "experts"},
    {"model.layers.*.self_attention.kv_proj", "colwise", 2},
    {"model.layers.*.mlp.input_linear", "experts"},
    {"model.layers.*.mlp.output_linear", "experts"},
    {"lm_head", "colwise"}};

// JetMoePreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the padding_idx row zero, RMSNorm weights one), then every
// JetMoeParallelExperts weight normal(0, initializer_range) and the MoA and MoE biases zero.
constexpr InitRule kInitRules[] = {{"JetMoeParallelExperts", "weight", InitFill::kNormal},
                                   {"JetMoeMoE", "bias", InitFill::kZeros},
                                   {"JetMoeMoA", "bias", InitFill::kZeros},
                                   {"Linear", "weight", InitFill::kNormal},
                                   {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                   {"RMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kJetMoeFamily{
    .model_type = "jetmoe",
    .hf_class_prefix = "JetMoe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenamed,
    .moe = true,
    .experts_class = "JetMoeParallelExperts",
    .routed_exchanges_per_layer = 3,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
