// gpt2: GPT-2 as transformers' GPT2Config (n_embd, n_layer, ... names) and modeling_gpt2.py:
// learned positions, fused qkv, LayerNorm, GeLU MLP, and Conv1D layers whose weight is stored [in,
// out] (the transpose of nn.Linear's):
//   transformer.wte.weight [vocab, n_embd], transformer.wpe.weight [n_positions, n_embd]
//   transformer.h.N.ln_1.{weight,bias}, transformer.h.N.attn.c_attn.{weight [n_embd, 3 n_embd],
//   bias} transformer.h.N.attn.c_proj.{weight [n_embd, n_embd], bias}, transformer.h.N.ln_2.*
//   transformer.h.N.mlp.c_fc.{weight [n_embd, n_inner], bias}, mlp.c_proj.{weight [n_inner,
//   n_embd]} transformer.ln_f.*, lm_head.weight (tied to wte unless tie_word_embeddings is false)
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {
namespace models {
namespace {

// transformers' Conv1D(nf, nx): y = x @ W + b with W [nx, nf], computed as addmm on the flattened
// tokens (which is what it runs).
class Conv1D : public Module {
 public:
  Conv1D(int64_t nf, int64_t nx, const TensorOptions& o) : Module("Conv1D"), nf_(nf), nx_(nx) {
    register_parameter("weight", empty({nx, nf}, o));
    register_parameter("bias", empty({nf}, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor y = addmm(parameter("bias"), view(x, {-1, nx_}), parameter("weight"));
    DimVector out = x.sizes();
    out.back() = nf_;
    return view(y, out);
  }
  // GPT2PreTrainedModel._init_weights: N(0, 0.02) weights, zero bias.
  void reset_parameters(uint64_t seed) override {
    init_member_normal("weight", seed, 0.0, 0.02);
    init_member_constant("bias", 0.0);
  }

 private:
  int64_t nf_, nx_;
};

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPT2Attention"),
        hidden_(c.hidden_size),
        heads_(c.num_attention_heads),
        attn_dropout_(training ? c.attention_dropout : 0.0),
        resid_dropout_(c.resid_dropout),
        training_(training) {
    register_module("c_attn", std::make_shared<Conv1D>(3 * hidden_, hidden_, o));
    register_module("c_proj", std::make_shared<Conv1D>(hidden_, hidden_, o));
  }
  Tensor forward(const Tensor& x) override {
    const std::vector<Tensor> qkv = split(child("c_attn")->call(x), hidden_, 2);
    const int64_t d = hidden_ / heads_;
    const Tensor out = scaled_dot_product_attention(
        split_heads(qkv[0], heads_, d), split_heads(qkv[1], heads_, d),
        split_heads(qkv[2], heads_, d), Tensor(), attn_dropout_, /*is_causal=*/true);
    return maybe_dropout(child("c_proj")->call(merge_heads(out)), resid_dropout_, training_);
  }

 private:
  int64_t hidden_, heads_;
  double attn_dropout_, resid_dropout_;
  bool training_;
};

class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPT2MLP"), act_(c.hidden_act), dropout_(c.resid_dropout), training_(training) {
    register_module("c_fc", std::make_shared<Conv1D>(c.intermediate_size, c.hidden_size, o));
    register_module("c_proj", std::make_shared<Conv1D>(c.hidden_size, c.intermediate_size, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = activation(act_, child("c_fc")->call(x));
    return maybe_dropout(child("c_proj")->call(h), dropout_, training_);
  }

 private:
  std::string act_;
  double dropout_;
  bool training_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("GPT2Block") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    const DimVector h{c.hidden_size};
    register_module("ln_1", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("attn", std::make_shared<Attention>(c, o, training));
    register_module("ln_2", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("mlp", std::make_shared<Mlp>(c, o, training));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = add(x, child("attn")->call(child("ln_1")->call(x)));
    return add(h, child("mlp")->call(child("ln_2")->call(h)));
  }
};

class Gpt2Model : public Module {
 public:
  Gpt2Model(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPT2Model"),
        max_positions_(c.max_position_embeddings),
        dropout_(c.embd_dropout),
        training_(training) {
    register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    register_module("wpe",
                    std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size, o));
    auto h = register_module("h", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Block>> blocks;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks.push_back(h->push_back(std::make_shared<Block>()));
    }
    register_module(
        "ln_f", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o));
    for (const auto& b : blocks) b->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    // Learned positions exist only up to n_positions (HF fails with an index error beyond).
    SP_CHECK(seq <= max_positions_, "gpt2: sequence length ", seq, " exceeds n_positions ",
             max_positions_);
    Tensor h = add(child("wte")->call(ids), child("wpe")->call(position_ids(seq)));
    h = maybe_dropout(h, dropout_, training_);
    for (const auto& [name, block] : child("h")->named_children()) h = block->call(h);
    return child("ln_f")->call(h);
  }

 private:
  int64_t max_positions_;
  double dropout_;
  bool training_;
};

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("n_embd");
  c.num_hidden_layers = f.integer("n_layer");
  c.num_attention_heads = f.integer("n_head");
  c.num_key_value_heads = c.num_attention_heads;
  c.max_position_embeddings = f.integer("n_positions");
  // n_inner: null or absent means 4 * n_embd (GPT2MLP). (validate reports n_embd <= 0.)
  int64_t default_inner = 0;
  if (!f.has("n_inner") && !mul_into(c.hidden_size, 4, default_inner) && c.hidden_size > 0) {
    f.fail("n_embd", std::to_string(c.hidden_size) +
                         " is too large for the default n_inner = 4 * n_embd, expected at most " +
                         std::to_string(INT64_MAX / 4) + " or an explicit n_inner");
  }
  c.intermediate_size = f.integer("n_inner", default_inner);
  head_dim_from_hidden(f, c, "n_head", "n_embd");
  c.hidden_act = f.string("activation_function", "gelu_new");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // Conv1D always has a bias
  c.partial_rotary_factor = 0;                // learned positions, no rotary
  c.embd_dropout = f.number("embd_pdrop", 0.1);
  c.attention_dropout = f.number("attn_pdrop", 0.1);
  c.resid_dropout = f.number("resid_pdrop", 0.1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  j["n_positions"] = c.max_position_embeddings;
  j["n_inner"] = c.intermediate_size;
  j["activation_function"] = c.hidden_act;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["embd_pdrop"] = c.embd_dropout;
  j["attn_pdrop"] = c.attention_dropout;
  j["resid_pdrop"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<Gpt2Model>>("GPT2LMHeadModel", c, o, training, "transformer",
                                                  "transformer.wte.weight");
}

// GPT2Config's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"hidden_size", "n_embd"},
    {"intermediate_size", "n_inner"},
    {"num_hidden_layers", "n_layer"},
    {"num_attention_heads", "n_head"},
    {"num_key_value_heads", "n_head"},  // derived: kv heads = heads
    {"head_dim", "n_head"},             // derived: n_embd / n_head
    {"max_position_embeddings", "n_positions"},
    {"hidden_act", "activation_function"},
    {"norm_eps", "layer_norm_epsilon"},
    {"embd_dropout", "embd_pdrop"},
    {"attention_dropout", "attn_pdrop"},
    {"resid_dropout", "resid_pdrop"},
};

}  // namespace
}  // namespace models

// Megatron's split with transformers' module names. c_attn holds [q; k; v] side by side, so each
// of the three is split over the ranks (fused_parts 3): a rank gets whole heads of q, k and v. The
// output layer is tied to wte; both lay the tied weight out by vocabulary rows.
constexpr TensorParallelRule kGpt2TpPlan[] = {{"transformer.wte", "rowwise"},
                                              {"transformer.h.*.attn.c_attn", "colwise", 3},
                                              {"transformer.h.*.attn.c_proj", "rowwise"},
                                              {"transformer.h.*.mlp.c_fc", "colwise"},
                                              {"transformer.h.*.mlp.c_proj", "rowwise"},
                                              {"lm_head", "colwise"}};

// GPT2PreTrainedModel._init_weights: Linear/Conv1D weights and Embedding rows normal(0,
// initializer_range), biases zero, LayerNorm weight one and bias zero; then every parameter named
// "c_proj.weight" (attention and MLP output projections) is redrawn from normal(0,
// initializer_range / sqrt(2 n_layer)), the residual scaling of Radford et al. 2019 §2.3. That
// rule comes first here because the first matching rule applies.
constexpr InitRule kGpt2InitRules[] = {{"Conv1D", "c_proj.weight", InitFill::kNormalDepthScaled},
                                       {"Conv1D", "weight", InitFill::kNormal},
                                       {"Conv1D", "bias", InitFill::kZeros},
                                       {"Linear", "weight", InitFill::kNormal},
                                       {"Linear", "bias", InitFill::kZeros},
                                       {"Embedding", "weight", InitFill::kNormal},
                                       {"LayerNorm", "weight", InitFill::kOnes},
                                       {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kGpt2Family;  // listed in family_registry.cpp
const ModelFamily kGpt2Family{
    .model_type = "gpt2",
    .hf_class_prefix = "GPT2",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = true,
    .fused_qkv = true,
    .tp_plan = kGpt2TpPlan,
    .init_rules = kGpt2InitRules,
};

}  // namespace shardplan::tensor
