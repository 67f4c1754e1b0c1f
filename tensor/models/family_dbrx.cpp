// dbrx (Databricks DBRX Base and Instruct, "132B total, 36B active"): transformers 5's DbrxConfig
// and modeling_dbrx.py. The config nests two sub-configs: attn_config (DbrxAttentionConfig:
// attn_pdrop, clip_qkv, kv_n_heads, and the files' rope_theta) and ffn_config (DbrxFFNConfig:
// ffn_act_fn, ffn_hidden_size, moe_num_experts, moe_top_k, moe_jitter_eps, moe_loss_weight,
// moe_normalize_expert_weights); the top level says d_model, n_heads, n_layers, max_seq_len.
// h d_model, H heads and kv key-value heads of d = h / H, E experts of width F, V vocabulary:
//   transformer.wte.weight                                    [V, h] (padding_idx pad_token_id)
//   transformer.blocks.N.norm_attn_norm.norm_1.weight         [h]  nn.LayerNorm(bias=False)
//   transformer.blocks.N.norm_attn_norm.attn.Wqkv.weight      [h + 2 kv d, h]  rows [q; k; v]
//   transformer.blocks.N.norm_attn_norm.attn.out_proj.weight  [h, h]
//   transformer.blocks.N.norm_attn_norm.norm_2.weight         [h]
//   transformer.blocks.N.ffn.router.layer.weight              [E, h]
//   transformer.blocks.N.ffn.experts.mlp.{w1, v1, w2}         [E F, h] each: gate, up, down
//   transformer.norm_f.weight [h], lm_head.weight [V, h]      (never tied: DbrxConfig refuses it)
// No bias anywhere. A block is pre-norm: h = x + out_proj(attn(norm_1(x))), then
// h + experts(norm_2(h)), each half's output dropped out by resid_pdrop when training.
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kDbrxFamily;  // listed in family_registry.cpp

namespace {

// nn.LayerNorm's default: DbrxConfig has no eps field.
constexpr double kDbrxNormEps = 1e-5;

// norm_1, norm_2 and norm_f are nn.LayerNorm(d_model, bias=False): a weight alone.
ModulePtr layer_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps,
                                     /*elementwise_affine=*/true, /*bias=*/false, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("DbrxAttention"),
        hidden_(c.hidden_size),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0),
        clip_(c.clip_qkv) {
    const int64_t kv = kv_heads_ * head_dim_;
    register_module("Wqkv", std::make_shared<Linear>(hidden_, hidden_ + 2 * kv, false, o));
    register_module("out_proj", std::make_shared<Linear>(hidden_, hidden_, false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor qkv = child("Wqkv")->call(x);
    // clip_qkv: the fused projection clamped to [-clip, clip] before the split (transformers'
    // clamp, traced as a maximum and a minimum against the bounds, as OLMo's clip_qkv).
    if (clip_) {
      qkv = binary(BinaryOp::kMinimum, binary(BinaryOp::kMaximum, qkv, Scalar(-*clip_)),
                   Scalar(*clip_));
    }
    const int64_t kv = kv_heads_ * head_dim_;
    const Tensor q = models::apply_rotary(
        models::split_heads(narrow(qkv, -1, 0, hidden_), heads_, head_dim_), cos_t, sin_t);
    const Tensor k = models::apply_rotary(
        models::split_heads(narrow(qkv, -1, hidden_, kv), kv_heads_, head_dim_), cos_t, sin_t);
    const Tensor v = models::split_heads(narrow(qkv, -1, hidden_ + kv, kv), kv_heads_, head_dim_);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_);
    return child("out_proj")->call(models::merge_heads(out));
  }

 private:
  int64_t hidden_, heads_, kv_heads_, head_dim_;
  double dropout_;
  std::optional<double> clip_;  // ModelConfig::clip_qkv
};

// norm_1, the attention and norm_2: returns {the residual stream after attention, its norm_2}.
class NormAttentionNorm : public Module {
 public:
  NormAttentionNorm(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("DbrxNormAttentionNorm"), dropout_(c.resid_dropout), training_(training) {
    register_module("norm_1", layer_norm(c, o));
    attn = register_module("attn", std::make_shared<Attention>(c, o, training));
    register_module("norm_2", layer_norm(c, o));
  }
  std::pair<Tensor, Tensor> run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = attn->run(child("norm_1")->call(x), cos_t, sin_t);
    const Tensor h = add(models::maybe_dropout(a, dropout_, training_), x);
    return {h, child("norm_2")->call(h)};
  }
  std::shared_ptr<Attention> attn;

