// The links under a plan's groups, timed by `shardplan rehearse` at nccl-tests' sizes, so that
// `shardplan calibrate --rehearsal` fits the cluster file to the job's own backend (NCCL on GPUs,
// MPI on CPUs) with the nccl-tests fit (collectives/calibration.h).
//   std::vector<LinkSweep> s = sweep_links(plan, *world, groups, *memory, ranks_per_node);
//   s[0].log;   // an all-reduce over a group inside one node, nccl-tests' sizes
//
// Note [Link sweeps]
// After the bill's calls, rehearse times an all-reduce (float32, in place) at nccl-tests' sizes,
// 8 B up to the largest bill size on that group (at least 1 MiB, at most 64 MiB), on two of the
// plan's groups: the largest one inside a node (the fabric), and among those spanning several
// nodes with the same ranks on each, the one with the fewest ranks per node (the network bounds
// it: calibrate refuses a run the fabric bounds). Only the group holding rank 0 runs; every
// other rank waits, so the network carries one group, as nccl-tests measures it, not the
// contention of every group at once (which the cost model prices from the cluster file's NIC
// shares). A group's nodes follow from the launcher's ranks per node, ranks placed node by node
// in mesh order (the placement plan.json's mesh assumes; rehearse checks it against the nodes the
// launcher reports and skips the sweeps, saying why, when it does not hold). Device buffers are not
// read back, so unlike `calibrate --mpi` the sums are not checked; rehearse is about time. The
// slowest rank's time per size is taken over the world communicator (MPI, host memory), never over
// an NCCL group, which moves device buffers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/calibration.h"
#include "collectives/communicator.h"
#include "collectives/nccl_tests_log.h"
#include "planner/materialize/shard_memory.h"
#include "planner/plan/plan_file.h"

namespace shardplan::planner {

struct LinkSweep {
  bool intra = true;         // inside one node (the fabric), else across nodes (the network)
  std::vector<size_t> dims;  // the group's mesh dims
  collectives::NcclTestsLog log;
};

// What Note [Link sweeps] would measure on a plan: the groups (dims) picked and their shape, with
// no rows. `ranks_per_node` is the launcher's (every node the same).
std::vector<LinkSweep> link_sweep_groups(const PlanFile& plan, int64_t ranks_per_node);

// Runs Note [Link sweeps]; `groups[i]` is this rank's communicator for rehearsal_groups(plan)[i].
// Collective over `world` (a communicator of host memory): every rank gets the logs, each row the
// slowest rank's time.
std::vector<LinkSweep> sweep_links(
    const PlanFile& plan, collectives::Communicator& world,
    const std::vector<std::unique_ptr<collectives::Communicator>>& groups, ShardMemory& memory,
    int64_t ranks_per_node);

// The link sweeps of a rehearsal document (`rehearse --out`, "format": "shardplan.rehearsal") as
// calibrate's inputs, each named after `origin`. Throws shardplan::Error naming the document and
// the field for a document that is not a rehearsal, a field of the wrong type or range, or a
// document without sweeps; and naming the backend when it is not `library`'s (a cluster priced
// for NCCL calibrated on MPI times would be wrong).
std::vector<collectives::CalibrationInput> rehearsal_link_inputs(const nlohmann::json& doc,
                                                                 const std::string& origin,
                                                                 collectives::Library library);

}  // namespace shardplan::planner
