// Collective cost queries against the targets: one query < 200 ns; pricing a
// redistribution plan (collectives/redistribute_cost.h) < 2 us.
//   build/bin/bench_cost_model_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
// A query is collective_cost() on a CollectiveCall whose GroupLinks were computed once (as the
// planner does per mesh dim): every (algorithm, protocol) that applies is priced and the cheapest
// kept. Each benchmark checks its answer once before timing (hand formulas of Note [Cost model]);
// the label shows the choice.
#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/redistribute_cost.h"
#include "collectives/redistribute_plan.h"
#include "collectives/topology.h"
#include "mesh/shard_spec.h"

namespace shardplan {
namespace {

using collectives::Algorithm;
using collectives::CollectiveCall;
using collectives::CollectiveCost;
using collectives::CollectiveKind;

CollectiveCall first_devices(const char* cluster, int64_t nodes, CollectiveKind kind, int64_t n,
                             int64_t bytes) {
  const collectives::Topology t(collectives::with_nodes(
      collectives::load_cluster(collectives::resolve_cluster(cluster)), nodes));
  std::vector<int64_t> devices(static_cast<size_t>(n));
  std::iota(devices.begin(), devices.end(), int64_t{0});
  return {kind, n, bytes, t.group_links(devices)};
}

void time_query(benchmark::State& state, const CollectiveCall& call, bool ok) {
  if (!ok) {
    state.SkipWithError("unexpected cost");
    return;
  }
  const CollectiveCost first = collectives::collective_cost(call);
  for (auto _ : state) {
    CollectiveCost c = collectives::collective_cost(call);
    benchmark::DoNotOptimize(c);
  }
  state.SetLabel(std::string(collectives::to_string(first.algorithm)) + "/" +
                 std::string(collectives::to_string(first.protocol)) + " busbw " +
                 std::to_string(static_cast<int>(first.busbw_gbps)) + " GB/s");
}

// One DGX H100, all_reduce of 1 GiB: ring x 3 protocols, tree x 3, NVLS; NVLS wins with
// t = 25 + S x 9/8 / (370.8 x 0.85) us.
void BM_AllReduceOneH100Node(benchmark::State& state) {
  const CollectiveCall call = first_devices("dgx-h100", 1, CollectiveKind::kAllReduce, 8, 1 << 30);
  const CollectiveCost c = collectives::collective_cost(call);
  const double expected_us = 25 + (1 << 30) * 9.0 / 8 / (370.8 * 0.85 * 1e3);
  time_query(state, call,
             c.algorithm == Algorithm::kNvls && std::abs(c.time_s * 1e6 - expected_us) < 1e-6);
}
BENCHMARK(BM_AllReduceOneH100Node);

// 64 DGX H100 nodes, 512 ranks, 64 MiB: the most work per query (ring, tree, and the hierarchical
// candidate's three phases, each by its best flat algorithm); the flat ring's 1022 steps lose.
void BM_AllReduce64H100Nodes(benchmark::State& state) {
  const CollectiveCall call =
      first_devices("dgx-h100", 64, CollectiveKind::kAllReduce, 512, int64_t{64} << 20);
  const CollectiveCost c = collectives::collective_cost(call);
  const auto ring = collectives::collective_cost_with(call, Algorithm::kRing);
  time_query(state, call, ring && c.time_s < ring->time_s);
}
BENCHMARK(BM_AllReduce64H100Nodes);

// all_to_all over 2 nodes (16 ranks, 1 GiB): direct, t = 8.4 + 14 + S x 8/16 / 48 us.
void BM_AllToAllTwoH100Nodes(benchmark::State& state) {
  const CollectiveCall call = first_devices("dgx-h100", 2, CollectiveKind::kAllToAll, 16, 1 << 30);
  const CollectiveCost c = collectives::collective_cost(call);
  const double expected_us = 8.4 + 14.0 + (1 << 30) * 8.0 / 16 / 48e3;
  time_query(state, call,
             c.algorithm == Algorithm::kDirect && std::abs(c.time_s * 1e6 - expected_us) < 1e-6);
}
BENCHMARK(BM_AllToAllTwoH100Nodes);

// docs/semantics.md §3.4's greedy plan on mesh (2, 4, 8) over 8 DGX H100 nodes, (4096, 4096) bf16
// S0,S0,S0 -> S1,S1,S1: md2 all_gather, md1 all_gather, md0 all_to_all, two local chunks; the
// mesh dims' links computed once. Priced: three collectives, the total their sum.
void BM_PricePlan3d(benchmark::State& state) {
  const mesh::ShardSpec src =
      mesh::make_shard_spec(std::vector<int64_t>{4096, 4096}, tensor::DType::kBFloat16,
                            mesh::DeviceMesh({2, 4, 8}), mesh::parse_placements("S0,S0,S0"));
  const collectives::RedistributePlan plan =
      collectives::plan_redistribute(src, mesh::parse_placements("S1,S1,S1"));
  const collectives::Topology t(collectives::with_nodes(
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), 8));
  const std::vector<collectives::GroupLinks> links =
      collectives::mesh_dim_links(t, src.mesh.shape());
  const collectives::PlanPrice first = collectives::price_plan(plan, links);
  int priced = 0;
  double sum = 0;
  for (const auto& step : first.steps) {
    if (step) ++priced, sum += step->time_s;
  }
  if (first.steps.size() != 5 || priced != 3 || std::abs(sum - first.total_time_s) > 1e-15) {
    state.SkipWithError("unexpected plan price");
    return;
  }
  for (auto _ : state) {
    collectives::PlanPrice p = collectives::price_plan(plan, links);
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::to_string(priced) + " collectives, " +
                 std::to_string(first.total_time_s * 1e6) + " us");
}
BENCHMARK(BM_PricePlan3d);

}  // namespace
}  // namespace shardplan
