// The rotary decoder of the Llama family (tensor/models/rotary_decoder.h): llama (1/2/3/3.1),
// mistral, mixtral, qwen2 and gemma differ only in biases, norms, the MLP activation, tied
// embeddings and Mixtral's sparse MoE. Names and shapes follow transformers' modeling_llama.py (and
// its siblings), <prefix> the family's class prefix:
//   model.embed_tokens.weight                       [vocab, hidden]
//   model.layers.N.input_layernorm.weight           [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight  q [heads*hd, hidden], k/v [kv*hd, hidden],
//                                                   o [hidden, heads*hd]
//   model.layers.N.self_attn.attn_sub_norm.weight   [hidden]                   (BitNet)
//   model.layers.N.post_attention_layernorm.weight  [hidden]
//   model.layers.N.mlp.{gate,up,down}_proj.weight   gate/up [ffn, hidden], down [hidden, ffn]
//   model.layers.N.mlp.ffn_sub_norm.weight          [ffn]                      (BitNet)
//   model.layers.N.mlp.gate.weight                  [experts, hidden]          (MoE layers)
//   model.layers.N.mlp.experts.gate_up_proj         [experts, 2 ffn, hidden]   (MoeStyle: the
//   model.layers.N.mlp.experts.down_proj            [experts, hidden, ffn]      order, names,
//   model.layers.N.mlp.shared_expert.*_proj.weight  as the dense MLP's          layout)
//   model.norm.weight, lm_head.weight (absent from the listing when tied)
#include "tensor/models/rotary_decoder.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/gated_delta_net.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/short_conv.h"

