// Compute time of traced ops on one accelerator: a roofline whose GEMM ceiling depends on the
// GEMM's shape (docs/cost-model.md §8.1 "Compute time").
//   ComputeModel a = compute_model(load_cluster("dgx-a100-80g.json"), Precision::kBf16);
//   gemm_efficiency(a, {.batch = 1, .m = 2048, .n = 6912, .k = 2304});  // ~0.86 of 312 TFLOP/s
//   OpSeconds t = op_seconds(a, step, step.ops[i]);                   // forward, backward, ...
//
// Note [GEMM efficiency]
// A large, well-shaped GEMM reaches the accelerator's measured maximum achievable matmul rate, a
// fraction of the dense peak that the cluster file states with its source
// (`accelerator.matmul_efficiency`). Smaller GEMMs lose more, for two reasons that follow from how
// GPU GEMM kernels work (output tiles of kTileM x kTileN computed by one SM each, in waves of one
// tile per SM):
//   tile quantization: a dimension that is not a multiple of the tile still costs whole tiles,
//       efficiency M N / (ceil(M / tm) tm ceil(N / tn) tn);
//   wave quantization: T tiles on S SMs run in ceil(T / S) waves, efficiency T / (ceil(T / S) S)
//       (only when the file states the SM count);
//   short reductions: each tile pays a fixed prologue and epilogue, worth about kFixedK steps of
//       the K loop, efficiency K / (K + kFixedK).
// The GEMM takes max(FLOPs / (peak x efficiency), bytes / HBM bandwidth). Every other op is
// priced by its bytes at HBM bandwidth (or its FLOPs at the peak, if that is slower).
//
// Note [FP8 GEMMs]
// Under --precision fp8 only the transformer blocks' linear layers run in fp8, as Transformer
// Engine's default recipe does: the fused attention keeps bf16 (its products at the bf16 peak and
// fraction), and so does every other op. The LM head stays bf16 too: Megatron-Core builds it as
// its own ColumnParallelLinear, not a Transformer Engine layer, and torchtitan leaves the
// `output` linear out of its float8 conversion. An fp8 GEMM needs its operands quantized, twice: as
// is, and transposed for the other GEMM that reads them (Hopper's fp8 tensor cores take only the TN
// layout; Transformer Engine docs, "Performance considerations: handling transposes"). In the
// forward the op that produces a GEMM's input (a norm, an activation function) writes both fp8
// copies itself, 1 + 1 bytes per element on top of the traced op; in the backward the bf16 output
// gradient is read and written twice in fp8, 2 + 1 + 1 bytes per element. All at HBM bandwidth.
// The weights' casts happen once per step (Transformer Engine caches them across micro-batches)
// and are left out, unless the stack casts them every micro-batch (torchao's float8 linear in
// torchtitan: read 2, write 1 + 1 bytes per weight element each forward) or ZeRO-3 frees the
// gathered weight after each use, its fp8 copy with it (every stack, then). Under current (dynamic)
// scaling the scale is the operand's own amax, found by one more read of the 16-bit operand
// before the cast (Transformer Engine's current scaling, torchao's tensorwise recipe); delayed
// scaling reuses past amaxes and needs none.
//
// Note [HBM efficiency]
// No kernel streams at the datasheet bandwidth: refresh, row switches and ECC take a part of it.
// The cluster file states the measured fraction (`accelerator.memory_efficiency`, e.g. 1.80 of
// 2.04 TB/s on an A100 80 GB) and every memory-bound price (elementwise ops, norms, attention
// scores, the optimizer) uses bandwidth x fraction; a file without it gets the datasheet figure.
#pragma once

#include <cstdint>

#include "collectives/cluster.h"
#include "planner/candidate/parallel_config.h"
#include "tensor/training.h"

