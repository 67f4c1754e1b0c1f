// Parts that the families with their own layer layouts (tensor/models/family_deepseek_v4.cpp,
// family_nemotron_h.cpp, family_gemma4_text.cpp, family_gpt2.cpp, family_bloom.cpp, ...) build the
// same way: a gated MLP, and the *ForCausalLM shell around a backbone. Internal to tensor/models/.
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

// out(act(in(x))), then dropout with probability `dropout` (0: none; pass 0 outside training):
// GPT-2's ungated MLP as its descendants build it from nn.Linear, both projections with biases,
// named as the family names them (GPT-J fc_in / fc_out, StarCoder c_fc / c_proj, GPT-NeoX
// dense_h_to_4h / dense_4h_to_h).
class TwoLayerMlp : public Module {
 public:
  TwoLayerMlp(std::string type_name, const char* in, const char* out, int64_t hidden, int64_t width,
              std::string act, double dropout, const TensorOptions& o)
      : Module(std::move(type_name)), in_(in), out_(out), act_(std::move(act)), dropout_(dropout) {
    register_module(in_, std::make_shared<Linear>(hidden, width, true, o));
    register_module(out_, std::make_shared<Linear>(width, hidden, true, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor y = child(out_)->call(activation(act_, child(in_)->call(x)));
    return maybe_dropout(y, dropout_, dropout_ > 0);
  }

 private:
  std::string in_, out_, act_;
  double dropout_;
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

// The same shell around a backbone its constructor builds whole (Backbone(c, o, training)),
// registered under `backbone` ("transformer" in GPT-2's descendants, "model" in OPT), with lm_head
// [vocab, width] (width: hidden_size, or OPT's word_embed_proj_dim) tied to `embedding` when
// c.tie_word_embeddings.
template <typename Backbone>
class LmHeadModel : public Module {
 public:
  LmHeadModel(std::string type_name, const ModelConfig& c, const TensorOptions& o, bool training,
              std::string backbone, const char* embedding, int64_t width = 0)
      : Module(std::move(type_name)), backbone_(std::move(backbone)) {
    register_module(backbone_, std::make_shared<Backbone>(c, o, training));
    register_module("lm_head", std::make_shared<Linear>(width > 0 ? width : c.hidden_size,
                                                        c.vocab_size, false, o));
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", embedding);
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(child(backbone_)->call(ids));
  }

 private:
  std::string backbone_;
};

}  // namespace shardplan::tensor::models
