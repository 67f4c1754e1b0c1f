// The decoder model of the families whose layers take rotary tables by layer type (Laguna, Mellum,
// Step 3.5's text model): embed_tokens, layers, norm and rotary_emb, one cos/sin table per layer
// type in use (a sliding layer rotating a different width or base than a full one), and their
// common pre-norm decoder layer (TypedDecoderLayer). Internal to tensor/models/.
//   struct Parts {
//     static constexpr const char* kName = "LagunaModel";
//     static constexpr const char* kLayerName = "LagunaDecoderLayer";
//     static constexpr const char* kMlpName = "LagunaMLP";
//     using Attn = Attention;  // Attn(c, kind, o, training); run(x, cos, sin)
//     using Moe = SparseMoe;   // Moe(c, o)
//     using Tables = Rotary;   // Tables(c); cos_sin(positions, type, dtype) -> {cos, sin}
//     static ModulePtr make_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o);
//     static bool mlp_bias(const ModelConfig& c);
//   };
//   return std::make_shared<CausalLm<TypedRotaryModel<Parts>>>("LagunaForCausalLM", c, o, ...);
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_shell.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

inline bool uses(const std::vector<AttentionType>& types, AttentionType t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

// The layer types of `c`'s layers, each once, in the order of first use (transformers orders them
// as a Python set; its rotary embedding registers a table per type).
inline std::vector<AttentionType> types_in_use(const ModelConfig& c) {
  std::vector<AttentionType> out;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t = layer_kind(c, i).attention;
    if (!uses(out, t)) out.push_back(t);
  }
  return out;
}

// <X>RotaryEmbedding of these families: per layer type in use, inv_freq of half the channels that
// type rotates (`rotated(type)`) and its original copy, non-persistent float32 buffers named by
// the type (transformers orders the types as a Python set; here by first use).
class TypedRotaryTables : public Module {
 public:
  TypedRotaryTables(std::string type_name, const ModelConfig& c,
                    const std::function<int64_t(AttentionType)>& rotated)
      : Module(std::move(type_name)) {
    for (const AttentionType t : types_in_use(c)) {
      const int64_t half = rotated(t) / 2;
      const std::string name(to_string(t));
      register_buffer(name + "_inv_freq", empty({half}, {.dtype = DType::kFloat32}), false);
      register_buffer(name + "_original_inv_freq", empty({half}, {.dtype = DType::kFloat32}),
                      false);
    }
  }
  // {cos, sin} [1, 1, S, rotated width] of `type`'s layers in `dtype`, as RotaryEmbedding::cos_sin
  // makes them (the attention_scaling factor, YaRN's attention_factor where it is not 1, is one
  // multiply of the tables and is not traced).
  std::pair<Tensor, Tensor> cos_sin(const Tensor& pos, AttentionType type, DType dtype) {
    CallScope scope(*this);
    const Tensor freqs = mul(unsqueeze(to(pos, DType::kFloat32), -1),
                             buffer(std::string(to_string(type)) + "_inv_freq"));
    const Tensor emb = cat({freqs, freqs}, -1);
    return {per_head(to(cos(emb), dtype)), per_head(to(sin(emb), dtype))};
  }
};

// <X>DecoderLayer of these families, made empty and filled once it sits in its ModuleList (Note
// [Filling repeated blocks after registration], blocks.h): self_attn, mlp (the family's sparse
// MoE block on the layers layer_kinds.h calls MoE, else a gated MLP of dense_intermediate_size,
// intermediate_size when the file states none), input_layernorm, post_attention_layernorm; the
// forward is Llama's pre-norm pair of residual branches.
template <class Parts>
class TypedDecoderLayer : public Module {
 public:
  TypedDecoderLayer() : Module(Parts::kLayerName) {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    kind_ = layer_kind(c, index);
    self_attn_ =
        register_module("self_attn", std::make_shared<typename Parts::Attn>(c, kind_, o, training));
    if (kind_.ffn == FfnKind::kMoe) {
      register_module("mlp", std::make_shared<typename Parts::Moe>(c, o));
    } else {
      const int64_t width =
          c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
      register_module("mlp", std::make_shared<GatedMlp>(Parts::kMlpName, c.hidden_size, width,
                                                        Parts::mlp_bias(c), c.hidden_act, o));
    }
    register_module("input_layernorm", Parts::make_norm(c.hidden_size, c, o));
    register_module("post_attention_layernorm", Parts::make_norm(c.hidden_size, c, o));
  }
  AttentionType attention() const { return kind_.attention; }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor h = add(x, self_attn_->run(child("input_layernorm")->call(x), cos_t, sin_t));
    return add(h, child("mlp")->call(child("post_attention_layernorm")->call(h)));
  }

 private:
  LayerKind kind_;
  std::shared_ptr<typename Parts::Attn> self_attn_;
};

// Made empty and filled by build() once registered (Note [Filling repeated blocks after
// registration], blocks.h). The forward makes the tables of every layer type in use once, before
// the layers, as the transformers models make them, and hands each layer its type's.
template <class Parts>
class TypedRotaryModel : public Module {
 public:
  TypedRotaryModel() : Module(Parts::kName) {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto list = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(list->push_back(std::make_shared<TypedDecoderLayer<Parts>>()));
    }
    register_module("norm", Parts::make_norm(c.hidden_size, c, o));
    rotary_emb_ = register_module("rotary_emb", std::make_shared<typename Parts::Tables>(c));
    types_ = types_in_use(c);
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_tokens")->call(ids);
    const Tensor pos = position_ids(ids.size(1));
    std::vector<std::pair<AttentionType, std::pair<Tensor, Tensor>>> tables;
    for (const AttentionType t : types_) {
      tables.emplace_back(t, rotary_emb_->cos_sin(pos, t, h.dtype()));
    }
    for (const auto& layer : layers_) {
      const auto it = std::find_if(tables.begin(), tables.end(),
                                   [&](const auto& e) { return e.first == layer->attention(); });
      h = layer->run(h, it->second.first, it->second.second);
    }
    return child("norm")->call(h);
  }

 private:
  std::shared_ptr<typename Parts::Tables> rotary_emb_;
  std::vector<AttentionType> types_;
  std::vector<std::shared_ptr<TypedDecoderLayer<Parts>>> layers_;
};

}  // namespace shardplan::tensor::models
