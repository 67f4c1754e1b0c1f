// persimmon: Adept's Persimmon-8B (base and chat), and the language model of Fuyu-8B (the
// multimodal fuyu file's text_config: Note [Multimodal configs] in model_config.cpp; Fuyu's image
// patch projection vision_embed_tokens is not built), as transformers' PersimmonConfig
// (vocabulary 262,144, 4,096 wide, 36 layers of 64 heads, MLP 16,384, relu2, 16,384 positions,
// layer_norm_eps 1e-5, qk_layernorm, half of each head rotated, untied, no dropout; rope_theta
// 10,000 when absent: transformers 5's default, where 4.x's class said 25,000) and
// modeling_persimmon.py: GPT-NeoX's names and fused per-head query_key_value in Llama's
// sequential pre-norm layer, every projection with a bias, and one LayerNorm (weight and bias) over
// head_dim shared by all heads of q and another of k, applied before RoPE:
//   model.embed_tokens.weight [vocab, hidden]
//   model.layers.N.self_attn.query_key_value.{weight [3 hidden, hidden], bias [3 hidden]}
//   model.layers.N.self_attn.dense.{weight [hidden, hidden], bias [hidden]}
//   model.layers.N.self_attn.{q,k}_layernorm.{weight,bias} [head_dim] (with qk_layernorm)
//   model.layers.N.mlp.dense_h_to_4h.{weight [ffn, hidden], bias}, dense_4h_to_h [hidden, ffn]
//   model.layers.N.{input,post_attention}_layernorm.{weight,bias} [hidden]
//   model.final_layernorm.{weight,bias} [hidden], lm_head.weight [vocab, hidden]
// and the non-persistent inv_freq buffer of model.rotary_emb. query_key_value's rows are
// [heads, 3, head_dim] (PersimmonAttention._split_heads views its output as [B, S, heads, 3,
// head_dim]): each head's q, k and v side by side, GPT-NeoX's and BLOOM's layout.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace models {
namespace {

ModulePtr make_layer_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, /*elementwise_affine=*/true,
                                     /*bias=*/true, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("PersimmonAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        qk_norm_(c.qk_norm_per_head),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size;
    register_module("query_key_value", std::make_shared<Linear>(h, 3 * h, /*bias=*/true, o));
    register_module("dense", std::make_shared<Linear>(h, h, /*bias=*/true, o));
    if (qk_norm_) {
      register_module("q_layernorm", make_layer_norm(head_dim_, c.norm_eps, o));
      register_module("k_layernorm", make_layer_norm(head_dim_, c.norm_eps, o));
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    // [B, S, 3H] -> [B, S, heads, 3, d], q, k and v picked out of it as views (_split_heads).
    const Tensor qkv = view(child("query_key_value")->call(x), {b, s, heads_, 3, head_dim_});
    Tensor q = select(qkv, 3, 0), k = select(qkv, 3, 1);
    const Tensor v = select(qkv, 3, 2);
    if (qk_norm_) {
      // One LayerNorm over head_dim for all heads, on [B, S, heads, d] before the transpose.
      q = child("q_layernorm")->call(q);
      k = child("k_layernorm")->call(k);
    }
    // [B, heads, S, d]; RoPE on the first int(d * partial_rotary_factor) channels of q and k.
    q = apply_rotary(transpose(q, 1, 2), cos_t, sin_t);
    k = apply_rotary(transpose(k, 1, 2), cos_t, sin_t);
    const Tensor out = scaled_dot_product_attention(q, k, transpose(v, 1, 2), Tensor(), dropout_,
                                                    /*is_causal=*/true);
    return child("dense")->call(merge_heads(out));
  }

 private:
  int64_t heads_, head_dim_;
  bool qk_norm_;
  double dropout_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Layer : public Module {
 public:
  Layer() : Module("PersimmonDecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    training_ = training;
    dropout_ = c.resid_dropout;
    attention = register_module("self_attn", std::make_shared<Attention>(c, o, training));
    register_module("mlp", std::make_shared<TwoLayerMlp>(
                               "PersimmonMLP", "dense_h_to_4h", "dense_4h_to_h", c.hidden_size,
                               c.intermediate_size, c.hidden_act, 0.0, o));
    register_module("input_layernorm", make_layer_norm(c.hidden_size, c.norm_eps, o));
    register_module("post_attention_layernorm", make_layer_norm(c.hidden_size, c.norm_eps, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // The attention's output joins the residual as it is; hidden_dropout drops out the MLP's
    // output only (PersimmonDecoderLayer.dropout).
    const Tensor h = add(x, attention->run(child("input_layernorm")->call(x), cos_t, sin_t));
    const Tensor m = child("mlp")->call(child("post_attention_layernorm")->call(h));
    return add(maybe_dropout(m, dropout_, training_), h);
  }
  std::shared_ptr<Attention> attention;

 private:
  double dropout_ = 0;
  bool training_ = false;
};

// Filled by build() once CausalLm has registered it under the root.
class PersimmonModel : public Module {
 public:
  PersimmonModel() : Module("PersimmonModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Layer>> empty;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty.push_back(layers->push_back(std::make_shared<Layer>()));
    }
    register_module("final_layernorm", make_layer_norm(c.hidden_size, c.norm_eps, o));
    rotary_emb_ = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>("PersimmonRotaryEmbedding", rotary_dim(c), c.rope_theta));
    for (const auto& layer : empty) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_tokens")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb_->cos_sin(position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = per_head(cos_t), sin_h = per_head(sin_t);
    for (const auto& [name, layer] : child("layers")->named_children()) {
      h = static_cast<Layer&>(*layer).run(h, cos_h, sin_h);
    }
    return child("final_layernorm")->call(h);
  }

 private:
  std::shared_ptr<RotaryEmbedding> rotary_emb_;
};

// PersimmonConfig types these keys without None (a strict dataclass): a null fails its check in
// transformers, so it is refused here rather than read as the default.
constexpr const char* kNotNullable[] = {
    "vocab_size",        "hidden_size",         "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
    "hidden_act",        "layer_norm_eps",      "qk_layernorm",
    "hidden_dropout",    "attention_dropout",   "tie_word_embeddings"};

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kNotNullable) {
    if (f.is_null(key)) f.fail(key, "is null; PersimmonConfig expects a value (or no key)");
  }
  // PersimmonConfig's defaults fill every key a file omits (Persimmon-8B's sizes).
  c.vocab_size = f.integer("vocab_size", 262144);
  c.hidden_size = f.integer("hidden_size", 4096);
  c.intermediate_size = f.integer("intermediate_size", 16384);
  c.num_hidden_layers = f.integer("num_hidden_layers", 36);
  c.num_attention_heads = f.integer("num_attention_heads", 64);
  // Every head has its own k and v: PersimmonConfig has no num_key_value_heads, and a file's
  // (Persimmon-8B's says 64) is ignored, as transformers ignores it.
  c.num_key_value_heads = c.num_attention_heads;
  head_dim_from_hidden(f, c, "num_attention_heads", "hidden_size",
                       " (PersimmonAttention splits hidden_size into its heads)");
  // PersimmonRotaryEmbedding sizes its tables by a file's head_dim when it is set (and not 0),
  // the attention by hidden_size / heads: rotated widths that differ fail to broadcast.
  if (f.has("head_dim") && c.head_dim > 0) {
    const int64_t d = f.integer("head_dim");
    if (d != 0 && d != c.head_dim) {
      f.fail("head_dim", std::to_string(d) + " is not hidden_size / num_attention_heads = " +
                             std::to_string(c.head_dim) +
                             "; PersimmonAttention's heads are that wide and its rotary tables "
                             "would not match them");
    }
  }
  c.max_position_embeddings = f.integer("max_position_embeddings", 16384);
  c.hidden_act = f.string("hidden_act", "relu2");
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // every nn.Linear but lm_head has its bias
  c.qk_norm_per_head = f.boolean("qk_layernorm", true);
  // The legacy keys; a rope_parameters object, read after this (Note [rope_parameters]), wins.
  // PersimmonConfig.__post_init__ sets partial_rotary_factor to 0.5 when neither gives one.
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("hidden_dropout", 0.0);  // the MLP's output only
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["layer_norm_eps"] = c.norm_eps;
  j["qk_layernorm"] = c.qk_norm_per_head;
  j["rope_theta"] = c.rope_theta;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["attention_dropout"] = c.attention_dropout;
  j["hidden_dropout"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<CausalLm<PersimmonModel>>("PersimmonForCausalLM", c, o, training,
                                                    "model.embed_tokens.weight");
}

// PersimmonConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {{"norm_eps", "layer_norm_eps"},
                                    {"qk_norm_per_head", "qk_layernorm"},
                                    {"resid_dropout", "hidden_dropout"}};

}  // namespace
}  // namespace models

