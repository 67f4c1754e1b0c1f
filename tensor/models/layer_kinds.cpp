#include "tensor/models/layer_kinds.h"

#include <algorithm>

#include "base/error.h"

namespace shardplan::tensor {

std::string_view to_string(FfnKind k) {
  return k == FfnKind::kMoe ? "moe" : k == FfnKind::kNone ? "none" : "dense";
}

std::string describe(const LayerKind& k) {
  std::string s = std::string(k.kv_shared ? "kv-shared " : "") + (k.rope ? "" : "nope ");
  if (k.attention == AttentionType::kNone) return "ffn " + std::string(to_string(k.ffn));
  if (k.attention == AttentionType::kSliding) s += "sliding " + std::to_string(k.window) + " ";
  if (k.attention == AttentionType::kChunked) s += "chunked " + std::to_string(k.window) + " ";
  if (k.attention == AttentionType::kLinear) s += "linear ";
  if (k.attention == AttentionType::kSparse) {
    s += "sparse " + std::to_string(k.window) + (k.indexer ? " " : " reused ");
  }
  if (k.attention == AttentionType::kCompressedSparse) {
    s += "csa " + std::to_string(k.compress_rate) + " keys " + std::to_string(k.window) + " ";
  }
  if (k.attention == AttentionType::kHeavilyCompressed) {
    s += "hca " + std::to_string(k.compress_rate) + " sliding " + std::to_string(k.window) + " ";
  }
  if (k.parallel_mamba) s += "attention+mamba ";
  if (k.sparse_activation) s += "sparse-gate ";
  if (k.ffn == FfnKind::kNone) {
    return s + (k.attention == AttentionType::kFull ? "attention mixer" : "mixer");
  }
  return s + (k.hash_router ? "hash-" : "") + std::string(to_string(k.ffn));
}

LayerKind layer_kind(const ModelConfig& c, int64_t layer) {
  SP_CHECK(layer >= 0 && layer < c.num_hidden_layers, "layer ", layer, ", expected one of 0..",
           c.num_hidden_layers - 1);
  LayerKind k;
  if (c.num_local_experts > 0 &&
      !std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), layer)) {
    k.ffn = FfnKind::kMoe;
  }
  if (std::binary_search(c.no_ffn_layers.begin(), c.no_ffn_layers.end(), layer)) {
    k.ffn = FfnKind::kNone;
  }
  if (!c.layer_types.empty()) {
    k.attention = c.layer_types[static_cast<size_t>(layer)];
    if (k.attention == AttentionType::kSliding) k.window = c.sliding_window.value_or(0);
    if (k.attention == AttentionType::kChunked) k.window = c.attention_chunk_size;
    if (k.attention == AttentionType::kSparse) {
      k.window = c.index_topk;
      k.indexer = !std::binary_search(c.shared_indexer_layers.begin(),
                                      c.shared_indexer_layers.end(), layer);
    }
    if (k.attention == AttentionType::kCompressedSparse) {
      k.window = c.sliding_window.value_or(0) + c.index_topk;
      k.compress_rate = c.compress_rate_csa;
      k.indexer = true;
    }
    if (k.attention == AttentionType::kHeavilyCompressed) {
      k.window = c.sliding_window.value_or(0);
      k.compress_rate = c.compress_rate_hca;
    }
  }
  k.hash_router = k.ffn == FfnKind::kMoe &&
                  std::binary_search(c.hash_moe_layers.begin(), c.hash_moe_layers.end(), layer);
  k.rope = !std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), layer);
  k.kv_shared = c.num_kv_shared_layers > 0 && layer >= c.num_hidden_layers - c.num_kv_shared_layers;
  k.parallel_mamba = c.parallel_mamba;
  k.sparse_activation = static_cast<size_t>(layer) < c.activation_sparsity.size() &&
                        c.activation_sparsity[static_cast<size_t>(layer)] > 0;
  return k;
}

int64_t LayerStack::first_layer(int32_t kind) const {
  const auto it = std::find(kind_of_layer.begin(), kind_of_layer.end(), kind);
  return it == kind_of_layer.end() ? -1 : it - kind_of_layer.begin();
}

int64_t LayerStack::count(int32_t kind) const {
  return std::count(kind_of_layer.begin(), kind_of_layer.end(), kind);
}

LayerStack layer_stack(const ModelConfig& c) {
  LayerStack s;
  s.kind_of_layer.reserve(static_cast<size_t>(std::max<int64_t>(0, c.num_hidden_layers)));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    auto it = std::find(s.kinds.begin(), s.kinds.end(), k);
    if (it == s.kinds.end()) it = s.kinds.insert(s.kinds.end(), k);
    s.kind_of_layer.push_back(static_cast<int32_t>(it - s.kinds.begin()));
  }
  return s;
}

