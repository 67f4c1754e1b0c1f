#include "tensor/layers.h"

#include <cmath>

#include "base/error.h"
#include "tensor/init.h"
#include "tensor/ops.h"
#include "tensor/trace.h"

namespace shardplan::tensor {

namespace {

// register_parameter sets requires_grad; the tensor is created as a plain leaf.
TensorOptions param_options(const TensorOptions& opts) {
  TensorOptions o = opts;
  o.requires_grad = false;
  return o;
}

void check_nonnegative(int64_t v, const char* module, const char* what) {
  SP_CHECK(v >= 0, module, ": ", what, " must be non-negative, got ", v);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, const TensorOptions& opts)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  check_nonnegative(in_features, "Linear", "in_features");
  check_nonnegative(out_features, "Linear", "out_features");
  const TensorOptions o = param_options(opts);
  register_parameter("weight", empty({out_features, in_features}, o));
  register_parameter("bias", bias ? empty({out_features}, o) : Tensor());
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight(), bias()); }

void Linear::reset_parameters(uint64_t seed) {
  // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + a^2)) = sqrt(1/3), bound =
  // gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in); the bias uses the same bound (nn.Linear).
  if (in_features_ == 0) {
    // Zero-element weight; PyTorch's bias bound is 0 then, so U(0, 0) = 0.
    if (bias().defined()) init_member_constant("bias", Scalar(0.0));
    return;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  init_member_uniform("weight", seed, -bound, bound);
  if (bias().defined()) init_member_uniform("bias", seed, -bound, bound);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, const TensorOptions& opts)
    : Module("Embedding") {
  check_nonnegative(num_embeddings, "Embedding", "num_embeddings");
  check_nonnegative(embedding_dim, "Embedding", "embedding_dim");
  register_parameter("weight", empty({num_embeddings, embedding_dim}, param_options(opts)));
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight(), indices); }

void Embedding::reset_parameters(uint64_t seed) { init_member_normal("weight", seed, 0.0, 1.0); }

LayerNorm::LayerNorm(DimVector normalized_shape, double eps, bool elementwise_affine, bool bias,
                     const TensorOptions& opts)
    : Module("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  const TensorOptions o = param_options(opts);
  register_parameter("weight", elementwise_affine ? empty(normalized_shape_, o) : Tensor());
  register_parameter("bias", elementwise_affine && bias ? empty(normalized_shape_, o) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape_, weight(), bias(), eps_);
}

void LayerNorm::reset_parameters(uint64_t /*seed*/) {
  if (weight().defined()) init_member_constant("weight", Scalar(1.0));
  if (bias().defined()) init_member_constant("bias", Scalar(0.0));
}

RMSNorm::RMSNorm(DimVector normalized_shape, std::optional<double> eps, bool elementwise_affine,
                 const TensorOptions& opts)
    : Module("RMSNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  register_parameter("weight",
                     elementwise_affine ? empty(normalized_shape_, param_options(opts)) : Tensor());
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape_, weight(), eps_); }

void RMSNorm::reset_parameters(uint64_t /*seed*/) {
  if (weight().defined()) init_member_constant("weight", Scalar(1.0));
}

GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  SP_CHECK(approximate_ == "none" || approximate_ == "tanh",
           "GELU: approximate must be 'none' or 'tanh', got '", approximate_, "'");
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Module& ModuleList::operator[](size_t i) const {
  SP_CHECK(i < size(), type_name(), ": index ", i, " is out of range for ", size(), " modules");
  return *named_children()[i].second;
}

GroupedExperts::GroupedExperts(std::string type_name, int64_t experts, int64_t hidden, int64_t ffn,
                               Layout layout, bool bias, std::function<Tensor(const Tensor&)> act,
                               const TensorOptions& opts, bool interleaved, bool gated,
                               bool separate_gate_up, bool shared)
    : Module(std::move(type_name)),
      experts_(experts),
      hidden_(hidden),
      ffn_(ffn),
      layout_(layout),
      act_(std::move(act)),
      interleaved_(interleaved),
      gated_(gated),
      separate_gate_up_(separate_gate_up),
      shared_(shared) {
  check_nonnegative(experts, "GroupedExperts", "experts");
  check_nonnegative(hidden, "GroupedExperts", "hidden");
  check_nonnegative(ffn, "GroupedExperts", "ffn");
  const TensorOptions o = param_options(opts);
  if (separate_gate_up) {
    // Inkling's shared experts: three tensors in InklingSharedExperts' order.
    SP_CHECK(layout == Layout::kOutIn && gated && !bias && !interleaved, "GroupedExperts ",
             this->type_name(), ": gate and up apart are [E, F, H], gated, unbiased, in halves");
    register_parameter("gate_proj", empty({experts, ffn, hidden}, o));
    register_parameter("up_proj", empty({experts, ffn, hidden}, o));
    register_parameter("down_proj", empty({experts, hidden, ffn}, o));
    return;
  }
  if (layout == Layout::kStackedRows) {
    // DBRX: three 2-D tensors of every expert's rows in turn, named as DbrxExpertGLU names them.
    SP_CHECK(gated && !bias && !interleaved, "GroupedExperts ", this->type_name(),
             ": stacked rows are gated, without biases or interleaving");
    for (const char* name : {"w1", "v1", "w2"}) {
      register_parameter(name, empty({experts * ffn, hidden}, o));
    }
    return;
  }
  const bool out_in = layout == Layout::kOutIn;
  const int64_t first = gated ? 2 * ffn : ffn;  // [gate; up] or up alone
  const char* name = gated ? "gate_up_proj" : "up_proj";
  register_parameter(
      name, out_in ? empty({experts, first, hidden}, o) : empty({experts, hidden, first}, o));
  register_parameter(std::string(name) + "_bias", bias ? empty({experts, first}, o) : Tensor());
  register_parameter("down_proj",
                     out_in ? empty({experts, hidden, ffn}, o) : empty({experts, ffn, hidden}, o));
  register_parameter("down_proj_bias", bias ? empty({experts, hidden}, o) : Tensor());
}

