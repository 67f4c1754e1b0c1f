// The MPI backend of collectives/communicator.h: host buffers, one MPI_Comm per mesh dim from
// MPI_Comm_split (docs/launching.md "Communicators"). Built when CMake finds MPI
// (SHARDPLAN_HAVE_MPI); only the shardplan binary and the mpi-labelled tests link it.
//   MpiSession mpi;                                        // MPI_Init_thread .. MPI_Finalize
//   MeshCommunicators c = mpi_mesh_communicators(mesh);    // c.dims[d]: this rank's group on dim d
//   c.world->all_reduce(sums, n, ReduceElement::kUInt64, ReduceOp::kSum);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "mesh/device_mesh.h"

namespace shardplan::collectives {

// True when a launcher started this process as one of several ranks (Open MPI, MPICH/Hydra,
// PMIx, Slurm's srun): the variables they export (docs/launching.md "Launchers").
bool launched_by_mpi_launcher();

// MPI for the life of the object (MPI_Init_thread with MPI_THREAD_FUNNELED, MPI_Finalize). Errors
// return to the caller (MPI_ERRORS_RETURN) and become RuntimeFailure naming rank, host and call.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int64_t world_rank() const { return rank_; }
  int64_t world_size() const { return size_; }
  // This rank's index among the ranks of its host: the launcher's variable
  // (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, LOCAL_RANK) when set, else the
  // rank in MPI_Comm_split_type(shared memory). The GPU a rank drives.
  int64_t local_rank() const { return local_rank_; }
  // Ranks on this rank's host, and hosts in the job.
  int64_t local_size() const { return local_size_; }
  int64_t nodes() const { return nodes_; }
  const std::string& host() const { return host_; }
  // "rank 3 on node7".
  std::string who() const;

  // Ends the whole job now (MPI_Abort on the world): the policy of Note [Communicator errors] for
  // a rank that cannot go on, so that no other rank waits for it in a collective.
  [[noreturn]] void abort(int exit_code) const;

 private:
  int64_t rank_ = 0;
  int64_t size_ = 1;
  int64_t local_rank_ = 0;
  int64_t local_size_ = 1;
  int64_t nodes_ = 1;
  std::string host_;
};

// MPI_COMM_WORLD as a Communicator (not owned: freed by MPI_Finalize).
std::unique_ptr<Communicator> mpi_world(const MpiSession& session);
// The ranks on this rank's host (MPI_Comm_split_type shared memory), by world rank. Collective.
std::unique_ptr<Communicator> mpi_node_communicator(const MpiSession& session);

// The world and one communicator per dim of `mesh`, whose rank ids are MPI world ranks: the
// ranks that differ from this one only on dim d, ordered by their coordinate on d. Collective
// over the world. Throws RuntimeFailure when the mesh does not hold this rank or a split fails.
MeshCommunicators mpi_mesh_communicators(const MpiSession& session, const mesh::DeviceMesh& mesh);
// One communicator per entry of `groups`, each a set of mesh dims (ascending): the ranks that
// differ from this one only on those dims, ordered by mesh_group_key. Collective over the world.
std::vector<std::unique_ptr<Communicator>> mpi_group_communicators(
    const MpiSession& session, const mesh::DeviceMesh& mesh,
    const std::vector<std::vector<size_t>>& groups);

}  // namespace shardplan::collectives