 private:
  double dropout_;
  bool training_;
};

// DbrxRouter: the Linear `layer` on every token. moe_jitter_eps's multiplicative noise on its
// input in training is not traced (docs/models.md, what the models leave out).
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o) : Module("DbrxRouter") {
    register_module("layer",
                    std::make_shared<Linear>(c.hidden_size, c.num_local_experts, false, o));
  }
  Tensor forward(const Tensor& x) override {
    return child("layer")->call(view(x, {x.size(0) * x.size(1), x.size(2)}));
  }
};

// DbrxExperts: the routed tokens dispatched to `mlp` (DbrxExpertGLU, the grouped experts of
// w1, v1, w2 [E F, h]) at their expected load, and combined by the routing weights (Note
// [Expected-load MoE] in models.h).
class Experts : public Module {
 public:
  Experts(const ModelConfig& c, const TensorOptions& o) : Module("DbrxExperts") {
    const std::string act = c.hidden_act;
    mlp = register_module(
        "mlp", std::make_shared<GroupedExperts>(
                   "DbrxExpertGLU", c.num_local_experts, c.hidden_size, c.intermediate_size,
                   GroupedExperts::Layout::kStackedRows, /*bias=*/false,
                   [act](const Tensor& x) { return models::activation(act, x); }, o));
  }
  // x [B, S, h], weights [B S, k] -> [B, S, h].
  Tensor run(const Tensor& x, const Tensor& weights) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor y = models::expected_load_experts(*mlp, view(x, {b * s, h}), weights);
    return view(y, {b, s, h});
  }
  std::shared_ptr<GroupedExperts> mlp;
};

