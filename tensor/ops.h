// The op set on meta tensors, with PyTorch's output sizes, strides, storage offsets, dtypes,
// view/non-view behaviour and errors (bad input throws shardplan::Error naming op and values).
// Ops compute metadata only: views and factories work on any device; ops that would compute data
// accept meta tensors only (tensor/ops/common.h says why).
//   Tensor x = randn({2, 16, 64});
//   Tensor y = softmax(matmul(x, transpose(x, -2, -1)), -1);   // [2, 16, 16]
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/dim_vector.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {

struct TensorOptions {
  std::optional<DType> dtype;  // unset: float32 (or inferred, for full)
  Device device = Device::meta();
  bool requires_grad = false;
};

// A tensor or a Python-number operand of a pointwise op.
struct Operand {
  Tensor tensor;
  Scalar scalar;
  bool is_scalar = false;
  Operand(Tensor t) : tensor(std::move(t)) {}                   // NOLINT: implicit by design
  Operand(Scalar s) : scalar(s), is_scalar(true) {}             // NOLINT
  Operand(double v) : scalar(v), is_scalar(true) {}             // NOLINT
  Operand(int v) : scalar(v), is_scalar(true) {}                // NOLINT
  Operand(int64_t v) : scalar(v), is_scalar(true) {}            // NOLINT
  Operand(bool v) : scalar(v), is_scalar(true) {}               // NOLINT
};

// PyTorch's memory_format argument. Channels-last exists for 4-d tensors only (NHWC order).
enum class MemoryFormat { kPreserve, kContiguous, kChannelsLast };

// ---- Factories (any device) ----
Tensor empty(const DimVector& size, const TensorOptions& opts = {},
             MemoryFormat format = MemoryFormat::kContiguous);
Tensor empty_strided(const DimVector& size, const DimVector& stride, const TensorOptions& opts = {});
Tensor zeros(const DimVector& size, const TensorOptions& opts = {});
Tensor ones(const DimVector& size, const TensorOptions& opts = {});
// dtype, when unset, is inferred from the value as PyTorch does: bool, int64, float32, complex64.
Tensor full(const DimVector& size, Scalar value, const TensorOptions& opts = {});
Tensor randn(const DimVector& size, const TensorOptions& opts = {});
// preserve_format: the same strides when `t` is non-overlapping and dense, else dense strides in
// `t`'s memory order. The way to real memory: empty_like(meta_t, {}, Device::cpu()).
Tensor empty_like(const Tensor& t, std::optional<DType> dtype = {}, std::optional<Device> device = {},
                  MemoryFormat format = MemoryFormat::kPreserve);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = {});

// ---- Views (share storage; metadata only) ----
Tensor view(const Tensor& t, const DimVector& size);
// A view when the strides allow, else a contiguous copy (not a view), as PyTorch.
Tensor reshape(const Tensor& t, const DimVector& size);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& t);
Tensor permute(const Tensor& t, const DimVector& dims);
Tensor expand(const Tensor& t, const DimVector& size);
Tensor expand_as(const Tensor& t, const Tensor& other);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& t, int64_t dim, const DimVector& sizes);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// t[start:end:step] along `dim`; start/end clamp like Python slicing; step must be positive.
Tensor slice(const Tensor& t, int64_t dim = 0, std::optional<int64_t> start = {},
             std::optional<int64_t> end = {}, int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& t, const DimVector& sizes, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& t, int64_t dim = 0);
Tensor as_strided(const Tensor& t, const DimVector& size, const DimVector& stride,
                  std::optional<int64_t> storage_offset = {});
// Returns `t` itself when already contiguous in `format`, else a copy in that format.
Tensor contiguous(const Tensor& t, MemoryFormat format = MemoryFormat::kContiguous);
// complex [..] -> real [.., 2] sharing storage.
Tensor view_as_real(const Tensor& t);
Tensor view_as_complex(const Tensor& t);

