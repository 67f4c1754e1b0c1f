// Note [Each byte read once per replica group] (planner/materialize/replica_load.h) without a
// launcher: the row split and its sub-parts by hand, the replicated dims of a 3-D plan, and a
// one-rank load equal to the plain fill. The multi-rank load, with bytes read per rank, runs under
// mpirun in tests/cli/gpu_loop_mpi_smoke.cmake.
#include "planner/materialize/replica_load.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "collectives/cluster.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/shards.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"
#include "tensor/safetensors.h"
#include "tests/planner/materialize/tiny_llama.h"

namespace shardplan::planner {
namespace {

TEST(ReplicaLoad, RowChunksTileTheRangeEvenly) {
  // 10 rows over 4 replicas: 10 j / 4 -> 0, 2, 5, 7, 10.
  const mesh::IndexRange rows{0, 10};
  EXPECT_EQ(row_chunk(rows, 4, 0), (mesh::IndexRange{0, 2}));
  EXPECT_EQ(row_chunk(rows, 4, 1), (mesh::IndexRange{2, 5}));
  EXPECT_EQ(row_chunk(rows, 4, 2), (mesh::IndexRange{5, 7}));
  EXPECT_EQ(row_chunk(rows, 4, 3), (mesh::IndexRange{7, 10}));
  // Fewer rows than replicas: some chunks are empty, together they still hold every row once.
  EXPECT_EQ(row_chunk({3, 4}, 2, 0).size() + row_chunk({3, 4}, 2, 1).size(), 1);
  EXPECT_EQ(row_chunk({3, 4}, 2, 1), (mesh::IndexRange{3, 4}));
}

// A strided part (rows 0-1 and 6-7 of a [8, 3] tensor, local order) cut to local rows 1..3: global
// row 1, then 6, keeping the columns.
TEST(ReplicaLoad, PartRowsTrimsTheRangesOfDimZero) {
  LocalParameter part;
  part.local_shape = {4, 3};
  part.ranges = {{{0, 2}, {6, 8}}, {{0, 3}}};
  part.numel = 12;
  part.bytes = 24;
  const LocalParameter sub = part_rows(part, {1, 3});
  ASSERT_EQ(sub.ranges[0].size(), 2u);
  EXPECT_EQ(sub.ranges[0][0], (mesh::IndexRange{1, 2}));
  EXPECT_EQ(sub.ranges[0][1], (mesh::IndexRange{6, 7}));
  EXPECT_EQ(sub.ranges[1], part.ranges[1]);
  EXPECT_EQ(sub.local_shape[0], 2);
  EXPECT_EQ(sub.numel, 6);
  EXPECT_EQ(sub.bytes, 12);
  EXPECT_EQ(part_rows(part, {2, 2}).numel, 0);
}

PlanFile tiny_checkpoint_plan(int64_t tp, int64_t pp, int64_t dp, int zero) {
  const std::filesystem::path dir =
      std::filesystem::path(SHARDPLAN_TEST_DATA_DIR) / "safetensors" / "tiny-llama";
  return testing::pinned_plan(tensor::find_model_config((dir / "config.json").string()),
                              "tiny-llama",
                              {.tp = tp, .pp = pp, .dp = dp, .zero = zero, .seq = 32, .seed = 0});
}

// tp 2 x pp 2 x dp 2 at ZeRO 0: a column-parallel weight is sharded on tp and replicated over dp
// alone (pp holds stages, not replicas); a norm is replicated over dp and tp, outermost first.
TEST(ReplicaLoad, ReplicaDimsAreTheReplicateDimsBesidesPp) {
  const MaterialLayout l(tiny_checkpoint_plan(2, 2, 2, 0));
  for (const MaterialParameter& m : l.parameters()) {
    const std::vector<size_t> dims = replica_dims(l, m);
    if (m.plan->name == "model.layers.0.self_attn.q_proj.weight") {
      EXPECT_EQ(dims, (std::vector<size_t>{kDpDim}));
    }
    if (m.plan->name == "model.layers.0.input_layernorm.weight") {
      EXPECT_EQ(dims, (std::vector<size_t>{kDpDim, kTpDim}));
    }
  }
}

// One rank: the split has one leaf, the whole part, so the load reads what init_shards reads and
// fills the same bytes.
TEST(ReplicaLoad, OneRankLoadEqualsThePlainRead) {
  const std::filesystem::path ck = std::filesystem::path(SHARDPLAN_TEST_DATA_DIR) / "safetensors" /
                                   "tiny-llama" / "model.safetensors";
  const MaterialLayout l(tiny_checkpoint_plan(1, 1, 1, 0));
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  RankShards a = allocate_shards(l, 0, *host), b = allocate_shards(l, 0, *host);
  CheckpointSource plain(l, tensor::read_checkpoint(ck));
  CheckpointSource split(l, tensor::read_checkpoint(ck));
  init_shards(l, a, plain);
  collectives::MeshCommunicators comms;
  comms.world = std::make_unique<collectives::SelfCommunicator>();
  for (int d = 0; d < 5; ++d)
    comms.dims.push_back(std::make_unique<collectives::SelfCommunicator>());
  EXPECT_EQ(load_across_replicas(l, b, split, comms), 0);  // nothing from replicas
  EXPECT_EQ(split.bytes_read(), plain.bytes_read());
  EXPECT_EQ(split.bytes_read(), a.bytes);
  for (size_t k = 0; k < a.parts.size(); ++k) {
    EXPECT_EQ(std::memcmp(a.data[k], b.data[k], static_cast<size_t>(a.parts[k].bytes)), 0)
        << l.parameters()[a.parts[k].index].plan->name;
  }
}

}  // namespace
}  // namespace shardplan::planner