namespace shardplan::tensor::models {
namespace {

// LlamaRMSNorm is nn.RMSNorm's computation (the fp32 upcast inside changes no shape or count),
// unless the family brings its own (RotaryDecoderStyle::make_norm).
ModulePtr make_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o,
                    const RotaryDecoderStyle& s) {
  if (s.make_norm) return s.make_norm(dim, c.norm_eps, o);
  return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
}

class Attention : public AttentionBlock {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const RotaryDecoderStyle& s,
            const std::string& prefix, const TensorOptions& o, bool training)
      : AttentionBlock(prefix + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(kv_heads_of(c, kind)),
        head_dim_(c.head_dim),
        value_dim_(value_head_dim(c, kind)),
        dropout_(training ? c.attention_dropout : 0.0),
        eps_(c.norm_eps),
        full_width_norm_(s.qk_norm_full_width),
        output_gate_(s.output_gate) {
    // Granite's attention_multiplier replaces 1/sqrt(head_dim) (same count, another scale).
    if (s.granite_multipliers) scale_ = c.attention_multiplier;
    if (kind.window > 0) window_ = kind.window;
    // NoPE layers (SmolLM3, Llama 4's full layers) rotate nothing; Llama 4's RoPE layers
    // L2-normalize q and k.
    rope_ = kind.rope;
    l2_norm_ = s.l2_qk_norm_on_rope_layers && rope_ && c.qk_norm_per_head;
    const int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_, h = c.hidden_size;
    const int64_t v_width = kv_heads_ * value_dim_, o_width = heads_ * value_dim_;
    SP_ASSERT(!s.fused_projections || value_dim_ == head_dim_,
              "fused q/k/v projections are built for v as wide as k only");
    if (s.scale_values) value_scale_ = c.attention_value_scale;
    if (s.scale_keys) key_scale_ = c.key_multiplier;
    clip_ = c.clip_qkv;
    if (s.fused_projections) {  // Phi-3: o_proj registered first, then [q; k; v] in one
      o_proj =
          register_module(std::string(s.o_proj_name), std::make_shared<Linear>(q, h, c.o_bias, o));
      qkv_proj =
          register_module("qkv_proj", std::make_shared<Linear>(h, q + 2 * kv, c.qkv_bias, o));
    } else {
      q_proj = register_module(
          "q_proj", std::make_shared<Linear>(h, output_gate_ ? 2 * q : q, c.qkv_bias, o));
      k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
      v_proj = register_module("v_proj", std::make_shared<Linear>(h, v_width, c.qkv_bias, o));
      o_proj = register_module(std::string(s.o_proj_name),
                               std::make_shared<Linear>(o_width, h, c.o_bias, o));
    }
    const std::string qn(s.qk_norm_names.q), kn(s.qk_norm_names.k);
    norm_after_rope_ = s.qk_norm_after_rope;
    rope_in_float32_ = s.rope_in_float32;
    if (s.qk_norm && s.make_head_norm) {  // Cohere: a weight per head
      q_norm = register_module(qn, s.make_head_norm(heads_, head_dim_, c.norm_eps, o));
      k_norm = register_module(kn, s.make_head_norm(kv_heads_, head_dim_, c.norm_eps, o));
    } else if (s.qk_norm) {
      q_norm = register_module(qn, make_norm(head_dim_, c, o, s));
      k_norm = register_module(kn, make_norm(head_dim_, c, o, s));
    } else if (s.qk_norm_full_width) {  // OLMo 2: over every head's width at once
      q_norm = register_module("q_norm", make_norm(q, c, o, s));
      k_norm = register_module("k_norm", make_norm(kv, c, o, s));
    }
    if (s.sub_norms) {  // BitNet: over hidden_size, on the merged heads before o_proj
      SP_ASSERT(o_width == h && !output_gate_ && s.separate_output_gate.empty(),
                "attn_sub_norm is built for ungated heads spanning hidden_size only");
      sub_norm_ = register_module("attn_sub_norm", make_norm(h, c, o, s));
    }
    if (!s.separate_output_gate.empty()) {  // AFMoE
      gate_proj_ = register_module(std::string(s.separate_output_gate),
                                   std::make_shared<Linear>(h, q, false, o));
    }
    // GPT-OSS: one learned logit per head joins each softmax (no product; a per-head add).
    if (s.attention_sinks &&
        (!s.sinks_on_sliding_layers_only || kind.attention == AttentionType::kSliding)) {
      register_parameter("sinks", empty({heads_}, o));
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    Tensor qx, kx, vx;
    if (qkv_proj) {
      const Tensor qkv = qkv_proj->call(x);
      const int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
      qx = narrow(qkv, -1, 0, q);
      kx = narrow(qkv, -1, q, kv);
      vx = narrow(qkv, -1, q + kv, kv);
    }
    // q, then k, each split into heads, normed per head (Qwen3, Gemma 3) or over the whole width
    // (OLMo 2) and rotated: the op order of the trace.
    if (!qkv_proj) qx = q_proj->call(x);
    qx = clip(qx);
    if (full_width_norm_) qx = q_norm->call(qx);
    Tensor q, gate;
    if (output_gate_) {
      // Per head [query | gate] (Qwen3NextAttention's view and chunk); the gate's copy is the
      // reshape of its strided half.
      const Tensor qg = view(qx, {qx.size(0), qx.size(1), heads_, 2 * head_dim_});
      gate = reshape(narrow(qg, -1, head_dim_, head_dim_),
                     {qx.size(0), qx.size(1), heads_ * head_dim_});
      q = transpose(narrow(qg, -1, 0, head_dim_), 1, 2);
    } else {
      q = split_heads(qx, heads_, head_dim_);
    }
    const bool head_norm = q_norm && !full_width_norm_;
    if (head_norm && !norm_after_rope_) q = q_norm->call(q);  // per head, over head_dim
    if (rope_) q = rotate(q, cos_t, sin_t);
    if (head_norm && norm_after_rope_) q = q_norm->call(q);  // HunYuan: on the rotated q
    if (l2_norm_) q = rms_norm(q, {head_dim_}, Tensor(), eps_);
    if (!qkv_proj) kx = k_proj->call(x);
    kx = clip(kx);
    if (full_width_norm_) kx = k_norm->call(kx);
    Tensor k = split_heads(kx, kv_heads_, head_dim_);
    if (key_scale_) k = mul(k, *key_scale_);  // Falcon-H1: before RoPE, even at 1
    if (head_norm && !norm_after_rope_) k = k_norm->call(k);
    if (rope_) k = rotate(k, cos_t, sin_t);
    if (head_norm && norm_after_rope_) k = k_norm->call(k);
    if (l2_norm_) k = rms_norm(k, {head_dim_}, Tensor(), eps_);
    Tensor v = split_heads(clip(qkv_proj ? vx : v_proj->call(x)), kv_heads_, value_dim_);
    if (value_scale_) v = mul(v, *value_scale_);  // MiMo-V2-Flash: even at 1
    // A sliding window or chunk bounds the keys of each query (the layer's kind).
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, scale_,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    if (output_gate_) return o_proj->call(mul(merge_heads(out), sigmoid(gate)));
    if (gate_proj_) return o_proj->call(mul(merge_heads(out), sigmoid(gate_proj_->call(x))));
    if (sub_norm_) return o_proj->call(sub_norm_->call(merge_heads(out)));  // BitNet
    return o_proj->call(merge_heads(out));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj, qkv_proj;
  ModulePtr q_norm, k_norm;  // with RotaryDecoderStyle::qk_norm or qk_norm_full_width
  std::shared_ptr<Linear> gate_proj_;  // RotaryDecoderStyle::separate_output_gate

 private:
  // OLMo's clip_qkv: the projection clamped to [-clip, clip] (q, k and v; transformers' clamp_,
  // traced as a maximum and a minimum against the bounds: the same shapes, one more elementwise
  // pass).
  Tensor clip(const Tensor& x) const {
    if (!clip_) return x;
    return binary(BinaryOp::kMinimum, binary(BinaryOp::kMaximum, x, Scalar(-*clip_)),
                  Scalar(*clip_));
  }
  // RoPE on x, in float32 and back where the family rotates so (Cohere).
  Tensor rotate(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) const {
    if (!rope_in_float32_ || x.dtype() == DType::kFloat32) return apply_rotary(x, cos_t, sin_t);
    return to(apply_rotary(to(x, DType::kFloat32), cos_t, sin_t), x.dtype());
  }

  int64_t heads_, kv_heads_, head_dim_, value_dim_;
  double dropout_, eps_;
  std::optional<double> value_scale_;  // RotaryDecoderStyle::scale_values
  std::optional<double> key_scale_;    // RotaryDecoderStyle::scale_keys
  std::optional<double> clip_;         // ModelConfig::clip_qkv
  bool full_width_norm_, output_gate_;
  bool rope_ = true, l2_norm_ = false, norm_after_rope_ = false, rope_in_float32_ = false;
  std::optional<int64_t> window_;
  std::optional<double> scale_;  // unset: 1/sqrt(head_dim)
  ModulePtr sub_norm_;           // RotaryDecoderStyle::sub_norms: attn_sub_norm
};

// down(act(gate(x)) * up(x)): SwiGLU (silu) or GeGLU (Gemma's tanh gelu); Phi-3 fuses gate and up
// into one gate_up_proj whose first half is the gate; Arcee has no gate, down(act(up(x))). BitNet
// norms down_proj's input (`sub_norm`, registered as ffn_sub_norm after down_proj).
class GatedMlp : public Module {
 public:
  GatedMlp(const ModelConfig& c, int64_t f, const std::string& prefix, const TensorOptions& o,
           bool fused = false, const RotaryDecoderStyle* ungated = nullptr,
           const MlpNames& names = {}, ModulePtr sub_norm = nullptr)
      : Module(prefix + "MLP"), act_(c.hidden_act), ffn_(f), fused_(fused), names_(names) {
    const int64_t h = c.hidden_size;
    if (ungated) {  // Arcee, Starcoder2: no gate at all
      in_ = ungated->ungated_in_name;
      out_ = ungated->ungated_out_name;
      register_module(std::string(in_), std::make_shared<Linear>(h, f, c.mlp_bias, o));
      register_module(std::string(out_), std::make_shared<Linear>(f, h, c.mlp_bias, o));
    } else if (fused) {
      register_module("gate_up_proj", std::make_shared<Linear>(h, 2 * f, c.mlp_bias, o));
    } else {
      register_module(std::string(names_.gate), std::make_shared<Linear>(h, f, c.mlp_bias, o));
      register_module(std::string(names_.up), std::make_shared<Linear>(h, f, c.mlp_bias, o));
    }
    if (!ungated) {
      register_module(std::string(names_.down), std::make_shared<Linear>(f, h, c.mlp_bias, o));
    }
    if (sub_norm) sub_norm_ = register_module("ffn_sub_norm", std::move(sub_norm));
    // ACT2FN makes an activation module; xIELU's has parameters, so the MLP registers it as
    // act_fn after its projections (ApertusMLP, LlamaMLP).
    if (act_ == "xielu") act_fn_ = register_module("act_fn", std::make_shared<XieluActivation>(o));
  }
  Tensor forward(const Tensor& x) override {
    if (!in_.empty()) return child(out_)->call(sub(act(child(in_)->call(x))));
    if (fused_) {
      const Tensor gu = child("gate_up_proj")->call(x);
      const Tensor g = act(narrow(gu, -1, 0, ffn_));
      return child(names_.down)->call(sub(mul(g, narrow(gu, -1, ffn_, ffn_))));
    }
    const Tensor g = act(child(names_.gate)->call(x));
    return child(names_.down)->call(sub(mul(g, child(names_.up)->call(x))));
  }

 private:
  Tensor act(const Tensor& x) { return act_fn_ ? act_fn_->call(x) : activation(act_, x); }
  Tensor sub(const Tensor& x) { return sub_norm_ ? sub_norm_->call(x) : x; }
  std::string act_;
  int64_t ffn_;
  bool fused_;
  std::string_view in_, out_;  // an ungated MLP's projections; empty: gated
  MlpNames names_;
  ModulePtr act_fn_;
  ModulePtr sub_norm_;  // BitNet's ffn_sub_norm
};

// GraniteMoeShared's shared MLP (MoeStyle::shared_in_layer): output_linear(act(a) * b), [a; b] the
// halves of input_linear(x), neither with a bias.
class SharedMlp : public Module {
 public:
  SharedMlp(const ModelConfig& c, int64_t width, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "MLP"), act_(c.hidden_act), ffn_(width) {
    register_module("input_linear", std::make_shared<Linear>(c.hidden_size, 2 * ffn_, false, o));
    register_module("output_linear", std::make_shared<Linear>(ffn_, c.hidden_size, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor ab = child("input_linear")->call(x);
    const Tensor a = activation(act_, narrow(ab, -1, 0, ffn_));
    return child("output_linear")->call(mul(a, narrow(ab, -1, ffn_, ffn_)));
  }

 private:
  std::string act_;
  int64_t ffn_;
};

// HunYuan MoE's router (MoeStyle::float32_wg_router): a float32 linear "wg" inside the gate; the
// tokens cast to float32 for it.
class Float32WgRouter : public Module {
 public:
  Float32WgRouter(int64_t experts, int64_t hidden, const std::string& prefix,
                  const TensorOptions& o)
      : Module(prefix + "Gate") {
    TensorOptions f32 = o;
    f32.dtype = DType::kFloat32;
    register_module("wg", std::make_shared<Linear>(hidden, experts, false, f32));
  }
  Tensor forward(const Tensor& x) override { return child("wg")->call(to(x, DType::kFloat32)); }
};

// ERNIE 4.5's router (MoeStyle::router_with_statics): its weight and the statics module with the
// score-correction bias, both float32; the tokens are cast to float32 for the logits.
class StaticsRouter : public Module {
 public:
  StaticsRouter(int64_t experts, int64_t hidden, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "TopKRouter") {
    TensorOptions f32 = o;
    f32.dtype = DType::kFloat32;
    register_parameter("weight", empty({experts, hidden}, f32));
    auto statics = std::make_shared<Module>(prefix + "Statics");
    statics->register_parameter("e_score_correction_bias", empty({1, experts}, f32))
        .set_requires_grad(false);  // nn.Parameter(requires_grad=False): updated outside autograd
    register_module("moe_statics", statics);
  }
  Tensor forward(const Tensor& x) override {
    return matmul(to(x, DType::kFloat32), transpose(parameter("weight"), 0, 1));
  }
};

// HY 3's router (MoeStyle::float32_topk_router): a bare weight in the model's dtype, the logits
// F.linear(x.float(), weight.float()).
class Float32TopKRouter : public Module {
 public:
  Float32TopKRouter(int64_t experts, int64_t hidden, const std::string& prefix,
                    const TensorOptions& o)
      : Module(prefix + "TopKRouter") {
    register_parameter("weight", empty({experts, hidden}, o));
  }
  Tensor forward(const Tensor& x) override {
    return matmul(to(x, DType::kFloat32),
                  transpose(to(parameter("weight"), DType::kFloat32), 0, 1));
  }
};

// AFMoE's router (MoeStyle::router_class): a module of the family's class around the Linear
// `gate`.
class WrappedRouter : public Module {
 public:
  WrappedRouter(std::string_view type, int64_t experts, int64_t hidden, const TensorOptions& o)
      : Module(std::string(type)) {
    register_module("gate", std::make_shared<Linear>(hidden, experts, false, o));
  }
  Tensor forward(const Tensor& x) override { return child("gate")->call(x); }
};

// Note [Expected-load MoE] in models.h. The router, the routed experts (one GroupedExperts) and
// the shared expert, registered in the family's order (MoeStyle).
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const MoeStyle& m, const std::string& prefix,
            const TensorOptions& o)
      : Module(m.block_class.empty() ? prefix + "SparseMoeBlock" : std::string(m.block_class)),
        experts_(c.num_local_experts),
        top_k_(c.num_experts_per_tok),
        sigmoid_router_(m.sigmoid_router),
        softmax_after_top_k_(m.softmax_after_top_k),
        float32_combine_(m.float32_combine) {
    auto make_router = [&] {
      if (m.float32_topk_router) {
        router = register_module(std::string(m.router), std::make_shared<Float32TopKRouter>(
                                                            experts_, c.hidden_size, prefix, o));
        return;
      }
      if (m.float32_wg_router) {
        router = register_module(std::string(m.router), std::make_shared<Float32WgRouter>(
                                                            experts_, c.hidden_size, prefix, o));
        return;
      }
      if (m.router_with_statics) {
        router = register_module(std::string(m.router), std::make_shared<StaticsRouter>(
                                                            experts_, c.hidden_size, prefix, o));
        return;
      }
      if (!m.router_class.empty()) {
        router = register_module(
            std::string(m.router),
            std::make_shared<WrappedRouter>(m.router_class, experts_, c.hidden_size, o));
        return;
      }
      router = register_module(std::string(m.router),
                               std::make_shared<Linear>(c.hidden_size, experts_, m.router_bias, o));
    };
    auto make_shared_expert = [&] {
      if (c.shared_expert_intermediate_size <= 0 || m.shared_in_layer) return;
      shared = register_module(
          std::string(m.shared_name),
          std::make_shared<GatedMlp>(c, c.shared_expert_intermediate_size, prefix, o));
      if (m.shared_gate) {
        shared_gate = register_module(std::string(m.shared_name) + "_gate",
                                      std::make_shared<Linear>(c.hidden_size, 1, false, o));
      }
    };
    if (m.router_first) make_router();
    if (m.shared_before_experts) make_shared_expert();
    const std::string act = c.hidden_act;
    experts = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       prefix + "Experts", experts_, c.hidden_size, c.intermediate_size, m.layout,
                       m.expert_bias, [act](const Tensor& x) { return activation(act, x); }, o,
                       m.interleaved_gate_up));
    if (!m.router_first) make_router();
    if (!m.shared_before_experts) make_shared_expert();
    if (!m.frozen_bias.empty()) {
      register_parameter(std::string(m.frozen_bias), empty({experts_}, o)).set_requires_grad(false);
    }
    if (!m.output_norm.empty()) {
      output_norm =
          register_module(std::string(m.output_norm),
                          std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    }
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    // Router scores in float32 (softmax, or DeepSeek-V3's sigmoid), the top k of them normalized.
    const Tensor logits = router->call(flat);
    Tensor weights;
    if (softmax_after_top_k_) {
      // GraniteMoe: the top k logits (narrow stands in for topk's values), then their softmax.
      weights = to(softmax(narrow(logits, 1, 0, top_k_), 1, DType::kFloat32), x.dtype());
    } else {
      const Tensor probs = sigmoid_router_ ? sigmoid(to(logits, DType::kFloat32))
                                           : softmax(logits, 1, DType::kFloat32);
      weights = narrow(probs, 1, 0, top_k_);  // stands in for topk's values
      weights = to(div(weights, sum(weights, {-1}, /*keepdim=*/true)), x.dtype());
    }
    Tensor combined = expected_load_experts(*experts, flat, weights);
    if (shared) {
      Tensor y = shared->call(flat);
      if (shared_gate) y = mul(y, sigmoid(shared_gate->call(flat)));
      combined = float32_combine_
                     ? to(add(to(combined, DType::kFloat32), to(y, DType::kFloat32)), x.dtype())
                     : add(combined, y);
    }
    if (output_norm) combined = output_norm->call(combined);  // A.X K1's post_mlp_layernorm
    return view(combined, {b, s, h});
  }
  ModulePtr router;
  std::shared_ptr<GroupedExperts> experts;
  ModulePtr shared, shared_gate, output_norm;

 private:
  int64_t experts_, top_k_;
  bool sigmoid_router_, softmax_after_top_k_, float32_combine_;
};

// A.X-K2's gated norm (ModelConfig::gated_norm_rank): y = norm(x), then y * sigmoid(gate(y)) with
// the low-rank gate fc2(silu(fc1(y))) in float32 and the product cast back (AXK2GatedRMSNorm,
// AXK2GateMLP; Megatron's GatedNormWrapper).
class GateMlp : public Module {
 public:
  GateMlp(int64_t hidden, int64_t rank, const std::string& prefix, const TensorOptions& o)
      : Module(prefix + "GateMLP") {
    register_module("fc1", std::make_shared<Linear>(hidden, rank, false, o));
    register_module("fc2", std::make_shared<Linear>(rank, hidden, false, o));
  }
  Tensor forward(const Tensor& x) override {
    return child("fc2")->call(silu(child("fc1")->call(x)));
  }
};

class GatedRMSNorm : public Module {
 public:
  GatedRMSNorm(const ModelConfig& c, const std::string& prefix, const TensorOptions& o,
               const RotaryDecoderStyle& s)
      : Module(prefix + "GatedRMSNorm") {
    register_module("norm", make_norm(c.hidden_size, c, o, s));
    register_module("mlp", std::make_shared<GateMlp>(c.hidden_size, c.gated_norm_rank, prefix, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor y = child("norm")->call(x);
    const Tensor g = sigmoid(to(child("mlp")->call(y), DType::kFloat32));
    return to(mul(y, g), y.dtype());
  }
};

// Made empty and filled by build() once it sits in its ModuleList (Note [Filling repeated blocks
// after registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const std::string& prefix) : Module(prefix + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const RotaryDecoderStyle& s,
             const std::string& prefix, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    placement_ = s.norms;
    auto register_mixer = [&] {
      if (kind.attention == AttentionType::kLinear && s.linear_mixer == LinearMixer::kMamba2) {
        self_attn =
            register_module("mamba", make_mamba2_mixer(c, prefix + std::string(s.linear_mixer_name),
                                                       prefix + "RMSNormGated", o));
      } else if (kind.attention == AttentionType::kLinear &&
                 s.linear_mixer == LinearMixer::kShortConv) {
        self_attn = register_module(
            "conv", make_short_conv(c, prefix + std::string(s.linear_mixer_name), o));
      } else if (kind.attention == AttentionType::kLinear) {
        self_attn = register_module("linear_attn",
                                    make_gated_delta_net(c, prefix, o, s.linear_projections));
      } else if (s.latent_attention) {
        self_attn = register_module(
            "self_attn",
            make_latent_attention(c, kind, prefix, o, training, s.make_norm, s.latent_query_gate));
      } else {
        self_attn = register_module("self_attn",
                                    std::make_shared<Attention>(c, kind, s, prefix, o, training));
      }
    };
    if (!s.mixer_last) register_mixer();
    auto register_ffn = [&] {
      if (kind.ffn == FfnKind::kMoe) {
        mlp = register_module(std::string(s.ffn_name),
                              std::make_shared<SparseMoe>(c, s.moe, prefix, o));
        if (s.moe.shared_in_layer && c.shared_expert_intermediate_size > 0) {
          shared_mlp = register_module(
              "shared_mlp",
              std::make_shared<SharedMlp>(c, c.shared_expert_intermediate_size, prefix, o));
        }
        return;
      }
      if (s.mixer_last && s.moe.shared_in_layer) {  // GraniteMoeHybrid without routed experts
        mlp = register_module("shared_mlp",
                              std::make_shared<SharedMlp>(c, c.intermediate_size, prefix, o));
        return;
      }
      // A dense layer of an MoE model has its own width (ModelConfig::dense_intermediate_size).
      const int64_t f = c.num_local_experts > 0 && c.dense_intermediate_size > 0
                            ? c.dense_intermediate_size
                            : c.intermediate_size;
      mlp = register_module(
          std::string(s.ffn_name),
          std::make_shared<GatedMlp>(c, f, prefix, o, s.fused_projections || s.fused_gate_up,
                                     s.ungated_mlp ? &s : nullptr, s.mlp_names,
                                     s.sub_norms ? make_norm(f, c, o, s) : nullptr));
    };
    if (!s.norms_before_ffn) register_ffn();
    const int64_t h = c.hidden_size;
    // A.X-K2 (ModelConfig::gated_norm_rank): the input norm gated on every layer, the one before
    // the feed-forward on MoE layers.
    auto layer_norm = [&](bool gated) -> ModulePtr {
      if (gated && c.gated_norm_rank > 0) return std::make_shared<GatedRMSNorm>(c, prefix, o, s);
      return make_norm(h, c, o, s);
    };
    if (placement_ != NormPlacement::kPost) {
      input_layernorm = register_module(std::string(s.input_norm_name), layer_norm(true));
    }
    if (placement_ != NormPlacement::kParallel) {
      post_attention_layernorm = register_module(std::string(s.post_attention_norm_name),
                                                 layer_norm(kind.ffn == FfnKind::kMoe));
    }
    if (placement_ == NormPlacement::kGlmSandwich) {
      post_self_attn_layernorm =
          register_module(std::string(s.post_self_attn_norm_name), make_norm(h, c, o, s));
      post_mlp_layernorm =
          register_module(std::string(s.post_mlp_norm_name), make_norm(h, c, o, s));
    }
    // Seed-OSS's residual_dropout and Phi-3's and Phi's resid_pdrop: dropout on each half's output
    // before it joins the residual stream, in training only.
    if (training) resid_dropout_ = c.resid_dropout;
    ffn_only_dropout_ = s.resid_dropout_ffn_only;
    SP_ASSERT(resid_dropout_ == 0 || placement_ == NormPlacement::kPre ||
                  placement_ == NormPlacement::kParallel,
              "residual dropout is built for pre-norm and parallel layers only");
    if (placement_ == NormPlacement::kSandwich) {
      pre_feedforward_layernorm =
          register_module(std::string(s.pre_ffn_norm_name), make_norm(h, c, o, s));
    }
    if (placement_ == NormPlacement::kSandwich || placement_ == NormPlacement::kPost) {
      post_feedforward_layernorm =
          register_module(std::string(s.post_ffn_norm_name), make_norm(h, c, o, s));
    }
    if (s.norms_before_ffn) register_ffn();
    if (s.mixer_last) register_mixer();
    if (s.granite_multipliers) residual_multiplier_ = c.residual_multiplier;
    SP_ASSERT(!residual_multiplier_ || placement_ == NormPlacement::kPre ||
                  placement_ == NormPlacement::kGlmSandwich,
              "the residual multiplier is built for pre-norm and GLM-sandwich layers only");
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // A half's output dropped out before it joins the residual (training only; StableLM: the
    // feed-forward's only) and scaled (Granite, HyperCLOVA X).
    auto drop = [&](Tensor y) { return resid_dropout_ > 0 ? dropout(y, resid_dropout_, true) : y; };
    auto scale = [&](Tensor y) { return residual_multiplier_ ? mul(y, *residual_multiplier_) : y; };
    auto attn_branch = [&](Tensor y) { return scale(ffn_only_dropout_ ? y : drop(y)); };
    auto ffn_branch = [&](Tensor y) { return scale(drop(y)); };
    switch (placement_) {
      case NormPlacement::kSandwich: {  // Gemma 2/3: normed in and out of each half
        const Tensor a = self_attn->run(input_layernorm->call(x), cos_t, sin_t);
        const Tensor h = add(x, post_attention_layernorm->call(a));
        const Tensor m = mlp->call(pre_feedforward_layernorm->call(h));
        return add(h, post_feedforward_layernorm->call(m));
      }
      case NormPlacement::kGlmSandwich: {  // GLM-4: the same order under GLM's names
        const Tensor a = self_attn->run(input_layernorm->call(x), cos_t, sin_t);
        const Tensor h = add(x, scale(post_self_attn_layernorm->call(a)));
        const Tensor m = mlp->call(post_attention_layernorm->call(h));
        return add(h, scale(post_mlp_layernorm->call(m)));
      }
      case NormPlacement::kPost: {  // OLMo 2: each half normed on its way out only
        const Tensor h = add(x, post_attention_layernorm->call(self_attn->run(x, cos_t, sin_t)));
        return add(h, post_feedforward_layernorm->call(mlp->call(h)));
      }
      case NormPlacement::kParallel: {  // Cohere, Phi: both halves read one norm of x
        const Tensor n = input_layernorm->call(x);
        const Tensor a = attn_branch(self_attn->run(n, cos_t, sin_t));
        return add(add(x, a), ffn_branch(mlp->call(n)));
      }
      case NormPlacement::kPre:
        break;
    }
    // Each half's output, dropped out (Seed-OSS, Phi-3) or scaled (Granite), joins the residual.
    const Tensor h = add(x, attn_branch(self_attn->run(input_layernorm->call(x), cos_t, sin_t)));
    const Tensor n = post_attention_layernorm->call(h);
    Tensor m = mlp->call(n);
    // GraniteMoeShared: the shared MLP reads the same normed input, every token, unweighted.
    if (shared_mlp) m = add(m, shared_mlp->call(n));
    return add(h, ffn_branch(m));
  }
  std::shared_ptr<AttentionBlock> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm, post_self_attn_layernorm, post_mlp_layernorm, shared_mlp;

 private:
  NormPlacement placement_ = NormPlacement::kPre;
  double resid_dropout_ = 0;
  bool ffn_only_dropout_ = false;              // RotaryDecoderStyle::resid_dropout_ffn_only
  std::optional<double> residual_multiplier_;  // Granite's, applied even at 1
};

// Empty until build(), like DecoderLayer.
class DecoderModel : public Module {
 public:
  explicit DecoderModel(const std::string& prefix) : Module(prefix + "Model") {}
  void build(const ModelConfig& c, const RotaryDecoderStyle& s, const std::string& prefix,
             const TensorOptions& o, bool training) {
    scale_embeddings_ = s.scale_embeddings;
    norm_embeddings_ = s.norm_embeddings;
    if (s.granite_multipliers) embedding_multiplier_ = c.embedding_multiplier;
    // Starcoder2's embedding_dropout (the one rotary family that drops out its embeddings: the
    // others leave ModelConfig::embd_dropout at 0).
    if (training) embd_dropout_ = c.embd_dropout;
    hidden_ = c.hidden_size;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>(prefix)));
    }
    norm = register_module(std::string(s.final_norm_name), make_norm(c.hidden_size, c, o, s));
    bool any_rotates = false;  // an attention layer not listed as NoPE
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool linear =
          !c.layer_types.empty() && c.layer_types[static_cast<size_t>(i)] == AttentionType::kLinear;
      any_rotates = any_rotates ||
                    (!linear && !std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i));
    }
    if (!s.rotary_module_only_with_rope || any_rotates) {
      rotary_emb = register_module(
          "rotary_emb", std::make_shared<RotaryEmbedding>(prefix + "RotaryEmbedding", rotary_dim(c),
                                                          c.rope_theta));
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), s, prefix, o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens->call(ids);
    // Gemma scales the embeddings by sqrt(hidden) (GemmaModel's normalizer).
    if (scale_embeddings_) h = mul(h, std::sqrt(static_cast<double>(hidden_)));
    if (embedding_multiplier_) h = mul(h, *embedding_multiplier_);  // Granite's
    h = maybe_dropout(h, embd_dropout_, true);
    Tensor cos_h, sin_h;  // undefined without a rotary module: no layer reads them
    if (rotary_emb) {
      const auto [cos_t, sin_t] = rotary_emb->cos_sin(position_ids(ids.size(1)), h.dtype());
      cos_h = per_head(cos_t);
      sin_h = per_head(sin_t);
    }
    // NanoChat: the final norm on the embeddings too, after the rotary tables (its op order).
    if (norm_embeddings_) h = norm->call(h);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  ModulePtr norm;
  std::shared_ptr<RotaryEmbedding> rotary_emb;

 private:
  bool scale_embeddings_ = false;
  bool norm_embeddings_ = false;  // RotaryDecoderStyle::norm_embeddings
  std::optional<double> embedding_multiplier_;
  double embd_dropout_ = 0;  // set in training builds only
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
    lm_head = register_module(
        "lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, c.lm_head_bias, o));
    model->build(c, s, prefix, o, training);  // under its final name: no renaming of the full tree
    softcap_ = c.final_logit_softcapping;
    if (s.granite_multipliers) {
      if (s.logits_scaling_multiplies) {
        logit_scale_ = c.logits_scaling;  // HyperCLOVA X: logits * logits_scaling
      } else {
        (s.logits_scaling_on_hidden ? hidden_divisor_ : logits_divisor_) = c.logits_scaling;
      }
    }
    if (s.logit_scale) logit_scale_ = c.logit_scale;
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "model.embed_tokens.weight");
  }
  Tensor forward(const Tensor& ids) override {
    Tensor hidden = model->call(ids);
    if (hidden_divisor_) hidden = div(hidden, *hidden_divisor_);  // MiniCPM3's
    Tensor logits = lm_head->call(hidden);
    if (logits_divisor_) logits = div(logits, *logits_divisor_);  // Granite's logits_scaling
    if (logit_scale_) logits = mul(logits, *logit_scale_);        // Cohere's logit_scale
    if (softcap_ <= 0) return logits;
    // Gemma 2's final_logit_softcapping: cap * tanh(logits / cap).
    return mul(tanh(div(logits, softcap_)), softcap_);
  }
  std::shared_ptr<DecoderModel> model;
  std::shared_ptr<Linear> lm_head;

 private:
  double softcap_ = 0;
  std::optional<double> logits_divisor_, hidden_divisor_, logit_scale_;
};

}  // namespace

