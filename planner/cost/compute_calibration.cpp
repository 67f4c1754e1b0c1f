#include "planner/cost/compute_calibration.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "base/json_fields.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {

namespace {

// Note [Compute calibration]: the GEMMs whose shape factor is at least this are ceiling-bound.
constexpr double kCeilingBound = 0.9;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.precision(digits);
  s << std::fixed << v;
  return s.str();
}

ComputeFit fit_of(std::string what, double previous, const std::vector<double>& each) {
  ComputeFit f{.what = std::move(what), .previous = previous, .fitted = median(each)};
  f.points = static_cast<int64_t>(each.size());
  f.low = *std::min_element(each.begin(), each.end());
  f.high = *std::max_element(each.begin(), each.end());
  return f;
}

// A measured time: a pass that ran took some.
double positive_seconds(JsonFields& row, std::string_view key) {
  const double s = row.number(key);
  if (!(s > 0)) row.fail(key, "expected a positive time in seconds, got " + fixed(s, 6));
  return s;
}

// A fitted fraction must be a fraction.
void check_fraction(const JsonFields& doc, const ComputeFit& f, std::string_view field) {
  if (!(f.fitted > 0 && f.fitted <= 1)) {
    doc.fail(field, "fits " + f.what + " = " + fixed(f.fitted, 3) +
                        ", expected a fraction in (0, 1] (measured faster than the stated peak?)");
  }
}

// The GEMM ceiling of `dtype` from the rows at `key`.
// `memory_bytes` is the measured device's: a GEMM whose operands and output (at least
// `operand_bytes` each element) would not fit in it was not run there.
ComputeFit fit_gemms(JsonFields& doc, std::string_view key, const std::string& dtype,
                     const collectives::Cluster& c, int64_t memory_bytes, double operand_bytes) {
  const nlohmann::json& rows = doc.array(key);
  const std::string field(key);
  const auto peak = c.accelerator.dense_tflops.find(dtype);
  if (peak == c.accelerator.dense_tflops.end()) {
    doc.fail(key, "measured " + dtype + " GEMMs, but the cluster file states no " + dtype +
                      " peak (accelerator.dense_tflops." + dtype + ")");
  }
  ComputeModel unit;  // Note [GEMM efficiency] at a ceiling of 1: the shape factor alone
  unit.matmul_efficiency = 1;
  if (c.accelerator.streaming_multiprocessors) {
    unit.streaming_multiprocessors =
        static_cast<int64_t>(c.accelerator.streaming_multiprocessors->value);
  }
  std::vector<double> bound, all;
  for (size_t i = 0; i < rows.size(); ++i) {
    JsonFields r(rows[i], doc.origin(), doc.join(key) + "[" + std::to_string(i) + "]");
    // "batch": a batch of GEMMs (a rank's experts, rehearse's rows); one when absent.
    const GemmShape g{.batch = r.has("batch") ? r.integer("batch", 1, int64_t{1} << 31) : 1,
                      .m = r.integer("m", 1),
                      .n = r.integer("n", 1),
                      .k = r.integer("k", 1)};
    const double elements =
        static_cast<double>(g.batch) * (static_cast<double>(g.m) * static_cast<double>(g.k) +
                                        static_cast<double>(g.k) * static_cast<double>(g.n) +
                                        static_cast<double>(g.m) * static_cast<double>(g.n));
    if (elements * operand_bytes > static_cast<double>(memory_bytes)) {
      r.fail("m", "a GEMM of batch " + std::to_string(g.batch) + " x " + std::to_string(g.m) +
                      " x " + std::to_string(g.n) + " x " + std::to_string(g.k) +
                      " needs more than the device's memory_bytes " + std::to_string(memory_bytes) +
                      " for its operands, expected a shape that was run on it");
    }
    const double rate = r.number("flops_per_s");
    if (!(rate > 0)) r.fail("flops_per_s", "expected a positive rate, got " + fixed(rate, 0));
    const double shape = gemm_efficiency(unit, g);
    const double ceiling = rate / (peak->second.value * 1e12 * shape);
    all.push_back(ceiling);
    if (shape >= kCeilingBound) bound.push_back(ceiling);
  }
  if (all.empty()) doc.fail(key, "expected at least one measured GEMM");
  const auto prev = c.accelerator.matmul_efficiency.find(dtype);
  ComputeFit f = fit_of("matmul_efficiency." + dtype,
                        prev == c.accelerator.matmul_efficiency.end() ? 0 : prev->second.value,
                        bound.empty() ? all : bound);
  check_fraction(doc, f, key);
  return f;
}

}  // namespace