class Ffn : public Module {
 public:
  Ffn(const ModelConfig& c, const TensorOptions& o)
      : Module("DbrxFFN"), top_k_(c.num_experts_per_tok) {
    router = register_module("router", std::make_shared<Router>(c, o));
    experts = register_module("experts", std::make_shared<Experts>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    // A softmax in the logits' own dtype (DbrxFFN.route_tokens_to_experts), its top k (narrow
    // stands in for topk's values) divided by their p-norm, traced for p = 1 (a sum of |w|).
    const Tensor probs = softmax(router->call(x), 1);
    const Tensor top = narrow(probs, 1, 0, top_k_);
    const Tensor weights = div(top, sum(abs(top), {-1}, /*keepdim=*/true));
    return experts->run(x, weights);
  }
  std::shared_ptr<Router> router;
  std::shared_ptr<Experts> experts;

 private:
  int64_t top_k_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("DbrxBlock") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    dropout_ = c.resid_dropout;
    training_ = training;
    norm_attn_norm =
        register_module("norm_attn_norm", std::make_shared<NormAttentionNorm>(c, o, training));
    register_module("ffn", std::make_shared<Ffn>(c, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const auto [residual, normed] = norm_attn_norm->run(x, cos_t, sin_t);
    return add(residual, models::maybe_dropout(child("ffn")->call(normed), dropout_, training_));
  }
  std::shared_ptr<NormAttentionNorm> norm_attn_norm;

 private:
  double dropout_ = 0;
  bool training_ = false;
};

// Empty until build(), filled once it sits under the root.
class DbrxModel : public Module {
 public:
  DbrxModel() : Module("DbrxModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    // DbrxModel registers rotary_emb first (its buffer only, non-persistent). It keeps emb_pdrop
    // but never applies it: no dropout after the embedding.
    rotary_emb = register_module("rotary_emb",
                                 std::make_shared<models::RotaryEmbedding>(
                                     "DbrxRotaryEmbedding", models::rotary_dim(c), c.rope_theta));
    register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto blocks = register_module("blocks", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks_.push_back(blocks->push_back(std::make_shared<Block>()));
    }
    register_module("norm_f", layer_norm(c, o));
    for (const auto& block : blocks_) block->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("wte")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& block : blocks_) h = block->run(h, cos_h, sin_h);
    return child("norm_f")->call(h);
  }
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  std::vector<std::shared_ptr<Block>> blocks_;
};

class DbrxForCausalLM : public Module {
 public:
  DbrxForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("DbrxForCausalLM") {
    auto transformer = register_module("transformer", std::make_shared<DbrxModel>());
    register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    transformer->build(c, o, training);  // under its final name: no renaming of the full tree
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(child("transformer")->call(ids));
  }
};

// One nested sub-config (attn_config, ffn_config, ffn_config.ffn_act_fn) as a flat document whose
// keys are "<object>.<key>", so ConfigFields reads it with its checks and its errors name the
// nested key ("field 'ffn_config.moe_top_k': ..."). Absent or null: empty, the sub-config's
// defaults (DbrxConfig builds DbrxAttentionConfig() and DbrxFFNConfig() from None).
nlohmann::json flattened(const ConfigFields& f, const char* object, const std::string& prefix) {
  nlohmann::json flat = nlohmann::json::object();
  if (!f.has(object)) return flat;
  const nlohmann::json& o = f.raw(object);
  if (!o.is_object()) {
    f.fail(object, "expected an object (or null: the defaults), got " + o.dump().substr(0, 80));
  }
  for (const auto& [key, value] : o.items()) flat[prefix + key] = value;
  return flat;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // The sizes are required (Note [Strict config parsing]); DbrxConfig's defaults (2,048 wide,
  // 24 layers, 16 heads, 32,000 tokens) are no released model's.
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("d_model");
  c.num_hidden_layers = f.integer("n_layers");
  c.num_attention_heads = f.integer("n_heads");
  // DbrxAttention's head_dim is d_model // n_heads and its Wqkv makes d_model query channels:
  // heads that do not divide d_model leave the query view without whole heads.
  head_dim_from_hidden(f, c, "n_heads", "d_model", ", expected whole heads of the queries");
  c.max_position_embeddings = f.integer("max_seq_len", 2048);
  c.norm_eps = kDbrxNormEps;
  c.resid_dropout = f.number("resid_pdrop", 0.0);
  (void)f.number("emb_pdrop", 0.0);  // kept by DbrxModel, applied nowhere
  if (f.boolean("tie_word_embeddings", false)) {
    f.fail("tie_word_embeddings",
           "true, but DbrxConfig refuses tied embeddings (validate_architecture); expected false");
  }

  const nlohmann::json attn_json = flattened(f, "attn_config", "attn_config.");
  const ConfigFields attn(attn_json, f.source());
  c.num_key_value_heads = attn.integer("attn_config.kv_n_heads", 1);  // the class's MQA default
  c.attention_dropout = attn.number("attn_config.attn_pdrop", 0.0);
  if (attn.has("attn_config.clip_qkv")) {
    const double clip = attn.number("attn_config.clip_qkv", 0.0);
    if (!(clip > 0) || !std::isfinite(clip)) {
      attn.fail("attn_config.clip_qkv",
                attn.raw("attn_config.clip_qkv").dump() +
                    ", expected a positive bound for |q|, |k| and |v| (or null: none)");
    }
    c.clip_qkv = clip;
  }
  // The RoPE base the checkpoints were trained with is attn_config's rope_theta (DBRX's own code
  // and transformers 4's DbrxAttentionConfig). transformers 5 moved RoPE to the top level, where a
  // rope_theta or rope_parameters (read after this, Note [rope_parameters]) wins; without either
  // it rotates at its default base 10,000. The base changes no shape or count.
  c.rope_theta = attn.number("attn_config.rope_theta", 10000.0);
  c.rope_theta = f.number("rope_theta", c.rope_theta);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);

