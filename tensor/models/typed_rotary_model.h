// The decoder model of the families whose layers take rotary tables by layer type (Laguna, Mellum,
// Step 3.5's text model): embed_tokens, layers, norm and rotary_emb, one cos/sin table per layer
// type in use (a sliding layer rotating a different width or base than a full one). Internal to
// tensor/models/.
//   struct Parts {
//     static constexpr const char* kName = "LagunaModel";
//     using Layer = DecoderLayer;  // Layer(); build(c, index, o, training); attention(); run(x,
//     cos, sin) using Tables = Rotary;       // Tables(c); cos_sin(positions, type, dtype) -> {cos,
//     sin} static ModulePtr make_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o);
//   };
//   return std::make_shared<CausalLm<TypedRotaryModel<Parts>>>("LagunaForCausalLM", c, o, ...);
#pragma once

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
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
      layers_.push_back(list->push_back(std::make_shared<typename Parts::Layer>()));
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
  std::vector<std::shared_ptr<typename Parts::Layer>> layers_;
};

}  // namespace shardplan::tensor::models
