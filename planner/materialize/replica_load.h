// Loading a checkpoint so that each replica group reads each byte from storage once
// (docs/launching.md "Checkpoints").
//   load_across_replicas(layout, shards, checkpoint_source, comms);   // instead of init_shards
//
// Note [Each byte read once per replica group]
// The ranks that hold the same part of a parameter are its replicas: they differ only on the
// mesh dims where it is Replicate (pp excepted: stages hold different layers). Reading the part
// on every replica would multiply storage traffic by the replica count (a dp 64 job would read its
// checkpoint 64 times). Instead the replicas split the part's rows (its local dim 0, whose slices
// are contiguous in the part's buffer): the rows go to the replicated dims outermost first, each
// dim splitting its parent's range evenly by the rank's coordinate on it, so the leaves tile the
// part and each rank reads only its leaf. The rows then travel back up dim by dim, innermost
// first: on each dim's group every rank broadcasts its range in place, after which the group
// holds its parent's range. Storage reads fall by the replica count; each rank receives the rest
// over the network. One algorithm for both backends: MPI on host buffers, NCCL on device ones.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "mesh/shard_spec.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/shards.h"

namespace shardplan::planner {

// The mesh dims over which parameter `m` is replicated, outermost first: not pp, not a dim that
// shards it, and of size above 1.
std::vector<size_t> replica_dims(const MaterialLayout& layout, const MaterialParameter& m);

// The rows [begin, end) of `rows` that chunk `j` of `k` holds (even split, the first chunks one
// row shorter when it does not divide).
mesh::IndexRange row_chunk(mesh::IndexRange rows, int64_t k, int64_t j);

// Rows [begin, end) of `part` along its local dim 0 as a part of their own (a 0-dim part is one
// row), laid out at begin * (part.bytes / rows) bytes into the part's buffer.
LocalParameter part_rows(const LocalParameter& part, mesh::IndexRange rows);

// Fills every part of `shards` from `source` under Note [Each byte read once per replica group]:
// `comms` must be collective over the shards' memory (MPI for host buffers, NCCL for device
// ones). Collective over every dim group; `progress(done, total)` after each part (bytes).
// Returns the bytes this rank received from its replicas (each byte it did not read, once).
int64_t load_across_replicas(const MaterialLayout& layout, RankShards& shards,
                             ParameterSource& source, collectives::MeshCommunicators& comms,
                             const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace shardplan::planner
