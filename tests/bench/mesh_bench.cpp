// Mesh and redistribution planning speed against the targets:
//   local shape + global offset of one rank on a 4-d mesh   < 100 ns
//   greedy redistribution plan on a 3-d mesh                < 5 us
//   min-cost (Dijkstra) redistribution plan on a 3-d mesh   < 200 us (bytes, and link time)
//   build/bin/bench_mesh_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Each benchmark checks its answer once before timing (a fast wrong result would not count): the
// label shows the local shard or the plan's step and collective counts.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "collectives/dtensor_compat.h"
#include "collectives/min_cost_redistribute.h"
#include "collectives/redistribute_cost.h"
#include "collectives/redistribute_plan.h"
#include "mesh/shard_spec.h"

namespace shardplan {
namespace {

using mesh::DeviceMesh;
using mesh::parse_placements;

// A Llama-70B-like MLP weight (28672 x 8192, bf16) over (pp, dp, cp, tp) = (4, 8, 2, 8), 512
// ranks: [R, S0, R, S1] (dp splits rows, tp columns); rank 300's coordinate.
void BM_LocalShapeAndOffset4d(benchmark::State& state) {
  const mesh::ShardSpec spec = mesh::make_shard_spec(
      std::vector<int64_t>{28672, 8192}, tensor::DType::kBFloat16,
      DeviceMesh({4, 8, 2, 8}, {"pp", "dp", "cp", "tp"}), parse_placements("R,S0,R,S1"));
  const mesh::MeshCoord coord = *spec.mesh.coordinate_of(300);  // (2, 2, 1, 4)
  const mesh::LocalShard first = mesh::local_shape_and_offset(spec, coord);
  // 28672 / 8 = 3584 rows from 2 * 3584 = 7168; 8192 / 8 = 1024 columns from 4 * 1024 = 4096.
  if (first.shape.vec() != std::vector<int64_t>{3584, 1024} ||
      first.offset.vec() != std::vector<int64_t>{7168, 4096}) {
    state.SkipWithError("wrong local shard");
    return;
  }
  for (auto _ : state) {
    mesh::LocalShard s = mesh::local_shape_and_offset(spec, coord);
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel("[3584, 1024] @ [7168, 4096]");
}
BENCHMARK(BM_LocalShapeAndOffset4d);

// docs/semantics.md §3.4's case on mesh (2,4,8): S(0)S(0)S(0) -> S(1)S(1)S(1) of a (4096, 4096)
// bf16 tensor.
mesh::ShardSpec source_3d() {
  return mesh::make_shard_spec(std::vector<int64_t>{4096, 4096}, tensor::DType::kBFloat16,
                               DeviceMesh({2, 4, 8}), parse_placements("S0,S0,S0"));
}

// Times plan(src, dst) after checking its first answer with ok(plan).
template <typename Plan, typename Check>
void time_plan(benchmark::State& state, const Plan& plan, const Check& ok) {
  const mesh::ShardSpec src = source_3d();
  const std::vector<mesh::Placement> dst = parse_placements("S1,S1,S1");
  const collectives::RedistributePlan first = plan(src, dst);
  if (!ok(first)) {
    state.SkipWithError("unexpected plan");
    return;
  }
  for (auto _ : state) {
    collectives::RedistributePlan p = plan(src, dst);
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::to_string(first.steps.size()) + " steps, " +
                 std::to_string(first.num_collectives()) + " collectives");
}

collectives::RedistributePlan greedy(const mesh::ShardSpec& s,
                                     const std::vector<mesh::Placement>& t) {
  return collectives::plan_redistribute(s, t);
}

// Greedy (docs/semantics.md §3.4 trace): md2 ag, md1 ag, md0 a2a, md1 chunk, md2 chunk.
void BM_GreedyPlan3d(benchmark::State& state) {
  time_plan(state, greedy, [](const collectives::RedistributePlan& p) {
    return p.steps.size() == 5 && p.num_collectives() == 3;
  });
}
BENCHMARK(BM_GreedyPlan3d);

// Min-cost over bytes moved: 2 x 4 x 8 = 64 ranks, 3 tensor-dim options per mesh dim, 27 states.
// Checked: it reaches the target and moves no more bytes than greedy (it moves a third: it keeps
// the 8-way split while gathering the outer dims).
void BM_MinCostPlan3d(benchmark::State& state) {
  const mesh::ShardSpec src = source_3d();
  const double greedy_bytes = collectives::plan_cost(greedy(src, parse_placements("S1,S1,S1")),
                                                     collectives::bytes_moved_cost);
  time_plan(
      state,
      [](const mesh::ShardSpec& s, const std::vector<mesh::Placement>& t) {
        return collectives::plan_min_cost_redistribute(s, t);
      },
      [&](const collectives::RedistributePlan& p) {
        return p.target.placements == parse_placements("S1,S1,S1") &&
               collectives::plan_cost(p, collectives::bytes_moved_cost) <= greedy_bytes;
      });
}
BENCHMARK(BM_MinCostPlan3d);

// A harder search: a 3-d tensor (1024, 1024, 512) bf16 rotating its three shards,
// [S0,S1,S2] -> [S2,S0,S1] on mesh (2,4,8): 4 options per mesh dim, 64 states, every edge priced
// in seconds on DTensor-style links (8 GPUs per host: mesh dim 0 crosses hosts).
void BM_MinCostPlan3dLinkTime(benchmark::State& state) {
  const mesh::ShardSpec src =
      mesh::make_shard_spec(std::vector<int64_t>{1024, 1024, 512}, tensor::DType::kBFloat16,
                            DeviceMesh({2, 4, 8}), parse_placements("S0,S1,S2"));
  const std::vector<mesh::Placement> dst = parse_placements("S2,S0,S1");
  const collectives::StepCostFn cost = collectives::link_time_cost(
      collectives::dtensor::dtensor_mesh_links(std::vector<int64_t>{2, 4, 8}, 8));
  const collectives::RedistributePlan first =
      collectives::plan_min_cost_redistribute(src, dst, cost);
  if (collectives::plan_cost(first, cost) >
      collectives::plan_cost(collectives::plan_redistribute(src, dst), cost)) {
    state.SkipWithError("min-cost plan slower than greedy");
    return;
  }
  for (auto _ : state) {
    collectives::RedistributePlan p = collectives::plan_min_cost_redistribute(src, dst, cost);
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::to_string(first.steps.size()) + " steps, " +
                 std::to_string(first.num_collectives()) + " collectives");
}
BENCHMARK(BM_MinCostPlan3dLinkTime);

}  // namespace
}  // namespace shardplan
