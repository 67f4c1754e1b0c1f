#include "tensor/models/gemma_text_blocks.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "tensor/models/blocks.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {

ScaledRmsNorm::ScaledRmsNorm(std::string type_name, int64_t dim, double eps, bool with_scale,
                             const TensorOptions& o)
    : Module(std::move(type_name)), dim_(dim), eps_(eps), with_scale_(with_scale) {
  if (with_scale) register_parameter("weight", empty({dim}, o));
}

Tensor ScaledRmsNorm::forward(const Tensor& x) {
  return rms_norm(x, {dim_}, with_scale_ ? parameter("weight") : Tensor(), eps_);
}

void ScaledRmsNorm::reset_parameters(uint64_t /*seed*/) {
  if (with_scale_) init_member_constant("weight", 1.0);
}

LayerTypeRotary::LayerTypeRotary(std::string type_name, const ModelConfig& c)
    : Module(std::move(type_name)) {
  for (const AttentionType t : {AttentionType::kSliding, AttentionType::kFull}) {
    if (std::find(c.layer_types.begin(), c.layer_types.end(), t) == c.layer_types.end()) continue;
    const int64_t d = head_dim_of(c, LayerKind{.attention = t});
    const std::string name(to_string(t));
    register_buffer(name + "_inv_freq", empty({d / 2}, {.dtype = DType::kFloat32}), false);
    register_buffer(name + "_original_inv_freq", empty({d / 2}, {.dtype = DType::kFloat32}), false);
  }
}

std::pair<Tensor, Tensor> LayerTypeRotary::cos_sin(const Tensor& pos, AttentionType type,
                                                   DType dtype) {
  CallScope scope(*this);
  const Tensor freqs = mul(unsqueeze(to(pos, DType::kFloat32), -1),
                           buffer(std::string(to_string(type)) + "_inv_freq"));
  const Tensor emb = cat({freqs, freqs}, -1);
  return {per_head(to(cos(emb), dtype)), per_head(to(sin(emb), dtype))};
}

KvSharingAttention::KvSharingAttention(const Style& style, const ModelConfig& c,
                                       const LayerKind& kind, const TensorOptions& o, bool training)
    : AttentionBlock(style.type_name),
      heads_(c.num_attention_heads),
      kv_heads_(kv_heads_of(c, kind)),
      head_dim_(head_dim_of(c, kind)),
      dropout_(training ? c.attention_dropout : 0.0) {
  if (kind.window > 0) window_ = kind.window;
  const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  const auto norm = [&](bool with_scale) {
    return std::make_shared<ScaledRmsNorm>(style.norm_type, head_dim_, c.norm_eps, with_scale, o);
  };
  q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
  q_norm = register_module("q_norm", norm(true));
  if (!kind.kv_shared) {
    // attention_k_eq_v: a full layer's values are its keys' projection (no v_proj module).
    const bool values = !(c.attention_k_eq_v && kind.attention == AttentionType::kFull);
    const auto projections = [&] {
      k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
      if (values) {
        v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
      }
    };
    if (style.order == Order::kProjectionsFirst) projections();
    k_norm = register_module("k_norm", norm(true));
    v_norm = register_module("v_norm", norm(false));
    if (style.order == Order::kNormsFirst) projections();
  }
  o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
}

Tensor KvSharingAttention::run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  CallScope scope(*this);
  const Tensor q =
      apply_rotary(q_norm->call(split_heads(q_proj->call(x), heads_, head_dim_)), cos_t, sin_t);
  if (k_proj) {
    const Tensor k_raw = k_proj->call(x);
    kv_.first = apply_rotary(k_norm->call(split_heads(k_raw, kv_heads_, head_dim_)), cos_t, sin_t);
    kv_.second = v_norm->call(split_heads(v_proj ? v_proj->call(x) : k_raw, kv_heads_, head_dim_));
  } else {
    kv_ = shared_kv_;
  }
  // The q and k norms stand in for 1/sqrt(head_dim): the softmax scale is 1.
  const Tensor out =
      scaled_dot_product_attention(q, kv_.first, kv_.second, Tensor(), dropout_,
                                   /*is_causal=*/true, 1.0, kv_heads_ != heads_, window_);
  return o_proj->call(merge_heads(out));
}

void SharedKeysAndValues::before(KvSharingAttention& attention, const LayerKind& kind, int64_t b,
                                 int64_t s, DType dtype) {
  if (!kind.kv_shared) return;
  auto source = stored_.find(kind.attention);
  if (source == stored_.end()) {
    const DimVector kv{b, attention.kv_heads(), s, attention.head_dim()};
    source = stored_
                 .emplace(kind.attention,
                          std::pair{empty(kv, {.dtype = dtype}), empty(kv, {.dtype = dtype})})
                 .first;
  }
  attention.use_keys_and_values(source->second);
}

void SharedKeysAndValues::after(const KvSharingAttention& attention, const LayerKind& kind) {
  if (!kind.kv_shared) stored_[kind.attention] = attention.keys_and_values();
}

Tensor per_layer_inputs(const Tensor& ids, const Tensor& embeds, Module& table, Module& projection,
                        Module& norm, int64_t layers, int64_t width) {
  const int64_t hidden = embeds.size(-1);
  const DimVector split{ids.size(0), ids.size(1), layers, width};
  const Tensor tokens = reshape(mul(table.call(ids), std::sqrt(static_cast<double>(width))), split);
  const Tensor context = norm.call(
      reshape(mul(projection.call(embeds), 1.0 / std::sqrt(static_cast<double>(hidden))), split));
  return mul(add(context, tokens), 1.0 / std::sqrt(2.0));
}

Tensor per_layer_slice(const Tensor& inputs, int64_t layer) {
  return reshape(narrow(inputs, 2, layer, 1), {inputs.size(0), inputs.size(1), inputs.size(3)});
}

Tensor per_layer_gate(const Tensor& x, const Tensor& slice, Module& gate, Module& projection,
                      Module& norm, std::string_view act) {
  const Tensor g = mul(activation(act, gate.call(x)), slice);
  return norm.call(projection.call(g));
}

void parse_kv_shared_layers(const ConfigFields& f, ModelConfig& c, int64_t absent) {
  const int64_t layers = c.num_hidden_layers;
  const int64_t shared = f.integer("num_kv_shared_layers", absent);
  if (shared < 0 || shared >= layers) {
    f.fail("num_kv_shared_layers",
           std::to_string(shared) + ", expected 0.." + std::to_string(layers - 1) +
               (shared < 0 ? "" : ": with every layer shared no layer computes keys and values"));
  }
  c.num_kv_shared_layers = shared;
  // A shared layer attends with the last earlier non-shared layer of its type: one must exist.
  const int64_t first = layers - shared;
  const auto begin = c.layer_types.begin();
  for (int64_t i = first; i < layers; ++i) {
    const AttentionType t = c.layer_types[static_cast<size_t>(i)];
    if (std::find(begin, begin + first, t) == begin + first) {
      f.fail("num_kv_shared_layers",
             std::to_string(shared) + " shared layers: layer " + std::to_string(i) + " (" +
                 std::string(to_string(t)) +
                 ") has no earlier layer of its type to take keys and values from; expected "
                 "fewer shared layers");
    }
  }
}

}  // namespace shardplan::tensor::models
