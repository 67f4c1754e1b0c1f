// The NCCL Communicator (collectives/nccl/) under mpirun, one rank per GPU: each collective's
// result written out by hand, as for the MPI backend. Built whenever NCCL and MPI are; skipped
// where no GPU is visible (or fewer GPUs than ranks on a host).
#if SHARDPLAN_HAVE_NCCL
#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/device_memory.h"
#include "tests/mpi/mpi_test_support.h"

namespace shardplan::collectives {
namespace {

using ::shardplan::testing::g_mpi;

TEST(NcclCommunicator, CollectivesOnGpus) {
  if (kernels::cuda_device_count() < g_mpi->local_size()) {
    GTEST_SKIP() << "needs one GPU per rank on each host";
  }
  const NcclDevice gpu(*g_mpi);
  const int64_t n = g_mpi->world_size();
  const int64_t me = g_mpi->world_rank();
  MeshCommunicators c = nccl_mesh_communicators(*g_mpi, gpu, mesh::DeviceMesh({n}));
  // all_reduce: rank r gives r + 1 in 1,000 elements; the sum is n (n + 1) / 2 everywhere.
  std::vector<float> host(1000, static_cast<float>(me + 1));
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, host.size() * sizeof(float) * static_cast<size_t>(n)), cudaSuccess);
  cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  c.dims[0]->all_reduce(d, host.size(), ReduceElement::kFloat32, ReduceOp::kSum);
  cudaMemcpy(host.data(), d, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(host[999], static_cast<float>(n * (n + 1) / 2));
  // all_gather: rank r gives 10 r.
  const int64_t mine = 10 * me;
  int64_t* g = nullptr;
  ASSERT_EQ(cudaMalloc(&g, sizeof(int64_t) * static_cast<size_t>(n + 1)), cudaSuccess);
  cudaMemcpy(g + n, &mine, sizeof mine, cudaMemcpyHostToDevice);
  c.world->all_gather(g + n, g, sizeof(int64_t));
  std::vector<int64_t> all(static_cast<size_t>(n));
  cudaMemcpy(all.data(), g, sizeof(int64_t) * all.size(), cudaMemcpyDeviceToHost);
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], 10 * r);
  // all_to_all: rank s sends 1000 s + r to rank r.
  std::vector<int64_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) send[static_cast<size_t>(r)] = 1000 * me + r;
  int64_t* a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, sizeof(int64_t) * static_cast<size_t>(2 * n)), cudaSuccess);
  cudaMemcpy(a, send.data(), sizeof(int64_t) * send.size(), cudaMemcpyHostToDevice);
  c.world->all_to_all(a, a + n, sizeof(int64_t));
  cudaMemcpy(recv.data(), a + n, sizeof(int64_t) * recv.size(), cudaMemcpyDeviceToHost);
  for (int64_t s = 0; s < n; ++s) EXPECT_EQ(recv[static_cast<size_t>(s)], 1000 * s + me);
  c.world->barrier();
  cudaFree(d);
  cudaFree(g);
  cudaFree(a);
}

}  // namespace
}  // namespace shardplan::collectives
#endif  // SHARDPLAN_HAVE_NCCL