// Megatron-LM's split (Shoeybi et al. 2019, §3). query_key_value's rows are [heads, 3, head_dim]
// (each head's q, k and v together), so a plain contiguous column split gives rank r of tp whole
// heads [r heads / tp, (r + 1) heads / tp) with their q, k and v, exactly the heads whose input
// columns of dense the row-parallel split gives it: fused_parts 1, as GPT-NeoX's and BLOOM's (a
// split of each third, fused_parts 3, would be wrong here: a rank would get q rows of some heads
// beside k rows of others). The q/k LayerNorms act on head_dim within one head and are shared by
// all heads: replicated, as the layer norms.
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.query_key_value", "colwise"},
                                          {"model.layers.*.self_attn.dense", "rowwise"},
                                          {"model.layers.*.mlp.dense_h_to_4h", "colwise"},
                                          {"model.layers.*.mlp.dense_4h_to_h", "rowwise"},
                                          {"lm_head", "colwise"}};

// PersimmonPreTrainedModel has no _init_weights of its own: PreTrainedModel's. Linear weights
// normal(0, initializer_range) and biases zero; the embedding normal with its padding_idx row
// (pad_token_id, when set: PersimmonModel passes it to nn.Embedding) zero; every nn.LayerNorm,
// the q/k ones included, weight one and bias zero.
constexpr InitRule kInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                   {"Linear", "bias", InitFill::kZeros},
                                   {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                   {"LayerNorm", "weight", InitFill::kOnes},
                                   {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kPersimmonFamily;  // listed in family_registry.cpp
const ModelFamily kPersimmonFamily{
    .model_type = "persimmon",
    .hf_class_prefix = "Persimmon",
    .layers_path = "model.layers",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .fused_qkv = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
