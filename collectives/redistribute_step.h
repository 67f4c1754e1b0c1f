// One step of a redistribution: a single mesh dim changes placement (PyTorch's "transform info",
// docs/semantics.md §3.1), with the collective it needs and the exact per-rank buffer.
//   ShardSpec s = make_shard_spec({5, 5}, DType::kFloat32, DeviceMesh({4}), {Shard{0}});
//   RedistributeStep st = make_step(s, 0, Shard{1});
//   st.op == StepOp::kAllToAll;  st.bytes_per_rank == 2 * 8 * 4   // (2, 8) padded, see below
// The rules are small named units in redistribute_step.cpp (one per op), each with its
// precondition (which transitions it serves) and its padded buffer size.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dim_vector.h"
#include "collectives/collective_call.h"
#include "mesh/placement.h"
#include "mesh/shard_spec.h"

namespace shardplan::collectives {

// What one mesh dim's change costs (docs/semantics.md §3.1):
//   S/SS -> R        all_gather        P -> R        all_reduce
//   R -> S/SS        local_chunk (0)   P -> S/SS     reduce_scatter
//   S(i) -> S(j)     all_to_all        size-1 dim    noop (0)
enum class StepOp { kNoop, kLocalChunk, kAllGather, kReduceScatter, kAllReduce, kAllToAll };
std::string_view to_string(StepOp op);
// The names to_string gives; throws shardplan::Error listing them otherwise.
StepOp parse_step_op(std::string_view s);
// The collective an op runs; std::nullopt for noop and local_chunk.
std::optional<CollectiveKind> collective_kind(StepOp op);

struct RedistributeStep {
  int64_t mesh_dim = 0;
  mesh::Placement src;
  mesh::Placement dst;
  StepOp op = StepOp::kNoop;
  int64_t group_size = 1;  // ranks along mesh_dim
  // The per-rank buffer of the collective as nccl-tests counts it (collective_call.h's S), with
  // the padding of Note [Uneven shard padding]: all_gather's output, reduce_scatter's input,
  // all_reduce's buffer, all_to_all's send buffer. local_chunk: the bytes the rank keeps (a clone);
  // noop: 0. Shapes differ between groups when shards are uneven: this is the largest group's
  // (with plain shards the group of mesh coordinate 0; Note [Uneven shard padding]).
  int64_t bytes_per_rank = 0;
  // The local tensor of the rank at mesh coordinate 0 before and after the step.
  shardplan::DimVector local_shape_before;
  shardplan::DimVector local_shape_after;

  bool communicates() const { return collective_kind(op).has_value(); }
  friend bool operator==(const RedistributeStep&, const RedistributeStep&) = default;
};

std::ostream& operator<<(std::ostream& os, const RedistributeStep& s);
// {"mesh_dim":0,"op":"all_gather","from":"S0","to":"R","group_size":2,"bytes_per_rank":...,
//  "local_shape_before":[...],"local_shape_after":[...]}
nlohmann::ordered_json to_json(const RedistributeStep& s);
// Reads what to_json writes, and a step of `shardplan redistribute --json` (its "mesh_dim_name"
// and "time_s" are checked, then dropped); other keys are refused. `j` is the value at `path` (""
// for the document) of `origin`; bad input is a shardplan::Error naming the field ("redistribute
// step: field 'from': placement 'X' is not valid: ...").
RedistributeStep redistribute_step_from_json(const nlohmann::json& j,
                                             std::string_view origin = "redistribute step",
                                             std::string_view path = "");

// Why a placement change is refused (docs/semantics.md §3.1 and DTensor.redistribute's user rule),
// or std::nullopt when it is allowed. Shard -> Partial, Partial(a) -> Partial(b) and
// Replicate -> Partial are refused: a target Partial is only accepted where the source already is
// that Partial.
std::optional<std::string> refused_transition(const mesh::Placement& src,
                                              const mesh::Placement& dst);

// The step that changes mesh dim `mesh_dim` of `current` to `dst` (dst already normalised, as
// make_shard_spec does). Throws shardplan::Error when the change is refused (refused_transition)
// or cannot be one step: a shard that is not the innermost level of its tensor dim (a later mesh
// dim of size > 1 also shards that dim, so this level's data are split further), or a strided
// shard changed to another shard without going through Replicate.
RedistributeStep make_step(const mesh::ShardSpec& current, int64_t mesh_dim,
                           const mesh::Placement& dst);

namespace detail {
// What step_on does with a change that cannot be one step: throw shardplan::Error saying why, or
// return std::nullopt without building a message (the min-cost search asks about every edge).
enum class OnRefusal { kThrow, kSkip };
// make_step on raw parts, for the planners' inner loops (no ShardSpec copies). `placements` is the
// current state.
std::optional<RedistributeStep> step_on(std::span<const int64_t> shape, int64_t itemsize,
                                        std::span<const int64_t> mesh_shape,
                                        std::span<const mesh::Placement> placements,
                                        int64_t mesh_dim, const mesh::Placement& dst,
                                        OnRefusal on_refusal);
}  // namespace detail

}  // namespace shardplan::collectives