namespace shardplan::planner {

// Note [Attention backward rate]
// A fused attention's backward (dq, dk, dv, with the scores recomputed) reaches a lower rate than
// its forward: measured with cuDNN's flash kernels on an H100 and an H200 (causal, 8,192 tokens,
// 8-32 heads of 128; scripts/gpu_measure.py, tests/data/gpu_measured_{h100,h200}.json) the
// backward took 2.8-3.3 times the forward where its FLOPs are 2.5 times (2 for the gradients,
// 0.5 for the recomputed Q K^T); FlashAttention-2 (Dao 2023, §4.1) reports its backward at up to
// 63 % of an A100's peak against 73 % forward. The backward's gradient products run at 0.8 of
// the forward's rate, so the backward takes 2 / 0.8 + 0.5 = 3.0 forwards.
inline constexpr double kFlashBackwardRate = 0.8;

inline constexpr int64_t kTileM = 128;
inline constexpr int64_t kTileN = 128;
inline constexpr int64_t kFixedK = 64;

struct ComputeModel {
  double peak_flops = 0;                  // dense FLOP/s of the GEMM dtype
  double matmul_efficiency = 1;           // large-GEMM fraction of the peak
  int64_t streaming_multiprocessors = 0;  // 0: no wave quantization
  double memory_bytes_per_s = 0;          // achievable HBM bandwidth (Note [HBM efficiency])
  double mfu_peak_flops = 0;              // dense bf16 peak (the MFU denominator); fp32 on a CPU
  // Note [FP8 GEMMs]: the fused attention runs in the MFU dtype, at mfu_peak_flops and this
  // fraction; whether the linear layers' GEMMs quantize their operands.
  double attention_matmul_efficiency = 1;
  bool quantized_gemms = false;
  // The 16-bit GEMM ceiling, for the GEMMs that stay 16-bit under fp8 (the LM head).
  double matmul16_efficiency = 1;
  // How the stack quantizes (Note [FP8 GEMMs]): a separate amax pass over each operand before
  // its cast (current / dynamic scaling), and the weights cast again every micro-batch.
  bool fp8_amax_pass = false;
  bool fp8_weight_casts = false;
  // Note [Ring attention steps] in planner/cost/block_cost.h: the rate of a context-parallel
  // rank's attention against keys of other ranks, as a fraction of its fused local attention's.
  double ring_attention_rate = 1;
};

// The GEMM dtype is fp8 for Precision::kFp8 and bf16 otherwise; a cluster without that peak
// (a CPU: fp32 only) computes in the dtype it has. Throws shardplan::Error when the cluster
// states no usable peak.
ComputeModel compute_model(const collectives::Cluster& cluster, Precision precision);

// The dtype compute_model prices GEMMs in ("bf16", "fp8", "fp32").
std::string_view gemm_dtype(const collectives::Cluster& cluster, Precision precision);

struct GemmShape {
  int64_t batch = 1;
  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 1;
};

// Fraction of the peak the GEMM reaches: Note [GEMM efficiency]. In (0, matmul_efficiency].
double gemm_efficiency(const ComputeModel& a, const GemmShape& g);

// The GEMM of a matrix-product op of `step`, read from its output shape and its FLOPs: the output
// is [..., M, N] (a linear's [b, s, n] is one GEMM of b s rows) and 2 M N K FLOPs per batch entry
// give K. Meaningless (all ones) for an op without matrix-product FLOPs.
GemmShape gemm_shape(const tensor::TrainingStep& step, const tensor::TrainingOp& op);

// The fused attention op as its two products per (batch x head): Q K^T (L x S, reducing over
// the head dim E) and scores x V (L x Ev, reducing over the S keys), each of 2 L S E FLOPs, so
// the rate of the pair is their harmonic mean. Causal attention computed blockwise (FlashAttention)
// skips the masked half of the blocks while the traced count covers the full square: it runs
// twice the counted rate (Dao 2023, FlashAttention-2 §3.1). The math path computes every score.
double attention_efficiency(const ComputeModel& a, int64_t batch_heads, int64_t l, int64_t s,
                            int64_t e, int64_t ev, bool causal_skip);

// Seconds of one op, forward, backward and recomputed forward, when it does `scale` times its
// traced work (FLOPs and bytes), its matrix products (if any) at `gemm_efficiency` of the peak.
struct OpSeconds {
  double forward = 0;
  double backward = 0;
  double recompute = 0;
};
OpSeconds op_seconds(const ComputeModel& a, const tensor::TrainingOp& op, double gemm_efficiency,
                     double scale = 1);

// `a` for the fused attention: its products at mfu_peak_flops and attention_matmul_efficiency
// (Note [FP8 GEMMs]).
ComputeModel attention_compute(const ComputeModel& a);

// One call of a fused attention kernel: batch x heads of `queries` against `keys`, with
// `head_dim` query/key and `value_dim` value channels per head, with a causal mask or none.
struct AttentionShape {
  int64_t batch_heads = 1;
  int64_t queries = 1;
  int64_t keys = 1;
  int64_t head_dim = 1;
  int64_t value_dim = 1;
  bool causal = true;
};

// The seconds of one fused call at `attn`'s rate (attention_compute, times the stack's kernel
// rate): the forward counts the full square's 2 L S (E + Ev) FLOPs per batch x head at
// attention_efficiency (a causal call skipping the masked half); the backward's gradient
// products are twice that at kFlashBackwardRate of the rate and its recomputed Q K^T half of it
// at the rate (Note [Attention backward rate]): `recompute`, which the kernel's backward runs.
OpSeconds fused_attention_seconds(const ComputeModel& attn, const AttentionShape& s);

// `a` for a GEMM that stays 16-bit under fp8 (the LM head): the bf16 peak and ceiling, no
// quantization. `a` itself when its GEMMs are not fp8.
ComputeModel sixteen_bit_compute(const ComputeModel& a);

// Seconds of quantizing an fp8 GEMM's operands: `input_elements` in the forward (and its
// recomputation), `output_elements` of the gradient in the backward, and `weight_elements` in the
// forward when the stack casts weights every micro-batch (Note [FP8 GEMMs]); zero unless
// a.quantized_gemms.
OpSeconds quantize_seconds(const ComputeModel& a, double input_elements, double output_elements,
                           int64_t activation_itemsize, double weight_elements = 0);

}  // namespace shardplan::planner
