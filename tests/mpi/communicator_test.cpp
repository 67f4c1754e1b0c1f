// The MPI Communicator (collectives/mpi/) on 1, 2, 4 and 8 ranks: every collective's result
// written out by hand from what each rank gave, and the per-mesh-dim groups equal to
// DeviceMesh's groups, for the default rank order and a permuted one.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "collectives/collective_benchmark.h"
#include "collectives/topology.h"
#include "kernels/convert.h"
#include "tests/mpi/mpi_test_support.h"

namespace shardplan::collectives {
namespace {

using ::shardplan::testing::g_mpi;

TEST(MpiCommunicator, GathersAndAllToAll) {
  const auto world = mpi_world(*g_mpi);
  const int64_t n = world->size();
  const int64_t me = world->rank();
  // all_gather: rank r gives {10r, 10r + 1}.
  const int32_t mine[2] = {static_cast<int32_t>(10 * me), static_cast<int32_t>(10 * me + 1)};
  std::vector<int32_t> all(static_cast<size_t>(2 * n));
  world->all_gather(mine, all.data(), sizeof mine);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(all[static_cast<size_t>(2 * r)], 10 * r);
    EXPECT_EQ(all[static_cast<size_t>(2 * r + 1)], 10 * r + 1);
  }
  // all_gather_varying: rank r gives r bytes of value r (rank 0 gives nothing).
  std::vector<std::byte> bytes(static_cast<size_t>(me), static_cast<std::byte>(me));
  std::vector<std::byte> joined;
  std::vector<size_t> counts;
  world->all_gather_varying(bytes.data(), bytes.size(), joined, counts);
  ASSERT_EQ(counts.size(), static_cast<size_t>(n));
  EXPECT_EQ(joined.size(), static_cast<size_t>(n * (n - 1) / 2));
  size_t at = 0;
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(counts[static_cast<size_t>(r)], static_cast<size_t>(r));
    for (int64_t k = 0; k < r; ++k) EXPECT_EQ(joined[at++], static_cast<std::byte>(r));
  }
  // all_to_all: rank s sends 1000 s + r to rank r, so rank r receives 1000 s + r from each s.
  std::vector<int64_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) send[static_cast<size_t>(r)] = 1000 * me + r;
  world->all_to_all(send.data(), recv.data(), sizeof(int64_t));
  for (int64_t s = 0; s < n; ++s) EXPECT_EQ(recv[static_cast<size_t>(s)], 1000 * s + me);
}

