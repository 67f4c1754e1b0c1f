// Matrix products. A multiply-add is 2 FLOPs: an [n,k] x [k,p] product costs 2·n·k·p, the
// convention of Megatron-LM's FLOP formulas (Narayanan et al. 2021, Appendix).
#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace {

void require_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  SP_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, but got ",
           a.dtype(), " != ", b.dtype());
}

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  detail::require_meta(a, op);
  detail::require_meta(b, op);
  require_same_dtype(a, b, op);
}

Tensor product_out(const DimVector& shape, const Tensor& a, const Tensor& b, const Tensor* bias,
                   double flops, const char* op) {
  Tensor out = detail::new_contiguous(shape, a.dtype(), a.device(), op);
  detail::propagate_grad(out, {&a, &b, bias});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins{a, b};
    if (bias != nullptr && bias->defined()) ins.push_back(*bias);
    const double bias_flops = bias != nullptr && bias->defined() ? out.numel() : 0;
    detail::emit_op(op, ins, {&out, 1}, flops + bias_flops, flops, false);
  }
  return out;
}

double mm_flops(int64_t batch, int64_t n, int64_t k, int64_t p) {
  return 2.0 * static_cast<double>(batch) * n * k * p;
}

void check_bias(const Tensor& bias, const DimVector& out_shape, const Tensor& a, const char* op) {
  detail::require_meta(bias, op);
  require_same_dtype(bias, a, op);
  const DimVector b = broadcast_shapes(bias.sizes(), out_shape, op);
  SP_CHECK(b == out_shape, op, ": bias of shape ", bias.sizes(), " does not broadcast to the "
           "output shape ", out_shape);
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  SP_CHECK(a.dim() == 2, "mm: self must be a matrix, got a ", a.dim(), "-d tensor of shape ",
           a.sizes());
  SP_CHECK(b.dim() == 2, "mm: mat2 must be a matrix, got a ", b.dim(), "-d tensor of shape ",
           b.sizes());
  SP_CHECK(a.sizes()[1] == b.sizes()[0], "mm: mat1 and mat2 shapes cannot be multiplied (",
           a.sizes()[0], "x", a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
  check_operands(a, b, "mm");
  return product_out({a.sizes()[0], b.sizes()[1]}, a, b, nullptr,
                     mm_flops(1, a.sizes()[0], a.sizes()[1], b.sizes()[1]), "mm");
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  SP_CHECK(a.dim() == 3, "bmm: batch1 must be a 3D tensor, got shape ", a.sizes());
  SP_CHECK(b.dim() == 3, "bmm: batch2 must be a 3D tensor, got shape ", b.sizes());
  const int64_t bs = a.sizes()[0], n = a.sizes()[1], k = a.sizes()[2], p = b.sizes()[2];
  SP_CHECK(b.sizes()[0] == bs && b.sizes()[1] == k, "bmm: Expected size for first two dimensions "
           "of batch2 tensor to be: [", bs, ", ", k, "] but got: [", b.sizes()[0], ", ",
           b.sizes()[1], "].");
  check_operands(a, b, "bmm");
  return product_out({bs, n, p}, a, b, nullptr, mm_flops(bs, n, k, p), "bmm");
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  (void)beta;
  (void)alpha;
  SP_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: mat1 and mat2 must be matrices, got shapes ",
           a.sizes(), " and ", b.sizes());
  SP_CHECK(a.sizes()[1] == b.sizes()[0], "addmm: mat1 and mat2 shapes cannot be multiplied (",
           a.sizes()[0], "x", a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
  check_operands(a, b, "addmm");
  const DimVector shape{a.sizes()[0], b.sizes()[1]};
  check_bias(bias, shape, a, "addmm");
  return product_out(shape, a, b, &bias, mm_flops(1, shape[0], a.sizes()[1], shape[1]), "addmm");
}

Tensor baddbmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  (void)beta;
  (void)alpha;
  SP_CHECK(a.dim() == 3 && b.dim() == 3, "baddbmm: batch1 and batch2 must be 3D tensors, got "
           "shapes ", a.sizes(), " and ", b.sizes());
  const int64_t bs = a.sizes()[0], n = a.sizes()[1], k = a.sizes()[2], p = b.sizes()[2];
  SP_CHECK(b.sizes()[0] == bs && b.sizes()[1] == k, "baddbmm: Expected size for first two "
           "dimensions of batch2 tensor to be: [", bs, ", ", k, "] but got: [", b.sizes()[0],
           ", ", b.sizes()[1], "].");
  check_operands(a, b, "baddbmm");
  const DimVector shape{bs, n, p};
  check_bias(bias, shape, a, "baddbmm");
  return product_out(shape, a, b, &bias, mm_flops(bs, n, k, p), "baddbmm");
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  SP_CHECK(da > 0 && db > 0, "matmul: both arguments to matmul need to be at least 1D, but they "
           "are ", da, "D and ", db, "D");
  check_operands(a, b, "matmul");
  const int64_t k_a = a.sizes()[da - 1];
  const int64_t k_b = db == 1 ? b.sizes()[0] : b.sizes()[db - 2];
  if (da == 1 && db == 1) {
    SP_CHECK(k_a == k_b, "matmul: inconsistent tensor size, expected tensor [", k_a,
             "] and src [", k_b, "] to have the same number of elements, but got ", k_a, " and ",
             k_b, " elements respectively");
    return product_out({}, a, b, nullptr, mm_flops(1, 1, k_a, 1), "matmul");
  }
  const int64_t n = da == 1 ? 1 : a.sizes()[da - 2];
  const int64_t p = db == 1 ? 1 : b.sizes()[db - 1];
  SP_CHECK(k_a == k_b, "matmul: mat1 and mat2 shapes cannot be multiplied (", n, "x", k_a,
           " and ", k_b, "x", p, "); shapes ", a.sizes(), " and ", b.sizes());
  // Batch dims (all but the last two; a 1-d operand has none) broadcast.
  const std::span<const int64_t> ba(a.sizes().data(), da > 2 ? da - 2 : 0);
  const std::span<const int64_t> bb(b.sizes().data(), db > 2 ? db - 2 : 0);
  DimVector shape = broadcast_shapes(ba, bb, "matmul");
  const int64_t batch = checked_numel(shape, "matmul");
  if (da > 1) shape.push_back(n);
  if (db > 1) shape.push_back(p);
  return product_out(shape, a, b, nullptr, mm_flops(batch, n, k_a, p), "matmul");
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  SP_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got shape ",
           weight.sizes());
  SP_CHECK(x.dim() >= 1, "linear: input must be at least 1-D, got a 0-d tensor");
  const int64_t in = weight.sizes()[1], out_f = weight.sizes()[0];
  const int64_t rows = checked_numel(std::span<const int64_t>(x.sizes().data(), x.dim() - 1),
                                     "linear");
  SP_CHECK(x.sizes().back() == in, "linear: mat1 and mat2 shapes cannot be multiplied (", rows,
           "x", x.sizes().back(), " and ", in, "x", out_f, "); input shape ", x.sizes(),
           ", weight shape ", weight.sizes());
  check_operands(x, weight, "linear");
  DimVector shape = x.sizes();
  shape.back() = out_f;
  if (bias.defined()) check_bias(bias, shape, x, "linear");
  return product_out(shape, x, weight, &bias, mm_flops(1, rows, in, out_f), "linear");
}

}  // namespace shardplan::tensor
