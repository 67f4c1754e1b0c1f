// Simulated per-rank execution for the sharding-propagation tests: small real arrays (row-major
// std::vector<double>), cut into each rank's local piece with the ShardSpec index ranges, an op run
// on every rank's pieces, and the per-rank results put back together (Shard: placed at the rank's
// global indices; Partial: reduced over the partial mesh dims; Replicate: replicas must agree).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mesh/op_strategy.h"
#include "mesh/shard_spec.h"

namespace shardplan::mesh::sim {

using shardplan::DimVector;

struct Array {
  DimVector shape;
  std::vector<double> v;
};

inline int64_t numel(const DimVector& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

inline DimVector strides_of(const DimVector& s) {
  DimVector st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d) {
    st[static_cast<size_t>(d)] = st[static_cast<size_t>(d) + 1] * s[static_cast<size_t>(d) + 1];
  }
  return st;
}

// Calls f(index) for every index of `shape` in row-major order.
inline void for_each_index(const DimVector& shape, const std::function<void(const DimVector&)>& f) {
  if (numel(shape) == 0) return;
  DimVector idx(shape.size(), 0);
  while (true) {
    f(idx);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

inline int64_t flat(const DimVector& shape, const DimVector& idx) {
  const DimVector st = strides_of(shape);
  int64_t f = 0;
  for (size_t d = 0; d < idx.size(); ++d) f += idx[d] * st[d];
  return f;
}

// Deterministic, distinct, non-trivial values (small integers plus a fraction).
inline Array iota(const DimVector& shape, double seed = 1) {
  Array a{shape, {}};
  for (int64_t i = 0; i < numel(shape); ++i) {
    a.v.push_back(std::fmod(seed * 7.0 + static_cast<double>(i) * 3.7, 11.0) - 5.0 + 0.25 * seed);
  }
  return a;
}

// The elements rank `coord` holds of `global` under `spec`, as a row-major local array.
// Partial(sum) mesh dims get an uneven split that sums back to the global value: weight (c+1)/T
// plus a term that cancels over the group, so per-rank values are not proportional to the global
// ones.
inline Array local_piece(const Array& global, const ShardSpec& spec, const MeshCoord& coord) {
  const auto ranges = global_index_ranges(spec, coord);
  const LocalShard ls = local_shape_and_offset(spec, coord);
  std::vector<std::vector<int64_t>> lists(ranges.size());
  for (size_t d = 0; d < ranges.size(); ++d) {
    for (const IndexRange& r : ranges[d]) {
      for (int64_t i = r.begin; i < r.end; ++i) lists[d].push_back(i);
    }
  }
  double weight = 1;
  std::vector<std::pair<int64_t, int64_t>> partial_dims;  // (coord, size) per Partial mesh dim
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    if (!spec.placements[md].is_partial()) continue;
    const bool avg = spec.placements[md].is_partial(ReduceOp::kAvg);
    EXPECT_TRUE(avg || spec.placements[md].is_partial(ReduceOp::kSum))
        << "simulated inputs: Partial(sum) or Partial(avg)";
    const int64_t n = spec.mesh.size(static_cast<int64_t>(md));
    // avg: the ranks' values average (sum / n) to the global value.
    weight *= static_cast<double>(coord[md] + 1) / static_cast<double>(n * (n + 1) / 2) *
              (avg ? static_cast<double>(n) : 1.0);
    partial_dims.push_back({coord[md], n});
  }
  int64_t total_partial = 1;
  for (auto [c, n] : partial_dims) total_partial *= n;
  Array out{ls.shape, {}};
  for_each_index(ls.shape, [&](const DimVector& li) {
    DimVector gi(li.size());
    for (size_t d = 0; d < li.size(); ++d) gi[d] = lists[d][static_cast<size_t>(li[d])];
    const int64_t g = flat(global.shape, gi);
    double x = global.v[static_cast<size_t>(g)] * weight;
    for (auto [c, n] : partial_dims) {  // sums to zero over c, for every other coordinate
      x += (static_cast<double>(c) - static_cast<double>(n - 1) / 2) *
           (1.0 + 0.1 * static_cast<double>(g)) * static_cast<double>(n) /
           static_cast<double>(total_partial);
    }
    out.v.push_back(x);
  });
  return out;
}

// Puts per-rank outputs (indexed by flat mesh index) back together under `spec` and checks the
// replicas agree. Partial(sum/avg/max/min) dims are reduced.
inline Array assemble(const std::vector<Array>& locals, const ShardSpec& spec) {
  const DeviceMesh& mesh = spec.mesh;
  std::vector<Array> per_replica;  // one assembled result per coordinate of the Replicate dims
  std::map<std::vector<int64_t>, size_t> replica_of;
  std::vector<std::vector<bool>> seen;
  for (int64_t f = 0; f < mesh.size(); ++f) {
    const MeshCoord coord = *mesh.coordinate_of(mesh.rank_at_flat_index(f));
    std::vector<int64_t> key;
    // Sum and avg dims compose (avg = sum / n per dim); max and min only with their own kind.
    double scale = 1;
    ReduceOp op = ReduceOp::kSum;
    for (size_t md = 0; md < spec.placements.size(); ++md) {
      if (spec.placements[md].is_replicate()) key.push_back(coord[md]);
      if (!spec.placements[md].is_partial()) continue;
      const ReduceOp r = spec.placements[md].reduce_op();
      if (r == ReduceOp::kAvg) scale /= static_cast<double>(mesh.size(static_cast<int64_t>(md)));
      if (r == ReduceOp::kMax || r == ReduceOp::kMin) op = r;
    }
    auto [it, fresh] = replica_of.emplace(key, per_replica.size());
    if (fresh) {
      const double init = op == ReduceOp::kMax ? -1e300 : op == ReduceOp::kMin ? 1e300 : 0.0;
      per_replica.push_back(
          {spec.shape, std::vector<double>(static_cast<size_t>(numel(spec.shape)), init)});
    }
    Array& acc = per_replica[it->second];
    const auto ranges = global_index_ranges(spec, coord);
    std::vector<std::vector<int64_t>> lists(ranges.size());
    for (size_t d = 0; d < ranges.size(); ++d) {
      for (const IndexRange& r : ranges[d]) {
        for (int64_t i = r.begin; i < r.end; ++i) lists[d].push_back(i);
      }
    }
    const Array& loc = locals[static_cast<size_t>(f)];
    EXPECT_EQ(loc.shape, local_shape(spec, coord)) << "rank at flat index " << f;
    int64_t k = 0;
    for_each_index(loc.shape, [&](const DimVector& li) {
      DimVector gi(li.size());
      for (size_t d = 0; d < li.size(); ++d) gi[d] = lists[d][static_cast<size_t>(li[d])];
      double& dst = acc.v[static_cast<size_t>(flat(spec.shape, gi))];
      const double x = loc.v[static_cast<size_t>(k++)];
      switch (op) {
        case ReduceOp::kMax:
          dst = std::max(dst, x);
          break;
        case ReduceOp::kMin:
          dst = std::min(dst, x);
          break;
        default:
          dst += x * scale;
      }
    });
  }
  for (size_t r = 1; r < per_replica.size(); ++r) {
    for (size_t i = 0; i < per_replica[0].v.size(); ++i) {
      EXPECT_NEAR(per_replica[r].v[i], per_replica[0].v[i], 1e-9) << "replicas differ at " << i;
    }
  }
  return per_replica.at(0);
}

// Runs `op` on every rank's local pieces of `globals` laid out as strategy `s` requires and checks
// the reassembled output 0 against `expected`. `op` also gets the input specs and the coordinate
// (embedding's masked lookup needs the rank's row range).
using LocalOp = std::function<Array(const std::vector<Array>& locals,
                                    const std::vector<ShardSpec>& specs, const MeshCoord& coord)>;

inline void check_strategy(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s,
                           const std::vector<Array>& globals, const Array& expected,
                           const LocalOp& op) {
  SCOPED_TRACE(::testing::Message() << call << " strategy " << s);
  std::vector<ShardSpec> specs;
  for (size_t i = 0; i < globals.size(); ++i) {
    specs.push_back(make_shard_spec(globals[i].shape, tensor::DType::kFloat64, mesh, s.inputs[i]));
  }
  const ShardSpec out_spec =
      make_shard_spec(expected.shape, tensor::DType::kFloat64, mesh, s.outputs[0]);
  std::vector<Array> outs;
  for (int64_t f = 0; f < mesh.size(); ++f) {
    const MeshCoord coord = *mesh.coordinate_of(mesh.rank_at_flat_index(f));
    std::vector<Array> locals;
    for (size_t i = 0; i < globals.size(); ++i)
      locals.push_back(local_piece(globals[i], specs[i], coord));
    outs.push_back(op(locals, specs, coord));
  }
  const Array got = assemble(outs, out_spec);
  ASSERT_EQ(got.shape, expected.shape);
  for (size_t i = 0; i < got.v.size(); ++i) {
    EXPECT_NEAR(got.v[i], expected.v[i], 1e-9) << "element " << i;
  }
}

// out[letters of `out`] = sum over the other letters of a[lhs] * b[rhs] (a tiny einsum).
inline Array einsum(const std::string& lhs, const std::string& rhs, const std::string& out,
                    const Array& a, const Array& b) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < lhs.size(); ++i) size[lhs[i]] = a.shape[i];
  for (size_t i = 0; i < rhs.size(); ++i) size[rhs[i]] = b.shape[i];
  std::string letters;
  DimVector all;
  for (auto [c, n] : size) letters += c, all.push_back(n);
  DimVector out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  Array r{out_shape, std::vector<double>(static_cast<size_t>(numel(out_shape)), 0.0)};
  auto pick = [&](const std::string& sub, const DimVector& idx) {
    DimVector s;
    for (char c : sub) s.push_back(idx[letters.find(c)]);
    return s;
  };
  for_each_index(all, [&](const DimVector& idx) {
    r.v[static_cast<size_t>(flat(out_shape, pick(out, idx)))] +=
        a.v[static_cast<size_t>(flat(a.shape, pick(lhs, idx)))] *
        b.v[static_cast<size_t>(flat(b.shape, pick(rhs, idx)))];
  });
  return r;
}

// Broadcasting elementwise f(a, b).
inline Array binary(const Array& a, const Array& b,
                    const std::function<double(double, double)>& f) {
  const size_t nd = std::max(a.shape.size(), b.shape.size());
  DimVector shape(nd, 1);
  auto fill = [&](const DimVector& s) {
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& o = shape[nd - s.size() + d];
      o = std::max(o, s[d]);
      if (s[d] == 0) o = 0;
    }
  };
  fill(a.shape);
  fill(b.shape);
  Array r{shape, {}};
  auto src = [&](const Array& x, const DimVector& idx) {
    DimVector xi(x.shape.size());
    for (size_t d = 0; d < xi.size(); ++d) {
      xi[d] = x.shape[d] == 1 ? 0 : idx[nd - x.shape.size() + d];
    }
    return x.v[static_cast<size_t>(flat(x.shape, xi))];
  };
  for_each_index(shape, [&](const DimVector& idx) { r.v.push_back(f(src(a, idx), src(b, idx))); });
  return r;
}

}  // namespace shardplan::mesh::sim