Tensor expected_load_experts(GroupedExperts& experts, const Tensor& flat, const Tensor& weights) {
  const int64_t tokens = flat.size(0), h = flat.size(1), top_k = weights.size(1);
  const int64_t count = experts.experts();
  // Each expert on its expected share of the tokens * k assignments, rounded up: the permuted
  // copy of the tokens the grouped GEMMs read (a buffer the backward keeps).
  const int64_t per_expert = (tokens * top_k + count - 1) / count;
  const Tensor dispatched =
      contiguous(expand(unsqueeze(narrow(flat, 0, 0, per_expert), 0), {count, per_expert, h}));
  const Tensor out = reshape(experts.call(dispatched), {count * per_expert, h});
  // The tokens * k expert outputs, weighted by their routing weight and summed per token.
  const Tensor routed = view(narrow(out, 0, 0, tokens * top_k), {tokens, top_k, h});
  return sum(mul(routed, unsqueeze(weights, -1)), {1});
}

std::shared_ptr<AttentionBlock> make_rotary_attention(const ModelConfig& c, const LayerKind& kind,
                                                      const RotaryDecoderStyle& style,
                                                      const std::string& prefix,
                                                      const TensorOptions& o, bool training) {
  return std::make_shared<Attention>(c, kind, style, prefix, o, training);
}

