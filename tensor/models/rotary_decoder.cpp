// The rotary decoder of the Llama family (tensor/models/rotary_decoder.h): llama (1/2/3/3.1),
// mistral, mixtral, qwen2 and gemma differ only in biases, norms, the MLP activation, tied
// embeddings and Mixtral's sparse MoE. Names and shapes follow transformers' modeling_llama.py (and
// its siblings), <prefix> the family's class prefix:
//   model.embed_tokens.weight                       [vocab, hidden]
//   model.layers.N.input_layernorm.weight           [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight  q [heads*hd, hidden], k/v [kv*hd, hidden],
//                                                   o [hidden, heads*hd]
//   model.layers.N.post_attention_layernorm.weight  [hidden]
//   model.layers.N.mlp.{gate,up,down}_proj.weight   gate/up [ffn, hidden], down [hidden, ffn]
//   model.layers.N.block_sparse_moe.gate.weight     [experts, hidden]          (mixtral)
//   model.layers.N.block_sparse_moe.experts.E.w{1,3}.weight [ffn, hidden], w2 [hidden, ffn]
//   model.norm.weight, lm_head.weight (absent from the listing when tied)
#include "tensor/models/rotary_decoder.h"

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/layer_kinds.h"

namespace shardplan::tensor::models {
namespace {

// LlamaRMSNorm is nn.RMSNorm's computation (the fp32 upcast inside changes no shape or count),
// unless the family brings its own (RotaryDecoderStyle::make_norm).
ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o, const RotaryDecoderStyle& s) {
  if (s.make_norm) return s.make_norm(c, o);
  return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const RotaryDecoderStyle& s, const std::string& prefix,
            const TensorOptions& o, bool training)
      : Module(prefix + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj = register_module("q_proj", std::make_shared<Linear>(c.hidden_size, q, c.qkv_bias, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(c.hidden_size, kv, c.qkv_bias, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(c.hidden_size, kv, c.qkv_bias, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, c.o_bias, o));
    if (s.qk_norm) {
      q_norm = register_module(
          "q_norm", std::make_shared<RMSNorm>(DimVector{head_dim_}, c.norm_eps, true, o));
      k_norm = register_module(
          "k_norm", std::make_shared<RMSNorm>(DimVector{head_dim_}, c.norm_eps, true, o));
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // q, then k, each split into heads, normed per head (Qwen3) and rotated: the op order of
    // the trace.
    Tensor q = split_heads(q_proj->call(x), heads_, head_dim_);
    if (q_norm) q = q_norm->call(q);  // per head, over head_dim
    q = apply_rotary(q, cos_t, sin_t);
    Tensor k = split_heads(k_proj->call(x), kv_heads_, head_dim_);
    if (k_norm) k = k_norm->call(k);
    k = apply_rotary(k, cos_t, sin_t);
    const Tensor v = split_heads(v_proj->call(x), kv_heads_, head_dim_);
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true,
                                                    {}, /*enable_gqa=*/kv_heads_ != heads_);
    return o_proj->call(merge_heads(out));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  ModulePtr q_norm, k_norm;  // with RotaryDecoderStyle::qk_norm

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
};

// down(act(gate(x)) * up(x)): SwiGLU (silu) or GeGLU (Gemma's tanh gelu).
class GatedMlp : public Module {
 public:
  GatedMlp(const ModelConfig& c, int64_t f, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "MLP"), act_(c.hidden_act) {
    const int64_t h = c.hidden_size;
    register_module("gate_proj", std::make_shared<Linear>(h, f, c.mlp_bias, o));
    register_module("up_proj", std::make_shared<Linear>(h, f, c.mlp_bias, o));
    register_module("down_proj", std::make_shared<Linear>(f, h, c.mlp_bias, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor g = activation(act_, child("gate_proj")->call(x));
    return child("down_proj")->call(mul(g, child("up_proj")->call(x)));
  }

 private:
  std::string act_;
};

// One Mixtral expert: w2(act(w1(x)) * w3(x)).
class Expert : public Module {
 public:
  Expert(const ModelConfig& c, const TensorOptions& o)
      : Module("MixtralBlockSparseTop2MLP"), act_(c.hidden_act) {
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    register_module("w1", std::make_shared<Linear>(h, f, false, o));
    register_module("w2", std::make_shared<Linear>(f, h, false, o));
    register_module("w3", std::make_shared<Linear>(h, f, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor g = activation(act_, child("w1")->call(x));
    return child("w2")->call(mul(g, child("w3")->call(x)));
  }

 private:
  std::string act_;
};

// Note [Expected-load MoE] in models.h.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o)
      : Module("MixtralSparseMoeBlock"),
        experts_(c.num_local_experts),
        top_k_(c.num_experts_per_tok) {
    gate = register_module("gate", std::make_shared<Linear>(c.hidden_size, experts_, false, o));
    experts = register_module("experts", std::make_shared<ModuleList>());
    for (int64_t e = 0; e < experts_; ++e) experts->push_back(std::make_shared<Expert>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    // Router in float32 (MixtralSparseMoeBlock: softmax(router_logits, dtype=torch.float)).
    const Tensor probs = softmax(gate->call(flat), 1, DType::kFloat32);
    Tensor weights = narrow(probs, 1, 0, top_k_);  // stands in for topk's values
    weights = to(div(weights, sum(weights, {-1}, /*keepdim=*/true)), x.dtype());
    // Each expert on its expected share of the tokens * k assignments, rounded up.
    const int64_t per_expert = (tokens * top_k_ + experts_ - 1) / experts_;
    std::vector<Tensor> outs;
    outs.reserve(static_cast<size_t>(experts_));
    for (const auto& [name, expert] : experts->named_children()) {
      outs.push_back(expert->call(narrow(flat, 0, 0, per_expert)));
    }
    // The tokens * k expert outputs, weighted by their routing weight and summed per token.
    const Tensor routed = view(narrow(cat(outs, 0), 0, 0, tokens * top_k_), {tokens, top_k_, h});
    const Tensor combined = sum(mul(routed, unsqueeze(weights, -1)), {1});
    return view(combined, {b, s, h});
  }
  std::shared_ptr<Linear> gate;
  std::shared_ptr<ModuleList> experts;

 private:
  int64_t experts_, top_k_;
};

// Made empty and filled by build() once it sits in its ModuleList (Note [Filling repeated blocks
// after registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const std::string& prefix) : Module(prefix + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const RotaryDecoderStyle& s,
             const std::string& prefix, const TensorOptions& o, bool training) {
    self_attn =
        register_module("self_attn", std::make_shared<Attention>(c, s, prefix, o, training));
    if (layer_kind(c, index).ffn == FfnKind::kMoe) {
      mlp = register_module("block_sparse_moe", std::make_shared<SparseMoe>(c, o));
    } else {
      // A dense layer of an MoE model has its own width (ModelConfig::dense_intermediate_size).
      const int64_t f = c.num_local_experts > 0 && c.dense_intermediate_size > 0
                            ? c.dense_intermediate_size
                            : c.intermediate_size;
      mlp = register_module("mlp", std::make_shared<GatedMlp>(c, f, prefix, o));
    }
    input_layernorm = register_module("input_layernorm", make_norm(c, o, s));
    post_attention_layernorm = register_module("post_attention_layernorm", make_norm(c, o, s));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor h = add(x, self_attn->run(input_layernorm->call(x), cos_t, sin_t));
    return add(h, mlp->call(post_attention_layernorm->call(h)));
  }
  std::shared_ptr<Attention> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm;
};

// Empty until build(), like DecoderLayer.
class DecoderModel : public Module {
 public:
  explicit DecoderModel(const std::string& prefix) : Module(prefix + "Model") {}
  void build(const ModelConfig& c, const RotaryDecoderStyle& s, const std::string& prefix,
             const TensorOptions& o, bool training) {
    scale_embeddings_ = s.scale_embeddings;
    hidden_ = c.hidden_size;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>(prefix)));
    }
    norm = register_module("norm", make_norm(c, o, s));
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>(prefix + "RotaryEmbedding", rotary_dim(c), c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), s, prefix, o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens->call(ids);
    // Gemma scales the embeddings by sqrt(hidden) (GemmaModel's normalizer).
    if (scale_embeddings_) h = mul(h, std::sqrt(static_cast<double>(hidden_)));
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = per_head(cos_t), sin_h = per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  ModulePtr norm;
  std::shared_ptr<RotaryEmbedding> rotary_emb;

 private:
  bool scale_embeddings_ = false;
  int64_t hidden_ = 0;
  // The children of `layers`, typed, in order (forward walks them without copying names).
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

class ForCausalLM : public Module {
 public:
  ForCausalLM(const ModelConfig& c, const RotaryDecoderStyle& s, const std::string& prefix,
              const TensorOptions& o, bool training)
      : Module(prefix + "ForCausalLM") {
    model = register_module("model", std::make_shared<DecoderModel>(prefix));
    lm_head =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, s, prefix, o, training);  // under its final name: no renaming of the full tree
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "model.embed_tokens.weight");
  }
  Tensor forward(const Tensor& ids) override { return lm_head->call(model->call(ids)); }
  std::shared_ptr<DecoderModel> model;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace

ModulePtr build_rotary_decoder(const ModelConfig& c, const TensorOptions& o, bool training,
                               const RotaryDecoderStyle& style) {
  return std::make_shared<ForCausalLM>(c, style, std::string(style.prefix), o, training);
}

void parse_rotary_decoder(const ConfigFields& f, ModelConfig& c, const RotaryDecoderDefaults& d) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  if (!f.has("head_dim")) {
    if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
      f.fail("num_attention_heads",
             std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
                 std::to_string(c.hidden_size) + " (and no head_dim is given)");
    }
  }
  c.head_dim =
      f.integer("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  c.hidden_act = f.string(d.act_key, d.hidden_act);
  c.norm_eps = f.number("rms_norm_eps", d.rms_norm_eps);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", d.tie_word_embeddings);
  c.rope_theta = f.number("rope_theta", d.rope_theta);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
  c.attention_dropout = f.number("attention_dropout", 0.0);
}

void rotary_decoder_to_hf_json(const ModelConfig& c, nlohmann::json& j, const char* act_key) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j[act_key] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["attention_dropout"] = c.attention_dropout;
  if (c.sliding_window) j["sliding_window"] = *c.sliding_window;
}

}  // namespace shardplan::tensor::models
