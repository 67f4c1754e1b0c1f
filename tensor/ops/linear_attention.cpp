// The ops of linear-attention layers (Gated DeltaNet, tensor/models/gated_delta_net.h; MiniMax's
// lightning attention, tensor/models/lightning_attention.h; xLSTM's mLSTM,
// tensor/models/family_xlstm.cpp): PyTorch's conv1d, the causal-conv1d library's fused
// convolution, the chunked gated delta rule that flash-linear-attention runs as one fused kernel
// (Note [Gated delta rule work] in tensor/ops.h), the blocked lightning attention (Note [Lightning
// attention work]) and the chunkwise mLSTM (Note [mLSTM chunkwise work]).
#include <algorithm>

#include "base/checked.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {
namespace {

void require_float(const Tensor& x, const char* op, const char* what) {
  SP_CHECK(is_floating(x.dtype()), op, ": expected a floating point ", what, ", got ", x.dtype());
}

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  const char* op = "conv1d";
  detail::require_meta(input, op);
  detail::require_meta(weight, op);
  SP_CHECK(input.dim() == 2 || input.dim() == 3, op,
           ": Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: ",
           input.sizes());
  SP_CHECK(weight.dim() == 3, op,
           ": Expected 3-dimensional weight for conv1d, but got weight of size ", weight.sizes());
  SP_CHECK(stride > 0, op, ": non-positive stride is not supported");
  SP_CHECK(padding >= 0, op, ": negative padding is not supported");
  SP_CHECK(dilation > 0, op, ": dilation should be greater than zero");
  SP_CHECK(groups > 0, op, ": non-positive groups is not supported");
  require_float(input, op, "input");
  SP_CHECK(input.dtype() == weight.dtype(), op, ": Input type (", input.dtype(),
           ") and weight type (", weight.dtype(), ") should be the same");
  detail::require_same_device(input, weight, op);
  const bool batched = input.dim() == 3;
  const int64_t n = batched ? input.size(0) : 1;
  const int64_t c_in = input.size(-2), length = input.size(-1);
  const int64_t c_out = weight.size(0), per_group = weight.size(1), k = weight.size(2);
  SP_CHECK(k > 0, op, ": kernel size should be greater than zero, but got kernel_width: ", k);
  SP_CHECK(c_out >= groups, op, ": Given groups=", groups, ", expected weight to be at least ",
           groups, " at dimension 0, but got weight of size ", weight.sizes(), " instead");
  SP_CHECK(c_out % groups == 0, op, ": Given groups=", groups,
           ", expected weight to be divisible by ", groups,
           " at dimension 0, but got weight of size ", weight.sizes(), " instead");
  int64_t channels = 0;  // checked: groups comes from the caller
  SP_CHECK(mul_into(per_group, groups, channels) && channels == c_in, op, ": Given groups=", groups,
           ", weight of size ", weight.sizes(), ", expected input", input.sizes(), " to have ",
           per_group, " x ", groups, " channels, but got ", c_in, " channels instead");
  if (bias.defined()) {
    SP_CHECK(bias.dim() == 1 && bias.size(0) == c_out, op, ": Given weight of size ",
             weight.sizes(), ", expected bias to be 1-dimensional with ", c_out,
             " elements, but got bias of size ", bias.sizes(), " instead");
    SP_CHECK(bias.dtype() == input.dtype(), op, ": Input type (", input.dtype(),
             ") and bias type (", bias.dtype(), ") should be the same");
  }
  // The padded length and the dilated kernel, in checked arithmetic (hostile sizes).
  int64_t padded = 0, span = 0;
  SP_CHECK(mul_into(padding, int64_t{2}, padded) && add_into(padded, length, padded) &&
               mul_into(dilation, k - 1, span) && add_into(span, int64_t{1}, span),
           op, ": padding ", padding, " or dilation ", dilation, " overflows int64");
  SP_CHECK(span <= padded, op, ": Calculated padded input size per channel: (", padded,
           "). Kernel size: (", span, "). Kernel size can't be greater than actual input size");
  const int64_t out_length = (padded - span) / stride + 1;
  const DimVector shape = batched ? DimVector{n, c_out, out_length} : DimVector{c_out, out_length};
  Tensor out = detail::new_contiguous(shape, input.dtype(), input.device(), op);
  detail::propagate_grad(out, {&input, &weight, &bias});
  if (active_trace_sink() != nullptr) {
    // A multiply-add per output element, input channel of its group and tap. A depthwise
    // convolution (groups = channels) is no matrix product: it is priced by the bytes it moves.
    const double flops = 2.0 * static_cast<double>(checked_numel(shape, op)) *
                         static_cast<double>(per_group) * static_cast<double>(k);
    std::vector<Tensor> ins{input, weight};
    if (bias.defined()) ins.push_back(bias);
    detail::emit_op(op, ins, {&out, 1}, flops, 0, false);
  }
  return out;
}

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu) {
  const char* op = "causal_conv1d";
  detail::require_meta(x, op);
  detail::require_meta(weight, op);
  SP_CHECK(x.dim() == 3, op, ": expected x as [batch, channels, tokens], got ", x.sizes());
  SP_CHECK(
      weight.dim() == 3 && weight.size(0) == x.size(1) && weight.size(1) == 1 && weight.size(2) > 0,
      op, ": expected a depthwise weight [", x.size(1), ", 1, width >= 1], got ", weight.sizes());
  require_float(x, op, "input");
  SP_CHECK(x.dtype() == weight.dtype(), op, ": Input type (", x.dtype(), ") and weight type (",
           weight.dtype(), ") should be the same");
  if (bias.defined()) {
    detail::require_meta(bias, op);
    SP_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1) && bias.dtype() == x.dtype(), op,
             ": expected a bias [", x.size(1), "] of the input's dtype, got ", bias.sizes(), " ",
             bias.dtype());
  }
  Tensor out = detail::new_contiguous(x.sizes(), x.dtype(), x.device(), op);
  detail::propagate_grad(out, {&x, &weight, &bias});
  if (active_trace_sink() != nullptr) {
    // A multiply-add per output and tap, the bias's add, and the SiLU (4 per element: sigmoid
    // and a product).
    const double elements = static_cast<double>(x.numel());
    const double flops = elements * (2.0 * static_cast<double>(weight.size(2)) +
                                     (bias.defined() ? 1.0 : 0.0) + (silu ? 4.0 : 0.0));
    std::vector<Tensor> ins{x, weight};
    if (bias.defined()) ins.push_back(bias);
    detail::emit_op(op, ins, {&out, 1}, flops, 0, false);
  }
  return out;
}

