// A rehearsal of a plan's communication (`shardplan rehearse`): one training step's worth of the
// collectives its bill priced, with their sizes, groups and counts, run through the job's own
// backend (MPI on host buffers, NCCL on device ones) and timed, beside what the plan predicted
// (docs/launching.md "Rehearsal").
//   std::vector<std::vector<size_t>> g = rehearsal_groups(plan);        // mesh dims per group
//   auto comms = mpi_group_communicators(session, mesh, g);             // or NCCL's
//   Rehearsal r = rehearse(plan, *world, comms, *memory, {});
//
// Note [Rehearsal]
// Each collective of the bill (plan.json's prediction.collectives) runs in bill order on its
// group: the ranks that differ only on the mesh dims whose sizes multiply to its group_size
// (group_dims: a data-parallel collective may span dp x ep x cp, an expert all-to-all ep x cp x
// tp). One warm-up call, a barrier, then the calls of one step (or --calls of them), timed on the
// host around blocking calls (the NCCL backend synchronizes its stream in each); a call's time is
// the slowest rank's average, and the step's is that times calls_per_step. Buffers are float32
// (reductions sum), sized by nccl-tests' convention the bill uses: S is the all-reduce buffer,
// the all-gather's output, the reduce-scatter's input. A pipeline send_recv goes down the stages
// on even calls and back up on odd ones, each stage receiving before it sends. What the step
// exposes is measured as each collective's measured time times the fraction of it the plan
// exposed: the rehearsal times the calls, the schedule that hides them is the model's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "planner/cost/step_model.h"
#include "planner/materialize/shard_memory.h"
#include "planner/plan/plan_file.h"

namespace shardplan::planner {

// The mesh dims (ascending) of the group a collective on `mesh_dim` ("dp") of `group_size` ranks
// spans on a mesh of `shape` (Note [Rehearsal]): the dim alone when it has the size, else the
// fewest dims of its family (dp: dp, ep, cp; ep: ep, cp, tp) that multiply to it. Throws
// shardplan::Error naming the collective when none does.
std::vector<size_t> group_dims(const std::vector<int64_t>& shape, const BillCollective& c);

// The distinct groups of the plan's collectives, in first-use order.
std::vector<std::vector<size_t>> rehearsal_groups(const PlanFile& plan);

// The bytes each of a call's two buffers needs: the bill's `bytes`, and at least 4 per rank. A
// call moves at least one element per rank, so a collective of fewer bytes than its group (an
// all-gather of 0 bytes over 8 ranks, a reduce-scatter of 8 bytes over 4) reads and writes
// beyond `bytes`: per rank one byte (all-gather, all-to-all) or one float (reduce-scatter).
int64_t rehearsal_buffer_bytes(const BillCollective& c);

struct RehearsalOptions {
  int64_t max_calls = 0;  // timed calls per collective; 0: all of a step's
  int warmup = 1;
};

struct RehearsedCollective {
  BillCollective planned;
  std::vector<size_t> dims;  // of its group
  int64_t calls_run = 0;
  double per_call_s = 0;  // the slowest rank's average
  double measured_s = 0;  // per_call_s x calls per step
  double measured_exposed_s = 0;
};

struct Rehearsal {
  std::vector<RehearsedCollective> collectives;
  double predicted_s = 0, measured_s = 0;
  double predicted_exposed_s = 0, measured_exposed_s = 0;
};

// Runs Note [Rehearsal] on this rank: `groups[i]` is this rank's communicator for
// rehearsal_groups(plan)[i]; buffers live in `memory`. Collective over `world`; every rank gets
// the same result. Throws shardplan::Error for a plan without collectives.
Rehearsal rehearse(const PlanFile& plan, collectives::Communicator& world,
                   const std::vector<std::unique_ptr<collectives::Communicator>>& groups,
                   ShardMemory& memory, const RehearsalOptions& options);

}  // namespace shardplan::planner
