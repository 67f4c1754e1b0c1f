// Parts that the families with their own layer layouts (tensor/models/family_deepseek_v4.cpp,
// family_nemotron_h.cpp, family_gemma4_text.cpp) build the same way: a gated MLP, and the
// *ForCausalLM shell around a backbone. Internal to tensor/models/.
//   register_module("mlp", std::make_shared<GatedMlp>("Gemma4TextMLP", h, width, false, act, o));
//   return std::make_shared<CausalLm<Backbone>>("NemotronHForCausalLM", c, o, training,
//                                               "model.embeddings.weight");
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// down_proj(act(gate_proj(x)) * up_proj(x)), the three projections `bias`ed or not (Llama's MLP,
// typed as the family names it).
class GatedMlp : public Module {
 public:
  GatedMlp(std::string type_name, int64_t hidden, int64_t width, bool bias, std::string act,
           const TensorOptions& o)
      : Module(std::move(type_name)), act_(std::move(act)) {
    register_module("gate_proj", std::make_shared<Linear>(hidden, width, bias, o));
    register_module("up_proj", std::make_shared<Linear>(hidden, width, bias, o));
    register_module("down_proj", std::make_shared<Linear>(width, hidden, bias, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor gate = activation(act_, child("gate_proj")->call(x));
    return child("down_proj")->call(mul(gate, child("up_proj")->call(x)));
  }

 private:
  std::string act_;
};

// <prefix>ForCausalLM: the backbone `model` (a Module with build(c, o, training), filled once
// lm_head is registered: Note [Filling repeated blocks after registration] in blocks.h) and
// lm_head [vocab, hidden], tied to the backbone's token embedding `embedding` (its FQN) when
// c.tie_word_embeddings.
template <typename Backbone>
class CausalLm : public Module {
 public:
  CausalLm(std::string type_name, const ModelConfig& c, const TensorOptions& o, bool training,
           const char* embedding)
      : Module(std::move(type_name)) {
    auto model = register_module("model", std::make_shared<Backbone>());
    register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, o, training);
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", embedding);
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(child("model")->call(ids));
  }
};

}  // namespace shardplan::tensor::models