namespace {

int64_t tiles(int64_t width) { return (width + 127) / 128; }  // 128-wide register tiles

}  // namespace

ChunkedScanWork gated_delta_rule_work(int64_t tokens, int64_t heads, int64_t key_dim,
                                      int64_t value_dim, int64_t chunk) {
  // Note [Gated delta rule work], per token and head. Forward: the chunk's k k^T (2 C K), the
  // tensor-core merge of its 16 x 16 inverse blocks (C^2 / 2), w and u (2 C K, 2 C V), the state
  // pass (w h and k^T v_new, 4 K V), the output's q h (2 K V), its in-chunk q k^T once per
  // 128-wide value tile (2 C K each) and scores x v_new (2 C V). Backward: dv local (2 C K + 2 C
  // V), the reverse state pass (6 K V), dq dk dw dg (6 K V + 4 C K + 2 C V per 128-wide key tile),
  // the WY gradients (10 C K + 4 C V + 4 C^2); and it recomputes w, u and the states first
  // (2 C K + 2 C V + 4 K V).
  const double c = static_cast<double>(chunk), k = static_cast<double>(key_dim),
               v = static_cast<double>(value_dim);
  const double nv = static_cast<double>(tiles(value_dim)), nk = static_cast<double>(tiles(key_dim));
  const double rows = static_cast<double>(tokens) * static_cast<double>(heads);
  ChunkedScanWork w;
  w.forward = rows * (6 * k * v + (4 + 2 * nv) * c * k + 4 * c * v + c * c / 2);
  w.backward = rows * (12 * k * v + 16 * c * k + (6 + 2 * nk) * c * v + 4 * c * c);
  w.recompute = rows * (2 * c * k + 2 * c * v + 4 * k * v);
  return w;
}

