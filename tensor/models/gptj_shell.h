// The GPT-J shell: transformers' GPTJForCausalLM (modeling_gptj.py) and CodeGenForCausalLM
// (modeling_codegen.py, GPT-J's layout under CodeGen's class names) around a family's own
// attention. Internal to tensor/models/; a family supplies its attention class and its names:
//   return make_gptj_causal_lm<Attention>(c, o, training, {.prefix = "CodeGen", .family =
//   "codegen"});
// Names and shapes (h hidden, I the MLP width, V vocabulary), in named_parameters order:
//   transformer.wte.weight [V, h]
//   transformer.h.N  ln_1 (LayerNorm with bias), attn.* (the family's), mlp.fc_in [I, h] + bias,
//                    mlp.fc_out [h, I] + bias
//   transformer.ln_f [h] + bias
//   lm_head.weight [V, h] + bias (nn.Linear's; a tie with wte leaves the bias the output layer's)
// A block is the parallel residual attn(n) + mlp(n) + x with n = ln_1(x): both halves read one
// norm. The attention takes (n, position ids) through run(); the rotary sinusoid tables are the
// family's: a sequence beyond their n_positions rows is refused, as transformers' gather fails.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor::models {

// What differs between the families that use the shell.
struct GptjNames {
  std::string prefix;  // the transformers class prefix: "GPTJ" builds GPTJBlock, GPTJMLP, ...
  std::string family;  // the model_type the sequence-length error names
};

namespace gptj_detail {

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
template <class Attention>
class Block : public Module {
 public:
  explicit Block(const std::string& prefix) : Module(prefix + "Block"), prefix_(prefix) {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module(
        "ln_1", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o));
    attn_ = register_module("attn", std::make_shared<Attention>(c, o, training));
    // <prefix>MLP: fc_in, fc_out (nn.Linear's bias), its output dropped out by resid_pdrop.
    register_module("mlp",
                    std::make_shared<TwoLayerMlp>(prefix_ + "MLP", "fc_in", "fc_out", c.hidden_size,
                                                  c.intermediate_size, c.hidden_act,
                                                  training ? c.resid_dropout : 0.0, o));
  }
  Tensor run(const Tensor& x, const Tensor& pos) {
    CallScope scope(*this);
    const Tensor n = child("ln_1")->call(x);
    const Tensor a = attn_->run(n, pos);
    const Tensor m = child("mlp")->call(n);
    return add(add(a, m), x);
  }

 private:
  std::string prefix_;
  std::shared_ptr<Attention> attn_;
};

template <class Attention>
class Model : public Module {
 public:
  Model(const ModelConfig& c, const TensorOptions& o, bool training, const GptjNames& names)
      : Module(names.prefix + "Model"),
        family_(names.family),
        max_positions_(c.max_position_embeddings),
        dropout_(c.embd_dropout),
        training_(training) {
    register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto h = register_module("h", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Block<Attention>>> blocks;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks.push_back(h->push_back(std::make_shared<Block<Attention>>(names.prefix)));
    }
    register_module(
        "ln_f", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o));
    for (const auto& b : blocks) b->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    SP_CHECK(seq <= max_positions_, family_, ": sequence length ", seq, " exceeds n_positions ",
             max_positions_, ", the rows of its sinusoid tables");
    Tensor h = maybe_dropout(child("wte")->call(ids), dropout_, training_);
    const Tensor pos = position_ids(seq);
    for (const auto& [name, block] : child("h")->named_children()) {
      h = static_cast<Block<Attention>&>(*block).run(h, pos);
    }
    return child("ln_f")->call(h);
  }

 private:
  std::string family_;
  int64_t max_positions_;
  double dropout_;
  bool training_;
};

template <class Attention>
class ForCausalLM : public Module {
 public:
  ForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training, const GptjNames& names)
      : Module(names.prefix + "ForCausalLM") {
    register_module("transformer", std::make_shared<Model<Attention>>(c, o, training, names));
    register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, true, o));
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "transformer.wte.weight");
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(child("transformer")->call(ids));
  }
};

}  // namespace gptj_detail

// The causal LM of `c` around `Attention` (constructed from (c, o, training), run(n, pos)).
template <class Attention>
ModulePtr make_gptj_causal_lm(const ModelConfig& c, const TensorOptions& o, bool training,
                              const GptjNames& names) {
  return std::make_shared<gptj_detail::ForCausalLM<Attention>>(c, o, training, names);
}

// GPTJConfig's and CodeGenConfig's common keys after the sizes: activation, LayerNorm epsilon,
// the tie (untied by default), the biases every layer has (none on the attention projections,
// nn.Linear's on fc_in, fc_out and lm_head), the dropouts. Neither attention reads RoPE settings
// (base 10,000 always): rope_scaling is kept only so that a plan trained beyond n_positions by
// --rope-scaling (Note [Long context by RoPE scaling] in planner/cli/plan_args.cpp) reads back as
// it was written.
inline void parse_gptj_common(const ConfigFields& f, ModelConfig& c) {
  c.hidden_act = f.string("activation_function", "gelu_new");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = c.o_bias = false;
  c.mlp_bias = true;
  c.lm_head_bias = true;
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
  c.embd_dropout = f.number("embd_pdrop", 0.0);
  c.attention_dropout = f.number("attn_pdrop", 0.0);
  c.resid_dropout = f.number("resid_pdrop", 0.0);
}

// What both families' parse reads back. No lm_head_bias: the output bias is the family's, not a
// config key (the shared check of architecture keys refuses one nobody reads).
inline void gptj_config_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  j["n_positions"] = c.max_position_embeddings;
  j["n_inner"] = c.intermediate_size;
  j["rotary_dim"] = rotary_dim(c);
  j["activation_function"] = c.hidden_act;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["embd_pdrop"] = c.embd_dropout;
  j["attn_pdrop"] = c.attention_dropout;
  j["resid_pdrop"] = c.resid_dropout;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
}

}  // namespace shardplan::tensor::models