// ---- Pointwise (broadcasting, type promotion, TensorIterator output strides) ----
enum class UnaryOp {
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kRelu, kReciprocal,
  kSquare, kLogicalNot, kSign, kFloor, kCeil, kRound, kErf, kBitwiseNot, kIsnan
};
Tensor unary(UnaryOp op, const Tensor& t);
Tensor neg(const Tensor& t);
Tensor abs(const Tensor& t);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor rsqrt(const Tensor& t);
Tensor sin(const Tensor& t);
Tensor cos(const Tensor& t);
Tensor tanh(const Tensor& t);
Tensor sigmoid(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor reciprocal(const Tensor& t);
Tensor square(const Tensor& t);

enum class BinaryOp {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum, kEq, kNe, kLt, kLe, kGt, kGe,
  kLogicalAnd, kLogicalOr, kBitwiseAnd, kBitwiseOr, kRemainder, kFloorDivide, kAtan2
};
// `alpha` scales b for add/sub (a + alpha * b).
Tensor binary(BinaryOp op, const Operand& a, const Operand& b, Scalar alpha = Scalar(int64_t{1}));
// In place: self keeps its shape and dtype; `other` must broadcast to self and the result type
// must be castable to self's dtype. Returns self.
Tensor& binary_(BinaryOp op, Tensor& self, const Operand& other, Scalar alpha = Scalar(int64_t{1}));
Tensor add(const Operand& a, const Operand& b, Scalar alpha = Scalar(int64_t{1}));
Tensor sub(const Operand& a, const Operand& b, Scalar alpha = Scalar(int64_t{1}));
Tensor mul(const Operand& a, const Operand& b);
Tensor div(const Operand& a, const Operand& b);
// rounding_mode "trunc" or "floor": integer operands keep their integer result type.
Tensor div(const Operand& a, const Operand& b, std::string_view rounding_mode);
Tensor pow(const Operand& a, const Operand& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Operand& a, const Operand& b);
Tensor ne(const Operand& a, const Operand& b);
Tensor lt(const Operand& a, const Operand& b);
Tensor le(const Operand& a, const Operand& b);
Tensor gt(const Operand& a, const Operand& b);
Tensor ge(const Operand& a, const Operand& b);
Tensor& add_(Tensor& self, const Operand& other, Scalar alpha = Scalar(int64_t{1}));
Tensor& sub_(Tensor& self, const Operand& other, Scalar alpha = Scalar(int64_t{1}));
Tensor& mul_(Tensor& self, const Operand& other);
Tensor& div_(Tensor& self, const Operand& other);
Tensor where(const Tensor& condition, const Operand& a, const Operand& b);
// Same dtype (and copy=false): returns `t` itself, as PyTorch.
Tensor to(const Tensor& t, DType dtype, bool copy = false);
// Result shape of broadcasting, or an error naming both shapes.
DimVector broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b, const char* op);

// ---- Reductions (contiguous outputs) ----
// `dims` empty = all dims, as PyTorch's sum(x, dim=[]) in 1.13.
Tensor sum(const Tensor& t, const DimVector& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = {});
Tensor mean(const Tensor& t, const DimVector& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = {});
Tensor amax(const Tensor& t, const DimVector& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& t, const DimVector& dims = {}, bool keepdim = false);
// dim unset: over the flattened tensor.
Tensor argmax(const Tensor& t, std::optional<int64_t> dim = {}, bool keepdim = false);
// dims unset: all dims. correction 1 = unbiased.
Tensor var(const Tensor& t, std::optional<DimVector> dims = {}, double correction = 1,
           bool keepdim = false);

// Both of var and mean in one pass: {var, mean}.
std::pair<Tensor, Tensor> var_mean(const Tensor& t, std::optional<DimVector> dims = {},
                                   double correction = 1, bool keepdim = false);

// ---- Matrix products (2·m·n·k FLOPs) ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = Scalar(int64_t{1}),
             Scalar alpha = Scalar(int64_t{1}));
Tensor baddbmm(const Tensor& bias, const Tensor& a, const Tensor& b,
               Scalar beta = Scalar(int64_t{1}), Scalar alpha = Scalar(int64_t{1}));