Tensor chunk_gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                              const Tensor& beta) {
  const char* op = "chunk_gated_delta_rule";
  const int64_t chunk_size = kGatedDeltaChunk;
  for (const Tensor* t : {&q, &k, &v, &g, &beta}) detail::require_meta(*t, op);
  SP_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
           ": expected q, k and v as [batch, tokens, heads, dim], got ", q.sizes(), ", ", k.sizes(),
           ", ", v.sizes());
  const int64_t b = q.size(0), t = q.size(1), h = q.size(2), kd = q.size(3), vd = v.size(3);
  SP_CHECK(k.sizes() == q.sizes(), op, ": key of size ", k.sizes(), " must match query's ",
           q.sizes());
  SP_CHECK(v.size(0) == b && v.size(1) == t && v.size(2) == h, op, ": value of size ", v.sizes(),
           ", expected [", b, ", ", t, ", ", h, ", *] as the query's");
  const DimVector gates{b, t, h};
  SP_CHECK(g.sizes() == gates && beta.sizes() == gates, op, ": g ", g.sizes(), " and beta ",
           beta.sizes(), " must both be [batch, tokens, heads] = ", gates);
  SP_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
           ": query, key and value must share a dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
           v.dtype());
  require_float(q, op, "query");
  require_float(g, op, "g");
  require_float(beta, op, "beta");
  Tensor out = detail::new_contiguous({b, t, h, vd}, v.dtype(), v.device(), op);
  detail::propagate_grad(out, {&q, &k, &v, &g, &beta});
  if (active_trace_sink() != nullptr) {
    // The chunks are padded to whole chunks, as the kernel pads them.
    const int64_t padded = (t + chunk_size - 1) / chunk_size * chunk_size;
    const double mm = gated_delta_rule_work(b * padded, h, kd, vd, chunk_size).forward;
    const Tensor ins[] = {q, k, v, g, beta};
    detail::emit_op(op, ins, {&out, 1}, mm, mm, false);
  }
  return out;
}

ChunkedScanWork lightning_attention_work(int64_t tokens, int64_t heads, int64_t head_dim,
                                         int64_t block) {
  // Note [Lightning attention work], per token and head: two products over the block's B x B
  // tile and two against the d x d state forward (2 d (d + B) each pair), four of each in
  // backward, and the scores and states once more before it.
  const double d = static_cast<double>(head_dim), b = static_cast<double>(block);
  const double rows = static_cast<double>(tokens) * static_cast<double>(heads);
  const double pair = 2 * d * (d + b);  // one product in the block and one against the state
  ChunkedScanWork w;
  w.forward = rows * 2 * pair;
  w.backward = rows * 4 * pair;
  w.recompute = rows * pair;
  return w;
}

Tensor lightning_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& slope) {
  const char* op = "lightning_attention";
  for (const Tensor* t : {&q, &k, &v, &slope}) detail::require_meta(*t, op);
  SP_CHECK(q.dim() == 4, op, ": expected q, k and v as [batch, tokens, heads, dim], got query ",
           q.sizes());
  SP_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(), op, ": key ", k.sizes(), " and value ",
           v.sizes(), " must match the query's ", q.sizes(),
           " (lightning attention's keys and values are as wide as its queries)");
  SP_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
           ": query, key and value must share a dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
           v.dtype());
  require_float(q, op, "query");
  require_float(slope, op, "slope");
  const int64_t b = q.size(0), t = q.size(1), h = q.size(2), d = q.size(3);
  SP_CHECK(slope.numel() == h, op, ": expected one decay per head (", h, "), got slope ",
           slope.sizes());
  Tensor out = detail::new_contiguous({b, t, h, d}, v.dtype(), v.device(), op);
  detail::propagate_grad(out, {&q, &k, &v, &slope});
  if (active_trace_sink() != nullptr) {
    // The blocks are padded to whole blocks, as the kernel pads them.
    const int64_t padded = (t + kLightningBlock - 1) / kLightningBlock * kLightningBlock;
    const double mm = lightning_attention_work(b * padded, h, d, kLightningBlock).forward;
    const Tensor ins[] = {q, k, v, slope};
    detail::emit_op(op, ins, {&out, 1}, mm, mm, false);
  }
  return out;
}

