// Meta-op dispatch cost: one view, pointwise, matmul or reduction op on meta tensors, per call.
// The target is a view or pointwise op in under 100 ns median; scripts/bench_meta_ops.sh
// runs this next to the same ops in PyTorch (scripts/bench_torch_meta.py) and prints the ratio.
//   build/bin/bench_meta_ops_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// Note [What one iteration measures]
// One iteration is one public op call plus the destruction of its result, as in PyTorch where a
// Python temporary dies at the end of the statement: building the output's TensorImpl (and, for
// non-views, its StorageImpl) and releasing them are both part of the per-op cost. Inputs are
// created once per benchmark, outside the timed loop. Before timing, each benchmark records its
// output's layout with describe() as the run's label; bench_torch_meta.py checks the label against
// PyTorch's output for the same op, so a fast but wrong op shows up in the same run.
//
// Shapes (keep in sync with kOps in scripts/bench_torch_meta.py): x, y [64, 128] float32;
// bias [128]; row [1, 128]; x4 [2, 128, 8, 64] (batch, seq, heads, head_dim); w [128, 256].
#include <benchmark/benchmark.h>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace {

// Times `op()` per Note [What one iteration measures]. `ops_per_call` > 1 marks a chain: the
// counter lets readers divide the time by the number of ops it dispatches.
template <typename Op>
void time_op(benchmark::State& state, const Op& op, int ops_per_call = 1) {
  state.SetLabel(describe(op()));
  for (auto _ : state) {
    Tensor out = op();
    benchmark::DoNotOptimize(out);
  }
  state.counters["ops_per_call"] = ops_per_call;
}

// ---- Baseline: a fresh meta tensor (one TensorImpl, one StorageImpl) ----

void BM_empty(benchmark::State& state) {
  time_op(state, [] { return empty({64, 128}); });
}
BENCHMARK(BM_empty);

// ---- Views: share the input's storage; no StorageImpl is created ----

void BM_view(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const DimVector shape{8, 8, 128};
  time_op(state, [&] { return view(x, shape); });
}
BENCHMARK(BM_view);

void BM_transpose(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return transpose(x, 0, 1); });
}
BENCHMARK(BM_transpose);

void BM_permute(benchmark::State& state) {
  const Tensor x4 = empty({2, 128, 8, 64});
  const DimVector dims{0, 2, 1, 3};
  time_op(state, [&] { return permute(x4, dims); });
}
BENCHMARK(BM_permute);

void BM_slice(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return slice(x, 1, 16, 48); });  // x[:, 16:48]
}
BENCHMARK(BM_slice);

void BM_select(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return select(x, 0, 3); });  // x[3]
}
BENCHMARK(BM_select);

void BM_expand(benchmark::State& state) {
  const Tensor row = empty({1, 128});
  const DimVector shape{64, 128};
  time_op(state, [&] { return expand(row, shape); });
}
BENCHMARK(BM_expand);

void BM_unsqueeze(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return unsqueeze(x, 0); });
}
BENCHMARK(BM_unsqueeze);

// reshape of a contiguous tensor takes the view path (no copy), with a -1 to infer.
void BM_reshape_view(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const DimVector shape{-1, 64};
  time_op(state, [&] { return reshape(x, shape); });
}
BENCHMARK(BM_reshape_view);

// ---- Pointwise: a fresh output with TensorIterator strides ----

void BM_add(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const Tensor y = empty({64, 128});
  time_op(state, [&] { return add(x, y); });
}
BENCHMARK(BM_add);

void BM_add_broadcast(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const Tensor bias = empty({128});
  time_op(state, [&] { return add(x, bias); });
}
BENCHMARK(BM_add_broadcast);

void BM_mul_scalar(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return mul(x, 0.5); });
}
BENCHMARK(BM_mul_scalar);

void BM_exp(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return exp(x); });
}
BENCHMARK(BM_exp);

void BM_gelu(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  time_op(state, [&] { return gelu(x); });
}
BENCHMARK(BM_gelu);

// ---- Matrix product and reduction ----

void BM_matmul(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const Tensor w = empty({128, 256});
  time_op(state, [&] { return matmul(x, w); });
}
BENCHMARK(BM_matmul);

void BM_sum(benchmark::State& state) {
  const Tensor x = empty({64, 128});
  const DimVector dims{-1};
  time_op(state, [&] { return sum(x, dims); });
}
BENCHMARK(BM_sum);

// ---- A chain: attention scores of one layer, 8 ops ----
// q, k [batch 2, seq 128, hidden 512] -> heads [2, 8, 128, 64] -> softmax(q k^T / sqrt(64)).

void BM_attention_scores(benchmark::State& state) {
  const Tensor hq = empty({2, 128, 512});
  const Tensor hk = empty({2, 128, 512});
  const DimVector heads{2, 128, 8, 64};
  time_op(
      state,
      [&] {
        const Tensor q = transpose(view(hq, heads), 1, 2);
        const Tensor k = transpose(view(hk, heads), 1, 2);
        const Tensor scores = mul(matmul(q, transpose(k, -2, -1)), 0.125);  // 1/sqrt(head_dim)
        return softmax(scores, -1);
      },
      /*ops_per_call=*/8);
}
BENCHMARK(BM_attention_scores);

}  // namespace
}  // namespace shardplan::tensor