// x [.., in] @ weight[out, in]^T (+ bias[out]).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- Joining ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// ---- Neural-network ops ----
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor layer_norm(const Tensor& x, const DimVector& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const DimVector& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = {});
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
// approximate: "none" or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);
// xIELU (Huang et al. 2024, arXiv:2411.13010; transformers' XIELUActivation), one fused pointwise
// kernel as trainers run it: x [..] floating, alpha_p and alpha_n the learned [1] parameters
// (stored before their softplus) -> like x. Its backward needs x (and the two parameters).
Tensor xielu(const Tensor& x, const Tensor& alpha_p, const Tensor& alpha_n);
Tensor dropout(const Tensor& x, double p, bool train);
// q [.., Hq, L, E], k [.., Hkv, S, E], v [.., Hkv, S, Ev] -> [.., Hq, L, Ev]. enable_gqa lets Hq be
// a multiple of Hkv (PyTorch 2.5+). `keys_per_query` (not PyTorch's: FlashAttention's window_size,
// or an attention chunk) bounds the keys each query attends, so the counted work is
// L x min(S, keys_per_query) per batch and head; shapes are unchanged.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0,
                                    bool is_causal = false, std::optional<double> scale = {},
                                    bool enable_gqa = false,
                                    std::optional<int64_t> keys_per_query = {});
// F.conv1d: input [N, C_in, L] (or unbatched [C_in, L]), weight [C_out, C_in / groups, K], an
// optional bias [C_out] -> [N, C_out, (L + 2 padding - dilation (K - 1) - 1) / stride + 1], with
// PyTorch's checks and messages.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

// causal_conv1d_fn of the causal-conv1d library (Dao AI Lab), with SiLU (Gated DeltaNet, as
// transformers and Megatron-LM call it) or without (LFM2's short convolution), and an optional
// bias [C]: x [B, C, L] through a depthwise weight [C, 1, K], each output reading its own and the
// K - 1 earlier tokens -> [B, C, L]. Equal to conv1d(x, w, b, padding = K - 1, groups = C) cut to
// its first L outputs (then SiLU), but one kernel: it writes L outputs and its backward reads x,
// w (and b) only.
Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                     bool silu = true);

// Note [Gated delta rule work]
// The gated delta rule (Yang, Kautz and Hatamizadeh 2024, "Gated Delta Networks", ICLR 2025)
// keeps per head a K x V state S, decayed and corrected per token t:
//   S_t = exp(g_t) S_{t-1} (I - beta_t k_t k_t^T) + beta_t k_t v_t^T,   o_t = S_t^T q_t.
// Trainers run it chunked (flash-linear-attention's chunk_gated_delta_rule, which Qwen3-Next's
// and Qwen3.5's transformers code and Megatron-LM call): within a chunk of C tokens the
// corrections are one triangular solve of a C x C system (the WY form), and the state passes from
// chunk to chunk. One fused call (q and k L2-normalized inside), [B, T, H, K] queries and keys,
// [B, T, H, V] values, per-token log decays g and write strengths beta [B, T, H] -> [B, T, H, V].
// Its FLOPs are the products flash-linear-attention 0.4's Triton kernels run, full C x C tiles
// counted as run (masked afterwards), per token and head (gated_delta_rule_work, with N_V and N_K
// the 128-wide value and key tiles):
//   forward    6 K V + (4 + 2 N_V) C K + 4 C V + C^2 / 2         (182,272 at K = V = 128, C = 64)
//   backward  12 K V + 16 C K + (6 + 2 N_K) C V + 4 C^2,
//   and backward recomputes w, u and the chunk states first: 2 C K + 2 C V + 4 K V,
// T padded to whole chunks (docs/cost-model.md §8.8). The 16 x 16 diagonal blocks' forward
// substitution runs on CUDA cores (~7 C FLOPs per token), not counted.
// flash-linear-attention's chunk: 64 tokens (chunk_gated_delta_rule's BT).
inline constexpr int64_t kGatedDeltaChunk = 64;
Tensor chunk_gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                              const Tensor& beta);
// The FLOPs of a scan: the matrix products of a chunked scan (this rule's, Mamba-2's below), or
// the CUDA-core arithmetic of Mamba-1's selective scan (selective_scan_work below).
struct ChunkedScanWork {
  double forward = 0;    // of the forward
  double backward = 0;   // of the backward, without its recomputation
  double recompute = 0;  // of the backward's recomputation (the rule's w, u and states)
};
// The work of `tokens` (already padded to whole chunks) x `heads` rows.
ChunkedScanWork gated_delta_rule_work(int64_t tokens, int64_t heads, int64_t key_dim,
                                      int64_t value_dim, int64_t chunk);

