// The op of Mamba-2 layers (tensor/models/mamba2_mixer.h): mamba_ssm's fused split, convolution,
// chunked scan and gated norm, or the gate alone when there is no norm (Note [Mamba-2 scan work]
// in tensor/ops.h), and the chunk of each chunked-scan op the planner prices; the selective
// scan of Mamba-1 layers (tensor/models/mamba_mixer.h, Note [Mamba-1 scan work]); the linear
// scan of Griffin's RG-LRU (tensor/models/rg_lru.h, Note [Linear scan work]); and RWKV-4's WKV
// recurrence (tensor/models/family_rwkv.cpp, Note [WKV work]).
#include <algorithm>

#include "base/checked.h"
#include "tensor/ops/common.h"

namespace shardplan::tensor {

ChunkedScanWork mamba_scan_work(int64_t tokens, int64_t heads, int64_t head_dim, int64_t groups,
                                int64_t state, int64_t chunk) {
  // Note [Mamba-2 scan work], per token: a head's products scale with N P and P (Q + 64), a
  // group's C B^T with Q N.
  const double q = static_cast<double>(chunk), n = static_cast<double>(state),
               p = static_cast<double>(head_dim);
  const double t = static_cast<double>(tokens);
  const double head_rows = t * static_cast<double>(heads);
  const double group_rows = t * static_cast<double>(groups);
  const double causal = p * (q + 64);  // (C B^T . L) x over the causal blocks, per token
  ChunkedScanWork w;
  w.forward = head_rows * (4 * n * p + causal) + group_rows * 2 * q * n;
  w.backward = head_rows * (10 * n * p + 3 * causal) + group_rows * 4 * q * n;
  w.recompute = head_rows * 2 * n * p + group_rows * 2 * q * n;
  return w;
}

int64_t chunked_scan_chunk(std::string_view op) {
  if (op == "chunk_gated_delta_rule") return kGatedDeltaChunk;
  if (op == "mamba_split_conv1d_scan_combined") return kMambaChunk;
  if (op == "lightning_attention") return kLightningBlock;
  if (op == "mlstm_chunkwise") return kMlstmChunk;
  return 0;
}

Tensor mamba_split_conv1d_scan_combined(const Tensor& zxbcdt, const Tensor& conv_weight,
                                        const Tensor& conv_bias, const Tensor& dt_bias,
                                        const Tensor& A, const Tensor& D, const Tensor& norm_weight,
                                        int64_t groups) {
  const char* op = "mamba_split_conv1d_scan_combined";
  for (const Tensor* t : {&zxbcdt, &conv_weight, &dt_bias, &A, &D}) detail::require_meta(*t, op);
  // No norm weight: mamba_ssm's rmsnorm_weight None (the gate inside the scan, no rstd).
  const bool normed = norm_weight.defined();
  if (normed) detail::require_meta(norm_weight, op);
  SP_CHECK(zxbcdt.dim() == 3, op, ": expected zxbcdt as [batch, tokens, channels], got ",
           zxbcdt.sizes());
  SP_CHECK(is_floating(zxbcdt.dtype()), op, ": expected a floating point zxbcdt, got ",
           zxbcdt.dtype());
  SP_CHECK(dt_bias.dim() == 1 && A.sizes() == dt_bias.sizes() && D.sizes() == dt_bias.sizes(), op,
           ": expected dt_bias, A and D as [heads], got ", dt_bias.sizes(), ", ", A.sizes(), ", ",
           D.sizes());
  SP_CHECK(!normed || norm_weight.dim() == 1, op, ": expected the norm weight as [d_inner], got ",
           norm_weight.sizes());
  SP_CHECK(conv_weight.dim() == 3 && conv_weight.size(1) == 1 && conv_weight.size(2) > 0, op,
           ": expected a depthwise convolution weight [conv_dim, 1, width], got ",
           conv_weight.sizes());
  const int64_t conv_dim = conv_weight.size(0), width = conv_weight.size(2);
  const int64_t heads = dt_bias.size(0);
  // d_inner: the norm's width, else the channels of zxbcdt that are neither xBC nor dt (sizes
  // are non-negative: the difference cannot overflow).
  const int64_t inner = normed ? norm_weight.size(0) : zxbcdt.size(2) - conv_dim - heads;
  SP_CHECK(heads > 0 && inner > 0 && inner % heads == 0, op, ": d_inner ", inner,
           " is not a positive multiple of the heads ", heads);
  SP_CHECK(groups > 0 && heads % groups == 0, op, ": ngroups ", groups,
           " must be positive and divide the heads ", heads);
  const int64_t bc = conv_dim - inner;  // 2 g N
  SP_CHECK(bc > 0 && bc % (2 * groups) == 0, op, ": conv_dim ", conv_dim, " is not d_inner ", inner,
           " plus 2 x ngroups ", groups, " x a state width");
  const int64_t state = bc / (2 * groups);
  // zxbcdt = [z d_inner | xBC conv_dim | dt heads] (checked sums: the sizes are the caller's).
  int64_t channels = 0;
  SP_CHECK(add_into(inner, conv_dim, channels) && add_into(channels, heads, channels) &&
               zxbcdt.size(2) == channels,
           op, ": zxbcdt of size ", zxbcdt.sizes(), ", expected ", channels,
           " channels = d_inner + conv_dim + heads");
  if (conv_bias.defined()) {
    detail::require_meta(conv_bias, op);
    SP_CHECK(conv_bias.dim() == 1 && conv_bias.size(0) == conv_dim, op,
             ": expected the convolution bias as [", conv_dim, "], got ", conv_bias.sizes());
  }
  SP_CHECK(zxbcdt.dtype() == conv_weight.dtype(), op, ": zxbcdt type (", zxbcdt.dtype(),
           ") and convolution weight type (", conv_weight.dtype(), ") should be the same");
  const int64_t b = zxbcdt.size(0), t = zxbcdt.size(1), head_dim = inner / heads;
  Tensor out = detail::new_contiguous({b, t, heads, head_dim}, zxbcdt.dtype(), zxbcdt.device(), op);
  Tensor rstd;  // the norm's, [B, T, g] fp32; none without the norm
  if (normed) rstd = detail::new_contiguous({b, t, groups}, DType::kFloat32, zxbcdt.device(), op);
  detail::propagate_grad(out, {&zxbcdt, &conv_weight, &conv_bias, &dt_bias, &A, &D, &norm_weight});
  if (active_trace_sink() != nullptr) {
    const int64_t padded = (t + kMambaChunk - 1) / kMambaChunk * kMambaChunk;
    const double mm =
        mamba_scan_work(b * padded, heads, head_dim, groups, state, kMambaChunk).forward;
    const double tokens = static_cast<double>(b) * static_cast<double>(t);
    // Per d_inner channel: the skip (2) and the gate (6), and the norm's 4 when there is one.
    const double per_channel = normed ? 12.0 : 8.0;
    const double elementwise = tokens * (static_cast<double>(conv_dim) * (2.0 * width + 4) +
                                         per_channel * static_cast<double>(inner));
    std::vector<Tensor> ins{zxbcdt, conv_weight};
    if (conv_bias.defined()) ins.push_back(conv_bias);
    for (const Tensor* p : {&dt_bias, &A, &D, &norm_weight}) {
      if (p->defined()) ins.push_back(*p);
    }
    std::vector<Tensor> outs{out};
    if (normed) outs.push_back(rstd);
    detail::emit_op(op, ins, outs, mm + elementwise, mm, false);
  }
  return out;
}

ChunkedScanWork selective_scan_work(int64_t tokens, int64_t channels, int64_t state) {
  // Note [Mamba-1 scan work], per token, channel and state: 7 forward, 16 backward, 5 recomputed.
  const double rows =
      static_cast<double>(tokens) * static_cast<double>(channels) * static_cast<double>(state);
  ChunkedScanWork w;
  w.forward = 7 * rows;
  w.backward = 16 * rows;
  w.recompute = 5 * rows;
  return w;
}

Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D, const Tensor& z, const Tensor& delta_bias) {
  const char* op = "selective_scan_fn";
  for (const Tensor* t : {&u, &delta, &A, &B, &C}) detail::require_meta(*t, op);
  for (const Tensor* t : {&D, &z, &delta_bias}) {
    if (t->defined()) detail::require_meta(*t, op);
  }
  SP_CHECK(u.dim() == 3 && is_floating(u.dtype()), op,
           ": expected u as floating point [batch, channels, tokens], got ", u.sizes(), " ",
           u.dtype());
  const int64_t b = u.size(0), channels = u.size(1), t = u.size(2);
  SP_CHECK(delta.sizes() == u.sizes() && delta.dtype() == u.dtype(), op, ": expected delta as u [",
           b, ", ", channels, ", ", t, "] ", u.dtype(), ", got ", delta.sizes(), " ",
           delta.dtype());
  SP_CHECK(!z.defined() || (z.sizes() == u.sizes() && z.dtype() == u.dtype()), op,
           ": expected z as u [", b, ", ", channels, ", ", t, "] ", u.dtype(), ", got ",
           z.defined() ? z.sizes() : DimVector{}, " ", z.defined() ? z.dtype() : u.dtype());
  SP_CHECK(A.dim() == 2 && A.size(0) == channels && A.size(1) > 0 && is_floating(A.dtype()), op,
           ": expected A as floating point [", channels, ", state], got ", A.sizes());
  const int64_t state = A.size(1);
  for (const Tensor* bc : {&B, &C}) {
    SP_CHECK(bc->dim() == 3 && bc->size(0) == b && bc->size(1) == state && bc->size(2) == t &&
                 is_floating(bc->dtype()),
             op, ": expected B and C as floating point [", b, ", ", state, ", ", t, "], got ",
             bc->sizes());
  }
  for (const Tensor* p : {&D, &delta_bias}) {
    SP_CHECK(!p->defined() || (p->dim() == 1 && p->size(0) == channels), op,
             ": expected D and delta_bias as [", channels, "], got ", p->sizes());
  }
  Tensor out = detail::new_contiguous({b, channels, t}, u.dtype(), u.device(), op);
  detail::propagate_grad(out, {&u, &delta, &A, &B, &C, &D, &z, &delta_bias});
  if (active_trace_sink() != nullptr) {
    const double tokens = static_cast<double>(b) * static_cast<double>(t);
    // Per token and channel: dt x and softplus always, the bias, the skip and the gate where given.
    const double per_channel = 4.0 + (delta_bias.defined() ? 1.0 : 0.0) +
                               (D.defined() ? 2.0 : 0.0) + (z.defined() ? 5.0 : 0.0);
    const double flops = selective_scan_work(b * t, channels, state).forward +
                         tokens * static_cast<double>(channels) * per_channel;
    std::vector<Tensor> ins{u, delta, A, B, C};
    for (const Tensor* p : {&D, &z, &delta_bias}) {
      if (p->defined()) ins.push_back(*p);
    }
    detail::emit_op(op, ins, {&out, 1}, flops, 0, false);
  }
  return out;
}