GroupedExperts::GroupedExperts(std::string type_name, int64_t experts, int64_t in, int64_t out,
                               Projection which, int64_t parts, const TensorOptions& opts,
                               Layout layout)
    : Module(std::move(type_name)),
      experts_(experts),
      hidden_(in),
      ffn_(out),
      layout_(layout),
      interleaved_(false),
      gated_(false),
      separate_gate_up_(false),
      shared_(false),
      projection_(which),
      parts_(parts) {
  check_nonnegative(experts, "GroupedExperts", "experts");
  check_nonnegative(in, "GroupedExperts", "in");
  check_nonnegative(out, "GroupedExperts", "out");
  SP_CHECK(parts >= 1 && out % parts == 0, "GroupedExperts ", this->type_name(), ": ", out,
           " output features in ", parts, " equal parts, expected a positive divisor");
  SP_CHECK(layout != Layout::kStackedRows, "GroupedExperts ", this->type_name(),
           ": one projection is [E, out, in] or [E, in, out], not stacked rows");
  // transformers' ParallelExperts stores [E, out, in], each expert's slice an nn.Linear weight;
  // Aria's AriaGroupedExpertsGemm [E, in, out], each slice the right operand of its matmul.
  const TensorOptions o = param_options(opts);
  register_parameter("weight", layout == Layout::kOutIn ? empty({experts, out, in}, o)
                                                        : empty({experts, in, out}, o));
}

Tensor GroupedExperts::forward(const Tensor& x) {
  SP_CHECK(x.dim() == 3 && x.size(0) == experts_ && x.size(2) == hidden_, "GroupedExperts: input ",
           x.sizes(), ", expected [", experts_, ", tokens, ", hidden_, "]");
  if (projection_) {  // [E, n, out]
    const Tensor w = parameter("weight");
    return bmm(x, layout_ == Layout::kOutIn ? transpose(w, 1, 2) : w);
  }
  if (layout_ == Layout::kStackedRows) {
    // Each tensor viewed [E, F, H]: gate x w1_e^T and up x v1_e^T, then act(gate) * up times w2_e
    // (DbrxExpertGLU.forward's order; w2 holds [F, H] per expert, read as it is).
    auto per_expert = [&](const char* name) {
      return view(parameter(name), {experts_, ffn_, hidden_});
    };
    const Tensor gate = bmm(x, transpose(per_expert("w1"), 1, 2));  // [E, n, F]
    const Tensor up = bmm(x, transpose(per_expert("v1"), 1, 2));
    return bmm(mul(act_(gate), up), per_expert("w2"));  // [E, n, H]
  }
  if (separate_gate_up_) {
    // Two GEMMs for gate and up (InklingSharedExperts.forward's bmm calls), then down.
    const Tensor gate = bmm(x, transpose(parameter("gate_proj"), 1, 2));  // [E, n, F]
    const Tensor up = bmm(x, transpose(parameter("up_proj"), 1, 2));
    return bmm(mul(act_(gate), up), transpose(parameter("down_proj"), 1, 2));  // [E, n, H]
  }
  const bool out_in = layout_ == Layout::kOutIn;
  const Tensor w1 = parameter(gated_ ? "gate_up_proj" : "up_proj");
  Tensor h = bmm(x, out_in ? transpose(w1, 1, 2) : w1);  // [E, n, 2F] ([E, n, F] ungated)
  const Tensor b1 = parameter(gated_ ? "gate_up_proj_bias" : "up_proj_bias");
  if (b1.defined()) h = add(h, unsqueeze(b1, 1));
  const Tensor w2 = parameter("down_proj");
  const Tensor b2 = parameter("down_proj_bias");
  if (!gated_) {
    Tensor y = bmm(act_(h), out_in ? transpose(w2, 1, 2) : w2);
    return b2.defined() ? add(y, unsqueeze(b2, 1)) : y;
  }
  const Tensor gate = interleaved_ ? slice(h, 2, 0, 2 * ffn_, 2) : narrow(h, 2, 0, ffn_);
  const Tensor up = interleaved_ ? slice(h, 2, 1, 2 * ffn_, 2) : narrow(h, 2, ffn_, ffn_);
  Tensor y = bmm(mul(act_(gate), up), out_in ? transpose(w2, 1, 2) : w2);
  if (b2.defined()) y = add(y, unsqueeze(b2, 1));
  return y;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, m] : named_children()) h = m->call(h);
  return h;
}

}  // namespace shardplan::tensor
