// Neural-network ops. FLOPs per element of the non-matmul ops are named constants below (an
// operation count of the usual formulation; only the matmul part enters Megatron-style formulas).
#include <algorithm>

#include "tensor/ops/common.h"
#include "tensor/ops/tensor_iterator.h"

namespace shardplan::tensor {
namespace {

// max, subtract, exp, sum, divide.
constexpr double kSoftmaxFlopsPerElement = 5;
// mean, subtract, square, mean, normalize, scale, shift (eps and rsqrt are per row).
constexpr double kLayerNormFlopsPerElement = 7;
// square, mean, normalize, scale.
constexpr double kRmsNormFlopsPerElement = 4;
// tanh form: x^3, multiply-add, scale, tanh, add, two multiplies (erf form counted the same).
constexpr double kGeluFlopsPerElement = 8;
// sigmoid (exp, add, divide) and a multiply.
constexpr double kSiluFlopsPerElement = 4;
// mask compare and scale.
constexpr double kDropoutFlopsPerElement = 2;
// xIELU: the sign test, the select and the longer branch, alpha_n (expm1(min(x, eps)) - x) +
// beta x (min, expm1, subtract, two multiplies, add); the positive branch alpha_p x^2 + beta x
// is shorter.
constexpr double kXieluFlopsPerElement = 8;

void require_float(const Tensor& x, const char* op) {
  SP_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), op,
           ": expected a floating point "
           "input, got ",
           x.dtype());
}

// A pointwise-shaped output following x's layout (TensorIterator rules).
Tensor like_pointwise(const Tensor& x, DType dtype, const char* op) {
  detail::require_meta(x, op);
  const detail::IterOperand ops[] = {{&x.sizes(), &x.strides(), x.is_contiguous()}};
  return make_fresh(x.sizes(), detail::pointwise_output_strides(x.sizes(), ops), dtype, x.device(),
                    op);
}

void check_normalized(const Tensor& x, const DimVector& normalized_shape, const Tensor& weight,
                      const Tensor& bias, const char* op) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  SP_CHECK(nd >= 1, op,
           ": Expected normalized_shape to be at least 1-dimensional, i.e., "
           "containing at least one element, but got normalized_shape = ",
           normalized_shape);
  bool match = x.dim() >= nd;
  for (int64_t i = 0; match && i < nd; ++i) {
    match = x.sizes()[x.dim() - nd + i] == normalized_shape[i];
  }
  SP_CHECK(
      match, op, ": Given normalized_shape=", normalized_shape, ", expected input with shape [*",
      [&] {
        std::string s;
        for (int64_t v : normalized_shape) s += ", " + std::to_string(v);
        return s;
      }(),
      "], but got input of size", x.sizes());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    SP_CHECK(p->sizes() == normalized_shape, op, ": Expected ", p == &weight ? "weight" : "bias",
             " to be of same shape as normalized_shape, but "
             "got ",
             p == &weight ? "weight" : "bias", " of shape ", p->sizes(),
             " and normalized_shape = ", normalized_shape);
    detail::require_meta(*p, op);
  }
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  SP_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  SP_CHECK(indices.dtype() == DType::kInt64 || indices.dtype() == DType::kInt32,
           "embedding: Expected tensor for argument #1 'indices' to have one of the following "
           "scalar types: Long, Int; but got ",
           indices.dtype(), " instead");
  detail::require_meta(weight, "embedding");
  detail::require_meta(indices, "embedding");
  DimVector shape = indices.sizes();
  shape.push_back(weight.sizes()[1]);
  Tensor out = detail::new_contiguous(shape, weight.dtype(), weight.device(), "embedding");
  detail::propagate_grad(out, {&weight});
  if (active_trace_sink() != nullptr) {
    // Reads only the gathered rows (one output's worth of the table) and the indices, not the
    // whole table: a 128k-row vocabulary costs a step only the rows its tokens name.
    const Tensor ins[] = {weight, indices};
    detail::emit_op("embedding", ins, {&out, 1}, 0, 0, false, out.nbytes() + indices.nbytes());
  }
  return out;
}

Tensor layer_norm(const Tensor& x, const DimVector& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  (void)eps;
  check_normalized(x, normalized_shape, weight, bias, "layer_norm");
  require_float(x, "layer_norm");
  detail::require_meta(x, "layer_norm");
  Tensor out = detail::new_contiguous(x.sizes(), x.dtype(), x.device(), "layer_norm");
  detail::propagate_grad(out, {&x, &weight, &bias});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins{x};
    if (weight.defined()) ins.push_back(weight);
    if (bias.defined()) ins.push_back(bias);
    detail::emit_op("layer_norm", ins, {&out, 1}, kLayerNormFlopsPerElement * x.numel(), 0, false);
  }
  return out;
}