Tensor linear_scan(const Tensor& a, const Tensor& x) {
  const char* op = "linear_scan";
  detail::require_meta(a, op);
  detail::require_meta(x, op);
  SP_CHECK(x.dim() == 3 && is_floating(x.dtype()), op,
           ": expected x as floating point [batch, tokens, channels], got ", x.sizes(), " ",
           x.dtype());
  SP_CHECK(a.sizes() == x.sizes() && is_floating(a.dtype()), op,
           ": expected the decays a as floating point of x's shape ", x.sizes(), ", got ",
           a.sizes(), " ", a.dtype());
  Tensor out = detail::new_contiguous(x.sizes(), x.dtype(), x.device(), op);
  detail::propagate_grad(out, {&a, &x});
  if (active_trace_sink() != nullptr) {
    // Note [Linear scan work]: the state's multiply-add per element, on CUDA cores.
    const Tensor ins[] = {a, x};
    detail::emit_op(op, ins, {&out, 1}, 2.0 * static_cast<double>(x.numel()), 0, false);
  }
  return out;
}

Tensor wkv(const Tensor& w, const Tensor& u, const Tensor& k, const Tensor& v) {
  const char* op = "wkv";
  for (const Tensor* t : {&w, &u, &k, &v}) detail::require_meta(*t, op);
  SP_CHECK(k.dim() == 3 && (k.dtype() == DType::kFloat32 || k.dtype() == DType::kBFloat16), op,
           ": expected k as float32 or bfloat16 [batch, tokens, channels] (the kernel's two "
           "builds; transformers casts float16 to float32), got ",
           k.sizes(), " ", k.dtype());
  SP_CHECK(v.sizes() == k.sizes() && v.dtype() == k.dtype(), op, ": expected v as k ", k.sizes(),
           " ", k.dtype(), ", got ", v.sizes(), " ", v.dtype());
  const int64_t b = k.size(0), channels = k.size(2);
  SP_CHECK(w.dim() == 1 && w.size(0) == channels && w.dtype() == DType::kFloat32, op,
           ": expected the decay w as float32 [", channels, "], got ", w.sizes(), " ", w.dtype());
  SP_CHECK(u.dim() == 1 && u.size(0) == channels && u.dtype() == k.dtype(), op,
           ": expected the bonus u as ", k.dtype(), " [", channels, "], got ", u.sizes(), " ",
           u.dtype());
  // Note [WKV work]: blocks of min(C, 32) threads over the B C rows, as transformers checks.
  const int64_t threads = std::min<int64_t>(channels, 32);
  int64_t rows = 0;
  SP_CHECK(threads > 0 && mul_into(b, channels, rows) && rows % threads == 0, op,
           ": the product of batch size (", b, ") and hidden size (", channels,
           ") needs to be a round multiple of ", threads);
  Tensor out = detail::new_contiguous(k.sizes(), k.dtype(), k.device(), op);
  detail::propagate_grad(out, {&w, &u, &k, &v});
  if (active_trace_sink() != nullptr) {
    // Note [WKV work]: per element, on CUDA cores.
    const Tensor ins[] = {w, u, k, v};
    detail::emit_op(op, ins, {&out, 1}, kWkvForwardFlops * static_cast<double>(k.numel()), 0,
                    false);
  }
  return out;
}

}  // namespace shardplan::tensor
