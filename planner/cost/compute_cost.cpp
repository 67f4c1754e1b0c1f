#include "planner/cost/compute_cost.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "tensor/ops.h"

namespace shardplan::planner {
namespace {

int64_t tiles_of(int64_t extent, int64_t tile) { return (extent + tile - 1) / tile; }

double tera(const collectives::Quantity& q) { return q.value * 1e12; }

}  // namespace

GemmShape gemm_shape(const tensor::TrainingStep& step, const tensor::TrainingOp& op) {
  GemmShape g;
  if (op.outputs.empty()) return g;
  const tensor::StepTensor& out = step.tensors[static_cast<size_t>(op.outputs.front())];
  const auto& s = out.sizes;
  int64_t numel = 1;
  for (int64_t d : s) numel *= d;
  if (numel == 0) return g;
  g.n = s.empty() ? 1 : s.back();
  if (const int64_t chunk = tensor::chunked_scan_chunk(op.op); chunk > 0 && s.size() == 4) {
    // Note [Gated delta rule work], Note [Mamba-2 scan work]: the kernels' products are per
    // (batch, head, chunk) tiles of C rows and V (Mamba-2: P) columns; priced as that batched
    // GEMM, its depth the rest of the count.
    const int64_t chunks = (s[1] + chunk - 1) / chunk;
    g.batch = s[0] * s[2] * chunks;
    g.m = chunk;
    g.k = std::max<int64_t>(
        1, std::llround(op.matmul_flops / (2.0 * static_cast<double>(g.batch * g.m * g.n))));
    return g;
  }
  if (op.op == "linear" || op.op == "addmm" || op.op == "mm" || s.size() < 3) {
    g.m = numel / std::max<int64_t>(g.n, 1);
  } else {
    g.m = s[s.size() - 2];
    g.batch = numel / std::max<int64_t>(g.m * g.n, 1);
  }
  g.k = std::max<int64_t>(1, std::llround(op.matmul_flops / (2.0 * static_cast<double>(numel))));
  return g;
}

std::string_view gemm_dtype(const collectives::Cluster& cluster, Precision precision) {
  const auto& peaks = cluster.accelerator.dense_tflops;
  if (precision == Precision::kFp8 && peaks.contains("fp8")) return "fp8";
  if (peaks.contains("bf16")) return "bf16";
  if (peaks.contains("fp32")) return "fp32";
  throw Error("cluster " + cluster.name +
              " states no bf16 or fp32 dense_tflops peak, expected one to price compute");
}

ComputeModel compute_model(const collectives::Cluster& cluster, Precision precision) {
  const collectives::AcceleratorSpec& acc = cluster.accelerator;
  SP_CHECK(precision != Precision::kFp8 || acc.dense_tflops.contains("fp8"), "--precision fp8 on ",
           cluster.name, ": the accelerator (", acc.model,
           ") states no fp8 peak, expected --precision bf16");
  const std::string dtype(gemm_dtype(cluster, precision));
  ComputeModel m;
  m.peak_flops = tera(acc.dense_tflops.at(dtype));
  if (auto it = acc.matmul_efficiency.find(dtype); it != acc.matmul_efficiency.end()) {
    m.matmul_efficiency = it->second.value;
  }
  if (acc.streaming_multiprocessors) {
    m.streaming_multiprocessors = static_cast<int64_t>(acc.streaming_multiprocessors->value);
  }
  // Streaming kernels reach a measured fraction of the datasheet bandwidth (Note [HBM efficiency]).
  m.memory_bytes_per_s = acc.memory_bandwidth_gbps.value * 1e9 *
                         (acc.memory_efficiency ? acc.memory_efficiency->value : 1.0);
  const std::string mfu_dtype(gemm_dtype(cluster, Precision::kBf16));
  m.mfu_peak_flops = tera(acc.dense_tflops.at(mfu_dtype));
  // Note [FP8 GEMMs]: the attention stays in the 16-bit (or CPU) dtype.
  if (auto it = acc.matmul_efficiency.find(mfu_dtype); it != acc.matmul_efficiency.end()) {
    m.attention_matmul_efficiency = it->second.value;
    m.matmul16_efficiency = it->second.value;
  }
  m.quantized_gemms = dtype == "fp8";
  return m;
}

ComputeModel attention_compute(const ComputeModel& a) {
  ComputeModel b = a;
  if (a.mfu_peak_flops > 0) {
    b.peak_flops = a.mfu_peak_flops;
    b.matmul_efficiency = a.attention_matmul_efficiency;
  }
  return b;
}

ComputeModel sixteen_bit_compute(const ComputeModel& a) {
  if (!a.quantized_gemms) return a;
  ComputeModel b = a;
  b.peak_flops = a.mfu_peak_flops;
  b.matmul_efficiency = a.matmul16_efficiency;
  b.quantized_gemms = false;
  return b;
}

OpSeconds quantize_seconds(const ComputeModel& a, double input_elements, double output_elements,
                           int64_t activation_itemsize, double weight_elements) {
  OpSeconds t;
  if (!a.quantized_gemms) return t;
  // Forward: the producing op (a norm, an activation) writes the fp8 copy and its transpose, 2
  // bytes per element. Backward: the 16-bit gradient is read and written twice in fp8. Current
  // scaling reads each 16-bit operand once more for its amax; weights cast every micro-batch are
  // read and written as an input is.
  const auto item = static_cast<double>(activation_itemsize);
  const double amax = a.fp8_amax_pass ? item : 0;
  const double weights = a.fp8_weight_casts ? weight_elements * (item + 2 + amax) : 0;
  t.forward = (input_elements * (2.0 + amax) + weights) / a.memory_bytes_per_s;
  t.backward = output_elements * (item + 2 + amax) / a.memory_bytes_per_s;
  t.recompute = t.forward;
  return t;
}

double gemm_efficiency(const ComputeModel& a, const GemmShape& g) {
  const int64_t tiles_m = tiles_of(std::max<int64_t>(g.m, 1), kTileM);
  const int64_t tiles_n = tiles_of(std::max<int64_t>(g.n, 1), kTileN);
  const double tile =
      static_cast<double>(g.m) * static_cast<double>(g.n) /
      (static_cast<double>(tiles_m * kTileM) * static_cast<double>(tiles_n * kTileN));
  double wave = 1;
  if (a.streaming_multiprocessors > 0) {
    const double tiles =
        static_cast<double>(g.batch) * static_cast<double>(tiles_m) * static_cast<double>(tiles_n);
    const double sms = static_cast<double>(a.streaming_multiprocessors);
    wave = tiles / (std::ceil(tiles / sms) * sms);
  }
  const double k = static_cast<double>(std::max<int64_t>(g.k, 1));
  const double reduction = k / (k + static_cast<double>(kFixedK));
  return a.matmul_efficiency * tile * wave * reduction;
}

double attention_efficiency(const ComputeModel& a, int64_t batch_heads, int64_t l, int64_t s,
                            int64_t e, int64_t ev, bool causal_skip) {
  const double qk = gemm_efficiency(a, {.batch = batch_heads, .m = l, .n = s, .k = e});
  const double pv = gemm_efficiency(a, {.batch = batch_heads, .m = l, .n = ev, .k = s});
  // FLOPs in proportion E : Ev.
  const double fe = static_cast<double>(e), fv = static_cast<double>(ev);
  const double pair = (fe + fv) / (fe / qk + fv / pv);
  return causal_skip ? 2 * pair : pair;
}

OpSeconds fused_attention_seconds(const ComputeModel& attn, const AttentionShape& s) {
  const double square = 2.0 * static_cast<double>(s.batch_heads) * static_cast<double>(s.queries) *
                        static_cast<double>(s.keys) * static_cast<double>(s.head_dim + s.value_dim);
  const double forward =
      square / (attn.peak_flops * attention_efficiency(attn, s.batch_heads, s.queries, s.keys,
                                                       s.head_dim, s.value_dim, s.causal));
  return {
      .forward = forward, .backward = 2 * forward / kFlashBackwardRate, .recompute = 0.5 * forward};
}

OpSeconds op_seconds(const ComputeModel& a, const tensor::TrainingOp& op, double gemm_eff,
                     double scale) {
  OpSeconds t;
  if (op.is_view || op.skipped) return t;
  const double bw = a.memory_bytes_per_s / scale;
  const double peak = a.peak_flops / scale;
  const double fwd_bytes = static_cast<double>(op.bytes_read + op.bytes_written);
  const double bwd_bytes = static_cast<double>(op.backward_bytes_read + op.backward_bytes_written);
  if (op.matmul_flops > 0) {
    const double rate = peak * gemm_eff;
    t.forward = std::max(op.flops / rate, fwd_bytes / bw);
    t.backward = std::max(op.backward_flops / rate, bwd_bytes / bw);
    // Recomputed work is forward work (the whole forward, or the Q K^T flash attention's
    // backward re-runs), at the same rate.
    t.recompute = op.recompute_flops / rate;
  } else {
    t.forward = std::max(fwd_bytes / bw, op.flops / peak);
    t.backward = std::max(bwd_bytes / bw, op.backward_flops / peak);
    t.recompute = op.recomputed ? t.forward : 0;
  }
  return t;
}

}  // namespace shardplan::planner