Tensor rms_norm(const Tensor& x, const DimVector& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  (void)eps;
  check_normalized(x, normalized_shape, weight, Tensor(), "rms_norm");
  require_float(x, "rms_norm");
  // PyTorch >= 2.4 composes it as (x * rsqrt(mean(x^2) + eps)).type_as(x) * weight, so the result
  // type is promote(x, weight) and the layout follows x like any pointwise op.
  const DType dtype = weight.defined() ? promote_types(x.dtype(), weight.dtype()) : x.dtype();
  Tensor out = like_pointwise(x, dtype, "rms_norm");
  detail::propagate_grad(out, {&x, &weight});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins{x};
    if (weight.defined()) ins.push_back(weight);
    detail::emit_op("rms_norm", ins, {&out, 1}, kRmsNormFlopsPerElement * x.numel(), 0, false);
  }
  return out;
}

static Tensor softmax_like(const Tensor& x, int64_t dim, std::optional<DType> dtype,
                           const char* op) {
  wrap_dim(dim, x.dim(), op);
  const DType out_dtype = dtype.value_or(x.dtype());
  SP_CHECK(is_floating(out_dtype) || is_complex(out_dtype), op,
           ": expected a floating point "
           "input or dtype, got ",
           out_dtype);
  detail::require_meta(x, op);
  Tensor out = detail::new_contiguous(x.sizes(), out_dtype, x.device(), op);
  detail::propagate_grad(out, {&x});
  detail::trace_op(op, {x}, out, kSoftmaxFlopsPerElement * x.numel());
  return out;
}

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like(x, dim, dtype, "softmax");
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like(x, dim, dtype, "log_softmax");
}

Tensor gelu(const Tensor& x, std::string_view approximate) {
  SP_CHECK(approximate == "none" || approximate == "tanh",
           "gelu: approximate argument must be either none or tanh, got '", approximate, "'");
  require_float(x, "gelu");
  Tensor out = like_pointwise(x, x.dtype(), "gelu");
  detail::propagate_grad(out, {&x});
  detail::trace_op("gelu", {x}, out, kGeluFlopsPerElement * x.numel());
  return out;
}

Tensor silu(const Tensor& x) {
  require_float(x, "silu");
  Tensor out = like_pointwise(x, x.dtype(), "silu");
  detail::propagate_grad(out, {&x});
  detail::trace_op("silu", {x}, out, kSiluFlopsPerElement * x.numel());
  return out;
}

Tensor xielu(const Tensor& x, const Tensor& alpha_p, const Tensor& alpha_n) {
  require_float(x, "xielu");
  for (const Tensor* a : {&alpha_p, &alpha_n}) {
    SP_CHECK(a->numel() == 1, "xielu: expected alpha_p and alpha_n of one element, got ",
             a->sizes());
  }
  Tensor out = like_pointwise(x, x.dtype(), "xielu");
  detail::propagate_grad(out, {&x, &alpha_p, &alpha_n});
  detail::trace_op("xielu", {x, alpha_p, alpha_n}, out, kXieluFlopsPerElement * x.numel());
  return out;
}

