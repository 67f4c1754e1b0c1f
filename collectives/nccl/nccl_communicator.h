// The NCCL backend of collectives/communicator.h: buffers in GPU memory, one NCCL communicator
// per mesh dim (docs/launching.md "Communicators"). Built when CMake finds CUDA, NCCL and MPI;
// MPI carries the bootstrap (rank 0's ncclUniqueId) and names ranks and hosts in errors.
//   NcclDevice gpu(mpi);                                   // cudaSetDevice(local rank)
//   MeshCommunicators c = nccl_mesh_communicators(mpi, gpu, mesh);
//   c.dims[tp]->all_reduce(device_ptr, n, ReduceElement::kBFloat16, ReduceOp::kSum);
//
// Every call is blocking, like the MPI backend's: it is enqueued on the communicator's stream and
// the stream is synchronized before returning, so callers need no CUDA of their own. Every CUDA
// and NCCL call is checked; failures name the rank, the host and the call (Note [Communicator
// errors] in collectives/communicator.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/mpi/mpi_communicator.h"
#include "mesh/device_mesh.h"

namespace shardplan::collectives {

// The GPU this rank drives: local rank modulo the visible devices (one rank per GPU is the
// launch this assumes; docs/launching.md "Launchers"). Throws RuntimeFailure when no GPU is
// visible.
class NcclDevice {
 public:
  explicit NcclDevice(const MpiSession& session);
  int device() const { return device_; }

 private:
  int device_ = 0;
};

// The world and one NCCL communicator per dim of `mesh` (whose rank ids are MPI world ranks):
// ncclCommInitRank on the world from rank 0's unique id broadcast over MPI, then ncclCommSplit
// with color = the other coordinates and key = the coordinate on the dim. Collective over the
// world.
MeshCommunicators nccl_mesh_communicators(const MpiSession& session, const NcclDevice& gpu,
                                          const mesh::DeviceMesh& mesh);
// The world and one NCCL communicator per entry of `groups` (sets of mesh dims, ascending), in
// `dims`: the ranks that differ from this one only on those dims, ordered by mesh_group_key.
MeshCommunicators nccl_group_communicators(const MpiSession& session, const NcclDevice& gpu,
                                           const mesh::DeviceMesh& mesh,
                                           const std::vector<std::vector<size_t>>& groups);

}  // namespace shardplan::collectives