ModulePtr build_rotary_decoder(const ModelConfig& c, const TensorOptions& o, bool training,
                               const RotaryDecoderStyle& style) {
  return std::make_shared<ForCausalLM>(c, style, std::string(style.prefix), o, training);
}

// A rope_scaling that scales nothing: rope_type "default", or, where the family's config class
// reads it so (RotaryDecoderDefaults::mrope: Qwen2-VL, Qwen2.5-VL), "mrope" (multimodal RoPE: a
// text token's position is the same on its three axes, so its channels rotate as plain RoPE's;
// mrope_section changes no shape).
static bool unscaled_rope(const nlohmann::json& r, bool mrope) {
  if (!r.is_object()) return false;
  for (const char* key : {"rope_type", "type"}) {
    if (r.contains(key) && r.at(key).is_string()) {
      const std::string t = r.at(key).get<std::string>();
      return t == "default" || (mrope && t == "mrope");
    }
  }
  return false;
}

void parse_rotary_decoder(const ConfigFields& f, ModelConfig& c, const RotaryDecoderDefaults& d) {
  if (d.sizes) {
    c.vocab_size = f.integer("vocab_size", d.sizes->vocab_size);
    c.hidden_size = f.integer("hidden_size", d.sizes->hidden_size);
    c.intermediate_size = f.integer("intermediate_size", d.sizes->intermediate_size);
    c.num_hidden_layers = f.integer("num_hidden_layers", d.sizes->num_hidden_layers);
    c.num_attention_heads = f.integer("num_attention_heads", d.sizes->num_attention_heads);
    c.num_key_value_heads = f.integer("num_key_value_heads", d.sizes->num_key_value_heads);
  } else {
    c.vocab_size = f.integer("vocab_size");
    c.hidden_size = f.integer("hidden_size");
    c.intermediate_size = f.integer("intermediate_size");
    c.num_hidden_layers = f.integer("num_hidden_layers");
    c.num_attention_heads = f.integer("num_attention_heads");
    c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  }
  // Bounded before anything is made per layer (layer types, dense or indexer lists): validate()
  // would refuse the count, but only after those lists were allocated.
  if (c.num_hidden_layers <= 0) {
    f.fail("num_hidden_layers",
           "must be a positive integer, got " + std::to_string(c.num_hidden_layers));
  }
  if (c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected at most " +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  if (!f.has("head_dim") && d.head_dim == 0) {
    if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
      f.fail("num_attention_heads",
             std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
                 std::to_string(c.hidden_size) + " (and no head_dim is given)");
    }
  }
  const int64_t even_split = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.head_dim = f.integer("head_dim", d.head_dim > 0 ? d.head_dim : even_split);
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  c.hidden_act = f.string(d.act_key, d.hidden_act);
  c.norm_eps = f.number("rms_norm_eps", d.rms_norm_eps);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", d.tie_word_embeddings);
  c.rope_theta = f.number("rope_theta", d.rope_theta);
  if (f.has("rope_scaling") && !unscaled_rope(f.raw("rope_scaling"), d.mrope)) {
    c.rope_scaling = parse_rope_scaling(f);
  }
  c.attention_dropout = f.number("attention_dropout", 0.0);
}

