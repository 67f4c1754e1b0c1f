// Redistribution plans: placements A -> B on a ShardSpec as an ordered list of one-mesh-dim steps
// (docs/semantics.md §3), in the order of PyTorch's default greedy planner (§3.3).
//   ShardSpec s = make_shard_spec({8, 8}, DType::kFloat32, DeviceMesh({2, 2}),
//                                 parse_placements("S0,S1"));
//   RedistributePlan p = plan_redistribute(s, parse_placements("S1,S0"));
//   p.steps: md1 S1->R all_gather, md0 S0->S1 all_to_all, md1 R->S0 local_chunk
//   p.num_collectives() == 2
// min_cost_redistribute.h finds the cheapest plan under a cost function instead.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <vector>

#include "collectives/redistribute_step.h"
#include "mesh/placement.h"
#include "mesh/shard_spec.h"

namespace shardplan::collectives {

struct RedistributePlan {
  mesh::ShardSpec source;
  mesh::ShardSpec target;  // source with the target placements (normalised)
  std::vector<RedistributeStep> steps;

  // Steps that run a collective (docs/semantics.md §3.6's CommDebugMode counts).
  int64_t num_collectives() const;
  friend bool operator==(const RedistributePlan&, const RedistributePlan&) = default;
};

std::ostream& operator<<(std::ostream& os, const RedistributePlan& p);
// {"steps":[...to_json(step)...],"collectives":N}
nlohmann::ordered_json to_json(const RedistributePlan& p);

// Checks `target` against `source` and returns the target spec: one placement per mesh dim (else
// shardplan::Error), Shard dims normalised and in range, and no refused transition on any mesh
// dim (refused_transition: Shard -> Partial, Partial(a) -> Partial(b), Replicate -> Partial).
mesh::ShardSpec checked_target(const mesh::ShardSpec& source,
                               std::span<const mesh::Placement> target);

// PyTorch's generate_greedy_transform_infos (docs/semantics.md §3.3). With a Shard in the source:
// pass 1 walks mesh dims inner -> outer and moves each to its target, or to Replicate when the
// target shards a tensor dim whose outer levels differ between now and the target (misaligned
// nesting) or when a strided shard is involved; pass 2 walks outer -> inner and finishes what is
// left (typically R -> S local chunks). Without a Shard in the source only pass 2 runs. Changes on
// size-1 mesh dims appear as noop steps; unchanged mesh dims as nothing. Throws what checked_target
// throws.
RedistributePlan plan_redistribute(const mesh::ShardSpec& source,
                                   std::span<const mesh::Placement> target);

}  // namespace shardplan::collectives