ModelConfig uniform_config(const ModelConfig& c, const LayerKind& k, int64_t layers) {
  SP_CHECK(layers >= 1, "a model of ", layers, " layers, expected at least one");
  ModelConfig one = c;
  one.num_hidden_layers = layers;
  one.dense_layers.clear();
  if (c.num_local_experts > 0 && k.ffn == FfnKind::kDense) {
    for (int64_t i = 0; i < layers; ++i) one.dense_layers.push_back(i);
  }
  one.layer_types.clear();
  if (!c.layer_types.empty()) one.layer_types.assign(static_cast<size_t>(layers), k.attention);
  one.no_ffn_layers.clear();
  if (k.ffn == FfnKind::kNone) {
    for (int64_t i = 0; i < layers; ++i) one.no_ffn_layers.push_back(i);
  }
  one.shared_indexer_layers.clear();
  if (k.attention == AttentionType::kSparse && !k.indexer) {
    for (int64_t i = 0; i < layers; ++i) one.shared_indexer_layers.push_back(i);
  }
  one.nope_layers.clear();
  if (!k.rope) {
    for (int64_t i = 0; i < layers; ++i) one.nope_layers.push_back(i);
  }
  one.num_kv_shared_layers = k.kv_shared ? layers : 0;
  one.hash_moe_layers.clear();
  if (k.hash_router) {
    for (int64_t i = 0; i < layers; ++i) one.hash_moe_layers.push_back(i);
  }
  // A sparse kind's layers keep the first sparse layer's share (it changes values, not work).
  one.activation_sparsity.clear();
  if (!c.activation_sparsity.empty()) {
    double share = 0;
    for (const double v : c.activation_sparsity) {
      if (k.sparse_activation && v > 0) {
        share = v;
        break;
      }
    }
    one.activation_sparsity.assign(static_cast<size_t>(layers), share);
  }
  SP_ASSERT(layer_kind(one, 0) == k, "a model of any kind of the stack");
  return one;
}

int64_t l_grad_cycles(const ModelConfig& c, int64_t high_cycle) {
  SP_CHECK(high_cycle >= 0 && high_cycle < c.h_cycles, "high cycle ", high_cycle,
           ", expected one of 0..", c.h_cycles - 1);
  // [1] * (h - len) + list: entry i is the list's (i - pad)-th, or a pad of 1.
  const auto listed = static_cast<int64_t>(c.l_bp_cycles.size());
  const int64_t pad = std::max<int64_t>(0, c.h_cycles - listed);
  const int64_t n = high_cycle < pad ? 1 : c.l_bp_cycles[static_cast<size_t>(high_cycle - pad)];
  return std::clamp<int64_t>(n, 0, c.l_cycles);
}

LayerPasses layer_passes(const ModelConfig& c) {
  if (c.h_cycles <= 0) return {};
  LayerPasses p{.forward = c.h_cycles * (c.l_cycles + 1), .backward = c.h_cycles, .layers = 2};
  for (int64_t i = 0; i < c.h_cycles; ++i) p.backward += l_grad_cycles(c, i);
  return p;
}

int64_t attention_heads_of(const ModelConfig& c, const LayerKind& kind) {
  return kind.attention == AttentionType::kSliding && c.sliding_num_attention_heads > 0
             ? c.sliding_num_attention_heads
             : c.num_attention_heads;
}

int64_t kv_heads_of(const ModelConfig& c, const LayerKind& kind) {
  if (kind.attention == AttentionType::kSliding && c.sliding_num_key_value_heads > 0) {
    return c.sliding_num_key_value_heads;
  }
  if (kind.attention == AttentionType::kFull && c.global_num_key_value_heads > 0) {
    return c.global_num_key_value_heads;
  }
  return c.num_key_value_heads;
}

int64_t head_dim_of(const ModelConfig& c, const LayerKind& kind) {
  return kind.attention == AttentionType::kFull && c.global_head_dim > 0 ? c.global_head_dim
                                                                         : c.head_dim;
}

int64_t value_head_dim(const ModelConfig& c, const LayerKind& kind) {
  return c.kv_lora_rank <= 0 && c.v_head_dim > 0 ? c.v_head_dim : head_dim_of(c, kind);
}

ModelConfig first_layers(const ModelConfig& c, int64_t layers) {
  SP_CHECK(layers >= 1 && layers <= c.num_hidden_layers, "the first ", layers, " layers of ",
           c.num_hidden_layers, ", expected between 1 and ", c.num_hidden_layers);
  ModelConfig out = c;
  out.num_hidden_layers = layers;
  std::erase_if(out.dense_layers, [&](int64_t l) { return l >= layers; });
  std::erase_if(out.shared_indexer_layers, [&](int64_t l) { return l >= layers; });
  std::erase_if(out.nope_layers, [&](int64_t l) { return l >= layers; });
  std::erase_if(out.no_ffn_layers, [&](int64_t l) { return l >= layers; });
  std::erase_if(out.hash_moe_layers, [&](int64_t l) { return l >= layers; });
  if (!out.layer_types.empty()) out.layer_types.resize(static_cast<size_t>(layers));
  if (!out.activation_sparsity.empty()) {
    out.activation_sparsity.resize(static_cast<size_t>(layers));
  }
  out.num_kv_shared_layers =
      std::max<int64_t>(0, layers - (c.num_hidden_layers - c.num_kv_shared_layers));
  return out;
}

}  // namespace shardplan::tensor