// Note [Lightning attention work]
// Lightning attention (Qin et al. 2024, "Lightning Attention-2: A Free Lunch for Handling
// Unlimited Sequence Lengths in Large Language Models", arXiv 2401.04658), the token mixer of
// MiniMax-Text-01's linear layers (MiniMax 2025, "MiniMax-01: Scaling Foundation Models with
// Lightning Attention", arXiv 2501.08313, §2.2), is causal linear attention with a fixed decay s
// per head: o_t = sum over j <= t of exp(-s (t - j)) (q_t . k_j) v_j, no softmax, no
// normalizer. It runs per block of B tokens in two parts: inside a block the decayed, masked
// scores ((Q K^T) . M) V over the whole B x B tile; across blocks Q times the d x d state KV
// of the earlier blocks, which each block then decays and extends, KV <- exp(-s B) KV +
// (decayed K)^T V. One fused call (the Lightning Attention-2 kernel; transformers'
// MiniMaxLightningAttention runs the same blocks in a Python loop): queries, keys and values
// [B, T, H, d] (already through the layer's SiLU) and the per-head decays [H] (MiniMax keeps
// them [H, 1, 1]) -> [B, T, H, d]. Its FLOPs per token and head, the B x B tiles counted in full
// as the kernels compute them (the mask applied afterwards), counted here from the paper's
// Algorithms 1 and 2 (lightning_attention_work):
//   forward    4 d^2 + 4 B d   (in the block Q K^T and its product with V, 2 B d each; across
//                               blocks Q KV and the state's update K^T V, 2 d^2 each)
//   backward   8 d^2 + 8 B d   (in the block dO V^T, dQ, dK and dV, 2 B d each; across blocks
//                               dQ = dO KV^T, dK = V dKV^T, dV = K dKV and dKV's update Q^T dO)
//   and backward recomputes the blocks' scores Q K^T and the states KV first: 2 B d + 2 d^2,
// T padded to whole blocks (docs/cost-model.md §8.14). At MiniMax-Text-01's d = 128 and B = 256:
// 196,608 forward FLOPs per token and head; the decays' elementwise products are not counted.
// MiniMax's block (MiniMaxConfig.block_size, 256 in every released file); a config's other block
// is priced at this one, as Mamba-2's chunk is.
inline constexpr int64_t kLightningBlock = 256;
Tensor lightning_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& slope);
// The work of `tokens` (already padded to whole blocks) x `heads` rows of width head_dim.
ChunkedScanWork lightning_attention_work(int64_t tokens, int64_t heads, int64_t head_dim,
                                         int64_t block);