AttentionType every_layer_sliding(const ModelConfig& c, int64_t /*layer*/) {
  return c.sliding_window ? AttentionType::kSliding : AttentionType::kFull;
}

void rope_on_windowed_layers_only(const ConfigFields& f, ModelConfig& c,
                                  const std::vector<AttentionType>& types,
                                  std::string_view family) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t = types[static_cast<size_t>(i)];
    if (t == AttentionType::kChunked) {
      f.fail("layer_types", "has chunked_attention, which " + std::string(family) +
                                " does not run; expected \"full_attention\" or "
                                "\"sliding_attention\"");
    }
    if (t == AttentionType::kFull || !c.sliding_window) c.nope_layers.push_back(i);
  }
}

std::vector<AttentionType> parse_layer_types(const ConfigFields& f, int64_t layers,
                                             AttentionType (*rule)(const ModelConfig&, int64_t),
                                             const ModelConfig& c) {
  std::vector<AttentionType> out;
  if (!f.has("layer_types")) {
    for (int64_t i = 0; i < layers; ++i) out.push_back(rule(c, i));
    return out;
  }
  const nlohmann::json& types = f.raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
    f.fail("layer_types",
           "expected a list of num_hidden_layers = " + std::to_string(layers) + " layer types");
  }
  for (const nlohmann::json& t : types) {
    bool known = false;
    for (const AttentionType a :
         {AttentionType::kFull, AttentionType::kSliding, AttentionType::kChunked}) {
      if (t.is_string() && t.get<std::string>() == to_string(a)) {
        out.push_back(a);
        known = true;
      }
    }
    if (!known) {
      f.fail("layer_types", t.dump().substr(0, 60) +
                                " is not a layer type; expected \"full_attention\", "
                                "\"sliding_attention\" or \"chunked_attention\"");
    }
  }
  return out;
}