Tensor dropout(const Tensor& x, double p, bool train) {
  SP_CHECK(p >= 0 && p <= 1, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  // Identity (the input itself) when nothing is dropped, as PyTorch.
  if (!train || p == 0 || x.numel() == 0) return x;
  Tensor out = like_pointwise(x, x.dtype(), "dropout");
  detail::propagate_grad(out, {&x});
  detail::trace_op("dropout", {x}, out, kDropoutFlopsPerElement * x.numel());
  return out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa,
                                    std::optional<int64_t> keys_per_query) {
  (void)scale;
  const char* op = "scaled_dot_product_attention";
  SP_CHECK(!keys_per_query || *keys_per_query > 0, op, ": keys_per_query must be positive, got ",
           keys_per_query.value_or(0));
  SP_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
           ": query, key and value must be at "
           "least 2-D, got ",
           q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  SP_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
           ": Expected query, key, and "
           "value to have the same dtype, but got query.dtype: ",
           q.dtype(), " key.dtype: ", k.dtype(), " and value.dtype: ", v.dtype(), " instead.");
  require_float(q, op);
  SP_CHECK(dropout_p >= 0 && dropout_p <= 1, op, ": dropout_p must be in [0, 1], got ", dropout_p);
  SP_CHECK(!(is_causal && attn_mask.defined()), op,
           ": Explicit attn_mask should not be set when "
           "is_causal=True");
  for (const Tensor* t : {&q, &k, &v}) detail::require_meta(*t, op);
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  SP_CHECK(k.size(-1) == E, op, ": key's last dim ", k.size(-1), " must equal query's ", E);
  SP_CHECK(v.size(-2) == S, op, ": value's sequence length ", v.size(-2), " must equal key's ", S);
  // Batch dims: everything before (heads, seq, dim). Heads are the third-from-last dim when
  // present.
  auto batch_of = [](const Tensor& t) {
    return DimVector(std::span<const int64_t>(t.sizes().data(), t.dim() - 2));
  };
  DimVector qb = batch_of(q), kb = batch_of(k), vb = batch_of(v);
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3) {
    const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.dim() >= 3 ? v.size(-3) : 1;
    SP_CHECK(hk > 0 && hq % hk == 0 && hk == hv, op,
             ": with enable_gqa the number of query heads (", hq,
             ") must be a multiple of the key/value heads (", hk, ", ", hv, ")");
    // Key/value heads are repeated hq/hk times: treat them as hq heads for broadcasting.
    kb.back() = hq;
    vb.back() = hq;
  }
  DimVector batch = broadcast_shapes(broadcast_shapes(qb, kb, op), vb, op);
  if (attn_mask.defined()) {
    const DimVector scores = [&] {
      DimVector s = batch;
      s.push_back(L);
      s.push_back(S);
      return s;
    }();
    SP_CHECK(attn_mask.dtype() == DType::kBool || attn_mask.dtype() == q.dtype(), op,
             ": Expected attn_mask dtype to be bool or to match query dtype, but got ",
             attn_mask.dtype());
    const DimVector b = broadcast_shapes(attn_mask.sizes(), scores, op);
    SP_CHECK(b == scores, op, ": attn_mask of shape ", attn_mask.sizes(),
             " does not broadcast to the attention scores' shape ", scores);
  }
  DimVector shape = batch;
  shape.push_back(L);
  shape.push_back(Ev);
  Tensor out = detail::new_contiguous(shape, q.dtype(), q.device(), op);
  detail::propagate_grad(out, {&q, &k, &v});
  if (active_trace_sink() != nullptr) {
    // QK^T and PV are 2·L·S·E and 2·L·S·Ev per batch·head; a causal mask skips no work in the
    // count (PyTorch's FLOP counter counts the full product too). A window or chunk bounds S.
    const double bh = static_cast<double>(checked_numel(batch, op));
    const double keys = static_cast<double>(keys_per_query ? std::min(S, *keys_per_query) : S);
    const double mm = 2.0 * bh * L * keys * (E + Ev);
    const double soft = kSoftmaxFlopsPerElement * bh * L * keys;
    std::vector<Tensor> ins{q, k, v};
    if (attn_mask.defined()) ins.push_back(attn_mask);
    detail::emit_op(op, ins, {&out, 1}, mm + soft, mm, false);
  }
  return out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     std::string_view reduction, int64_t ignore_index, double label_smoothing) {
  (void)ignore_index;
  const char* op = "cross_entropy";
  SP_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum", op, ": ", reduction,
           " is not a valid value for reduction (expected none, mean or sum)");
  SP_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op,
           ": label_smoothing must be between "
           "0.0 and 1.0. Got: ",
           label_smoothing);
  SP_CHECK(input.dim() >= 1, op, ": input must have a class dimension, got a 0-d tensor");
  require_float(input, op);
  detail::require_meta(input, op);
  detail::require_meta(target, op);
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.sizes()[class_dim];
  if (weight.defined()) {
    SP_CHECK(weight.dim() == 1 && weight.sizes()[0] == C, op,
             ": weight tensor should be defined "
             "either for all ",
             C, " classes or no classes but got weight tensor of shape: ", weight.sizes());
  }
  DimVector loss_shape;  // input's shape without the class dim
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != class_dim) loss_shape.push_back(input.sizes()[d]);
  }
  if (is_floating(target.dtype())) {
    // Class probabilities: same shape as input.
    SP_CHECK(target.sizes() == input.sizes(), op, ": Expected target of shape ", input.sizes(),
             " (class probabilities) but got ", target.sizes());
  } else {
    SP_CHECK(target.dtype() == DType::kInt64, op,
             ": expected target of class indices to be int64 "
             "(Long), got ",
             target.dtype());
    SP_CHECK(target.sizes() == loss_shape, op, ": Expected input batch_size (",
             input.dim() > 1 ? input.sizes()[0] : 1, ") to match target batch_size (",
             target.dim() > 0 ? target.sizes()[0] : 1, "); input shape ", input.sizes(),
             ", target shape ", target.sizes());
  }
  const DimVector shape = reduction == "none" ? loss_shape : DimVector{};
  Tensor out = detail::new_contiguous(shape, input.dtype(), input.device(), op);
  detail::propagate_grad(out, {&input, &weight});
  // log_softmax over the classes plus a gather and the reduction.
  detail::trace_op(op, {input, target}, out, (kSoftmaxFlopsPerElement + 1) * input.numel());
  return out;
}

}  // namespace shardplan::tensor