// Note [mLSTM chunkwise work]
// The mLSTM (Beck et al. 2024, "xLSTM: Extended Long Short-Term Memory", NeurIPS 2024, §2.3)
// keeps per head a K x V matrix memory C, a K-wide normalizer n and a scalar max state m, written
// per token t through an exponential input gate i_t and a sigmoid forget gate f_t (both from
// preactivations, log f_t = logsigmoid):
//   m_t = max(log f_t + m_{t-1}, i_t),   C_t = f'_t C_{t-1} + i'_t k_t v_t^T,
//   n_t = f'_t n_{t-1} + i'_t k_t,       h_t = C_t^T q_t / max(|n_t^T q_t|, exp(-m_t)),
// f' and i' the gates divided by exp(m_t), q scaled by K^-1/2. Trainers run it chunkwise, with
// the kernels of the xLSTM 7B paper (Beck et al. 2025, "xLSTM 7B: A Recurrent LLM for Fast and
// Efficient Inference", arXiv 2503.13427), Tiled Flash Linear Attention's (Beck et al. 2025,
// arXiv 2503.14376; mlstm_kernels' chunkwise--triton_xl_chunk, which transformers'
// xLSTMForCausalLM calls through the xlstm package): a recurrent kernel passes the state from
// chunk to chunk, then a parallel kernel makes each chunk's outputs from the state entering it
// and the gated causal scores of its own tokens. One fused call: [B, T, H, K] queries and keys,
// [B, T, H, V] values, the input and forget gate preactivations [B, T, H] -> [B, T, H, V] in the
// values' dtype. Its FLOPs are the matrix products of those kernels per token and head
// (mlstm_chunkwise_work), C the chunk, N_V and N_K the 128-wide value and key tiles of the
// kernels' grids (the parallel kernels recompute Q K^T, or dH V^T, once per tile of the other
// width), each C x C tile counted whole:
//   forward    4 K V + 2 N_V C K + 2 C V      (the chunk states K^T V; Q K^T per value tile and
//                                             the gated scores times V; Q times the state entering)
//   backward   8 K V + (4 + 2 N_V) C K + (2 + 4 N_K) C V
//              (dC by a reverse pass over the chunks, Q^T dH; dV: K Q^T per value tile, the
//              scores^T dH, K dC; dK and dQ: dH V^T per key tile, dS^T Q and dS K, V dC^T and
//              dH C^T)
//   and backward recomputes the chunk states first: 2 K V,
// T padded to whole chunks (docs/cost-model.md §8.17). mlstm_kernels' own count (its roofline
// analysis, utils/analysis/roofline_analysis/flops_mlstm.py) has the same products with Q K^T
// once: 4 K V + 2 C (K + V) forward. The gates' cumulative log-sigmoid, the C x C decay matrix and
// the max and normalizer (elementwise, about 10 C per token and head) are not counted. The chunk of
// xLSTM-7B's config.json (chunk_size), the kernels' 64-wide tiles: one tile a chunk. A config's
// other chunk is priced at this one, as Mamba-2's is.
inline constexpr int64_t kMlstmChunk = 64;
Tensor mlstm_chunkwise(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& i,
                       const Tensor& f);
// The work of `tokens` (already padded to whole chunks) x `heads` rows.
ChunkedScanWork mlstm_chunkwise_work(int64_t tokens, int64_t heads, int64_t key_dim,
                                     int64_t value_dim, int64_t chunk);

// Note [Mamba-2 scan work]
// Mamba-2's state space duality layer (Dao and Gu 2024, "Transformers are SSMs", ICML 2024) keeps
// per head a P x N state (P the head width, N the state width), decayed by exp(dt A) and written
// by dt x B^T per token; a token reads it through C, and D x skips it. B and C are shared by the
// heads of a group, as keys and queries are by grouped-query heads. Trainers run the whole mixer
// between its two projections as one autograd function (mamba_ssm's
// mamba_split_conv1d_scan_combined, which transformers' Mamba-2 hybrids and Megatron-LM call in
// training): split the in_proj output zxbcdt [B, T, 2 d_inner + 2 g N + H] into z, xBC and dt,
// the causal depthwise convolution (conv_weight [conv_dim, 1, K], conv_dim = d_inner + 2 g N,
// optional bias) and SiLU over xBC, dt = softplus(dt + dt_bias), the chunked scan (chunks of Q
// tokens), y + D x, and the gated RMSNorm norm(y * silu(z)) with norm_weight [d_inner] (d_inner
// = H P) -> [B, T, H, P]. It also writes the norm's fp32 reciprocal RMS per token and group, [B,
// T, g], which it keeps for backward (the trace's second output). Without a norm (norm_weight
// undefined: mamba_ssm's rmsnorm_weight None, Falcon-H1 without mamba_rms_norm) the scan gates
// y * silu(z) itself, d_inner is what zxbcdt holds beside xBC and dt, and there is no rstd (the
// group count is then recovered from the recorded work, Note [Mamba-2 groups] in
// tensor/training.cpp). Its FLOPs are the matrix
// products mamba_ssm 2's Triton kernels run per chunk, per token (mamba_scan_work):
//   forward    per head 4 N P + P (Q + 64), per group 2 Q N
//              (chunk states B^T x and the state read C h, 2 Q N P each per chunk; C B^T over the
//              whole Q x Q tile per group; (C B^T . L) x over the causal half plus its 64-row
//              diagonal blocks, Q P (Q + 64))
//   backward   per head 10 N P + 3 P (Q + 64), per group 4 Q N
//              (dstates, dx's state part, dC, dB and the decays' state part, 2 Q N P each; dx's
//              in-chunk part, dCB and the decays' in-chunk part over the causal blocks; dC and dB
//              from dCB, 2 Q^2 N each per group)
//   and backward recomputes the convolution, C B^T and the chunk states first: per head 2 N P,
//   per group 2 Q N,
// T padded to whole chunks (docs/cost-model.md §8.9). The convolution, softplus, skip, gate and
// norm are elementwise: conv_dim (2 K + 4) + 12 d_inner FLOPs per token, counted apart (8 d_inner
// without the norm: the skip's 2 and the gate's 6 stay, the norm's square, sum, rstd and weight
// products go).
// mamba_ssm's and transformers' default chunk (mamba_chunk_size): 256 tokens. A config's other
// chunk is priced at this one (docs/cost-model.md §8.9 says by how much that can differ).
inline constexpr int64_t kMambaChunk = 256;
Tensor mamba_split_conv1d_scan_combined(const Tensor& zxbcdt, const Tensor& conv_weight,
                                        const Tensor& conv_bias, const Tensor& dt_bias,
                                        const Tensor& A, const Tensor& D, const Tensor& norm_weight,
                                        int64_t groups);