ChunkedScanWork mlstm_chunkwise_work(int64_t tokens, int64_t heads, int64_t key_dim,
                                     int64_t value_dim, int64_t chunk) {
  // Note [mLSTM chunkwise work], per token and head. Forward: the recurrent kernel's K^T V per
  // chunk (2 K V); the parallel kernel, once per 128-wide value tile, Q K^T over the chunk's tile
  // (2 C K each), then the scores times V and Q times the entering state (2 C V, 2 K V over the
  // tiles). Backward: dC's reverse pass Q^T dH (2 K V); the dV kernel per value tile K Q^T (2 C K
  // each), then S^T dH and K dC (2 C V, 2 K V); the dK and dQ kernels per key tile dH V^T (2 C V
  // each), then dS^T Q and V dC^T, dS K and dH C^T (2 C K + 2 K V each); and it recomputes the
  // chunk states first (2 K V).
  const double c = static_cast<double>(chunk), k = static_cast<double>(key_dim),
               v = static_cast<double>(value_dim);
  const double nv = static_cast<double>(tiles(value_dim)), nk = static_cast<double>(tiles(key_dim));
  const double rows = static_cast<double>(tokens) * static_cast<double>(heads);
  ChunkedScanWork w;
  w.forward = rows * (4 * k * v + 2 * nv * c * k + 2 * c * v);
  w.backward = rows * (8 * k * v + (4 + 2 * nv) * c * k + (2 + 4 * nk) * c * v);
  w.recompute = rows * 2 * k * v;
  return w;
}

Tensor mlstm_chunkwise(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& i,
                       const Tensor& f) {
  const char* op = "mlstm_chunkwise";
  for (const Tensor* t : {&q, &k, &v, &i, &f}) detail::require_meta(*t, op);
  SP_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
           ": expected q, k and v as [batch, tokens, heads, dim], got ", q.sizes(), ", ", k.sizes(),
           ", ", v.sizes());
  const int64_t b = q.size(0), t = q.size(1), h = q.size(2), kd = q.size(3), vd = v.size(3);
  SP_CHECK(k.sizes() == q.sizes(), op, ": key of size ", k.sizes(), " must match query's ",
           q.sizes());
  SP_CHECK(v.size(0) == b && v.size(1) == t && v.size(2) == h, op, ": value of size ", v.sizes(),
           ", expected [", b, ", ", t, ", ", h, ", *] as the query's");
  const DimVector gates{b, t, h};
  SP_CHECK(i.sizes() == gates && f.sizes() == gates, op, ": the input gate ", i.sizes(),
           " and the forget gate ", f.sizes(), " must both be [batch, tokens, heads] = ", gates);
  SP_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
           ": query, key and value must share a dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
           v.dtype());
  require_float(q, op, "query");
  require_float(i, op, "input gate");
  require_float(f, op, "forget gate");
  Tensor out = detail::new_contiguous({b, t, h, vd}, v.dtype(), v.device(), op);
  detail::propagate_grad(out, {&q, &k, &v, &i, &f});
  if (active_trace_sink() != nullptr) {
    // The chunks are padded to whole chunks, as the kernels' padding mode pads them.
    const int64_t padded = (t + kMlstmChunk - 1) / kMlstmChunk * kMlstmChunk;
    const double mm = mlstm_chunkwise_work(b * padded, h, kd, vd, kMlstmChunk).forward;
    const Tensor ins[] = {q, k, v, i, f};
    detail::emit_op(op, ins, {&out, 1}, mm, mm, false);
  }
  return out;
}

}  // namespace shardplan::tensor
