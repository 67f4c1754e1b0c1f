// A redistribution plan (collectives/redistribute_plan.h) run on real data: each step's collective
// issued through a Communicator on its mesh dim's group, with uneven and empty shards padded as
// DTensor pads them (Note [Uneven shard padding] in collectives/redistribute_step.cpp), so the
// bytes issued are the bytes the plan prices.
//   LocalShard mine{bytes, local_shape(plan.source, coord)};
//   std::vector<IssuedCollective> issued = execute_redistribute(plan, coord, comms, mine);
//   // mine now holds the rank's shard of plan.target
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/redistribute_plan.h"

namespace shardplan::collectives {

// One rank's local tensor: its elements, row-major over `shape`.
struct LocalData {
  std::vector<std::byte> bytes;
  shardplan::DimVector shape;
};

// A collective the executor issued: which step, what, and the per-rank buffer in the sense of
// RedistributeStep::bytes_per_rank (padded all_gather output, reduce_scatter input, all_to_all
// send buffer, all_reduce buffer) on this rank.
struct IssuedCollective {
  size_t step = 0;
  StepOp op = StepOp::kNoop;
  int64_t mesh_dim = 0;
  int64_t bytes_per_rank = 0;
};

// Runs every step of `plan` on `local`, this rank's shard of plan.source at mesh coordinate
// `coord`; comms.dims[d] must be the group of plan.source.mesh dim d with rank = coord[d].
// Partial sums are reduced in the tensor's dtype (float32, float64, bfloat16, int64; other dtypes
// are a shardplan::Error when a step reduces). Collective over every group a step uses.
std::vector<IssuedCollective> execute_redistribute(const RedistributePlan& plan,
                                                   std::span<const int64_t> coord,
                                                   MeshCommunicators& comms, LocalData& local);

}  // namespace shardplan::collectives
