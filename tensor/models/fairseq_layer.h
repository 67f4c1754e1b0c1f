// The pre-LN decoder layer of fairseq's transformer language models, as transformers keeps it in
// XGLMDecoderLayer and BioGptDecoderLayer around the family's own attention. Internal to
// tensor/models/:
//   layers->push_back(std::make_shared<FairseqDecoderLayer<Attention>>("XGLMDecoderLayer"));
// Names and shapes, h hidden and I ffn width, in registration (named_parameters) order:
//   self_attn.* (the family's), self_attn_layer_norm [h] + bias, fc1 [I, h] + bias,
//   fc2 [h, I] + bias, final_layer_norm [h] + bias      (LayerNorms at ModelConfig::norm_eps)
// x + drop(attn(ln1(x))), then h + drop(fc2(act(fc1(ln2(h))))). activation_dropout, the one
// between fc1 and fc2, is 0 (the families' parse refuses any other).
#pragma once

#include <memory>
#include <string>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h). `Attention`
// is constructed from (c, o, training) and called on the normed input.
template <class Attention>
class FairseqDecoderLayer : public Module {
 public:
  explicit FairseqDecoderLayer(const std::string& type_name) : Module(type_name) {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    act_ = c.hidden_act;
    dropout_ = training ? c.resid_dropout : 0.0;
    const int64_t h = c.hidden_size, ffn = c.intermediate_size;
    auto norm = [&] {
      return std::make_shared<LayerNorm>(DimVector{h}, c.norm_eps, true, true, o);
    };
    register_module("self_attn", std::make_shared<Attention>(c, o, training));
    register_module("self_attn_layer_norm", norm());
    register_module("fc1", std::make_shared<Linear>(h, ffn, true, o));
    register_module("fc2", std::make_shared<Linear>(ffn, h, true, o));
    register_module("final_layer_norm", norm());
  }
  Tensor forward(const Tensor& x) override {
    const Tensor a = child("self_attn")->call(child("self_attn_layer_norm")->call(x));
    const Tensor h = add(x, maybe_dropout(a, dropout_, dropout_ > 0));
    const Tensor n = child("final_layer_norm")->call(h);
    const Tensor m = child("fc2")->call(activation(act_, child("fc1")->call(n)));
    return add(h, maybe_dropout(m, dropout_, dropout_ > 0));
  }

 private:
  std::string act_;
  double dropout_ = 0;
};

}  // namespace shardplan::tensor::models
