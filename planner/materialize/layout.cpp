#include "planner/materialize/layout.h"

#include <algorithm>
#include <array>
#include <utility>

#include "base/checked.h"
#include "base/error.h"
#include "collectives/topology.h"
#include "planner/candidate/candidate_mesh.h"
#include "tensor/init.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

mesh::DeviceMesh plan_mesh(const PlanFile& f) {
  const std::vector<int64_t> shape = f.mesh_shape();
  const std::array<int64_t, 5> order = dim_order(f.order);
  return mesh::DeviceMesh::from_ranks(shape, collectives::rank_order_by_dims(shape, order),
                                      mesh_names());
}

kernels::FillSpec fill_spec(const tensor::ParameterInit& init, uint64_t seed, uint64_t key) {
  if (init.kind == tensor::ParameterInit::Kind::kNormal) {
    return kernels::FillSpec{kernels::FillKind::kNormal, init.a, init.b, seed, key};
  }
  if (init.kind == tensor::ParameterInit::Kind::kLogIndex) {
    return kernels::FillSpec{kernels::FillKind::kLogIndex, init.a, init.b, seed, key};
  }
  return kernels::FillSpec{kernels::FillKind::kConstant, init.a, 0.0, seed, key};
}

}  // namespace

MaterialLayout::MaterialLayout(PlanFile plan) : file_(std::move(plan)), mesh_(plan_mesh(file_)) {
  const tensor::ModelFamily& family = tensor::family_of(file_.model);
  SP_CHECK(!family.init_rules.empty(), "the ", family.model_type,
           " family has no init rules (ModelFamily::init_rules), so its parameters cannot be "
           "initialized as Hugging Face does");
  const tensor::ModulePtr model = tensor::build_model(file_.model);
  std::vector<tensor::NamedInit> inits = tensor::parameter_inits(*model, file_.model);
  SP_CHECK(inits.size() == file_.parameters.size(), "plan.json lists ", file_.parameters.size(),
           " parameters but the model has ", inits.size());
  const std::vector<int64_t>& mesh_shape = mesh_.shape();
  params_.reserve(inits.size());
  for (size_t i = 0; i < inits.size(); ++i) {
    const PlanParameter& p = file_.parameters[i];
    SP_CHECK(inits[i].name == p.name, "plan.json parameter ", i, " is '", p.name,
             "' but the model's is '", inits[i].name, "'");
    MaterialParameter m;
    m.plan = &p;
    m.init = inits[i].init;
    m.type = tensor::kernel_element_type(p.dtype);
    m.fill =
        fill_spec(m.init, static_cast<uint64_t>(file_.seed), kernels::tensor_key_from_name(p.name));
    if (auto why = kernels::check_fill_spec(m.type, m.fill)) {
      SP_FAIL("parameter '", p.name, "': ", *why);
    }
    std::vector<int64_t> sub_shape;
    std::vector<mesh::Placement> sub_placements;
    for (size_t d = 0; d < p.placements.size(); ++d) {
      SP_CHECK(!p.placements[d].is_partial(), "parameter '", p.name, "' is Partial on mesh dim ",
               mesh_names()[d], ", expected a parameter to be Shard or Replicate");
      if (!p.placements[d].is_any_shard()) continue;
      m.shard_dims.push_back(static_cast<int64_t>(d));
      sub_shape.push_back(mesh_shape[d]);
      sub_placements.push_back(p.placements[d]);
    }
    if (sub_shape.empty()) {  // a replicated parameter: a one-rank mesh of "nothing"
      sub_shape.push_back(1);
      sub_placements.push_back(mesh::Placement::replicate());
    }
    m.spec = mesh::make_shard_spec(p.shape, p.dtype, mesh::DeviceMesh(sub_shape),
                                   std::move(sub_placements));
    m.numel = shardplan::checked_product(p.shape).value();  // make_shard_spec checked it
    params_.push_back(std::move(m));
  }
}

