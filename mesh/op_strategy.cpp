#include "mesh/op_strategy.h"

#include <algorithm>

#include "base/error.h"
#include "mesh/shard_spec.h"

namespace shardplan::mesh {

namespace detail {

int64_t wrap_dim(const OpCall& call, int64_t dim, int64_t ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 / -1, as PyTorch
  SP_CHECK(dim >= -n && dim < n, "op '", call.op, "': dim ", dim, " out of range for a ", ndim,
           "-d tensor (expected ", -n, "..", n - 1, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> reduced_dims(const OpCall& call) {
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  std::vector<int64_t> r;
  if (call.dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) r.push_back(d);
    return r;
  }
  for (int64_t d : call.dims) r.push_back(wrap_dim(call, d, nd));
  std::sort(r.begin(), r.end());
  SP_CHECK(std::adjacent_find(r.begin(), r.end()) == r.end(), "op '", call.op,
           "': a dim appears twice in the reduced dims");
  return r;
}

void check_arity(const OpCall& call, size_t min_inputs, size_t max_inputs) {
  SP_CHECK(call.inputs.size() >= min_inputs && call.inputs.size() <= max_inputs, "op '", call.op,
           "': expected ", min_inputs, (min_inputs == max_inputs ? "" : " to "),
           (min_inputs == max_inputs ? std::string() : std::to_string(max_inputs)),
           " tensor inputs, got ", call.inputs.size());
}

}  // namespace detail

namespace {

[[noreturn]] void no_strategy(const OpCall& call) {
  SP_FAIL("op '", call.op,
          "' has no sharding strategy (supported: mm, bmm, matmul, linear, addmm, ",
          "baddbmm, pointwise ops, sum/mean/amax/amin, view/reshape/transpose/permute/flatten/",
          "unsqueeze/squeeze, embedding, softmax, layer_norm, rms_norm, ",
          "scaled_dot_product_attention, cat, split, stack, chunk, unbind, unflatten, expand, ",
          "select, narrow, slice, argmax, var, cross_entropy)");
}

// One tensor's placements over the mesh are shardable (§5.1.7): a tensor dim sharded by several
// mesh dims needs at least the product of their sizes elements.
bool shardable(const shardplan::DimVector& shape, const std::vector<Placement>& ps,
               const DeviceMesh& mesh) {
  shardplan::DimVector need(shape.size(), 1);
  for (size_t md = 0; md < ps.size(); ++md) {
    if (!ps[md].is_any_shard()) continue;
    const int64_t d = ps[md].shard_dim();
    if (d < 0 || d >= static_cast<int64_t>(shape.size())) return false;
    need[static_cast<size_t>(d)] *= mesh.size(static_cast<int64_t>(md)) * ps[md].split_factor();
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (need[d] > 1 && need[d] > shape[d]) return false;
  }
  return true;
}

// Partial(avg) averages per-rank means: right only when every rank reduced as many elements.
bool avg_partials_even(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s) {
  for (const auto& out : s.outputs) {
    for (const Placement& p : out) {
      if (!p.is_partial(ReduceOp::kAvg)) continue;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const ShardSpec spec =
            make_shard_spec(call.inputs[i], tensor::DType::kFloat32, mesh, s.inputs[i]);
        if (!is_evenly_shardable(spec)) return false;
      }
      return true;
    }
  }
  return true;
}

}  // namespace

std::vector<shardplan::DimVector> output_shapes(const OpCall& call) {
  using Fn = std::optional<std::vector<shardplan::DimVector>> (*)(const OpCall&);
  for (Fn fn :
       {&detail::matmul_output_shapes, &detail::pointwise_output_shapes,
        &detail::reduction_output_shapes, &detail::nn_output_shapes, &detail::join_output_shapes,
        &detail::view_output_shapes, &detail::slice_output_shapes, &detail::stack_output_shapes,
        &detail::stats_output_shapes}) {
    if (auto r = fn(call)) return *r;
  }
  no_strategy(call);
}

std::vector<DimStrategy> single_dim_strategies(const OpCall& call, int64_t mesh_dim_size) {
  SP_CHECK(mesh_dim_size >= 1, "op '", call.op, "': mesh dim size ", mesh_dim_size,
           " must be >= 1");
  output_shapes(call);  // validates the shapes before any rule reads them
  using Fn = std::optional<std::vector<DimStrategy>> (*)(const OpCall&);
  for (Fn fn : {&detail::matmul_strategies, &detail::pointwise_strategies,
                &detail::reduction_strategies, &detail::nn_strategies, &detail::join_strategies,
                &detail::slice_strategies, &detail::stack_strategies, &detail::stats_strategies}) {
    if (auto r = fn(call)) return *r;
  }
  if (auto r = detail::view_strategies(call, mesh_dim_size)) return *r;
  no_strategy(call);
}

std::vector<OpStrategy> candidate_strategies(const OpCall& call, const DeviceMesh& mesh) {
  const int64_t nd = mesh.ndim();
  std::vector<std::vector<DimStrategy>> per_dim;
  per_dim.reserve(static_cast<size_t>(nd));
  for (int64_t md = 0; md < nd; ++md) per_dim.push_back(single_dim_strategies(call, mesh.size(md)));

  std::vector<OpStrategy> out;
  std::vector<size_t> idx(static_cast<size_t>(nd), 0);  // odometer over the per-dim lists
  while (true) {
    OpStrategy s;
    const DimStrategy& first = per_dim.empty() ? DimStrategy{} : per_dim[0][0];
    s.outputs.assign(first.outputs.size(), {});
    s.inputs.assign(call.inputs.size(), {});
    for (int64_t md = 0; md < nd; ++md) {
      const DimStrategy& d = per_dim[static_cast<size_t>(md)][idx[static_cast<size_t>(md)]];
      for (size_t o = 0; o < d.outputs.size(); ++o) s.outputs[o].push_back(d.outputs[o]);
      for (size_t i = 0; i < d.inputs.size(); ++i) s.inputs[i].push_back(d.inputs[i]);
    }
    bool ok = true;
    for (size_t i = 0; i < s.inputs.size() && ok; ++i) {
      ok = shardable(call.inputs[i], s.inputs[i], mesh);
    }
    if (ok) ok = detail::view_candidate_ok(call, mesh, s) && detail::nn_candidate_ok(call, mesh, s);
    if (ok) ok = avg_partials_even(call, mesh, s);
    if (ok) out.push_back(std::move(s));
    // Advance the odometer, last mesh dim fastest.
    int64_t md = nd - 1;
    for (; md >= 0; --md) {
      auto& k = idx[static_cast<size_t>(md)];
      if (++k < per_dim[static_cast<size_t>(md)].size()) break;
      k = 0;
    }
    if (md < 0) break;
  }
  return out;
}

bool is_strict_view(const std::string& op) {
  // unflatten is a view() of the split shape in PyTorch, so it is strict too.
  return op == "view" || op == "_unsafe_view" || op == "unflatten";
}

namespace {
void print_list(std::ostream& os, const std::vector<Placement>& ps) {
  os << '[' << to_string(ps) << ']';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const DimStrategy& s) {
  os << "out ";
  print_list(os, s.outputs);
  os << " <- in ";
  print_list(os, s.inputs);
  return os;
}

std::ostream& operator<<(std::ostream& os, const OpStrategy& s) {
  os << "out";
  for (const auto& o : s.outputs) {
    os << ' ';
    print_list(os, o);
  }
  os << " <- in";
  for (const auto& i : s.inputs) {
    os << ' ';
    print_list(os, i);
  }
  return os;
}

std::ostream& operator<<(std::ostream& os, const OpCall& call) {
  os << call.op << '(';
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (i) os << ", ";
    os << call.inputs[i];
  }
  return os << ')';
}

}  // namespace shardplan::mesh
