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

#include "planner/materialize_layout.h"
#include "planner/parameter_source.h"

namespace shardplan::planner {

struct RankShards {
  int64_t rank = 0;
  std::vector<int64_t> coord;  // on the plan's mesh
  std::vector<LocalParameter> parts;
  std::vector<std::unique_ptr<std::byte[]>> data;  // one host buffer per part
  int64_t bytes = 0;
};

// Allocates rank `rank`'s parts, uninitialized. Throws RuntimeFailure when memory runs out.
RankShards allocate_shards(const MaterialLayout& layout, int64_t rank);

// Fills every part from `source` (the init rules, or a checkpoint); `progress(done, total)` after
// each part (bytes).
void init_shards(const MaterialLayout& layout, RankShards& shards, ParameterSource& source,
                 const std::function<void(int64_t, int64_t)>& progress = {});

// Order-independent checksum of a part (kernels/checksum.h): parts of disjoint shards add up, mod
// 2^64, to the checksum of the whole tensor.
uint64_t part_checksum(const MaterialLayout& layout, const LocalParameter& part,
                       const std::byte* data);

// The checksum of parameter `index` unsharded, taken from `source` in bounded chunks (never more
// than `chunk_elements` at once).
uint64_t reference_checksum(const MaterialLayout& layout, size_t index, ParameterSource& source,
                            int64_t chunk_elements = int64_t{1} << 22);

// Global linear index of local element `local` (row-major over part.local_shape).
int64_t global_index_of(const MaterialParameter& p, const LocalParameter& part, int64_t local);

}  // namespace shardplan::planner
