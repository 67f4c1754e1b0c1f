// The NCCL Communicator (collectives/nccl/) under mpirun, one rank per GPU: each collective's
// result written out by hand, as for the MPI backend. Built whenever NCCL and MPI are; skipped
// where no GPU is visible (or fewer GPUs than ranks on a host).
#if SHARDPLAN_HAVE_NCCL
#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/device_memory.h"
#include "tests/mpi/mpi_test_support.h"

namespace shardplan::collectives {
namespace {

using ::shardplan::testing::g_mpi;

// A device buffer of `count` T, every byte 0xFF first: a collective that writes nothing leaves
// values no check expects (on one GPU, one rank: in-place results would pass unwritten).
template <class T>
class Sentinel {
 public:
  explicit Sentinel(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(&d_, sizeof(T) * count_), cudaSuccess);
    EXPECT_EQ(cudaMemset(d_, 0xFF, sizeof(T) * count_), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Sentinel() { cudaFree(d_); }
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;
  T* data() { return d_; }
  void put(const std::vector<T>& v, size_t at = 0) {
    ASSERT_LE(at + v.size(), count_);
    ASSERT_EQ(cudaMemcpy(d_ + at, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<T> get(size_t at, size_t count) {
    std::vector<T> v(count);
    EXPECT_LE(at + count, count_);
    EXPECT_EQ(cudaMemcpy(v.data(), d_ + at, sizeof(T) * count, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }

 private:
  T* d_ = nullptr;
  size_t count_;
};

TEST(NcclCommunicator, CollectivesOnGpus) {
  if (kernels::cuda_device_count() < g_mpi->local_size()) {
    GTEST_SKIP() << "needs one GPU per rank on each host";
  }
  const NcclDevice gpu(*g_mpi);
  const int64_t n = g_mpi->world_size();
  const int64_t me = g_mpi->world_rank();
  const auto un = static_cast<size_t>(n);
  MeshCommunicators c = nccl_mesh_communicators(*g_mpi, gpu, mesh::DeviceMesh({n}));
  // all_reduce: rank r gives r + 1 in 1,000 elements; the sum is n (n + 1) / 2 everywhere.
  Sentinel<float> d(1000);
  d.put(std::vector<float>(1000, static_cast<float>(me + 1)));
  c.dims[0]->all_reduce(d.data(), 1000, ReduceElement::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(d.get(999, 1)[0], static_cast<float>(n * (n + 1) / 2));
  // The uint64 min and max verification reduces with: 100 + r.
  Sentinel<uint64_t> u(2);
  u.put({100 + static_cast<uint64_t>(me), 100 + static_cast<uint64_t>(me)});
  c.world->all_reduce(u.data(), 1, ReduceElement::kUInt64, ReduceOp::kMin);
  c.world->all_reduce(u.data() + 1, 1, ReduceElement::kUInt64, ReduceOp::kMax);
  EXPECT_EQ(u.get(0, 2), (std::vector<uint64_t>{100, 100 + static_cast<uint64_t>(n - 1)}));
  // all_gather: rank r gives 10 r + 7 into a sentinel-filled output.
  Sentinel<int64_t> g(un + 1);
  g.put({10 * me + 7}, un);
  c.world->all_gather(g.data() + n, g.data(), sizeof(int64_t));
  const std::vector<int64_t> all = g.get(0, un);
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], 10 * r + 7);
  // reduce_scatter: every rank gives r + 1 in each of n blocks of 4; each gets n (n + 1) / 2.
  Sentinel<float> rs(4 * un + 4);
  rs.put(std::vector<float>(4 * un, static_cast<float>(me + 1)));
  c.world->reduce_scatter(rs.data(), rs.data() + 4 * n, 4, ReduceElement::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(rs.get(4 * un, 4), std::vector<float>(4, static_cast<float>(n * (n + 1) / 2)));
  // all_to_all: rank s sends 1000 s + r + 1 to rank r.
  std::vector<int64_t> send(un);
  for (int64_t r = 0; r < n; ++r) send[static_cast<size_t>(r)] = 1000 * me + r + 1;
  Sentinel<int64_t> a(2 * un);
  a.put(send);
  c.world->all_to_all(a.data(), a.data() + n, sizeof(int64_t));
  const std::vector<int64_t> recv = a.get(un, un);
  for (int64_t s = 0; s < n; ++s) EXPECT_EQ(recv[static_cast<size_t>(s)], 1000 * s + me + 1);
  // broadcast from the last rank: 42 + n everywhere.
  Sentinel<int64_t> b(1);
  b.put({me == n - 1 ? 42 + n : -1});
  c.world->broadcast(b.data(), sizeof(int64_t), n - 1);
  EXPECT_EQ(b.get(0, 1)[0], 42 + n);
  // all_gather_varying: rank r gives r + 1 bytes of value r.
  Sentinel<std::byte> v(un);
  v.put(std::vector<std::byte>(static_cast<size_t>(me + 1), static_cast<std::byte>(me)));
  std::vector<std::byte> gathered;
  std::vector<size_t> counts;
  c.world->all_gather_varying(v.data(), static_cast<size_t>(me + 1), gathered, counts);
  ASSERT_EQ(counts.size(), un);
  size_t at = 0;
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(counts[static_cast<size_t>(r)], static_cast<size_t>(r + 1));
    for (int64_t k = 0; k <= r; ++k) EXPECT_EQ(gathered.at(at++), static_cast<std::byte>(r));
  }
  EXPECT_EQ(gathered.size(), at);
  // send / recv around a ring (two ranks or more): rank r receives 5 (r - 1 mod n) + 3.
  if (n > 1) {
    Sentinel<int64_t> p(2);
    p.put({5 * me + 3});
    const int64_t next = (me + 1) % n, prev = (me + n - 1) % n;
    if (me % 2 == 0) {
      c.world->send(p.data(), sizeof(int64_t), next, 0);
      c.world->recv(p.data() + 1, sizeof(int64_t), prev, 0);
    } else {
      c.world->recv(p.data() + 1, sizeof(int64_t), prev, 0);
      c.world->send(p.data(), sizeof(int64_t), next, 0);
    }
    EXPECT_EQ(p.get(1, 1)[0], 5 * prev + 3);
  }
  c.world->barrier();
}

}  // namespace
}  // namespace shardplan::collectives
#endif  // SHARDPLAN_HAVE_NCCL
