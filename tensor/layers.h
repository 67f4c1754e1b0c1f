// The built-in layers the model builders are made of (PyTorch's torch.nn names, parameter names and
// shapes): Linear, Embedding, LayerNorm, RMSNorm, GELU, ModuleList, Sequential. Each is a Module
// (tensor/module.h) whose parameters are meta tensors until to_empty.
//   auto proj = std::make_shared<Linear>(4096, 11008, /*bias=*/false,
//   TensorOptions{DType::kBFloat16}); Tensor y = proj->call(x);  // x [.., 4096] -> y [.., 11008],
//   traced as one linear op
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensor/module.h"

namespace shardplan::tensor {

// Meta by default; TensorOptions picks dtype and device.
// Constructors allocate but do not initialize: call init_weights after to_empty.

// y = x W^T + b, W [out, in], b [out]. Init: U(-1/sqrt(in), 1/sqrt(in)) for both, which is what
// PyTorch's kaiming_uniform_(a=sqrt(5)) reduces to (gain sqrt(2/(1+5)), bound gain*sqrt(3/in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         const TensorOptions& opts = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;
  Tensor weight() const { return parameter("weight"); }
  Tensor bias() const { return parameter("bias"); }  // undefined without bias
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

 private:
  int64_t in_features_;
  int64_t out_features_;
};

// Lookup table [num_embeddings, embedding_dim]; forward takes integer indices. Init: N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const TensorOptions& opts = {});
  Tensor forward(const Tensor& indices) override;
  void reset_parameters(uint64_t seed) override;
  Tensor weight() const { return parameter("weight"); }
};

// Init: weight 1, bias 0.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(DimVector normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true, const TensorOptions& opts = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;
  Tensor weight() const { return parameter("weight"); }
  Tensor bias() const { return parameter("bias"); }

 private:
  DimVector normalized_shape_;
  double eps_;
};

// eps unset: the dtype's machine epsilon at run time, as PyTorch. Init: weight 1.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(DimVector normalized_shape, std::optional<double> eps = {},
                   bool elementwise_affine = true, const TensorOptions& opts = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed) override;
  Tensor weight() const { return parameter("weight"); }

 private:
  DimVector normalized_shape_;
  std::optional<double> eps_;
};

// approximate: "none" or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;

 private:
  std::string approximate_;
};