void parse_granite_multipliers(const ConfigFields& f, ModelConfig& c) {
  c.embedding_multiplier = f.number("embedding_multiplier", 1);
  c.residual_multiplier = f.number("residual_multiplier", 1);
  c.attention_multiplier = f.number("attention_multiplier", 1);
  c.logits_scaling = f.number("logits_scaling", 1);
  // Granite passes attention_multiplier as the scale itself: 0 would not be "the default" there.
  if (!(c.attention_multiplier > 0)) {
    f.fail("attention_multiplier",
           "expected a positive softmax scale, got " + f.raw("attention_multiplier").dump());
  }
}

void granite_multipliers_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["embedding_multiplier"] = c.embedding_multiplier;
  j["residual_multiplier"] = c.residual_multiplier;
  j["attention_multiplier"] = c.attention_multiplier;
  j["logits_scaling"] = c.logits_scaling;
}

void parse_logit_scale(const ConfigFields& f, ModelConfig& c) {
  if (f.is_null("logit_scale")) {
    f.fail("logit_scale", "is null; expected a number (the logits are multiplied by it)");
  }
  c.logit_scale = f.number("logit_scale", 0.0625);
}

void require_built_value(const ConfigFields& f, const char* key, const nlohmann::json& built,
                         std::string_view family, const char* what) {
  if (!f.has(key) || f.raw(key) == built) return;
  f.fail(key, f.raw(key).dump().substr(0, 60) + ": transformers' " + std::string(family) +
                  " builds " + what + "; expected " + built.dump());
}