TEST(MpiCommunicator, Reductions) {
  const auto world = mpi_world(*g_mpi);
  const int64_t n = world->size();
  const int64_t me = world->rank();
  // reduce_scatter: rank s gives block r = 100 s + r; block r sums to 100 n(n-1)/2 + n r.
  std::vector<double> in(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) in[static_cast<size_t>(r)] = 100.0 * me + r;
  double out = -1;
  world->reduce_scatter(in.data(), &out, 1, ReduceElement::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(out, 100.0 * n * (n - 1) / 2 + static_cast<double>(n * me));
  // all_reduce sum / min / max over every element type: rank r gives r + 1.
  uint64_t u[3] = {static_cast<uint64_t>(me) + 1, static_cast<uint64_t>(me) + 1,
                   static_cast<uint64_t>(me) + 1};
  world->all_reduce(&u[0], 1, ReduceElement::kUInt64, ReduceOp::kSum);
  world->all_reduce(&u[1], 1, ReduceElement::kUInt64, ReduceOp::kMin);
  world->all_reduce(&u[2], 1, ReduceElement::kUInt64, ReduceOp::kMax);
  EXPECT_EQ(u[0], static_cast<uint64_t>(n * (n + 1) / 2));
  EXPECT_EQ(u[1], 1u);
  EXPECT_EQ(u[2], static_cast<uint64_t>(n));
  int64_t i = -me;
  world->all_reduce(&i, 1, ReduceElement::kInt64, ReduceOp::kMin);
  EXPECT_EQ(i, -(n - 1));
  float f = 0.5f * static_cast<float>(me);
  world->all_reduce(&f, 1, ReduceElement::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(f, 0.25f * static_cast<float>(n * (n - 1)));
  // bf16 (MPI has none: a user op): small integers are exact.
  uint16_t h[2] = {kernels::float_to_bf16_bits(static_cast<float>(me + 1)),
                   kernels::float_to_bf16_bits(static_cast<float>(me + 1))};
  world->all_reduce(&h[0], 1, ReduceElement::kBFloat16, ReduceOp::kSum);
  world->all_reduce(&h[1], 1, ReduceElement::kBFloat16, ReduceOp::kMax);
  EXPECT_EQ(kernels::bf16_bits_to_float(h[0]), static_cast<float>(n * (n + 1) / 2));
  EXPECT_EQ(kernels::bf16_bits_to_float(h[1]), static_cast<float>(n));
}

TEST(MpiCommunicator, BroadcastPointToPointBarrier) {
  const auto world = mpi_world(*g_mpi);
  const int64_t n = world->size();
  const int64_t me = world->rank();
  int64_t v = me == n - 1 ? 4242 : -1;
  world->broadcast(&v, sizeof v, n - 1);
  EXPECT_EQ(v, 4242);
  if (n > 1) {  // a ring: send to the next rank, receive from the previous one
    int64_t got = -1;
    const int64_t out = 7 * me;
    if (me % 2 == 0) {
      world->send(&out, sizeof out, (me + 1) % n, 5);
      world->recv(&got, sizeof got, (me + n - 1) % n, 5);
    } else {
      world->recv(&got, sizeof got, (me + n - 1) % n, 5);
      world->send(&out, sizeof out, (me + 1) % n, 5);
    }
    EXPECT_EQ(got, 7 * ((me + n - 1) % n));
  }
  world->barrier();
}

// The group of every mesh dim holds exactly DeviceMesh's group_ranks, in coordinate order.
void expect_groups(const mesh::DeviceMesh& dm) {
  const MeshCommunicators c = mpi_mesh_communicators(*g_mpi, dm);
  const mesh::MeshCoord coord = *dm.coordinate_of(g_mpi->world_rank());
  ASSERT_EQ(c.dims.size(), dm.shape().size());
  for (size_t d = 0; d < c.dims.size(); ++d) {
    EXPECT_EQ(c.dims[d]->size(), dm.shape()[d]);
    EXPECT_EQ(c.dims[d]->rank(), coord[d]);
    const int64_t me = g_mpi->world_rank();
    std::vector<int64_t> members(static_cast<size_t>(c.dims[d]->size()));
    c.dims[d]->all_gather(&me, members.data(), sizeof me);
    EXPECT_EQ(members, dm.group_ranks(static_cast<int64_t>(d), me)) << "mesh dim " << d;
  }
}

TEST(MpiCommunicator, MeshDimGroups) {
  const int64_t n = g_mpi->world_size();
  std::vector<int64_t> shape;  // 8 -> 2x2x2, 4 -> 2x2, 2 -> 2x1, 1 -> 1
  for (int64_t left = n; left > 1; left /= 2) shape.push_back(2);
  if (shape.size() < 2) shape.push_back(1);
  expect_groups(mesh::DeviceMesh(shape));
  // Launch ranks laid out with mesh dim 0 fastest (what a cp-inner plan does to its dims).
  std::vector<int64_t> order(shape.size());
  std::iota(order.rbegin(), order.rend(), 0);
  expect_groups(mesh::DeviceMesh::from_ranks(shape, rank_order_by_dims(shape, order)));
}

// Groups of several mesh dims (rehearse's data-parallel dp x cp): on 2 x 2 x 2 the group of dims
// {0, 2} through a rank holds the 4 ranks that share its coordinate on dim 1, ordered row-major
// over dims 0 and 2 (mesh_group_key), i.e. by world rank for the default layout.
TEST(MpiCommunicator, GroupsOfSeveralMeshDims) {
  const int64_t n = g_mpi->world_size();
  if (n != 8) GTEST_SKIP() << "needs 8 ranks";
  const mesh::DeviceMesh dm({2, 2, 2});
  const auto groups = mpi_group_communicators(*g_mpi, dm, {{0, 2}, {1}});
  ASSERT_EQ(groups.size(), 2u);
  const int64_t me = g_mpi->world_rank();
  std::vector<int64_t> members(4);
  ASSERT_EQ(groups[0]->size(), 4);
  groups[0]->all_gather(&me, members.data(), sizeof me);
  const int64_t middle = (me / 2) % 2;  // coordinate on dim 1
  EXPECT_EQ(members,
            (std::vector<int64_t>{2 * middle, 2 * middle + 1, 4 + 2 * middle, 5 + 2 * middle}));
  EXPECT_EQ(groups[0]->rank(), (me / 4) * 2 + me % 2);
  EXPECT_EQ(groups[1]->size(), 2);
  EXPECT_EQ(groups[1]->rank(), middle);
}

}  // namespace
}  // namespace shardplan::collectives

namespace shardplan::collectives {
namespace {

// calibrate --mpi's measurement: one row per size, each a positive time, results checked inside.
TEST(MpiCommunicator, BenchmarkAllReduceLikeNcclTests) {
  const auto world = mpi_world(*::shardplan::testing::g_mpi);
  BenchmarkOptions o;
  o.sizes = {1024, 65536};
  o.warmup = 1;
  o.iterations = 3;
  const NcclTestsLog log = benchmark_all_reduce(*world, o, 1, world->size(), "test");
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_EQ(log.rows[1].bytes, 65536);
  EXPECT_EQ(log.rows[1].count, 16384);
  EXPECT_GT(log.rows[0].out_of_place_us, 0);
  EXPECT_EQ(log.ranks, world->size());
}

}  // namespace
}  // namespace shardplan::collectives