LocalParameter local_part_of(const MaterialParameter& m, std::span<const int64_t> sub) {
  LocalParameter out;
  const int64_t zero = 0;
  const std::span<const int64_t> coord =
      m.shard_dims.empty() && sub.empty() ? std::span(&zero, 1) : sub;
  out.ranges = mesh::global_index_ranges(m.spec, coord);
  out.local_shape.resize(out.ranges.size());
  out.numel = 1;
  for (size_t d = 0; d < out.ranges.size(); ++d) {
    int64_t n = 0;
    for (const mesh::IndexRange& r : out.ranges[d]) n += r.size();
    out.local_shape[d] = n;
    out.numel *= n;  // at most the global numel, which make_shard_spec checked
  }
  out.bytes = out.numel * static_cast<int64_t>(kernels::element_size(m.type));
  return out;
}

LocalParameter MaterialLayout::local_part(size_t index, std::span<const int64_t> sub) const {
  LocalParameter out = local_part_of(params_[index], sub);
  out.index = index;
  return out;
}

std::vector<LocalParameter> MaterialLayout::parameters_at(std::span<const int64_t> coord) const {
  std::vector<LocalParameter> out;
  std::vector<int64_t> sub;
  for (size_t i = 0; i < params_.size(); ++i) {
    const MaterialParameter& m = params_[i];
    if (m.plan->stage != coord[kPpDim]) continue;
    sub.clear();
    for (const int64_t d : m.shard_dims) sub.push_back(coord[static_cast<size_t>(d)]);
    LocalParameter part = local_part(i, sub);
    part.shard_leader = true;
    for (size_t d = 0; d < coord.size(); ++d) {
      const bool shards = std::find(m.shard_dims.begin(), m.shard_dims.end(),
                                    static_cast<int64_t>(d)) != m.shard_dims.end();
      if (!shards && d != kPpDim && coord[d] != 0) part.shard_leader = false;
    }
    out.push_back(std::move(part));
  }
  return out;
}

std::vector<LocalParameter> MaterialLayout::rank_parameters(int64_t rank) const {
  const std::optional<mesh::MeshCoord> coord = mesh_.coordinate_of(rank);
  SP_CHECK(coord.has_value(), "rank ", rank, " is not in the plan's mesh of ", mesh_.size(),
           " ranks");
  return parameters_at(std::vector<int64_t>(coord->begin(), coord->end()));
}

void for_each_box(const MaterialParameter& p, const LocalParameter& part,
                  const std::function<void(const kernels::FillRegion&, int64_t)>& fn) {
  const size_t n = part.ranges.size();
  if (part.numel == 0) return;
  const std::vector<int64_t>& shape = p.plan->shape;
  std::vector<int64_t> global_strides(n, 1), local_strides(n, 1);
  for (size_t d = n; d-- > 1;) {
    global_strides[d - 1] = global_strides[d] * shape[d];
    local_strides[d - 1] = local_strides[d] * part.local_shape[d];
  }
  // Odometer over the range lists: pick[d] is the range used on dim d, start[d] its local start.
  std::vector<size_t> pick(n, 0);
  std::vector<int64_t> start(n, 0), sizes(n, 0);
  while (true) {
    int64_t global_offset = 0;
    int64_t local_offset = 0;
    for (size_t d = 0; d < n; ++d) {
      const mesh::IndexRange& r = part.ranges[d][pick[d]];
      sizes[d] = r.size();
      global_offset += r.begin * global_strides[d];
      local_offset += start[d] * local_strides[d];
    }
    const kernels::FillRegion region{static_cast<int>(n), sizes.data(), local_strides.data(),
                                     global_strides.data(), global_offset};
    fn(region, local_offset);
    size_t d = n;
    while (d > 0) {
      --d;
      start[d] += part.ranges[d][pick[d]].size();
      if (++pick[d] < part.ranges[d].size()) break;
      pick[d] = 0;
      start[d] = 0;
      if (d == 0) return;
    }
    if (n == 0) return;
  }
}

}  // namespace shardplan::planner
