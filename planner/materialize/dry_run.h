// `materialize --dry-run`: the whole plan checked on virtual ranks, nothing allocated and no
// launcher needed (docs/launching.md "Dry run"). For every parameter its shards must tile the
// tensor exactly once; every rank's bytes must fit its device; the communicator groups must
// partition the world; the init streams must be distinct and valid. A 16,384-rank plan takes
// well under a second (Note [Shards depend on the sharding dims only]).
//   DryRunReport r = dry_run(layout, 80 * kGiB);   // throws shardplan::Error on a bad plan
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/materialize/layout.h"

namespace shardplan::planner {

// Ranks that allocate the same bytes on the same stage.
struct RankClass {
  int64_t stage = 0;
  int64_t bytes = 0;
  int64_t parameters = 0;            // tensors the rank holds
  int64_t count = 0;                 // ranks in the class
  std::vector<int64_t> first_ranks;  // launch ranks, at most 3
};

struct MeshGroups {
  std::string name;  // "tp"
  int64_t size = 0;  // ranks per group
  int64_t groups = 0;
};

struct DryRunReport {
  int64_t ranks = 0;
  int64_t parameters = 0;
  int64_t elements = 0;            // of the unsharded model
  int64_t shards_checked = 0;      // distinct (parameter, shard) pairs whose ranges were checked
  std::vector<RankClass> classes;  // by stage, then bytes descending
  std::vector<MeshGroups> groups;  // per mesh dim
  int64_t max_bytes = 0;
  int64_t device_memory_bytes = 0;  // 0: unknown
};

// `device_memory_bytes` 0 skips the fit check. Throws shardplan::Error naming the parameter, the
// rank or the dim at the first inconsistency.
DryRunReport dry_run(const MaterialLayout& layout, int64_t device_memory_bytes);

}  // namespace shardplan::planner