// The routed experts of a mixture-of-experts layer as three-dimensional parameters, one slice per
// expert (transformers 5's fused layout, torchtitan's GroupedExperts): gate_up_proj holds each
// expert's gate and up projections side by side, down_proj its output projection.
//   kOutIn (Mixtral, Qwen-MoE, DeepSeek):  gate_up_proj [E, 2F, H], down_proj [E, H, F]
//   kInOut (GPT-OSS, Llama 4):             gate_up_proj [E, H, 2F], down_proj [E, F, H]
//   kStackedRows (DBRX's DbrxExpertGLU):   w1 (gate), v1 (up), w2 (down) [E x F, H] each, expert
//                                          e's rows [e F, (e + 1) F); w2 is read untransposed
// with optional biases gate_up_proj_bias [E, 2F] and down_proj_bias [E, H] (GPT-OSS), gate and up
// as two halves of the 2F features or alternating (GPT-OSS). Not gated (Nemotron-H): up_proj
// [E, F, H] in place of gate_up_proj, down(act(up(x))). Gate and up apart (`separate_gate_up`,
// kOutIn, gated, no biases: Inkling's shared experts): gate_proj and up_proj [E, F, H], then
// down_proj [E, H, F], each its own batched GEMM. `shared` experts (Inkling's InklingSharedExperts)
// are always active: every token passes through each of them, so expert parallelism leaves them
// whole (only the routed experts' dim 0 is split) while tensor parallelism splits their F.
// forward takes the tokens already dispatched, [E, n, H] (n tokens for every expert), and returns
// [E, n, H]: down(act(gate(x)) * up(x)) per expert, each projection one batched GEMM (the grouped
// GEMM of Megatron-Core and torchtitan). Expert parallelism splits dim 0 (kStackedRows: whole
// experts' rows); expert tensor parallelism splits F (mesh/parallel_style.h, style "experts"; not
// kStackedRows, whose F shares dim 0 with the experts). kStackedRows has neither biases nor
// interleaving and is always gated: its gate and up are two GEMMs, as DBRX runs them. Init: none
// of its own (the families' _init_weights fill these parameters).
// One projection alone (`which`: transformers' ParallelExperts, JetMoE's input_linear and
// output_linear, each a module of its own holding `weight` [E, out, in]; with `layout` kInOut,
// Aria's AriaGroupedExpertsGemm fc1 and fc2, `weight` [E, in, out], read untransposed): forward
// [E, n, in] -> [E, n, out], one batched GEMM. kFirst is an expert's first projection, whose
// output features tensor parallelism splits (`parts` equal projections side by side, each split
// over the ranks as a fused colwise projection: 2 for [gate; up]); kSecond the projection after
// it, whose input features it splits, its output a partial sum (gate_up_out_dim and down_in_dim
// say where those features are). Expert parallelism splits dim 0 as for the others.
class GroupedExperts : public Module {
 public:
  enum class Layout : uint8_t { kOutIn, kInOut, kStackedRows };
  GroupedExperts(std::string type_name, int64_t experts, int64_t hidden, int64_t ffn, Layout layout,
                 bool bias, std::function<Tensor(const Tensor&)> act,
                 const TensorOptions& opts = {}, bool interleaved = false, bool gated = true,
                 bool separate_gate_up = false, bool shared = false);
  enum class Projection : uint8_t { kFirst, kSecond };
  GroupedExperts(std::string type_name, int64_t experts, int64_t in, int64_t out, Projection which,
                 int64_t parts = 1, const TensorOptions& opts = {}, Layout layout = Layout::kOutIn);
  Tensor forward(const Tensor& x) override;
  int64_t experts() const { return experts_; }
  int64_t ffn() const { return ffn_; }
  Layout layout() const { return layout_; }
  // Tensor dims of the projections' feature axes: where tensor parallelism splits F (kStackedRows:
  // dim 0, which the experts share).
  int64_t gate_up_out_dim() const {
    return layout_ == Layout::kStackedRows ? 0 : layout_ == Layout::kOutIn ? 1 : 2;
  }
  int64_t down_in_dim() const {
    return layout_ == Layout::kStackedRows ? 0 : layout_ == Layout::kOutIn ? 2 : 1;
  }
  // Gate and up in alternating features (GPT-OSS) rather than in two halves: a contiguous split
  // of the features then keeps each rank's gates beside their ups.
  bool interleaved() const { return interleaved_; }
  bool gated() const { return gated_; }
  bool separate_gate_up() const { return separate_gate_up_; }
  bool shared() const { return shared_; }
  // Set for one projection alone (its `weight` [E, out, in], or [E, in, out] for kInOut), and its
  // equal parts.
  std::optional<Projection> projection() const { return projection_; }
  int64_t projection_parts() const { return parts_; }

 private:
  int64_t experts_, hidden_, ffn_;  // a projection: hidden_ its in, ffn_ its out features
  Layout layout_;
  std::function<Tensor(const Tensor&)> act_;
  bool interleaved_, gated_, separate_gate_up_, shared_;
  std::optional<Projection> projection_;
  int64_t parts_ = 1;
};

// Children named "0", "1", ... in order; no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() : ModuleList("ModuleList") {}
  // Registers `m` under the next index and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    return register_module(std::to_string(size()), std::move(m));
  }
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;

 protected:
  explicit ModuleList(std::string type_name) : Module(std::move(type_name)) {}
};

// A ModuleList whose forward feeds each child's output to the next.
class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace shardplan::tensor
