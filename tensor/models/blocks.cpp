#include "tensor/models/blocks.h"

#include "base/error.h"

namespace shardplan::tensor::models {

bool known_activation(std::string_view n) {
  return n == "silu" || n == "swish" || n == "gelu" || n == "gelu_new" || n == "gelu_fast" ||
         n == "gelu_pytorch_tanh" || n == "relu" || n == "relu2" || n == "xielu";
}

const char* known_activations() {
  return "silu, swish, gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, relu, relu2, xielu";
}

Tensor activation(std::string_view n, const Tensor& x) {
  if (n == "silu" || n == "swish") return silu(x);
  if (n == "gelu") return gelu(x, "none");
  // transformers' NewGELU, FastGELU and PytorchGELUTanh are the tanh approximation.
  if (n == "gelu_new" || n == "gelu_fast" || n == "gelu_pytorch_tanh") return gelu(x, "tanh");
  if (n == "relu") return relu(x);
  if (n == "relu2") return square(relu(x));  // transformers' ReLUSquaredActivation
  if (n == "xielu") {
    SP_FAIL(
        "hidden_act 'xielu' has learned parameters, which this model's feed-forward does "
        "not build; expected one of: silu, swish, gelu, gelu_new, gelu_fast, "
        "gelu_pytorch_tanh, relu, relu2");
  }
  SP_FAIL("unknown hidden activation '", n, "'; expected one of: ", known_activations());
}

XieluActivation::XieluActivation(const TensorOptions& o) : Module("XIELUActivation") {
  register_parameter("alpha_p", empty({1}, o));
  register_parameter("alpha_n", empty({1}, o));
  register_buffer("beta", empty({}, o));
  register_buffer("eps", empty({}, o));
}

Tensor XieluActivation::forward(const Tensor& x) {
  return xielu(x, parameter("alpha_p"), parameter("alpha_n"));
}

Tensor maybe_dropout(const Tensor& x, double p, bool training) {
  return training && p > 0 ? dropout(x, p, true) : x;
}

Tensor position_ids(int64_t seq) { return empty({1, seq}, {.dtype = DType::kInt64}); }

RotaryEmbedding::RotaryEmbedding(std::string type_name, int64_t rot_dim, double /*theta*/)
    : Module(std::move(type_name)), rot_dim_(rot_dim) {
  SP_ASSERT(rot_dim > 0 && rot_dim % 2 == 0, "rot_dim ", rot_dim);
  // theta (and rope_scaling) only change inv_freq's values, which meta tensors do not hold.
  register_buffer("inv_freq", empty({rot_dim / 2}, {.dtype = DType::kFloat32}),
                  /*persistent=*/false);
}

std::pair<Tensor, Tensor> RotaryEmbedding::cos_sin(const Tensor& pos, DType dtype) {
  CallScope scope(*this);
  // [1, S, 1] * [rot/2] -> [1, S, rot/2]: transformers' inv_freq @ position_ids outer product.
  Tensor freqs = mul(unsqueeze(to(pos, DType::kFloat32), -1), buffer("inv_freq"));
  Tensor emb = cat({freqs, freqs}, -1);
  return {to(cos(emb), dtype), to(sin(emb), dtype)};
}

Tensor apply_rotary(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  const int64_t d = x.size(-1), rot = cos_t.size(-1);
  // [1, S, rot] -> [1, 1, S, rot]: broadcast over the heads (unless the caller did it).
  const Tensor c = cos_t.dim() == 4 ? cos_t : per_head(cos_t);
  const Tensor s = sin_t.dim() == 4 ? sin_t : per_head(sin_t);
  const Tensor xr = rot == d ? x : narrow(x, -1, 0, rot);
  const Tensor x1 = narrow(xr, -1, 0, rot / 2), x2 = narrow(xr, -1, rot / 2, rot / 2);
  const Tensor rotated = add(mul(xr, c), mul(cat({neg(x2), x1}, -1), s));
  if (rot == d) return rotated;
  return cat({rotated, narrow(x, -1, rot, d - rot)}, -1);
}

Tensor split_heads(const Tensor& x, int64_t heads, int64_t head_dim) {
  return transpose(view(x, {x.size(0), x.size(1), heads, head_dim}), 1, 2);
}

Tensor merge_heads(const Tensor& x) {
  return reshape(transpose(x, 1, 2), {x.size(0), x.size(2), x.size(1) * x.size(3)});
}

OffsetRMSNorm::OffsetRMSNorm(std::string type_name, int64_t dim, double eps, const TensorOptions& o)
    : Module(std::move(type_name)), dim_(dim), eps_(eps) {
  register_parameter("weight", empty({dim}, o));
}

Tensor OffsetRMSNorm::forward(const Tensor& x) {
  return rms_norm(x, {dim_}, add(parameter("weight"), 1.0), eps_);
}

void OffsetRMSNorm::reset_parameters(uint64_t /*seed*/) { init_member_constant("weight", 0.0); }

WeightOnlyLayerNorm::WeightOnlyLayerNorm(std::string type_name, int64_t heads, int64_t dim,
                                         double eps, const TensorOptions& o)
    : Module(std::move(type_name)), heads_(heads), dim_(dim), eps_(eps) {
  register_parameter("weight", heads > 0 ? empty({heads, dim}, o) : empty({dim}, o));
}

Tensor WeightOnlyLayerNorm::forward(const Tensor& x) {
  if (heads_ == 0) return layer_norm(x, {dim_}, parameter("weight"), Tensor(), eps_);
  // [heads, dim] -> [heads, 1, dim] against [B, heads, S, dim] (transformers norms [B, S, heads,
  // dim] before its transpose: the same products).
  return mul(layer_norm(x, {dim_}, Tensor(), Tensor(), eps_),
             view(parameter("weight"), {heads_, 1, dim_}));
}

void WeightOnlyLayerNorm::reset_parameters(uint64_t /*seed*/) {
  init_member_constant("weight", 1.0);
}

}  // namespace shardplan::tensor::models
