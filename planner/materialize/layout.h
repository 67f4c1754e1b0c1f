// What each rank of a plan holds and how it fills it, computed without allocating anything:
// the layer under `materialize` (docs/launching.md "What materialize does"), used alike by the
// ranks of a real run and by `--dry-run` on virtual ranks.
//   MaterialLayout l(read_plan_file("plan.json"));
//   for (const LocalParameter& p : l.rank_parameters(3)) ...   // rank 3's shards
//
// Note [Shards depend on the sharding dims only]
// A parameter's local shard is decided by the mesh dims whose placement shards it (Shard or
// StridedShard); Replicate dims leave the local tensor as it is (DTensor's
// compute_local_shape_and_global_offset skips them). So each parameter keeps a ShardSpec over a
// small mesh of those dims alone (at most the product of their sizes, never the world), and any
// rank's shard is that spec at the rank's coordinates on them. A 16,384-rank plan then costs
// per parameter what its TP x FSDP degree costs, not what the world does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/element_type.h"
#include "kernels/init_fill.h"
#include "kernels/region.h"
#include "mesh/device_mesh.h"
#include "mesh/shard_spec.h"
#include "planner/plan/plan_file.h"
#include "tensor/models/init_rules.h"

namespace shardplan::planner {

// One parameter of the plan and what every rank needs to fill its part of it.
struct MaterialParameter {
  const PlanParameter* plan = nullptr;  // in MaterialLayout::file()
  tensor::ParameterInit init;
  kernels::ElementType type = kernels::ElementType::kFloat32;
  kernels::FillSpec fill{};         // seed = the plan's, tensor_key = FNV-1a of the name
  std::vector<int64_t> shard_dims;  // mesh dims that shard it (Note [Shards depend ...])
  mesh::ShardSpec spec;  // over a mesh of shard_dims alone
  int64_t numel = 0;
};

// A rank's part of one parameter: the Cartesian product of `ranges` (one list per tensor dim, in
// local order), stored contiguously as `local_shape`.
struct LocalParameter {
  size_t index = 0;  // into MaterialLayout::parameters()
  shardplan::DimVector local_shape;
  std::vector<std::vector<mesh::IndexRange>> ranges;
  int64_t numel = 0;
  int64_t bytes = 0;
  // The rank with coordinate 0 on every mesh dim that does not shard the parameter (pp excepted:
  // the stage holds it): exactly one rank per distinct shard, the one whose data count once in
  // sums over shards.
  bool shard_leader = false;
};

// The part of `m` at the coordinate `sub` of its spec's mesh (the mesh of m.shard_dims).
LocalParameter local_part_of(const MaterialParameter& m, std::span<const int64_t> sub);

class MaterialLayout {
 public:
  // Resolves every parameter's init rule and fill spec; throws shardplan::Error for a model whose
  // family has no init rules, or a fill spec the kernels refuse.
  explicit MaterialLayout(PlanFile plan);
  MaterialLayout(const MaterialLayout&) = delete;
  MaterialLayout& operator=(const MaterialLayout&) = delete;

  const PlanFile& file() const { return file_; }
  // [pp, dp/ep, ep, cp, tp], launch ranks laid out by the plan's dim order (the mapping the
  // planner priced: collectives::rank_order_by_dims).
  const mesh::DeviceMesh& mesh() const { return mesh_; }
  int64_t world_size() const { return mesh_.size(); }
  const std::vector<MaterialParameter>& parameters() const { return params_; }

  // The parameters on the stage of `coord` (a mesh coordinate) and the rank's part of each.
  std::vector<LocalParameter> parameters_at(std::span<const int64_t> coord) const;
  // The same for a launch rank (throws shardplan::Error if the mesh does not hold it).
  std::vector<LocalParameter> rank_parameters(int64_t rank) const;

  // The part of parameter `index` at the coordinate `sub` of its shard_dims.
  LocalParameter local_part(size_t index, std::span<const int64_t> sub) const;

 private:
  PlanFile file_;
  mesh::DeviceMesh mesh_;
  std::vector<MaterialParameter> params_;
};

// Calls `fn(region, local_offset)` for each box of `part`: the FillRegion of the box within the
// global tensor (local contiguous strides) and the element offset of its first element in the
// local buffer. Boxes are disjoint and together hold every local element once.
void for_each_box(const MaterialParameter& p, const LocalParameter& part,
                  const std::function<void(const kernels::FillRegion&, int64_t)>& fn);

}  // namespace shardplan::planner