  const nlohmann::json ffn_json = flattened(f, "ffn_config", "ffn_config.");
  const ConfigFields ffn(ffn_json, f.source());
  c.intermediate_size = ffn.integer("ffn_config.ffn_hidden_size");
  c.num_local_experts = ffn.integer("ffn_config.moe_num_experts");
  c.num_experts_per_tok = ffn.integer("ffn_config.moe_top_k");
  // ffn_act_fn: {"name": ..., more kwargs}; DbrxExpertGLU reads the name (default silu) alone.
  const nlohmann::json act_json = flattened(ffn, "ffn_config.ffn_act_fn", "ffn_config.ffn_act_fn.");
  c.hidden_act = ConfigFields(act_json, f.source()).string("ffn_config.ffn_act_fn.name", "silu");
  // Routing only: the jitter's width (not traced), the weights' p-norm (traced for p = 1), the
  // auxiliary loss's weight. Read so that a wrong type is an error.
  const double jitter = ffn.number("ffn_config.moe_jitter_eps", 0.0);
  if (!(jitter >= 0 && jitter < 1)) {
    ffn.fail("ffn_config.moe_jitter_eps",
             std::to_string(jitter) + ", expected a noise width in [0, 1) (or null: none)");
  }
  const double p = ffn.number("ffn_config.moe_normalize_expert_weights", 1.0);
  if (!(p > 0) || !std::isfinite(p)) {
    ffn.fail("ffn_config.moe_normalize_expert_weights",
             std::to_string(p) + ", expected the positive p of a p-norm (or null: none)");
  }
  (void)ffn.number("ffn_config.moe_loss_weight", 0.01);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["d_model"] = c.hidden_size;
  j["n_heads"] = c.num_attention_heads;
  j["n_layers"] = c.num_hidden_layers;
  j["max_seq_len"] = c.max_position_embeddings;
  j["resid_pdrop"] = c.resid_dropout;
  j["attn_config"] = {
      {"attn_pdrop", c.attention_dropout},
      {"clip_qkv", c.clip_qkv ? nlohmann::json(*c.clip_qkv) : nlohmann::json(nullptr)},
      {"kv_n_heads", c.num_key_value_heads},
      {"rope_theta", c.rope_theta}};
  j["ffn_config"] = {{"ffn_act_fn", {{"name", c.hidden_act}}},
                     {"ffn_hidden_size", c.intermediate_size},
                     {"moe_num_experts", c.num_local_experts},
                     {"moe_top_k", c.num_experts_per_tok}};
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<DbrxForCausalLM>(c, o, training);
}

// DbrxConfig's keys for ModelConfig's fields (attribute_map and the sub-configs), so that errors
// name the key in the file.
constexpr FieldRename kRenamed[] = {{"hidden_size", "d_model"},
                                    {"num_hidden_layers", "n_layers"},
                                    {"num_attention_heads", "n_heads"},
                                    {"max_position_embeddings", "max_seq_len"},
                                    {"num_key_value_heads", "attn_config.kv_n_heads"},
                                    {"attention_dropout", "attn_config.attn_pdrop"},
                                    {"clip_qkv", "attn_config.clip_qkv"},
                                    {"rope_theta", "attn_config.rope_theta"},
                                    {"intermediate_size", "ffn_config.ffn_hidden_size"},
                                    {"num_local_experts", "ffn_config.moe_num_experts"},
                                    {"num_experts_per_tok", "ffn_config.moe_top_k"},
                                    {"hidden_act", "ffn_config.ffn_act_fn"},
                                    {"resid_dropout", "resid_pdrop"}};

// DbrxPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the padding_idx row zero, LayerNorm weights one), then
// DbrxExpertGLU's w1, v1 and w2 normal(0, initializer_range).
constexpr InitRule kInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                   {"Linear", "bias", InitFill::kZeros},
                                   {"DbrxExpertGLU", "w1", InitFill::kNormal},
                                   {"DbrxExpertGLU", "v1", InitFill::kNormal},
                                   {"DbrxExpertGLU", "w2", InitFill::kNormal},
                                   {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                   {"LayerNorm", "weight", InitFill::kOnes},
                                   {"LayerNorm", "bias", InitFill::kZeros}};

}  // namespace

// Note [DBRX has no tensor-parallel plan]
// Wqkv holds [q; k; v] of grouped-query heads: h query rows, then kv d key and kv d value rows
// (DBRX: 6,144, 1,024, 1,024). A head-aligned split gives each rank a contiguous block of each
// part, which no single placement is: a _StridedShard needs equal parts (3 of 8,192 / 3 rows does
// not even divide), and one over 8 equal parts of kv d rows hands a rank query heads r, r + 8, ...
// whose key-value heads are not its own. So, as Phi-3's qkv_proj (docs/models.md), DBRX has no
// plan and the planner keeps tp = 1; its experts still split whole over expert-parallel ranks
// (GroupedExperts' stacked rows, Shard(0) of [E F, h]), and data, pipeline and context
// parallelism apply.
const ModelFamily kDbrxFamily{
    .model_type = "dbrx",
    .hf_class_prefix = "Dbrx",
    .layers_path = "transformer.blocks",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenamed,
    .fused_qkv = true,
    .moe = true,
    .experts_class = "DbrxExpertGLU",
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
