// Small models built from the Module tree for the tensor tests: a 2-layer MLP and a tiny
// decoder-only transformer with a tied embedding / lm_head. Sizes are small so parameter counts
// can be written out by hand in the tests.
//   auto lm = std::make_shared<test::TinyLM>();   // V=100, D=32, H=4, F=128, 2 layers
#pragma once

#include <memory>

#include "tensor/layers.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::tensor::test {

// Sequential(Linear(in, hidden), GELU, Linear(hidden, out)): parameters "0.*" and "2.*".
inline std::shared_ptr<Sequential> make_mlp(int64_t in, int64_t hidden, int64_t out) {
  auto mlp = std::make_shared<Sequential>();
  mlp->push_back(std::make_shared<Linear>(in, hidden));
  mlp->push_back(std::make_shared<GELU>());
  mlp->push_back(std::make_shared<Linear>(hidden, out));
  return mlp;
}

// Multi-head causal self-attention without biases: [B, S, D] -> [B, S, D].
class Attention : public Module {
 public:
  Attention(int64_t dim, int64_t heads) : Module("Attention"), heads_(heads) {
    q_proj = register_module("q_proj", std::make_shared<Linear>(dim, dim, false));
    k_proj = register_module("k_proj", std::make_shared<Linear>(dim, dim, false));
    v_proj = register_module("v_proj", std::make_shared<Linear>(dim, dim, false));
    o_proj = register_module("o_proj", std::make_shared<Linear>(dim, dim, false));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), d = x.size(2);
    auto heads = [&](const Tensor& t) {
      return transpose(view(t, {b, s, heads_, d / heads_}), 1, 2);
    };
    Tensor o = scaled_dot_product_attention(heads(q_proj->call(x)), heads(k_proj->call(x)),
                                            heads(v_proj->call(x)), Tensor(), 0.0,
                                            /*is_causal=*/true);
    return o_proj->call(reshape(transpose(o, 1, 2), {b, s, d}));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  int64_t heads_;
};

class Mlp : public Module {
 public:
  Mlp(int64_t dim, int64_t hidden) : Module("Mlp") {
    up = register_module("up", std::make_shared<Linear>(dim, hidden));
    act = register_module("act", std::make_shared<GELU>());
    down = register_module("down", std::make_shared<Linear>(hidden, dim));
  }
  Tensor forward(const Tensor& x) override { return down->call(act->call(up->call(x))); }
  std::shared_ptr<Linear> up;
  std::shared_ptr<GELU> act;
  std::shared_ptr<Linear> down;
};

// Pre-norm block: x + attn(LayerNorm(x)), then h + mlp(RMSNorm(h)).
class Block : public Module {
 public:
  Block(int64_t dim, int64_t heads, int64_t hidden) : Module("Block") {
    attn_norm = register_module("attn_norm", std::make_shared<LayerNorm>(DimVector{dim}));
    attn = register_module("attn", std::make_shared<Attention>(dim, heads));
    mlp_norm = register_module("mlp_norm", std::make_shared<RMSNorm>(DimVector{dim}));
    mlp = register_module("mlp", std::make_shared<Mlp>(dim, hidden));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = add(x, attn->call(attn_norm->call(x)));
    return add(h, mlp->call(mlp_norm->call(h)));
  }
  std::shared_ptr<LayerNorm> attn_norm;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<RMSNorm> mlp_norm;
  std::shared_ptr<Mlp> mlp;
};

// Token ids [B, S] (int64) -> logits [B, S, V]; lm_head.weight is embed.weight.
class TinyLM : public Module {
 public:
  static constexpr int64_t kVocab = 100, kDim = 32, kHeads = 4, kHidden = 128, kLayers = 2;

  explicit TinyLM(bool tie = true) : Module("TinyLM") {
    embed = register_module("embed", std::make_shared<Embedding>(kVocab, kDim));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < kLayers; ++i) {
      layers->push_back(std::make_shared<Block>(kDim, kHeads, kHidden));
    }
    norm = register_module("norm", std::make_shared<RMSNorm>(DimVector{kDim}));
    lm_head = register_module("lm_head", std::make_shared<Linear>(kDim, kVocab, false));
    if (tie) tie_parameters(*this, "lm_head.weight", "embed.weight");
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed->call(ids);
    for (const auto& [name, layer] : layers->named_children()) h = layer->call(h);
    return lm_head->call(norm->call(h));
  }
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace shardplan::tensor::test
