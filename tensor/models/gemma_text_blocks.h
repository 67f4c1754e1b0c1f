// The blocks Gemma 4's and Gemma 3n's text models build alike (transformers' modeling_gemma4.py
// took them from modeling_gemma3n.py): the RMSNorm scaled by its weight, RoPE tables keyed by
// layer type, the attention whose q, k and v are normed per head and whose last layers may attend
// with an earlier layer's keys and values, and the per-layer embeddings mixed in at the model's
// start and gated into each layer. Internal to tensor/models/ (gemma4_text_model.cpp,
// family_gemma3n_text.cpp), each block typed by the family's class names.
//   auto attn = std::make_shared<KvSharingAttention>(kStyle, c, layer_kind(c, i), o, training);
//   SharedKeysAndValues kv;                   // one per forward
//   kv.before(*attn, kind, b, s, dtype);      // a shared layer takes its source's keys and values
//   x = attn->run(x, cos, sin);
//   kv.after(*attn, kind);                    // a source layer leaves its own
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensor/layers.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {

// Gemma4RMSNorm, Gemma3nRMSNorm (by `type_name`): x (mean(x^2) + eps)^-1/2 in float32, times the
// weight where it has one (with_scale) and cast back; the weight starts at one (not Gemma's
// 1 + w offset). Without a scale it has no parameter (v_norm, Gemma 4's router norm).
class ScaledRmsNorm : public Module {
 public:
  ScaledRmsNorm(std::string type_name, int64_t dim, double eps, bool with_scale,
                const TensorOptions& o);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;

 private:
  int64_t dim_;
  double eps_;
  bool with_scale_;
};

// Gemma4TextRotaryEmbedding, Gemma3nRotaryEmbedding (by `type_name`): for each layer type present
// in c.layer_types, {type}_inv_freq and {type}_original_inv_freq [d / 2], d that type's head width
// (head_dim_of), non-persistent float32 buffers. Bases and scaling change values only.
class LayerTypeRotary : public Module {
 public:
  LayerTypeRotary(std::string type_name, const ModelConfig& c);
  // {cos, sin} [1, 1, S, d] of `type`'s layers in `dtype`, as RotaryEmbedding::cos_sin makes them.
  std::pair<Tensor, Tensor> cos_sin(const Tensor& pos, AttentionType type, DType dtype);
};

// Gemma4TextAttention, Gemma3nTextAttention: q_proj, k_proj, v_proj (biases: ModelConfig::qkv_bias)
// and o_proj (o_bias) over the kind's heads and head width (kv_heads_of, head_dim_of); q_norm and
// k_norm over each head and a weightless v_norm; RoPE on q and k after their norms; softmax scale
// 1 (the norms stand in for 1/sqrt(d)); the kind's window. A key-value-shared layer
// (LayerKind::kv_shared) builds no k or v parts and attends with the keys and values handed to it
// (SharedKeysAndValues); with ModelConfig::attention_k_eq_v a full layer has no v_proj and its
// values are its key projection before k_norm and RoPE (Gemma 4).
class KvSharingAttention : public AttentionBlock {
 public:
  // named_parameters order: Gemma 4 registers q_proj, q_norm, k_norm, v_norm, k_proj, v_proj,
  // o_proj; Gemma 3n q_proj, q_norm, k_proj, v_proj, k_norm, v_norm, o_proj.
  enum class Order : uint8_t { kNormsFirst, kProjectionsFirst };
  struct Style {
    const char* type_name;  // "Gemma4TextAttention"
    const char* norm_type;  // its norms' class, "Gemma4RMSNorm"
    Order order;
  };
  KvSharingAttention(const Style& style, const ModelConfig& c, const LayerKind& kind,
                     const TensorOptions& o, bool training);
  // A shared layer's keys and values [B, kv heads, S, head_dim], set before each run.
  void use_keys_and_values(std::pair<Tensor, Tensor> kv) { shared_kv_ = std::move(kv); }
  // The keys and values the last run computed (normed, keys rotated).
  const std::pair<Tensor, Tensor>& keys_and_values() const { return kv_; }
  // x [B, S, h] -> [B, S, h].
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override;
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  ModulePtr q_norm, k_norm, v_norm;

 private:
  std::pair<Tensor, Tensor> kv_, shared_kv_;
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::optional<int64_t> window_;
};

// The keys and values the layers of one forward pass along: a key-value-shared layer (all of them
// come after the others) attends with those of the latest non-shared layer of its type. A model
// of shared layers alone (the planner's one-layer trace of that kind, Note [Tracing one block at
// full width] in planner/cost/block_cost.h) has no such layer: the source's keys and values enter
// as inputs.
class SharedKeysAndValues {
 public:
  // Before `attention`, of a layer of kind `kind`, runs on b x s tokens of `dtype`.
  void before(KvSharingAttention& attention, const LayerKind& kind, int64_t b, int64_t s,
              DType dtype);
  // After it ran.
  void after(const KvSharingAttention& attention, const LayerKind& kind);

 private:
  std::map<AttentionType, std::pair<Tensor, Tensor>> stored_;
};

// Per-layer embeddings (ModelConfig::per_layer_input_size P > 0 for each of per_layer_input_layers
// L): the model's `table` (embed_tokens_per_layer [rows, L P]) rows of tokens `ids` [B, S] times
// sqrt(P), and the `norm` (per_layer_projection_norm [P]) of `projection`
// (per_layer_model_projection [L P, h]) of their scaled embeddings `embeds` [B, S, h] times
// h^-1/2, summed and times 2^-1/2: [B, S, L, P]. L is the full model's layer count also in a
// one-layer model of a kind: the table and its projection run once, at the model's start.
Tensor per_layer_inputs(const Tensor& ids, const Tensor& embeds, Module& table, Module& projection,
                        Module& norm, int64_t layers, int64_t width);
// Layer `layer`'s slice [B, S, P] of per_layer_inputs' result.
Tensor per_layer_slice(const Tensor& inputs, int64_t layer);
// What a layer adds of its slice [B, S, P] to x [B, S, h]: its post_per_layer_input_norm `norm`
// of per_layer_projection `projection` [h, P] of act(per_layer_input_gate `gate` [P, h] (x)) times
// the slice.
Tensor per_layer_gate(const Tensor& x, const Tensor& slice, Module& gate, Module& projection,
                      Module& norm, std::string_view act);

// Gemma4ForCausalLM, Gemma4UnifiedForCausalLM, Gemma3nForCausalLM (by `type_name`): the backbone
// `model` (a Module made from `backbone_args` with build(c, o, training), filled once lm_head is
// registered: Note [Filling repeated blocks after registration] in blocks.h) and lm_head [vocab,
// hidden], tied to model.embed_tokens when c.tie_word_embeddings; the logits soft-capped, cap x
// tanh(logits / cap), where c.final_logit_softcapping > 0.
template <typename Backbone>
class SoftcappedCausalLm : public Module {
 public:
  template <typename... BackboneArgs>
  SoftcappedCausalLm(std::string type_name, const ModelConfig& c, const TensorOptions& o,
                     bool training, BackboneArgs&&... backbone_args)
      : Module(std::move(type_name)), softcap_(c.final_logit_softcapping) {
    model = register_module(
        "model", std::make_shared<Backbone>(std::forward<BackboneArgs>(backbone_args)...));
    lm_head =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, o, training);
    if (c.tie_word_embeddings) tie_parameters(*this, "lm_head.weight", "model.embed_tokens.weight");
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor logits = lm_head->call(model->call(ids));
    if (softcap_ <= 0) return logits;
    return mul(tanh(div(logits, softcap_)), softcap_);  // final_logit_softcapping
  }
  std::shared_ptr<Backbone> model;
  std::shared_ptr<Linear> lm_head;

 private:
  double softcap_;
};

// num_kv_shared_layers (`absent` when the file has none) into c (whose num_hidden_layers and
// layer_types are read), refused where transformers' attention fails: negative, or so many that
// no layer computes keys and values (its source search reads layer_types[:L - n]), or a shared
// layer with no earlier non-shared layer of its type.
void parse_kv_shared_layers(const ConfigFields& f, ModelConfig& c, int64_t absent);

}  // namespace shardplan::tensor::models