void pad_token_id_or(const ConfigFields& f, ModelConfig& c, int64_t absent) {
  if (!f.has("pad_token_id") && !f.is_null("pad_token_id")) c.pad_token_id = absent;
}

void class_rope_unless_given(const ConfigFields& f, ModelConfig& c, double theta,
                             const RopeScaling& scaling) {
  if (f.has("rope_parameters") || f.has("rope_scaling")) return;
  c.rope_theta = theta;
  c.rope_scaling = scaling;
}

void say_when_rope_is_unscaled(const ModelConfig& c, nlohmann::json& j) {
  if (!c.rope_scaling)
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
}

std::vector<int64_t> parse_no_rope_layers(const ConfigFields& f, int64_t layers, bool longer_ok) {
  std::vector<int64_t> nope;
  // An empty list is no list (transformers' configs test it for truth before deriving one).
  if (f.has("no_rope_layers") && !f.raw("no_rope_layers").empty()) {
    const nlohmann::json& v = f.raw("no_rope_layers");
    const int64_t n = v.is_array() ? static_cast<int64_t>(v.size()) : -1;
    if (n != layers && !(longer_ok && n > layers)) {
      f.fail("no_rope_layers", std::string("expected a list of ") + (longer_ok ? "at least " : "") +
                                   "num_hidden_layers = " + std::to_string(layers) +
                                   " entries, 1 (RoPE) or 0 (none)");
    }
    for (int64_t i = 0; i < layers; ++i) {
      const nlohmann::json& e = v[static_cast<size_t>(i)];
      if (!e.is_number_integer() || (e.get<int64_t>() != 0 && e.get<int64_t>() != 1)) {
        f.fail("no_rope_layers", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                     ", expected 1 (RoPE) or 0 (none)");
      }
      if (e.get<int64_t>() == 0) nope.push_back(i);
    }
    f.integer("no_rope_layer_interval", 4);  // ignored beside a list, as the configs do
    return nope;
  }
  const int64_t interval = f.integer("no_rope_layer_interval", 4);
  if (interval <= 0) {
    f.fail("no_rope_layer_interval", "must be positive, got " + std::to_string(interval));
  }
  for (int64_t i = interval - 1; i < layers; i += interval) nope.push_back(i);
  return nope;
}

nlohmann::json no_rope_layers_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    j.push_back(std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i) ? 0 : 1);
  }
  return j;
}

nlohmann::json layer_types_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::array();
  for (const AttentionType t : c.layer_types) j.push_back(std::string(to_string(t)));
  return j;
}