// Its work on `tokens` (batch x tokens padded to whole chunks) for `heads` heads of width
// head_dim in `groups` groups of state width `state` (the same three parts as the rule's).
ChunkedScanWork mamba_scan_work(int64_t tokens, int64_t heads, int64_t head_dim, int64_t groups,
                                int64_t state, int64_t chunk);
// The ops run as chunked scans (chunk_gated_delta_rule, mamba_split_conv1d_scan_combined,
// lightning_attention, mlstm_chunkwise): their chunk, 0 for any other op. Their output is [B, T,
// heads, width].
int64_t chunked_scan_chunk(std::string_view op);

// Note [Mamba-1 scan work]
// Mamba's selective scan (Gu and Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective
// State Spaces", §3.2 Algorithm 2 and eq. 2 and 4, the zero-order hold with B discretized as
// dt B) keeps per channel d of d_inner an N-wide state h, per token t:
//   dt = softplus(dt_t + delta_bias_d),  h_t = exp(dt A_d) h_{t-1} + dt x_t B_t,
//   y_t = C_t h_t + D_d x_t,             out_t = y_t silu(z_t),
// A [d_inner, N] per channel and state, B and C [N] per token shared by every channel (one group,
// where Mamba-2 has g). mamba_ssm's selective_scan_fn (selective_scan_cuda) runs it as one kernel
// that scans chunks of kSelectiveScanChunk tokens in registers and passes the state on (Gu and
// Dao §3.3.2, "hardware-aware"): its arithmetic is fp32 on CUDA cores, no matrix product, so the
// op records no matmul FLOPs and the planner prices it as the elementwise ops, by the bytes it
// moves (docs/cost-model.md §8.13). u, delta and z [B, d_inner, T], A [d_inner, N] (fp32), B and C
// [B, N, T], D and delta_bias [d_inner] (fp32), softplus on delta; D, z and delta_bias may be
// undefined (left out) -> [B, d_inner, T] in u's dtype. The paper gives the recurrence's order,
// O(B T d_inner N); the counts are those of the arithmetic above (selective_scan_work):
//   forward   per token, channel and state 7: dt A and its exp (2), (dt x) B (1), the state's
//             multiply-add (2), C h's multiply-add (2);
//   backward  per token, channel and state 16: the reverse scan dh = exp(dt A) dh + C dy (4), the
//             sums of dC and dB (2 each), dt's and x's shares through dt x B (2), A's and dt's
//             through exp(dt A) h (6);
//   and backward first recomputes the states from each chunk's saved start: 5 per token, channel
//   and state (the forward's without the readout).
// Per token and channel the op adds the bias (1), softplus (3), dt x (1), the skip D x (2) and
// the gate y silu(z) (5) where present: 12 with all three, recorded with the forward; the backward
// does twice that.
// mamba_ssm's chunk (kNThreads 128 x kNItems 16 in selective_scan_fwd_kernel): per chunk the kernel
// writes the state's running pair, [B, d_inner, chunks, 2 N] fp32, kept for backward.
inline constexpr int64_t kSelectiveScanChunk = 2048;
Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D = Tensor(), const Tensor& z = Tensor(),
                      const Tensor& delta_bias = Tensor());
