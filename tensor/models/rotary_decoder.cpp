// The rotary decoder of the Llama family: llama (1/2/3/3.1), mistral, mixtral, qwen2 and gemma
// differ only in biases, norms, the MLP activation, tied embeddings and Mixtral's sparse MoE.
// Names and shapes follow transformers' modeling_llama.py (and its siblings):
//   model.embed_tokens.weight                       [vocab, hidden]
//   model.layers.N.input_layernorm.weight           [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight  q [heads*hd, hidden], k/v [kv*hd, hidden],
//                                                   o [hidden, heads*hd]
//   model.layers.N.post_attention_layernorm.weight  [hidden]
//   model.layers.N.mlp.{gate,up,down}_proj.weight   gate/up [ffn, hidden], down [hidden, ffn]
//   model.layers.N.block_sparse_moe.gate.weight     [experts, hidden]          (mixtral)
//   model.layers.N.block_sparse_moe.experts.E.w{1,3}.weight [ffn, hidden], w2 [hidden, ffn]
//   model.norm.weight, lm_head.weight (absent from the listing when tied)
#include <cmath>
#include <memory>
#include <vector>

#include "tensor/base/error.h"
#include "tensor/models/blocks.h"
#include "tensor/models/models_internal.h"

namespace shardplan::tensor::models {
namespace {

// "Llama", "Mistral", ...: the prefix of the transformers class names, so module types read as
// in PyTorch ("LlamaDecoderLayer").
std::string prefix_of(const std::string& model_type) {
  if (model_type == "llama") return "Llama";
  if (model_type == "mistral") return "Mistral";
  if (model_type == "mixtral") return "Mixtral";
  if (model_type == "qwen2") return "Qwen2";
  if (model_type == "gemma") return "Gemma";
  SP_ASSERT(false, "not a rotary decoder: ", model_type);
}

// Gemma's RMSNorm scales by (1 + weight) (GemmaRMSNorm), its weight stored as the offset.
class GemmaRMSNorm : public Module {
 public:
  GemmaRMSNorm(int64_t dim, double eps, const TensorOptions& o)
      : Module("GemmaRMSNorm"), dim_(dim), eps_(eps) {
    register_parameter("weight", empty({dim}, o));
  }
  Tensor forward(const Tensor& x) override {
    return rms_norm(x, {dim_}, add(parameter("weight"), 1.0), eps_);
  }
  void reset_parameters(uint64_t /*seed*/) override { init_member_constant("weight", 0.0); }

 private:
  int64_t dim_;
  double eps_;
};

// LlamaRMSNorm is nn.RMSNorm's computation (the fp32 upcast inside changes no shape or count).
ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  if (c.model_type == "gemma") return std::make_shared<GemmaRMSNorm>(c.hidden_size, c.norm_eps, o);
  return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const std::string& prefix, const TensorOptions& o, bool training)
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
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor q = apply_rotary(split_heads(q_proj->call(x), heads_, head_dim_), cos_t, sin_t);
    const Tensor k = apply_rotary(split_heads(k_proj->call(x), kv_heads_, head_dim_), cos_t, sin_t);
    const Tensor v = split_heads(v_proj->call(x), kv_heads_, head_dim_);
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true,
                                                    {}, /*enable_gqa=*/kv_heads_ != heads_);
    return o_proj->call(merge_heads(out));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
};

// down(act(gate(x)) * up(x)): SwiGLU (silu) or GeGLU (Gemma's tanh gelu).
class GatedMlp : public Module {
 public:
  GatedMlp(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "MLP"), act_(c.hidden_act) {
    const int64_t h = c.hidden_size, f = c.intermediate_size;
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
  void build(const ModelConfig& c, const std::string& prefix, const TensorOptions& o,
             bool training) {
    self_attn = register_module("self_attn", std::make_shared<Attention>(c, prefix, o, training));
    if (c.num_local_experts > 0) {
      mlp = register_module("block_sparse_moe", std::make_shared<SparseMoe>(c, o));
    } else {
      mlp = register_module("mlp", std::make_shared<GatedMlp>(c, prefix, o));
    }
    input_layernorm = register_module("input_layernorm", make_norm(c, o));
    post_attention_layernorm = register_module("post_attention_layernorm", make_norm(c, o));
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
  void build(const ModelConfig& c, const std::string& prefix, const TensorOptions& o,
             bool training) {
    gemma_ = c.model_type == "gemma";
    hidden_ = c.hidden_size;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>(prefix)));
    }
    norm = register_module("norm", make_norm(c, o));
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>(prefix + "RotaryEmbedding", rotary_dim(c), c.rope_theta));
    for (const auto& layer : layers_) layer->build(c, prefix, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens->call(ids);
    // Gemma scales the embeddings by sqrt(hidden) (GemmaModel's normalizer).
    if (gemma_) h = mul(h, std::sqrt(static_cast<double>(hidden_)));
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
  bool gemma_ = false;
  int64_t hidden_ = 0;
  // The children of `layers`, typed, in order (forward walks them without copying names).
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

class ForCausalLM : public Module {
 public:
  ForCausalLM(const ModelConfig& c, const std::string& prefix, const TensorOptions& o,
              bool training)
      : Module(prefix + "ForCausalLM") {
    model = register_module("model", std::make_shared<DecoderModel>(prefix));
    lm_head =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, prefix, o, training);  // under its final name: no renaming of the full tree
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "model.embed_tokens.weight");
  }
  Tensor forward(const Tensor& ids) override { return lm_head->call(model->call(ids)); }
  std::shared_ptr<DecoderModel> model;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace

ModulePtr build_llama_like(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<ForCausalLM>(c, prefix_of(c.model_type), o, training);
}

}  // namespace shardplan::tensor::models
