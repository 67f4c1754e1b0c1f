// Pieces shared by the model families of tensor/models/ (internal to that folder; the public API
// is tensor/models/models.h): activations by Hugging Face name, rotary embedding as pointwise ops,
// dropout that exists only in training builds, and meta position ids.
//   auto rope = std::make_shared<RotaryEmbedding>("LlamaRotaryEmbedding", 128, 500000.0);
//   auto [cos, sin] = rope->cos_sin(position_ids(4096), DType::kBFloat16);
//   q = apply_rotary(q, cos, sin);                     // q [B, H, S, D]
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "tensor/layers.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {

// Note [Filling repeated blocks after registration]
// Module::register_module renames the parent's whole subtree (Note [Module FQNs at call time]),
// so appending full decoder layers to a ModuleList one by one costs O(layers^2 x modules per
// layer): 80 Llama-3-70B layers made the build 6.8 ms, 90% of it renaming. The families therefore
// append EMPTY layers (each append renames only empty siblings), register the modules that follow
// the list, and fill each layer last, when a registration renames that layer's subtree alone; the
// Llama family also fills its backbone only once it sits under the root, so the full tree is
// never renamed. The tree, its names and its order are those of a bottom-up build (the FQN tests
// of tests/tensor/models check them).

// Hugging Face's ACT2FN names this builds: silu/swish, gelu (erf), gelu_new / gelu_fast /
// gelu_pytorch_tanh (tanh approximation), relu, relu2 (relu(x) squared), and xielu, which has
// learned parameters: a module of its own (XieluActivation), which the Llama-shaped MLPs build as
// their act_fn; activation() refuses it.
bool known_activation(std::string_view hf_name);
const char* known_activations();  // for error messages
Tensor activation(std::string_view hf_name, const Tensor& x);

// transformers' XIELUActivation (Apertus's MLP act_fn): the parameters alpha_p and alpha_n [1]
// (softplus-inverse of 0.8 and of 0.8 - beta, in the model's dtype) and the persistent scalar
// buffers beta (0.5) and eps (-1e-6); forward is the fused xielu op.
class XieluActivation : public Module {
 public:
  explicit XieluActivation(const TensorOptions& o);
  Tensor forward(const Tensor& x) override;
};

// dropout(x, p) when `training` and p > 0, else x itself (no op recorded).
Tensor maybe_dropout(const Tensor& x, double p, bool training);

// The rotated width per head: int(head_dim * partial_rotary_factor), as transformers truncates.
inline int64_t rotary_dim(const ModelConfig& c) {
  return static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
}

// A rotated width r of head_dim d as ModelConfig's fraction: the smallest double whose product
// with d truncates back to r in rotary_dim above, since r / d itself can fall a rounding short
// (30 / 44 x 44 = 29.999...). For the families whose files give rotary_dim (GPT-J, MiniMax-M2).
inline double rotary_fraction(int64_t r, int64_t d) {
  double f = static_cast<double>(r) / static_cast<double>(d);
  while (static_cast<int64_t>(static_cast<double>(d) * f) < r) f = std::nextafter(f, 2.0);
  return f;
}

// Gemma's RMSNorm (GemmaRMSNorm, Gemma2RMSNorm, Gemma3RMSNorm by `type_name`): it scales by
// (1 + weight), its weight stored as the offset, so it starts at zero.
class OffsetRMSNorm : public Module {
 public:
  OffsetRMSNorm(std::string type_name, int64_t dim, double eps, const TensorOptions& o);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;

 private:
  int64_t dim_;
  double eps_;
};

// Cohere's LayerNorm (CohereLayerNorm, Cohere2LayerNorm by `type_name`): mean-subtracted over the
// last dimension, scaled by a weight and no bias. Its weight is [dim] for the layer norms, or
// [heads, dim] for Cohere's per-head q and k norms (use_qk_norm: a scale per head and channel),
// which then broadcasts over [B, heads, S, dim]. Init: weight 1.
class WeightOnlyLayerNorm : public Module {
 public:
  WeightOnlyLayerNorm(std::string type_name, int64_t heads, int64_t dim, double eps,
                      const TensorOptions& o);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;

 private:
  int64_t heads_, dim_;  // heads_ 0: a weight of [dim]
  double eps_;
};

// Position ids [1, seq] int64 on meta (Note [What the traced forward counts] in models.h).
Tensor position_ids(int64_t seq);

// Rotary tables of width `rot_dim` (even) from the non-persistent buffer inv_freq [rot_dim / 2]
// (float32, as transformers keeps it).
class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(std::string type_name, int64_t rot_dim, double theta);
  // {cos, sin}, each [1, S, rot_dim] in `dtype`, from position ids [1, S]: the outer product
  // position x inv_freq, duplicated (cat), cos and sin, cast to the activations' dtype.
  std::pair<Tensor, Tensor> cos_sin(const Tensor& position_ids, DType dtype);
  int64_t rot_dim() const { return rot_dim_; }

 private:
  int64_t rot_dim_;
};

// x [B, H, S, D] rotated on its first cos.size(-1) channels (all of D, or GPT-NeoX's rotary_pct
// part), HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half = cat(-x2, x1).
// cos and sin are cos_sin's [1, S, rot] or already [1, 1, S, rot] (broadcast over the heads): HF
// unsqueezes them in every layer; the families here do it once per forward (per_head), which
// leaves 4 free view ops per layer out of the trace and changes no FLOP, byte or saved tensor.
Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin);
// [1, S, rot] -> [1, 1, S, rot].
inline Tensor per_head(const Tensor& table) { return unsqueeze(table, 1); }

// [B, S, H*D] -> [B, H, S, D] (a view), and back ([B, H, S, D] -> [B, S, H*D], a copy as HF's
// transpose(1, 2).reshape).
Tensor split_heads(const Tensor& x, int64_t heads, int64_t head_dim);
Tensor merge_heads(const Tensor& x);

}  // namespace shardplan::tensor::models
