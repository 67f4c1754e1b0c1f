// Summarising a layout at cluster scale (mesh/shard_classes.h, issue "output at cluster scale"):
// the classes of a 4-d mesh of 10^9 ranks, and of 10^10 ranks, without walking the ranks; and the
// search of the planner on Llama-3.1-405B over 16,384 H100s.
//   build/bin/bench_shard_classes_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
// Each benchmark checks that the class counts add up to the mesh before timing.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "collectives/cluster.h"
#include "mesh/shard_classes.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan {
namespace {

void check_total(const mesh::LayoutShape& l, benchmark::State& state) {
  int64_t total = 0;
  for (const mesh::ShardClass& c : mesh::shard_classes(l)) total += c.count;
  if (total != l.ranks) state.SkipWithError("class counts do not add up to the mesh");
}

// 10^9 ranks as 10 x 100 x 1,000 x 1,000: an uneven 4-d layout (rows over two mesh dims, columns
// over another, one dim replicated).
void BM_ShardClasses4dBillion(benchmark::State& state) {
  const mesh::LayoutShape l = mesh::layout_shape(std::vector<int64_t>{1000003, 77777},
                                                 std::vector<int64_t>{10, 100, 1000, 1000},
                                                 mesh::parse_placements("S0,R,S1,S0"));
  check_total(l, state);
  for (auto _ : state) benchmark::DoNotOptimize(mesh::shard_classes(l));
  state.SetLabel("10^9 ranks");
}
BENCHMARK(BM_ShardClasses4dBillion);

void BM_ShardClassesTenBillion(benchmark::State& state) {
  const mesh::LayoutShape l =
      mesh::layout_shape(std::vector<int64_t>{4, 4}, std::vector<int64_t>{100000, 100000},
                         mesh::parse_placements("R,S1"));
  check_total(l, state);
  for (auto _ : state) benchmark::DoNotOptimize(mesh::shard_classes(l));
  state.SetLabel("10^10 ranks");
}
BENCHMARK(BM_ShardClassesTenBillion);

// The whole search (traces, links, every configuration) of `model` on `gpus` H100s, one Planner
// per iteration; configurations per second as a counter.
void plan_search(benchmark::State& state, const char* model_name, planner::TrainingSetup setup,
                 const planner::PlannerOptions& options) {
  const tensor::ModelConfig model = tensor::find_model_config(model_name);
  const collectives::Cluster cluster =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  int64_t evaluated = 0;
  for (auto _ : state) {
    planner::Planner p(model, cluster, setup, options);
    const planner::SearchResult r = p.search({}, 10);
    evaluated = r.evaluated;
    benchmark::DoNotOptimize(r.top.data());
  }
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(evaluated) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_PlanLlama405bOn16384H100(benchmark::State& state) {
  plan_search(state, "llama3.1-405b", {.gpus = 16384, .seq = 8192, .global_batch = 2048}, {});
}
BENCHMARK(BM_PlanLlama405bOn16384H100)->Unit(benchmark::kMillisecond);

// A stack of layer kinds with expert parallelism: DeepSeek-V3 (3 dense layers, 58 MoE, 256
// experts) on 1,024 H100s at fp8, ep and etp searched (issue target: under 1 s).
void BM_PlanDeepSeekV3On1024H100(benchmark::State& state) {
  planner::PlannerOptions fp8;
  fp8.precision = planner::Precision::kFp8;
  plan_search(state, "deepseek-v3", {.gpus = 1024, .seq = 4096, .global_batch = 8192}, fp8);
}
BENCHMARK(BM_PlanDeepSeekV3On1024H100)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace shardplan
