// Transformer stacks built from tensor/module.h primitives for the training-step tests and the
// training-trace benchmark, until (and besides) the Hugging Face builders of tensor/models/:
//   - GptModel: a GPT-3-style decoder as Megatron-LM / Korthikanti et al. 2022 describe it (fused
//     QKV, LayerNorm, GeLU MLP of 4h, dropout after attention probabilities, after the attention
//     projection and after the MLP), with the attention core either written out
//     (softmax(QK^T)V, scores materialized) or as one scaled_dot_product_attention call.
//   - LlamaModel: RMSNorm, RoPE, grouped-query attention through sdpa, SwiGLU MLP, untied head.
//   auto gpt = std::make_shared<test::GptModel>(test::GptConfig{.hidden = 64, .heads = 4});
//   TrainingStep st = trace_training_step(*gpt, {.batch = 2, .seq = 16});
#pragma once

#include <cmath>
#include <memory>

#include "tensor/layers.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::tensor::test {

struct GptConfig {
  int64_t vocab = 1000;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t max_positions = 512;
  double dropout = 0.1;          // 0 disables every dropout site (the op is then the identity)
  bool fused_attention = false;  // true: one sdpa call; false: softmax(QK^T)V written out
  DType dtype = DType::kFloat16;
};

// Megatron's ParallelAttention without tensor parallelism: x [b, s, h] -> [b, s, h].
class GptAttention : public Module {
 public:
  explicit GptAttention(const GptConfig& c) : Module("GptAttention"), c_(c) {
    const TensorOptions o{c.dtype};
    qkv = register_module("qkv", std::make_shared<Linear>(c.hidden, 3 * c.hidden, true, o));
    proj = register_module("proj", std::make_shared<Linear>(c.hidden, c.hidden, true, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = c_.hidden, a = c_.heads, d = h / a;
    // One [b, s, 3h] storage; q, k, v are views of it ([b, a, s, d] after the transpose).
    Tensor fused = qkv->call(x);
    auto head = [&](int64_t i) {
      return transpose(view(narrow(fused, 2, i * h, h), {b, s, a, d}), 1, 2);
    };
    Tensor q = head(0), k = head(1), v = head(2);
    Tensor ctx;
    if (c_.fused_attention) {
      ctx = scaled_dot_product_attention(q, k, v, Tensor(), c_.dropout, /*is_causal=*/true);
    } else {
      // Scores [b, a, s, s]; the 1/sqrt(d) scale by a Python number (saves nothing).
      Tensor scores = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(double(d)));
      Tensor probs = dropout(softmax(scores, -1), c_.dropout, true);
      ctx = matmul(probs, v);
    }
    Tensor merged = reshape(transpose(ctx, 1, 2), {b, s, h});
    return dropout(proj->call(merged), c_.dropout, true);
  }
  std::shared_ptr<Linear> qkv, proj;

 private:
  GptConfig c_;
};

class GptMlp : public Module {
 public:
  explicit GptMlp(const GptConfig& c) : Module("GptMlp"), p_(c.dropout) {
    const TensorOptions o{c.dtype};
    fc = register_module("fc", std::make_shared<Linear>(c.hidden, 4 * c.hidden, true, o));
    act = register_module("act", std::make_shared<GELU>());
    out = register_module("out", std::make_shared<Linear>(4 * c.hidden, c.hidden, true, o));
  }
  Tensor forward(const Tensor& x) override {
    return dropout(out->call(act->call(fc->call(x))), p_, true);
  }
  std::shared_ptr<Linear> fc;
  std::shared_ptr<GELU> act;
  std::shared_ptr<Linear> out;

 private:
  double p_;
};

// Pre-LayerNorm block: x + attn(ln1(x)), then h + mlp(ln2(h)).
class GptBlock : public Module {
 public:
  explicit GptBlock(const GptConfig& c) : Module("GptBlock") {
    const TensorOptions o{c.dtype};
    ln1 = register_module("ln1",
                          std::make_shared<LayerNorm>(DimVector{c.hidden}, 1e-5, true, true, o));
    attn = register_module("attn", std::make_shared<GptAttention>(c));
    ln2 = register_module("ln2",
                          std::make_shared<LayerNorm>(DimVector{c.hidden}, 1e-5, true, true, o));
    mlp = register_module("mlp", std::make_shared<GptMlp>(c));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = add(x, attn->call(ln1->call(x)));
    return add(h, mlp->call(ln2->call(h)));
  }
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<GptAttention> attn;
  std::shared_ptr<GptMlp> mlp;
};

// Token ids [b, s] -> fp32 logits [b, s, V] (the fp32 cast as Megatron's cross-entropy input);
// word embedding tied to the output layer, learned positions.
class GptModel : public Module {
 public:
  explicit GptModel(const GptConfig& c) : Module("GptModel"), c_(c) {
    const TensorOptions o{c.dtype};
    wte = register_module("wte", std::make_shared<Embedding>(c.vocab, c.hidden, o));
    wpe = register_module("wpe", std::make_shared<Embedding>(c.max_positions, c.hidden, o));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.layers; ++i) layers->push_back(std::make_shared<GptBlock>(c));
    ln_f = register_module("ln_f",
                           std::make_shared<LayerNorm>(DimVector{c.hidden}, 1e-5, true, true, o));
    head = register_module("head", std::make_shared<Linear>(c.hidden, c.vocab, false, o));
    tie_parameters(*this, "head.weight", "wte.weight");
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor pos = empty({ids.size(1)}, {DType::kInt64});
    Tensor h = dropout(add(wte->call(ids), wpe->call(pos)), c_.dropout, true);
    for (const auto& [name, layer] : layers->named_children()) h = layer->call(h);
    return to(head->call(ln_f->call(h)), DType::kFloat32);
  }
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> head;

