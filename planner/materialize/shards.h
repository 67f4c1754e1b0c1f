// One rank's shards in host memory: allocated without touching them (PyTorch's to_empty) and
// filled by the kernels/ fills keyed on the global element index, so that every shard equals
// that slice of the unsharded model (docs/launching.md "What materialize does").
//   RankShards s = allocate_shards(layout, rank);   // uninitialized
//   init_shards(layout, s);                         // the family's _init_weights values
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/shard_memory.h"

namespace shardplan::planner {

// One rank's parts and their buffers in `memory` (which must outlive it); the buffers are
// released with it.
struct RankShards {
  int64_t rank = 0;
  std::vector<int64_t> coord;  // on the plan's mesh
  std::vector<LocalParameter> parts;
  std::vector<std::byte*> data;  // one buffer per part, in `memory`
  ShardMemory* memory = nullptr;
  int64_t bytes = 0;

  RankShards() = default;
  RankShards(RankShards&& other) noexcept;
  RankShards& operator=(RankShards&& other) noexcept;
  RankShards(const RankShards&) = delete;
  RankShards& operator=(const RankShards&) = delete;
  ~RankShards();
};

// Allocates rank `rank`'s parts in `memory`, uninitialized. Throws RuntimeFailure (naming the
// rank, the parameter and the bytes) when memory runs out.
RankShards allocate_shards(const MaterialLayout& layout, int64_t rank, ShardMemory& memory);

// Fills every part from `source` (the init rules, or a checkpoint); `progress(done, total)` after
// each part (bytes).
void init_shards(const MaterialLayout& layout, RankShards& shards, ParameterSource& source,
                 const std::function<void(int64_t, int64_t)>& progress = {});

// The checksum of parameter `index` unsharded, taken from `source` in `memory` (on the GPU when
// the shards are there: it fills computed values itself) in bounded chunks, never more than
// `chunk_elements` at once.
uint64_t reference_checksum(const MaterialLayout& layout, size_t index, ParameterSource& source,
                            ShardMemory& memory, int64_t chunk_elements = int64_t{1} << 22);

// Global linear index of local element `local` (row-major over part.local_shape).
int64_t global_index_of(const MaterialParameter& p, const LocalParameter& part, int64_t local);

}  // namespace shardplan::planner
