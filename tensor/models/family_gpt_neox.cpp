// gpt_neox: GPT-NeoX-20B and Pythia as transformers' GPTNeoXConfig and modeling_gpt_neox.py: fused
// qkv laid out per head, partial rotary (rotary_pct), LayerNorms with bias, untied embed_out,
// parallel residual:
//   gpt_neox.embed_in.weight [vocab, hidden]
//   gpt_neox.layers.N.{input,post_attention}_layernorm.{weight,bias} [hidden]
//   gpt_neox.layers.N.attention.query_key_value.{weight [3 hidden, hidden], bias [3 hidden]}
//   gpt_neox.layers.N.attention.dense.{weight [hidden, hidden], bias}
//   gpt_neox.layers.N.mlp.dense_h_to_4h.{weight [ffn, hidden], bias}, dense_4h_to_h [hidden, ffn]
//   gpt_neox.final_layer_norm.{weight,bias}, embed_out.weight [vocab, hidden]
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {
namespace models {
namespace {

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTNeoXAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size;
    register_module("query_key_value", std::make_shared<Linear>(h, 3 * h, c.qkv_bias, o));
    register_module("dense", std::make_shared<Linear>(h, h, c.o_bias, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    // [B, S, 3H] -> [B, S, heads, 3 d] -> [B, heads, S, 3 d]: q, k, v interleaved per head.
    const Tensor qkv =
        permute(view(child("query_key_value")->call(x), {b, s, heads_, 3 * d}), {0, 2, 1, 3});
    const Tensor q = apply_rotary(narrow(qkv, -1, 0, d), cos_t, sin_t);
    const Tensor k = apply_rotary(narrow(qkv, -1, d, d), cos_t, sin_t);
    const Tensor v = narrow(qkv, -1, 2 * d, d);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true);
    return child("dense")->call(merge_heads(out));
  }

 private:
  int64_t heads_, head_dim_;
  double dropout_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Layer : public Module {
 public:
  Layer() : Module("GPTNeoXLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    parallel_ = c.use_parallel_residual;
    dropout_ = c.resid_dropout;
    training_ = training;
    const DimVector h{c.hidden_size};
    register_module("input_layernorm", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("post_attention_layernorm",
                    std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    attention = register_module("attention", std::make_shared<Attention>(c, o, training));
    register_module("mlp", std::make_shared<TwoLayerMlp>(
                               "GPTNeoXMLP", "dense_h_to_4h", "dense_4h_to_h", c.hidden_size,
                               c.intermediate_size, c.hidden_act, 0.0, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = maybe_dropout(attention->run(child("input_layernorm")->call(x), cos_t, sin_t),
                                   dropout_, training_);
    if (parallel_) {
      // x + attn(ln1(x)) + mlp(ln2(x)) (use_parallel_residual, GPT-NeoX-20B and Pythia).
      const Tensor m = maybe_dropout(child("mlp")->call(child("post_attention_layernorm")->call(x)),
                                     dropout_, training_);
      return add(add(m, a), x);
    }
    const Tensor h = add(a, x);
    return add(maybe_dropout(child("mlp")->call(child("post_attention_layernorm")->call(h)),
                             dropout_, training_),
               h);
  }
  std::shared_ptr<Attention> attention;

 private:
  bool parallel_ = false;
  double dropout_ = 0;
  bool training_ = false;
};

class NeoXModel : public Module {
 public:
  NeoXModel(const ModelConfig& c, const TensorOptions& o, bool training) : Module("GPTNeoXModel") {
    register_module("embed_in", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Layer>> empty;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty.push_back(layers->push_back(std::make_shared<Layer>()));
    }
    register_module("final_layer_norm", std::make_shared<LayerNorm>(DimVector{c.hidden_size},
                                                                    c.norm_eps, true, true, o));
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>("GPTNeoXRotaryEmbedding", rotary_dim(c), c.rope_theta));
    for (const auto& layer : empty) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_in")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = per_head(cos_t), sin_h = per_head(sin_t);
    for (const auto& [name, layer] : child("layers")->named_children()) {
      h = static_cast<Layer&>(*layer).run(h, cos_h, sin_h);
    }
    return child("final_layer_norm")->call(h);
  }
  std::shared_ptr<RotaryEmbedding> rotary_emb;
};

class NeoXForCausalLM : public Module {
 public:
  NeoXForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTNeoXForCausalLM") {
    register_module("gpt_neox", std::make_shared<NeoXModel>(c, o, training));
    register_module("embed_out", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    if (c.tie_word_embeddings)
      tie_parameters(*this, "embed_out.weight", "gpt_neox.embed_in.weight");
  }
  Tensor forward(const Tensor& ids) override {
    return child("embed_out")->call(child("gpt_neox")->call(ids));
  }
};

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = c.num_attention_heads;
  head_dim_from_hidden(f, c, "num_attention_heads", "hidden_size");
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.hidden_act = f.string("hidden_act", "gelu");
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", true);
  c.mlp_bias = true;
  // Older configs say rotary_pct / rotary_emb_base, newer ones partial_rotary_factor / rope_theta.
  c.partial_rotary_factor = f.has("partial_rotary_factor") ? f.number("partial_rotary_factor", 0.25)
                                                           : f.number("rotary_pct", 0.25);
  c.rope_theta =
      f.has("rope_theta") ? f.number("rope_theta", 10000.0) : f.number("rotary_emb_base", 10000.0);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
  c.use_parallel_residual = f.boolean("use_parallel_residual", true);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("hidden_dropout", 0.0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["attention_dropout"] = c.attention_dropout;
  j["hidden_act"] = c.hidden_act;
  j["layer_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["use_parallel_residual"] = c.use_parallel_residual;
  j["hidden_dropout"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<NeoXForCausalLM>(c, o, training);
}

// GPTNeoXConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"norm_eps", "layer_norm_eps"},
    {"resid_dropout", "hidden_dropout"},
    {"partial_rotary_factor", "rotary_pct"},
};

}  // namespace
}  // namespace models

// GPT-NeoX's fused query_key_value is laid out per head ([heads, 3, head_dim] rows), so a plain
// column split gives each rank whole heads with their q, k and v, as Megatron-LM's own fused QKV.
constexpr TensorParallelRule kTpPlan[] = {
    {"gpt_neox.embed_in", "rowwise"},
    {"gpt_neox.layers.*.attention.query_key_value", "colwise"},
    {"gpt_neox.layers.*.attention.dense", "rowwise"},
    {"gpt_neox.layers.*.mlp.dense_h_to_4h", "colwise"},
    {"gpt_neox.layers.*.mlp.dense_4h_to_h", "rowwise"},
    {"embed_out", "colwise"}};

// GPTNeoXPreTrainedModel._init_weights: Linear weights and Embedding rows normal(0,
// initializer_range), Linear biases zero, LayerNorm weight one and bias zero.
constexpr std::span<const InitRule> kInitRules = kPreTrainedInitRules;

extern const ModelFamily kGptNeoxFamily;  // listed in family_registry.cpp
const ModelFamily kGptNeoxFamily{
    .model_type = "gpt_neox",
    .hf_class_prefix = "GPTNeoX",
    .layers_path = "gpt_neox.layers",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .fused_qkv = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