 private:
  GptConfig c_;
};

struct LlamaConfig {
  int64_t vocab = 128256;
  int64_t hidden = 8192;
  int64_t heads = 64;
  int64_t kv_heads = 8;
  int64_t intermediate = 28672;
  int64_t layers = 80;
  DType dtype = DType::kBFloat16;
};

// Hugging Face LlamaAttention's computation: q/k/v projections, RoPE as
// q*cos + rotate_half(q)*sin, grouped-query sdpa (causal), o projection.
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& c) : Module("LlamaAttention"), c_(c) {
    const TensorOptions o{c.dtype};
    const int64_t d = c.hidden / c.heads;
    q_proj = register_module("q_proj", std::make_shared<Linear>(c.hidden, c.heads * d, false, o));
    k_proj =
        register_module("k_proj", std::make_shared<Linear>(c.hidden, c.kv_heads * d, false, o));
    v_proj =
        register_module("v_proj", std::make_shared<Linear>(c.hidden, c.kv_heads * d, false, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(c.heads * d, c.hidden, false, o));
  }
  // cos, sin: [s, d] position tables (computed once by the model).
  Tensor forward_rope(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = c_.hidden / c_.heads;
    auto heads = [&](const Tensor& t, int64_t n) { return transpose(view(t, {b, s, n, d}), 1, 2); };
    auto rope = [&](const Tensor& t) {
      const int64_t half = d / 2;
      Tensor rot = cat({neg(narrow(t, -1, half, half)), narrow(t, -1, 0, half)}, -1);
      return add(mul(t, cos_t), mul(rot, sin_t));
    };
    Tensor q = rope(heads(q_proj->call(x), c_.heads));
    Tensor k = rope(heads(k_proj->call(x), c_.kv_heads));
    Tensor v = heads(v_proj->call(x), c_.kv_heads);
    Tensor o = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true, {},
                                            /*enable_gqa=*/true);
    return o_proj->call(reshape(transpose(o, 1, 2), {b, s, c_.hidden}));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  LlamaConfig c_;
};

class LlamaMlp : public Module {
 public:
  explicit LlamaMlp(const LlamaConfig& c) : Module("LlamaMLP") {
    const TensorOptions o{c.dtype};
    gate =
        register_module("gate_proj", std::make_shared<Linear>(c.hidden, c.intermediate, false, o));
    up = register_module("up_proj", std::make_shared<Linear>(c.hidden, c.intermediate, false, o));
    down =
        register_module("down_proj", std::make_shared<Linear>(c.intermediate, c.hidden, false, o));
  }
  Tensor forward(const Tensor& x) override {
    return down->call(mul(silu(gate->call(x)), up->call(x)));
  }
  std::shared_ptr<Linear> gate, up, down;
};

class LlamaLayer : public Module {
 public:
  explicit LlamaLayer(const LlamaConfig& c) : Module("LlamaDecoderLayer") {
    const TensorOptions o{c.dtype};
    input_norm = register_module("input_layernorm",
                                 std::make_shared<RMSNorm>(DimVector{c.hidden}, 1e-5, true, o));
    attn = register_module("self_attn", std::make_shared<LlamaAttention>(c));
    post_norm = register_module("post_attention_layernorm",
                                std::make_shared<RMSNorm>(DimVector{c.hidden}, 1e-5, true, o));
    mlp = register_module("mlp", std::make_shared<LlamaMlp>(c));
  }
  Tensor forward_rope(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor h = add(x, attn->forward_rope(input_norm->call(x), cos_t, sin_t));
    return add(h, mlp->call(post_norm->call(h)));
  }
  std::shared_ptr<RMSNorm> input_norm, post_norm;
  std::shared_ptr<LlamaAttention> attn;
  std::shared_ptr<LlamaMlp> mlp;
};

// Token ids [b, s] -> logits [b, s, V].
class LlamaModel : public Module {
 public:
  explicit LlamaModel(const LlamaConfig& c) : Module("LlamaForCausalLM"), c_(c) {
    const TensorOptions o{c.dtype};
    embed = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab, c.hidden, o));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks.push_back(layers->push_back(std::make_shared<LlamaLayer>(c)));
    }
    norm = register_module("norm", std::make_shared<RMSNorm>(DimVector{c.hidden}, 1e-5, true, o));
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.hidden, c.vocab, false, o));
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t s = ids.size(1), d = c_.hidden / c_.heads;
    // The rotary tables: position-dependent constants, not activations of the step.
    const Tensor cos_t = empty({s, d}, {c_.dtype}), sin_t = empty({s, d}, {c_.dtype});
    Tensor h = embed->call(ids);
    for (const auto& layer : blocks) h = layer->forward_rope(h, cos_t, sin_t);
    return lm_head->call(norm->call(h));
  }
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<ModuleList> layers;
  std::vector<std::shared_ptr<LlamaLayer>> blocks;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;

 private:
  LlamaConfig c_;
};

}  // namespace shardplan::tensor::test