std::optional<int64_t> sliding_window_or(const ConfigFields& f, int64_t absent) {
  if (f.is_null("sliding_window")) return std::nullopt;
  return f.integer("sliding_window", absent);
}

void parse_qwen_sliding_window(const ConfigFields& f, ModelConfig& c,
                               AttentionType (*rule)(const ModelConfig&, int64_t),
                               bool has_layer_types, int64_t max_window_layers) {
  const bool listed = has_layer_types && f.has("layer_types");
  if (!f.boolean("use_sliding_window", false)) {
    // No window: the layer types may still be listed (checked), every layer attends in full.
    if (listed) (void)parse_layer_types(f, c.num_hidden_layers, rule, c);
    return;
  }
  c.sliding_window = sliding_window_or(f, 4096);
  c.max_window_layers = f.integer("max_window_layers", max_window_layers);
  if (c.max_window_layers < 0) {
    f.fail("max_window_layers", "must be >= 0, got " + std::to_string(c.max_window_layers));
  }
  if (!c.sliding_window) return;
  if (!listed) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_types.push_back(rule(c, i));
    return;
  }
  c.layer_types = parse_layer_types(f, c.num_hidden_layers, rule, c);
  for (AttentionType& t : c.layer_types) {
    if (t == AttentionType::kChunked) t = AttentionType::kFull;
  }
}

void qwen_sliding_window_to_hf_json(const ModelConfig& c, nlohmann::json& j, bool has_layer_types) {
  j["use_sliding_window"] = c.sliding_window.has_value();
  if (c.sliding_window) {
    j["max_window_layers"] = c.max_window_layers;
    if (has_layer_types) j["layer_types"] = layer_types_json(c);
  }
}

AttentionType slides_from_max_window_layers(const ModelConfig& c, int64_t layer) {
  return c.sliding_window && layer >= c.max_window_layers ? AttentionType::kSliding
                                                          : AttentionType::kFull;
}

void parse_qwen_moe(const ConfigFields& f, ModelConfig& c) {
  c.num_local_experts = f.integer("num_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size");
  const int64_t step = f.integer("decoder_sparse_step", 1);
  if (step <= 0) f.fail("decoder_sparse_step", "must be positive, got " + std::to_string(step));
  std::vector<int64_t> mlp_only;
  if (f.has("mlp_only_layers")) {
    const nlohmann::json& v = f.raw("mlp_only_layers");
    if (!v.is_array()) f.fail("mlp_only_layers", "expected a list of layer indices");
    for (const nlohmann::json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() >= c.num_hidden_layers) {
        f.fail("mlp_only_layers", e.dump() + " is not a layer, expected integers in 0.." +
                                      std::to_string(c.num_hidden_layers - 1));
      }
      mlp_only.push_back(e.get<int64_t>());
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool listed = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    if (listed || (i + 1) % step != 0) c.dense_layers.push_back(i);
  }
}

int64_t shared_experts_width(const ConfigFields& f, const char* key, int64_t count, int64_t width) {
  if (count < 0) f.fail(key, "must be >= 0, got " + std::to_string(count));
  const std::optional<int64_t> w = checked_mul(count, width);
  if (!w) {
    f.fail(key, std::to_string(count) + " shared experts of width " + std::to_string(width) +
                    " overflow a 64-bit width; expected a count a model has");
  }
  return *w;
}

void parse_deepseek_moe(const ConfigFields& f, ModelConfig& c, const DeepseekMoeDefaults& d) {
  const auto size = [&f](const char* key, int64_t absent) {
    return absent > 0 ? f.integer(key, absent) : f.integer(key);
  };
  c.num_local_experts = size("n_routed_experts", d.n_routed_experts);
  c.num_experts_per_tok = size("num_experts_per_tok", d.num_experts_per_tok);
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = size("moe_intermediate_size", d.moe_intermediate_size);
  // More than the layers makes every layer dense, as the models test `layer_idx >=
  // first_k_dense_replace` (DeepSeek-V3) or take min(first_k_dense_replace, layers) (V3.2).
  const int64_t dense = f.integer("first_k_dense_replace", d.first_k_dense_replace);
  if (dense < 0) f.fail("first_k_dense_replace", std::to_string(dense) + ", expected >= 0");
  for (int64_t i = 0; i < std::min(dense, c.num_hidden_layers); ++i) c.dense_layers.push_back(i);
  c.shared_expert_intermediate_size =
      shared_experts_width(f, "n_shared_experts", f.integer("n_shared_experts", d.n_shared_experts),
                           c.intermediate_size);
  // DeepSeek-V2's moe_layer_freq: DeepSeek-V3 files carry 1 (every layer past the dense ones).
  if (d.moe_layer_freq_period) {
    const int64_t freq = f.integer("moe_layer_freq", 1);
    if (freq <= 0) f.fail("moe_layer_freq", std::to_string(freq) + ", expected a positive period");
    for (int64_t i = dense; i < c.num_hidden_layers; ++i) {
      if (i % freq != 0) c.dense_layers.push_back(i);  // after the prefix: still sorted
    }
  } else if (f.integer("moe_layer_freq", 1) != 1) {
    f.fail("moe_layer_freq", "only 1 (every layer after first_k_dense_replace) is built, got " +
                                 f.raw("moe_layer_freq").dump());
  }
  check_expert_groups(f, c);
  f.number("routed_scaling_factor", 1.0);
  f.boolean("norm_topk_prob", true);
  c.mtp_layers = f.integer("num_nextn_predict_layers", 0);
  if (c.mtp_layers < 0) f.fail("num_nextn_predict_layers", "must be >= 0");
}

void check_expert_groups(const ConfigFields& f, const ModelConfig& c) {
  const int64_t groups = f.integer("n_group", 1), topk_groups = f.integer("topk_group", 1);
  if (groups <= 0 || c.num_local_experts % groups != 0 || topk_groups <= 0 ||
      topk_groups > groups) {
    f.fail("n_group", std::to_string(groups) + " groups with topk_group " +
                          std::to_string(topk_groups) + ", expected groups dividing " +
                          std::to_string(c.num_local_experts) +
                          " experts and 1 <= topk_group <= n_group");
  }
}

void deepseek_moe_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["n_routed_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["first_k_dense_replace"] = c.dense_layers.size();
  j["n_shared_experts"] =
      c.intermediate_size > 0 ? c.shared_expert_intermediate_size / c.intermediate_size : 0;
  j["num_nextn_predict_layers"] = c.mtp_layers;
}

void qwen_moe_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = c.dense_layers;
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
