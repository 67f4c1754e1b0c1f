// `materialize --verify`: proof, through collectives, that the sharded model is the unsharded one
// (docs/launching.md "Verification"):
//   replicas    the checksum of every shard is the same on every rank of each mesh dim that does
//               not shard it (min == max over the dim's group);
//   coverage    the checksums of one copy of each distinct shard add up to the checksum of the
//               whole tensor filled at once, and their element counts to its numel;
//   samples     elements of every shard recomputed one by one by the source's reference
//               (ParameterSource::element_bits: the scalar fill, or a read of that element alone),
//               not by the bulk path under test;
//   gather      for models of at most `gather_limit_bytes`, every tensor gathered whole on rank 0
//               (each distinct shard sent once) and compared byte for byte with the unsharded
//               source there.
// The reference is the source the shards were made from: the init rules or the checkpoint.
//   VerifyReport v = verify_shards(layout, shards, source, comms, &data_comms);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "planner/materialize/shards.h"

namespace shardplan::planner {

inline constexpr int64_t kSamplesPerShard = 16;
inline constexpr int64_t kDefaultGatherLimitBytes = int64_t{1} << 30;

// Where verification's checksum reductions and gathers ran (verify_shards' `data_comms`).
enum class VerifyWire {
  kLocal,        // one rank: nothing moved
  kShardMemory,  // the data communicators, on buffers in the shards' memory (NCCL on GPUs)
  kHostCopies,   // the host communicators, over host copies of the shards
};

struct VerifyReport {
  VerifyWire wire = VerifyWire::kLocal;
  int64_t replica_checks = 0;  // (shard, mesh dim) pairs compared over a group
  int64_t covered = 0;         // parameters whose shards sum to the whole
  int64_t samples = 0;         // elements recomputed on this rank
  int64_t gathered = 0;        // tensors compared whole (0 when the model is over the limit)
  int64_t failures = 0;        // over all ranks
  // Per parameter, the checksum of the whole tensor as its shards add up (kernels/checksum.h):
  // a fingerprint of the materialized model that any world size must reproduce.
  std::vector<uint64_t> whole_checksums;
  std::vector<std::string> messages;  // this rank's failures (the first few)
};

// Collective over comms.world and every comms.dims[d]; every rank gets the same `failures`.
// `data_comms`, when given, are communicators over the shards' memory (NCCL where the shards are
// on GPUs, MPI where they are on the host, as load_across_replicas takes): the collectives that
// carry shard bytes or checksums run on them, on buffers in that memory, and rank 0 assembles and
// compares the gathered tensors there. Without them, those collectives run on `comms` over host
// copies (one rank needs none: nothing moves).
VerifyReport verify_shards(const MaterialLayout& layout, const RankShards& shards,
                           ParameterSource& source, collectives::MeshCommunicators& comms,
                           collectives::MeshCommunicators* data_comms = nullptr,
                           int64_t gather_limit_bytes = kDefaultGatherLimitBytes);

}  // namespace shardplan::planner
