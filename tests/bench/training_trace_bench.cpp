// One training step of Llama-3-70B traced on meta: forward through the 80-layer model with meta
// token ids, saved tensors per op, backward and recompute FLOPs, Adam, activation memory and peak.
// The target is under 3 ms on one core and under 50 MB peak RSS (reported as counters).
//   build/bin/bench_training_trace_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
//
// The model is the Llama-like stack of tests/tensor/training_models.h with Llama-3-70B's sizes
// (hidden 8192, 64 heads, 8 kv heads, intermediate 28672, vocab 128256, 80 layers, bf16): the
// same parameter count as the published 70,553,706,496, checked before timing. Every layer is
// traced (no block is multiplied), so the totals are exact by construction.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <memory>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/training.h"
#include "tensor/training_graph.h"
#include "tests/tensor/training_models.h"

namespace shardplan::tensor {
namespace {

constexpr int64_t kLlama3_70bParams = 70'553'706'496;  // Meta's model card / HF safetensors

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void report(benchmark::State& state, const TrainingStep& st) {
  state.counters["ops"] = static_cast<double>(st.totals.ops);
  state.counters["model_TFLOP"] = st.totals.model_flops() / 1e12;
  state.counters["hw_TFLOP"] = st.totals.hardware_flops() / 1e12;
  state.counters["act_GB"] = static_cast<double>(st.totals.activation_bytes) / 1e9;
  state.counters["peak_act_GB"] = static_cast<double>(st.totals.peak_activation_bytes) / 1e9;
  state.counters["maxrss_MB"] = peak_rss_mb();
}

TraceOptions options(benchmark::State& state) {
  TraceOptions o;
  o.batch = 1;
  o.seq = 4096;
  o.dropout = false;
  o.recompute = static_cast<RecomputePolicy>(state.range(0));
  return o;
}

// Trace only: the model exists (built once).
void BM_TraceTrainingStep_Llama3_70B(benchmark::State& state) {
  auto model = std::make_shared<test::LlamaModel>(test::LlamaConfig{});
  SP_ASSERT(model->parameters_numel() == kLlama3_70bParams);
  const TraceOptions o = options(state);
  TrainingStep last;
  for (auto _ : state) {
    TrainingStep st = trace_training_step(*model, o);
    benchmark::DoNotOptimize(st.totals);
    last = std::move(st);
  }
  report(state, last);
}
BENCHMARK(BM_TraceTrainingStep_Llama3_70B)
    ->Arg(static_cast<int>(RecomputePolicy::kNone))
    ->Arg(static_cast<int>(RecomputePolicy::kSelective))
    ->Arg(static_cast<int>(RecomputePolicy::kFull))
    ->Unit(benchmark::kMillisecond);

// Trace and build the Boost.Graph of the step (ops as vertices, tensors as edges).
void BM_TraceAndGraph_Llama3_70B(benchmark::State& state) {
  auto model = std::make_shared<test::LlamaModel>(test::LlamaConfig{});
  const TraceOptions o = options(state);
  TrainingStep last;
  for (auto _ : state) {
    TrainingStep st = trace_training_step(*model, o);
    const TrainingGraph g = training_graph(st);
    benchmark::DoNotOptimize(boost::num_edges(g));
    last = std::move(st);
  }
  report(state, last);
}
BENCHMARK(BM_TraceAndGraph_Llama3_70B)
    ->Arg(static_cast<int>(RecomputePolicy::kNone))
    ->Unit(benchmark::kMillisecond);

// Build on meta and trace: what `shardplan inspect --model llama3-70b` does.
void BM_BuildAndTrace_Llama3_70B(benchmark::State& state) {
  const TraceOptions o = options(state);
  TrainingStep last;
  for (auto _ : state) {
    auto model = std::make_shared<test::LlamaModel>(test::LlamaConfig{});
    TrainingStep st = trace_training_step(*model, o);
    benchmark::DoNotOptimize(st.totals);
    last = std::move(st);
  }
  report(state, last);
}
BENCHMARK(BM_BuildAndTrace_Llama3_70B)
    ->Arg(static_cast<int>(RecomputePolicy::kNone))
    ->Unit(benchmark::kMillisecond);

// The measurement, as `shardplan inspect --model llama3-70b` does it: Llama-3-70B built by
// the Hugging Face builder from configs/models/llama3-70b.json (parsed once, outside the loop: a
// 1 kB file) on meta, then one training step traced (forward, saved tensors, backward, Adam).
// scripts/bench_models.sh runs it beside PyTorch building the same model on meta.
void BM_BuildAndTrace_Llama3_70B_HF(benchmark::State& state) {
  const ModelConfig cfg = find_model_config("llama3-70b");
  BuildOptions build;
  build.training = true;
  SP_ASSERT(build_model(cfg, build)->parameters_numel() == kLlama3_70bParams);
  const TraceOptions o = options(state);
  TrainingStep last;
  for (auto _ : state) {
    const ModulePtr model = build_model(cfg, build);
    TrainingStep st = trace_training_step(*model, o);
    benchmark::DoNotOptimize(st.totals);
    last = std::move(st);
  }
  report(state, last);
}
BENCHMARK(BM_BuildAndTrace_Llama3_70B_HF)
    ->Arg(static_cast<int>(RecomputePolicy::kNone))
    ->Unit(benchmark::kMillisecond);

// The trace alone on the Hugging Face model (built once).
void BM_Trace_Llama3_70B_HF(benchmark::State& state) {
  BuildOptions build;
  build.training = true;
  const ModulePtr model = build_model(find_model_config("llama3-70b"), build);
  const TraceOptions o = options(state);
  TrainingStep last;
  for (auto _ : state) {
    TrainingStep st = trace_training_step(*model, o);
    benchmark::DoNotOptimize(st.totals);
    last = std::move(st);
  }
  report(state, last);
}
BENCHMARK(BM_Trace_Llama3_70B_HF)
    ->Arg(static_cast<int>(RecomputePolicy::kNone))
    ->Unit(benchmark::kMillisecond);

// The Hugging Face builder alone.
void BM_Build_Llama3_70B_HF(benchmark::State& state) {
  const ModelConfig cfg = find_model_config("llama3-70b");
  for (auto _ : state) {
    const ModulePtr model = build_model(cfg);
    benchmark::DoNotOptimize(model.get());
  }
}
BENCHMARK(BM_Build_Llama3_70B_HF)->Unit(benchmark::kMillisecond);

// Building alone, to separate the Module tree's cost from the trace's.
void BM_Build_Llama3_70B(benchmark::State& state) {
  for (auto _ : state) {
    auto model = std::make_shared<test::LlamaModel>(test::LlamaConfig{});
    benchmark::DoNotOptimize(model.get());
  }
}
BENCHMARK(BM_Build_Llama3_70B)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardplan::tensor
