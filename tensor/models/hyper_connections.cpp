#include "tensor/models/hyper_connections.h"

#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// streams [B, S, n, h] flattened to [B, S, n h] in float32, RMS-normalized without a weight, and
// projected by `fn` [k, n h] (cast to float32): the k mixing logits, float32.
Tensor mixing_logits(const Tensor& streams, const Tensor& fn, double eps) {
  const int64_t b = streams.size(0), s = streams.size(1), width = streams.size(2) * streams.size(3);
  const Tensor flat =
      rms_norm(to(reshape(streams, {b, s, width}), DType::kFloat32), {width}, Tensor(), eps);
  return linear(flat, to(fn, DType::kFloat32));
}

// The pre-weighted sum of the streams, in the streams' dtype: [B, S, h].
Tensor weighted_sum(const Tensor& weights, const Tensor& streams) {
  return sum(mul(unsqueeze(to(weights, streams.dtype()), -1), streams), {2});
}

// logits * scale[i] + bias: one of the three parts of a site's mixing.
Tensor scaled(const Tensor& logits, const Tensor& scale, int64_t i, const Tensor& bias) {
  return add(mul(logits, narrow(scale, 0, i, 1)), bias);
}

}  // namespace

HyperConnection::HyperConnection(std::string type_name, int64_t streams, int64_t hidden, double eps,
                                 const TensorOptions& o)
    : Module(std::move(type_name)), n_(streams), eps_(eps) {
  const int64_t mix = (2 + streams) * streams;
  register_parameter("fn", empty({mix, streams * hidden}, o));
  register_parameter("base", empty({mix}, o));
  register_parameter("scale", empty({3}, o));
}

HyperConnection::Mix HyperConnection::collapse(const Tensor& streams) {
  CallScope scope(*this);
  const Tensor logits = mixing_logits(streams, parameter("fn"), eps_);
  const Tensor base = parameter("base"), scale = parameter("scale");
  const int64_t b = streams.size(0), s = streams.size(1);
  const Tensor pre =
      add(sigmoid(scaled(narrow(logits, -1, 0, n_), scale, 0, narrow(base, 0, 0, n_))), eps_);
  const Tensor post =
      mul(sigmoid(scaled(narrow(logits, -1, n_, n_), scale, 1, narrow(base, 0, n_, n_))), 2.0);
  // Note [Hyper-connection trace]: the softmax, then Sinkhorn's normalizations as one.
  const Tensor comb_logits = scaled(view(narrow(logits, -1, 2 * n_, n_ * n_), {b, s, n_, n_}),
                                    scale, 2, view(narrow(base, 0, 2 * n_, n_ * n_), {n_, n_}));
  const Tensor comb = add(softmax(comb_logits, -1), eps_);
  return {weighted_sum(pre, streams), post, div(comb, sum(comb, {-2}, /*keepdim=*/true))};
}

Tensor HyperConnection::expand(const Tensor& y, const Tensor& streams, const Mix& mix) {
  CallScope scope(*this);
  const DType dt = streams.dtype();
  const Tensor written = mul(unsqueeze(to(mix.post, dt), -1), unsqueeze(y, 2));  // [B, S, n, h]
  return add(written, matmul(transpose(to(mix.comb, dt), -1, -2), streams));
}

HyperHead::HyperHead(std::string type_name, int64_t streams, int64_t hidden, double eps,
                     const TensorOptions& o)
    : Module(std::move(type_name)), n_(streams), eps_(eps) {
  register_parameter("hc_fn", empty({streams, streams * hidden}, o));
  register_parameter("hc_base", empty({streams}, o));
  register_parameter("hc_scale", empty({1}, o));
}

Tensor HyperHead::forward(const Tensor& streams) {
  const Tensor logits = mixing_logits(streams, parameter("hc_fn"), eps_);
  const Tensor pre =
      add(sigmoid(add(mul(logits, parameter("hc_scale")), parameter("hc_base"))), eps_);
  return weighted_sum(pre, streams);
}

}  // namespace shardplan::tensor::models