// The per-state part of the scan's work on `tokens` (batch x tokens) x `channels` channels of
// state width `state` (the per-channel part is the op's own, recorded in its FLOPs).
ChunkedScanWork selective_scan_work(int64_t tokens, int64_t channels, int64_t state);

// Note [Linear scan work]
// A diagonal first-order linear recurrence per batch row and channel, from a zero state:
//   h_t = a_t h_{t-1} + x_t,
// the scan of Griffin's RG-LRU (De et al. 2024, "Griffin: Mixing Gated Linear Recurrences with
// Local Attention for Efficient Language Models", arXiv 2402.19427, §2.4; §3.2 runs it as a
// custom "linear scan" kernel that keeps the state on chip, its gates and input normalization
// computed before it; RecurrentGemma's transformers code loops over the tokens in Python).
// Trainers run it as one kernel (flash-linear-attention's HGRN ops run the same recurrence on
// GPUs) that reads a and x once, accumulates in fp32 and writes h: a and x [B, T, C] of one
// shape -> h [B, T, C] in x's dtype. No matrix product, so it records no matmul FLOPs and is
// priced as the elementwise ops are, by the bytes it moves. FLOPs per element: forward 2 (the
// state's multiply-add); backward 3, the reverse scan dh_t = dy_t + a_{t+1} dh_{t+1} (2) and
// da_t = dh_t h_{t-1} (1), reading a, the output h and the output's gradient (kept for backward:
// a and h; dx is dh).
Tensor linear_scan(const Tensor& a, const Tensor& x);

// Note [WKV work]
// RWKV-4's time mixing (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era",
// arXiv 2305.13048, §3.1.2 eq. 14-16; transformers' RwkvLinearAttention) is per batch row and
// channel c a weighted average of the values so far, the weights decaying by w_c per token and
// the current token's raised by the bonus u_c:
//   wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t)
//           / (sum_{i<t} e^{-(t-1-i) w + k_i} + e^{u + k_t}),
// with no matrix product. The CUDA extension transformers loads (RWKV-LM's wkv_cuda, the
// kernels-community/rwkv build: one thread per batch row and channel, T steps in turn) keeps the
// numerator, the denominator and their running maximum (exp overflows otherwise) in fp32
// registers. One op, as that kernel: the decay w [C] in fp32 (the layer passes -exp(time_decay)),
// the bonus u [C] and k, v [B, T, C] of one dtype (float32 or bfloat16: the model casts float16
// to float32 first) -> wkv [B, T, C] in k's dtype. FLOPs per element (token and channel), counted
// from the kernel's statements, each exp one: forward 23 (the output from the state, 11 with its
// two exps and one division; the state's update, 12 with two exps); backward 60, a forward-order
// pass that re-runs the states and sums the gradients of w and u (34) and a reverse pass for the
// gradients of k and v (26). The backward keeps two fp32 values per element in thread-local memory
// (q and r, float[T] arrays the compiler cannot hold in registers), written by the first pass and
// read by the second: kWkvBackwardScratchBytes per element that the trace adds to its bytes.
// autograd keeps w, u, k, v and the output (RwkvLinearAttention's save_for_backward). The kernel
// runs min(C, 32) threads a block and needs B C to be a multiple of them (transformers raises
// otherwise), checked here.
inline constexpr double kWkvForwardFlops = 23;
inline constexpr double kWkvBackwardFlops = 60;
inline constexpr int64_t kWkvBackwardScratchBytes = 16;  // q and r fp32, written and read
Tensor wkv(const Tensor& w, const Tensor& u, const Tensor& k, const Tensor& v);

// reduction: "none", "mean" or "sum". `target` holds class indices (integer) or probabilities.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     std::string_view reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// ---- Data-dependent ops: their output shape needs data, so on meta they fail clearly ----
Tensor nonzero(const Tensor& t);
Scalar item(const Tensor& t);
// x[mask] with a boolean mask.
Tensor index_with_mask(const Tensor& t, const Tensor& mask);
// Copies out of a tensor into host memory: "Cannot copy out of meta tensor; no data!" on meta.
Tensor to_device(const Tensor& t, Device device);

}  // namespace shardplan::tensor