ComputeCalibration calibrate_compute(const collectives::Cluster& base, const StackProfile& stack,
                                     const nlohmann::json& measured, const std::string& origin) {
  JsonFields doc(measured, origin);
  ComputeCalibration out;
  out.cluster = base;
  out.stack = stack;
  collectives::AcceleratorSpec& acc = out.cluster.accelerator;
  const std::string device = doc.str("device");
  // "torch" is absent from a rehearsal's measurements (cuBLAS called directly).
  const std::string where = "measured: " + origin + " (" + device +
                            (doc.has("torch") ? ", PyTorch " + doc.str("torch") : std::string()) +
                            ", CUDA " + doc.str("cuda") +
                            "; shardplan calibrate, Note [Compute calibration])";
  const int64_t sms = doc.integer("streaming_multiprocessors", 1);
  if (acc.streaming_multiprocessors &&
      sms != static_cast<int64_t>(acc.streaming_multiprocessors->value)) {
    doc.fail("streaming_multiprocessors",
             "measured on a GPU with " + std::to_string(sms) + " SMs, but the cluster file's " +
                 acc.model + " has " +
                 std::to_string(static_cast<int64_t>(acc.streaming_multiprocessors->value)) +
                 ", expected a measurement of the cluster's GPU");
  }

  // The device memory the GPU offers, in the files' GB of 10^9 bytes.
  // From 1 MB to 100 TB: the cluster file's own bounds on memory_gb.
  const int64_t bytes = doc.integer("memory_bytes", 1'000'000, 100'000'000'000'000);
  out.fits.push_back(fit_of("memory_gb", acc.memory_gb.value, {static_cast<double>(bytes) / 1e9}));
  acc.memory_gb = {out.fits.back().fitted, where + ": the device's total memory"};

  {  // Note [HBM efficiency]: the copy's rate over the datasheet bandwidth.
    JsonFields hbm = doc.object("hbm");
    const double copy = hbm.number("copy_bytes_per_s");
    if (!(copy > 0))
      hbm.fail("copy_bytes_per_s", "expected a positive rate, got " + fixed(copy, 0));
    // Measured beside the copy (scripts/gpu_measure.py), reported, not fitted: still rates.
    for (const char* other : {"read_bytes_per_s", "triad_bytes_per_s"}) {
      if (hbm.has(other) && !(hbm.number(other) > 0)) {
        hbm.fail(other, "expected a positive rate, got " + fixed(hbm.number(other), 0));
      }
    }
    hbm.done();
    const double datasheet = acc.memory_bandwidth_gbps.value * 1e9;
    out.fits.push_back(fit_of("memory_efficiency",
                              acc.memory_efficiency ? acc.memory_efficiency->value : 0,
                              {copy / datasheet}));
    check_fraction(doc, out.fits.back(), "hbm");
    acc.memory_efficiency = collectives::Quantity{
        out.fits.back().fitted,
        where + ": a copy's bytes read and written per second over the datasheet bandwidth"};
  }

  for (const auto& [key, dtype] : {std::pair<const char*, const char*>{"bf16_gemm", "bf16"},
                                   std::pair<const char*, const char*>{"fp8_gemm", "fp8"}}) {
    if (!doc.has(key)) continue;
    // bf16 operands take 2 bytes, fp8's at least 1.
    const ComputeFit f =
        fit_gemms(doc, key, dtype, base, bytes, std::string_view(dtype) == "bf16" ? 2.0 : 1.0);
    out.fits.push_back(f);
    const std::string src = where + ": the median of " + std::to_string(f.points) +
                            " GEMMs' rate over the peak and their shape factor (" +
                            fixed(f.low, 3) + "-" + fixed(f.high, 3) + ")";
    acc.matmul_efficiency[dtype] = {f.fitted, src};
    // fp16 runs on the same tensor cores at the same peak as bf16.
    if (std::string_view(dtype) == "bf16" && acc.matmul_efficiency.contains("fp16")) {
      acc.matmul_efficiency["fp16"] = {f.fitted, src};
    }
  }

  // The fitted cluster's prices, at efficiency 1, with the stack's attention kernel.
  ComputeModel a = compute_model(out.cluster, Precision::kBf16);
  a.attention_matmul_efficiency *= attention_kernel_rate(stack.attention_kernel, acc.arch);
  if (doc.has("llama_layers")) {
    const nlohmann::json& rows = doc.array("llama_layers");
    std::vector<double> each;
    for (size_t i = 0; i < rows.size(); ++i) {
      JsonFields r(rows[i], origin, "llama_layers[" + std::to_string(i) + "]");
      const tensor::ModelConfig cfg = r.parsed(
          "model", [](const std::string& name) { return tensor::find_model_config(name); });
      const TraceKey key{.micro_batch = r.integer("micro_batch", 1), .seq = r.integer("seq", 1)};
      const int64_t tp = r.integer("tp", 1, cfg.num_attention_heads);
      if (cfg.num_attention_heads % tp != 0) {
        r.fail("tp", std::to_string(tp) + " does not divide the model's " +
                         std::to_string(cfg.num_attention_heads) +
                         " attention heads, expected a tensor-parallel degree it runs at");
      }
      const double seconds = positive_seconds(r, "forward_s") + positive_seconds(r, "backward_s");
      // A shape the trace refuses (a micro-batch x seq beyond int64) names this row.
      const RankWork work = [&] {
        try {
          return rank_work(trace_one_block(cfg, key), a, {.tp = tp});
        } catch (const Error& e) {
          r.fail("micro_batch", std::string("micro_batch x seq: ") + e.what());
        }
      }();
      const PartWork& w = work.block();
      const double attention = w.attention_s;
      const double rest = w.forward_s + w.backward_s - attention;
      if (!(seconds > attention)) {
        r.fail("forward_s", "the layer took " + fixed(seconds * 1e3, 3) +
                                " ms, less than its attention alone is priced (" +
                                fixed(attention * 1e3, 3) + " ms), expected a longer time");
      }
      each.push_back(rest / (seconds - attention));
    }
    if (!each.empty()) {
      ComputeFit f = fit_of("compute_efficiency", stack.compute_efficiency, each);
      check_fraction(doc, f, "llama_layers");
      out.fits.push_back(f);
      out.stack.compute_efficiency = f.fitted;
      out.stack_fitted = true;
    }
  }
  if (doc.has("attention")) {
    const nlohmann::json& rows = doc.array("attention");
    for (size_t i = 0; i < rows.size(); ++i) {
      JsonFields r(rows[i], origin, "attention[" + std::to_string(i) + "]");
      // Optional, for rehearse's calls (scripts/time_attention.py): keys other than the
      // queries, a value width other than the head's, no causal mask. Bounds far beyond any
      // kernel's keep the tile counts of attention_efficiency inside int64.
      constexpr int64_t kTokens = int64_t{1} << 30, kWidth = 1 << 16;
      const int64_t seq = r.integer("seq", 1, kTokens);
      const int64_t dim = r.integer("head_dim", 1, kWidth);
      const AttentionShape shape{
          .batch_heads = r.integer("batch", 1, kTokens) * r.integer("heads", 1, kWidth),
          .queries = seq,
          .keys = r.has("keys") ? r.integer("keys", 1, kTokens) : seq,
          .head_dim = dim,
          .value_dim = r.has("value_dim") ? r.integer("value_dim", 1, kWidth) : dim,
          .causal = r.has("causal") ? r.boolean("causal") : true};
      const double seconds = positive_seconds(r, "forward_s") + positive_seconds(r, "backward_s");
      const OpSeconds p = fused_attention_seconds(attention_compute(a), shape);
      const double predicted = p.forward + p.backward + p.recompute;
      out.attention_ratio.push_back(predicted / seconds);
    }
  }
  // Read and reported by the measuring scripts, not fitted; any other key is a typo or another
  // file, refused like every other shardplan file's.
  for (const char* informational : {"idle", "attention_kernels", "source", "layers",
                                    "attention_calls", "attention_stack", "attention_timed_by"}) {
    if (doc.has(informational)) (void)doc.get(informational);
  }
  doc.done();
  return out;
}

}  // namespace shardplan::planner
