// bloom: BigScience's BLOOM (560M to 176B) as transformers' BloomConfig and modeling_bloom.py: a
// LayerNorm on the token embeddings, fused qkv laid out per head, LayerNorms with bias, a 4x GELU
// (tanh approximation) MLP, biases on every Linear, ALiBi positions (no parameters), lm_head tied
// to the embeddings:
//   transformer.word_embeddings.weight [vocab, hidden]
//   transformer.word_embeddings_layernorm.{weight,bias} [hidden]
//   transformer.h.N.input_layernorm.{weight,bias} [hidden]
//   transformer.h.N.self_attention.query_key_value.{weight [3 hidden, hidden], bias [3 hidden]}
//   transformer.h.N.self_attention.dense.{weight [hidden, hidden], bias}
//   transformer.h.N.post_attention_layernorm.{weight,bias} [hidden]
//   transformer.h.N.mlp.dense_h_to_4h.{weight [4 hidden, hidden], bias}, dense_4h_to_h
//   transformer.ln_f.{weight,bias}, lm_head.weight [vocab, hidden] (only when untied)
//
// Note [ALiBi inside the fused kernel]
// BLOOM has no position embedding: each head adds slope_h x (key position) to its attention
// scores (Press et al. 2022, "Train Short, Test Long", ALiBi; BloomModel.build_alibi_tensor, the
// slopes a geometric series in the head index), which transformers' eager path folds into the
// scores by baddbmm. shardplan prices attention as a fused kernel, and FlashAttention-2 takes
// ALiBi slopes natively (alibi_slopes, [heads] float32, the bias made inside the kernel), so the
// attention is traced as scaled_dot_product_attention, causal, without a mask: the bias costs no
// traced op and no saved tensor. The [batch x heads, 1, seq] alibi tensor of the eager path (made
// once per forward, outside the layers) is not traced either. docs/models.md, "What the models
// leave out".
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {
namespace models {
namespace {

// BloomAttention and its dropout_add: dense(attention(x)), dropped out when training and added to
// the residual the block hands in (its input, or its normed input with
// apply_residual_connection_post_layernorm).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("BloomAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        attention_dropout_(training ? c.attention_dropout : 0.0),
        hidden_dropout_(c.resid_dropout),
        training_(training) {
    const int64_t h = c.hidden_size;
    register_module("query_key_value", std::make_shared<Linear>(h, 3 * h, true, o));
    register_module("dense", std::make_shared<Linear>(h, h, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& residual) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    // [B, S, 3h] -> [B, S, heads, 3 d] -> [B, heads, S, 3 d]: BloomAttention._reshape's view
    // [heads, 3, d], each head's q, k and v side by side.
    const Tensor qkv =
        permute(view(child("query_key_value")->call(x), {b, s, heads_, 3 * d}), {0, 2, 1, 3});
    const Tensor q = narrow(qkv, -1, 0, d);
    const Tensor k = narrow(qkv, -1, d, d);
    const Tensor v = narrow(qkv, -1, 2 * d, d);
    // The ALiBi bias is inside the fused kernel (Note [ALiBi inside the fused kernel]).
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), attention_dropout_, /*is_causal=*/true);
    const Tensor o = child("dense")->call(merge_heads(out));
    return add(residual, maybe_dropout(o, hidden_dropout_, training_));
  }

 private:
  int64_t heads_, head_dim_;
  double attention_dropout_, hidden_dropout_;
  bool training_;
};

// BloomMLP: dense_4h_to_h(gelu(dense_h_to_4h(x))), its dropout_add as the attention's. BloomGelu
// is the tanh approximation (0.79788456 = sqrt(2 / pi)), a custom autograd function saving its
// input, which is what the fused gelu(x, "tanh") op records.
class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("BloomMLP"), hidden_dropout_(c.resid_dropout), training_(training) {
    register_module("dense_h_to_4h",
                    std::make_shared<Linear>(c.hidden_size, c.intermediate_size, true, o));
    register_module("dense_4h_to_h",
                    std::make_shared<Linear>(c.intermediate_size, c.hidden_size, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& residual) {
    CallScope scope(*this);
    const Tensor m = child("dense_4h_to_h")->call(gelu(child("dense_h_to_4h")->call(x), "tanh"));
    return add(residual, maybe_dropout(m, hidden_dropout_, training_));
  }

 private:
  double hidden_dropout_;
  bool training_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("BloomBlock") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    residual_from_norm_ = c.apply_residual_connection_post_layernorm;
    const DimVector h{c.hidden_size};
    register_module("input_layernorm", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    attention_ = register_module("self_attention", std::make_shared<Attention>(c, o, training));
    register_module("post_attention_layernorm",
                    std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    mlp_ = register_module("mlp", std::make_shared<Mlp>(c, o, training));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor n1 = child("input_layernorm")->call(x);
    const Tensor a = attention_->run(n1, residual_from_norm_ ? n1 : x);
    const Tensor n2 = child("post_attention_layernorm")->call(a);
    return mlp_->run(n2, residual_from_norm_ ? n2 : a);
  }

 private:
  bool residual_from_norm_ = false;
  std::shared_ptr<Attention> attention_;
  std::shared_ptr<Mlp> mlp_;
};

class BloomModel : public Module {
 public:
  BloomModel(const ModelConfig& c, const TensorOptions& o, bool training) : Module("BloomModel") {
    const DimVector h{c.hidden_size};
    register_module("word_embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    register_module("word_embeddings_layernorm",
                    std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    auto layers = register_module("h", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Block>> blocks;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks.push_back(layers->push_back(std::make_shared<Block>()));
    }
    register_module("ln_f", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    for (const auto& b : blocks) b->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    // No position input: ALiBi (Note [ALiBi inside the fused kernel]).
    Tensor x = child("word_embeddings_layernorm")->call(child("word_embeddings")->call(ids));
    for (const auto& [name, block] : child("h")->named_children()) x = block->call(x);
    return child("ln_f")->call(x);
  }
};

// The key that sets `field`: its attribute_map alias when the file holds it (PreTrainedConfig
// sets the other keyword arguments after the dataclass fields, so the alias wins over the field;
// null would set the field to None, which BloomAttention cannot use), else the field.
const char* key_for(const ConfigFields& f, const char* field, const char* alias) {
  if (f.is_null(alias)) {
    f.fail(alias, std::string("is null, which sets ") + field +
                      " to None; expected a positive integer or no key");
  }
  return f.has(alias) ? alias : field;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // BloomConfig's defaults: a 2-layer toy of width 64 over BLOOM's vocabulary.
  c.vocab_size = f.integer("vocab_size", 250880);
  // n_embed, the key of the published files, replaces hidden_size unless null (__post_init__).
  const char* hidden_key = f.has("n_embed") ? "n_embed" : "hidden_size";
  c.hidden_size = f.integer(hidden_key, 64);
  c.num_hidden_layers = f.integer(key_for(f, "n_layer", "num_hidden_layers"), 2);
  const char* heads_key = key_for(f, "n_head", "num_attention_heads");
  c.num_attention_heads = f.integer(heads_key, 8);
  c.num_key_value_heads = c.num_attention_heads;
  // BloomAttention raises unless the heads split hidden_size evenly.
  if (c.num_attention_heads <= 0) {
    f.fail(heads_key, "must be a positive integer, got " + std::to_string(c.num_attention_heads));
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    f.fail(heads_key, std::to_string(c.num_attention_heads) + " does not divide " + hidden_key +
                          " " + std::to_string(c.hidden_size));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  // BloomMLP is always 4 x hidden_size wide (no n_inner). validate reports hidden_size <= 0.
  if (!mul_into(c.hidden_size, 4, c.intermediate_size) && c.hidden_size > 0) {
    f.fail(hidden_key, std::to_string(c.hidden_size) +
                           " is too large for the MLP of 4 x hidden_size, expected at most " +
                           std::to_string(INT64_MAX / 4));
  }
  c.hidden_act = "gelu_pytorch_tanh";  // BloomGelu: no key chooses it
  c.partial_rotary_factor = 0;         // ALiBi, no rotary
  // ALiBi has no table of positions: BLOOM's training length (2,048, the model card's "sequence
  // length"), or the seq_length some of its files keep from Megatron-DeepSpeed.
  c.max_position_embeddings = f.integer("seq_length", 2048);
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // every nn.Linear but lm_head has a bias
  c.apply_residual_connection_post_layernorm =
      f.boolean("apply_residual_connection_post_layernorm", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("hidden_dropout", 0.0);
  // slow_but_exact with pretraining_tp > 1 runs dense and dense_4h_to_h as pretraining_tp column
  // slices of F.linear summed, without their biases: another forward, not built.
  const int64_t pretraining_tp = f.integer("pretraining_tp", 1);
  if (f.boolean("slow_but_exact", false) && pretraining_tp > 1) {
    f.fail("slow_but_exact",
           "true with pretraining_tp " + std::to_string(pretraining_tp) +
               " splits dense and dense_4h_to_h into " + std::to_string(pretraining_tp) +
               " slices summed without their biases, which shardplan does not build; expected "
               "false (as every released BLOOM file)");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  j["seq_length"] = c.max_position_embeddings;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["apply_residual_connection_post_layernorm"] = c.apply_residual_connection_post_layernorm;
  j["attention_dropout"] = c.attention_dropout;
  j["hidden_dropout"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<BloomModel>>(
      "BloomForCausalLM", c, o, training, "transformer", "transformer.word_embeddings.weight");
}

// BloomConfig's names for ModelConfig's fields, so that errors name the key in the file. A file
// may also say n_embed, num_hidden_layers or num_attention_heads; parse's own errors name the key
// it read.
constexpr FieldRename kRenamed[] = {
    {"num_hidden_layers", "n_layer"},
    {"num_attention_heads", "n_head"},
    {"num_key_value_heads", "n_head"},     // derived: kv heads = heads
    {"head_dim", "n_head"},                // derived: hidden_size / n_head
    {"intermediate_size", "hidden_size"},  // derived: 4 x hidden_size
    {"max_position_embeddings", "seq_length"},
    {"norm_eps", "layer_norm_epsilon"},
    {"resid_dropout", "hidden_dropout"},
};

}  // namespace
}  // namespace models

// BLOOM's fused query_key_value is laid out per head ([heads, 3, head_dim] rows, as GPT-NeoX's),
// so a plain column split gives each rank whole heads with their q, k and v, as Megatron-LM's own
// fused QKV (BLOOM was trained with it, Megatron-DeepSpeed at TP 4). The tied embedding and
// lm_head both split by vocabulary rows (Megatron's VocabParallelEmbedding and parallel
// cross-entropy); word_embeddings_layernorm and every other LayerNorm stay replicated.
constexpr TensorParallelRule kTpPlan[] = {
    {"transformer.word_embeddings", "rowwise"},
    {"transformer.h.*.self_attention.query_key_value", "colwise"},
    {"transformer.h.*.self_attention.dense", "rowwise"},
    {"transformer.h.*.mlp.dense_h_to_4h", "colwise"},
    {"transformer.h.*.mlp.dense_4h_to_h", "rowwise"},
    {"lm_head", "colwise"}};

// BloomPreTrainedModel has no _init_weights of its own: PreTrainedModel._init_weights draws Linear
// weights and Embedding rows normal(0, initializer_range) (no padding_idx: no zero row), zeroes
// Linear biases, and sets LayerNorm weights to one and biases to zero.
constexpr std::span<const InitRule> kInitRules = kPreTrainedInitRules;

extern const ModelFamily kBloomFamily;  // listed in family_registry.cpp
const ModelFamily kBloomFamily{
    .model_type = "bloom",
    .hf_class_prefix = "Bloom",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,             // ALiBi (Note [ALiBi inside the fused kernel])
    .learned_positions = false,  // no position table
    .fused_qkv = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
