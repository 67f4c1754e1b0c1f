// Every candidate of expand, select, narrow, slice, chunk, unbind, stack, unflatten, argmax, var
// and cross_entropy run rank by rank on small real arrays (each rank calls the op with the same
// arguments on its local pieces only) reassembles to the unsharded result, for every output.
// Meshes include uneven splits (3 ranks, sizes that do not divide). The dropped candidates are
// run too and shown to give wrong numbers, so the rules are checked against arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "mesh/op_strategy.h"
#include "propagation_sim.h"

namespace shardplan::mesh {
namespace {

using sim::Array;
using shardplan::DimVector;

// out[idx] = x[src(idx)] over every index of `shape`.
Array gather(const Array& x, const DimVector& shape,
             const std::function<DimVector(const DimVector&)>& src) {
  Array r{shape, {}};
  sim::for_each_index(shape, [&](const DimVector& o) {
    r.v.push_back(x.v[static_cast<size_t>(sim::flat(x.shape, src(o)))]);
  });
  return r;
}

// Several outputs: f returns every output of the op on the given arrays.
using MultiOp = std::function<std::vector<Array>(const std::vector<Array>&)>;

// Runs every candidate of `call` on `mesh` and checks each output; returns how many candidates.
size_t check_all(const OpCall& call, const DeviceMesh& mesh, const std::vector<Array>& globals,
                 const MultiOp& f) {
  const std::vector<Array> want = f(globals);
  const auto cands = candidate_strategies(call, mesh);
  for (const OpStrategy& s : cands) {
    EXPECT_EQ(s.outputs.size(), want.size()) << s;
    for (size_t o = 0; o < want.size(); ++o) {
      SCOPED_TRACE(::testing::Message() << "output " << o);
      const OpStrategy one{{s.outputs[o]}, s.inputs};
      sim::check_strategy(call, mesh, one, globals, want[o],
                          [&](const std::vector<Array>& in, const std::vector<ShardSpec>&,
                              const MeshCoord&) { return f(in)[o]; });
    }
  }
  return cands.size();
}

// The sum of |got - want| when `s` is run anyway (for candidates the tables leave out).
double error_of(const DeviceMesh& mesh, const OpStrategy& s, const std::vector<Array>& globals,
                const MultiOp& f) {
  const Array want = f(globals)[0];
  std::vector<Array> outs;
  for (int64_t r = 0; r < mesh.size(); ++r) {
    const MeshCoord c = *mesh.coordinate_of(mesh.rank_at_flat_index(r));
    std::vector<Array> loc;
    for (size_t i = 0; i < globals.size(); ++i) {
      loc.push_back(sim::local_piece(
          globals[i], make_shard_spec(globals[i].shape, tensor::DType::kFloat64, mesh, s.inputs[i]),
          c));
    }
    outs.push_back(f(loc)[0]);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const ShardSpec out = make_shard_spec(want.shape, tensor::DType::kFloat64, mesh, s.outputs[0]);
  // A wrong rule may give a rank a piece of the wrong shape: that alone shows it is wrong.
  for (int64_t r = 0; r < mesh.size(); ++r) {
    const MeshCoord c = *mesh.coordinate_of(mesh.rank_at_flat_index(r));
    if (outs[static_cast<size_t>(r)].shape != local_shape(out, c)) return kInf;
  }
  double e = 0;
  const bool replicated = std::all_of(s.outputs[0].begin(), s.outputs[0].end(),
                                      [](const Placement& p) { return p.is_replicate(); });
  if (replicated) {  // every rank should hold the whole result: compare each one
    for (const Array& o : outs) {
      for (size_t i = 0; i < want.v.size(); ++i) e += std::abs(o.v[i] - want.v[i]);
    }
  } else {
    const Array got = sim::assemble(outs, out);
    for (size_t i = 0; i < want.v.size(); ++i) e += std::abs(got.v[i] - want.v[i]);
  }
  return std::isnan(e) ? kInf : e;  // e.g. the variance of a 1-element piece
}

// --- the ops on plain arrays -------------------------------------------------------------------

Array expand(const Array& x, const DimVector& target) {
  const size_t lead = target.size() - x.shape.size();
  DimVector shape = target;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (target[d + lead] == -1) shape[d + lead] = x.shape[d];
  }
  return gather(x, shape, [&](const DimVector& o) {
    DimVector i(x.shape.size());
    for (size_t d = 0; d < i.size(); ++d) i[d] = x.shape[d] == 1 ? 0 : o[d + lead];
    return i;
  });
}

// x[..., start : start + step * size : step, ...] on dim d, the output `size` long; `drop`
// removes the dim (select).
Array take(const Array& x, size_t d, int64_t start, int64_t step, int64_t size, bool drop) {
  DimVector shape = x.shape;
  shape[d] = size;
  if (drop) shape.erase(d);
  return gather(x, shape, [&](const DimVector& o) {
    DimVector i = o;
    if (drop) i.insert(d, 0);
    i[d] = start + step * (drop ? 0 : o[d]);
    return i;
  });
}

// slice with Python clamping of start/end, as the op does on whatever piece it is given.
Array slice(const Array& x, size_t d, int64_t start, std::optional<int64_t> end, int64_t step) {
  const int64_t n = x.shape[d];
  int64_t s = start < 0 ? start + n : start, e = end.value_or(n);
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  return take(x, d, s, step, (e - s + step - 1) / step, false);
}

std::vector<Array> chunk(const Array& x, size_t d, int64_t chunks) {
  const int64_t n = x.shape[d], each = (n + chunks - 1) / chunks;
  std::vector<Array> r;
  for (int64_t b = 0; b < n; b += each) r.push_back(take(x, d, b, 1, std::min(each, n - b), false));
  return r;
}

std::vector<Array> unbind(const Array& x, size_t d) {
  std::vector<Array> r;
  for (int64_t i = 0; i < x.shape[d]; ++i) r.push_back(take(x, d, i, 1, 1, true));
  return r;
}

Array stack(const std::vector<Array>& xs, size_t d) {
  DimVector shape = xs[0].shape;
  shape.insert(d, static_cast<int64_t>(xs.size()));
  Array r{shape, {}};
  sim::for_each_index(shape, [&](const DimVector& o) {
    DimVector i = o;
    i.erase(d);
    const Array& x = xs[static_cast<size_t>(o[d])];
    r.v.push_back(x.v[static_cast<size_t>(sim::flat(x.shape, i))]);
  });
  return r;
}

// Reduces dim d of x (keepdim or not) with f over the values along it.
Array reduce_dim(const Array& x, size_t d, bool keepdim,
                 const std::function<double(const std::vector<double>&)>& f) {
  DimVector shape = x.shape;
  shape[d] = 1;
  Array r{shape, {}};
  sim::for_each_index(shape, [&](const DimVector& o) {
    std::vector<double> vals;
    DimVector i = o;
    for (i[d] = 0; i[d] < x.shape[d]; ++i[d]) {
      vals.push_back(x.v[static_cast<size_t>(sim::flat(x.shape, i))]);
    }
    r.v.push_back(f(vals));
  });
  if (!keepdim) r.shape.erase(d);
  return r;
}

double argmax_of(const std::vector<double>& v) {
  return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());
}

double var_of(const std::vector<double>& v) {  // correction 1, as torch.var's default
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

// cross_entropy of logits x (N, C, rest...) or (C,); target class indices (x's shape without the
// class dim) or probabilities (x's shape); optional class weights; reduction none / sum / mean
// (weighted mean: divided by the sum of the picked weights).
Array cross_entropy(const std::vector<Array>& in, const std::string& reduction) {
  const Array &x = in[0], &t = in[1];
  const size_t cd = x.shape.size() == 1 ? 0 : 1;
  const bool indices = t.shape.size() + 1 == x.shape.size();
  DimVector loss_shape = x.shape;
  loss_shape.erase(cd);
  Array loss{loss_shape, {}};
  double wsum = 0;
  sim::for_each_index(loss_shape, [&](const DimVector& o) {
    DimVector i = o;
    i.insert(cd, 0);
    std::vector<double> logit;
    for (i[cd] = 0; i[cd] < x.shape[cd]; ++i[cd]) {
      logit.push_back(x.v[static_cast<size_t>(sim::flat(x.shape, i))]);
    }
    const double mx = *std::max_element(logit.begin(), logit.end());
    double z = 0;
    for (double l : logit) z += std::exp(l - mx);
    const double lse = mx + std::log(z);
    double l = 0;
    if (indices) {
      const auto y = static_cast<size_t>(t.v[static_cast<size_t>(sim::flat(t.shape, o))]);
      const double w = in.size() == 3 ? in[2].v[y] : 1.0;
      l = w * (lse - logit[y]);
      wsum += w;
    } else {
      for (i[cd] = 0; i[cd] < x.shape[cd]; ++i[cd]) {
        const auto c = static_cast<size_t>(i[cd]);
        const double w = in.size() == 3 ? in[2].v[c] : 1.0;
        l += w * t.v[static_cast<size_t>(sim::flat(t.shape, i))] * (lse - logit[c]);
      }
      wsum += 1;  // probabilities: the mean is over rows
    }
    loss.v.push_back(l);
  });
  if (reduction == "none") return loss;
  double s = 0;
  for (double l : loss.v) s += l;
  return Array{{}, {reduction == "sum" ? s : s / wsum}};
}

MultiOp one(std::function<Array(const std::vector<Array>&)> f) {
  return [f](const std::vector<Array>& in) { return std::vector<Array>{f(in)}; };
}

// --- the tests ---------------------------------------------------------------------------------

TEST(PropagationSimGaps, ExpandBroadcastDims) {
  const Array x = sim::iota({3, 1, 4}, 1);
  // -1 keeps a dim's size: the same call runs on every rank's piece (explicit sizes would be
  // rewritten to the local ones, as DTensor does for view ops).
  const DimVector target{2, -1, 5, -1};
  const OpCall call("expand", {{3, 1, 4}}, target);
  const MultiOp f = one([&](const std::vector<Array>& in) { return expand(in[0], target); });
  // R, S(1)<-S0, S(3)<-S2, P per dim = 16 on (2,2), less S0 twice (3 < 4): 15.
  EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), {x}, f), 15u);
  EXPECT_EQ(check_all(call, DeviceMesh({3}), {x}, f), 4u);
  // Sharding the output's new dim 0 from a replicated input (each rank expands to 1 of the 2
  // rows) is not a local op: a rank would have to call expand with other sizes.
  EXPECT_EQ(error_of(DeviceMesh({2}), {{{Shard{0}}}, {{Replicate{}}}}, {x}, f),
            std::numeric_limits<double>::infinity());
}

TEST(PropagationSimGaps, SelectNarrowSliceOnEveryDim) {
  const Array x = sim::iota({5, 4, 3}, 2);
  const DeviceMesh m23({2, 3}), m3({3});
  for (int64_t d = 0; d < 3; ++d) {
    SCOPED_TRACE(::testing::Message() << "dim " << d);
    const auto ud = static_cast<size_t>(d);
    OpCall sel("select", {{5, 4, 3}});
    sel.dim = d;
    sel.start = -1;  // the last index: a rank holding a shard of dim d would pick its own last
    const MultiOp fs = one([&](const std::vector<Array>& in) {
      return take(in[0], ud, in[0].shape[ud] - 1, 1, 1, true);
    });
    EXPECT_GT(check_all(sel, m23, {x}, fs), 1u);
    EXPECT_GT(check_all(sel, m3, {x}, fs), 1u);
    // Keeping the indexed dim sharded is wrong: each rank picks its own last row (2 ranks: no
    // rank is empty, so every rank has one to pick).
    EXPECT_GT(error_of(DeviceMesh({2}), {{{Replicate{}}}, {{Shard{d}}}}, {x}, fs), 1e-3);

    OpCall nar("narrow", {{5, 4, 3}});
    nar.dim = d;
    nar.start = 1;
    nar.length = 2;
    const MultiOp fn =
        one([&](const std::vector<Array>& in) { return take(in[0], ud, 1, 1, 2, false); });
    EXPECT_GT(check_all(nar, m23, {x}, fn), 1u);
    EXPECT_GT(check_all(nar, m3, {x}, fn), 1u);

    for (const auto& [start, end, step] :
         {std::tuple{int64_t{0}, std::optional<int64_t>{}, int64_t{2}},
          std::tuple{int64_t{-2}, std::optional<int64_t>{100}, int64_t{1}},
          std::tuple{int64_t{-100}, std::optional<int64_t>{}, int64_t{1}}}) {  // the identity
      OpCall sl("slice", {{5, 4, 3}});
      sl.dim = d;
      sl.start = start;
      sl.end = end;
      sl.step = step;
      const MultiOp f = one([&, b = start, e = end, st = step](const std::vector<Array>& in) {
        return slice(in[0], ud, b, e, st);
      });
      EXPECT_GT(check_all(sl, m23, {x}, f), 1u);
      EXPECT_GT(check_all(sl, m3, {x}, f), 1u);
    }
  }
}

TEST(PropagationSimGaps, IdentitySliceKeepsItsShardButNarrowCannot) {
  const Array x = sim::iota({5, 4}, 3);
  OpCall sl("slice", {{5, 4}});
  sl.start = -100;
  bool kept = false;
  for (const OpStrategy& s : candidate_strategies(sl, DeviceMesh({3}))) {
    kept = kept || s.inputs[0][0] == Placement(Shard{0});
  }
  EXPECT_TRUE(kept);  // and check_all above reassembled it
  // narrow(0, 0, 5) on a rank's 2 rows has no meaning; the table leaves S0 out.
  OpCall nar("narrow", {{5, 4}});
  nar.length = 5;
  for (const OpStrategy& s : candidate_strategies(nar, DeviceMesh({3}))) {
    EXPECT_NE(s.inputs[0][0], Placement(Shard{0})) << s;
  }
}

TEST(PropagationSimGaps, ChunkAndUnbindEveryOutput) {
  const Array x = sim::iota({7, 3, 4}, 4);
  for (int64_t d = 0; d < 3; ++d) {
    SCOPED_TRACE(::testing::Message() << "dim " << d);
    OpCall ch("chunk", {{7, 3, 4}});
    ch.dim = d;
    ch.chunks = 3;
    const auto ud = static_cast<size_t>(d);
    const MultiOp fc = [&](const std::vector<Array>& in) { return chunk(in[0], ud, 3); };
    EXPECT_GT(check_all(ch, DeviceMesh({2, 3}), {x}, fc), 1u);
    OpCall ub("unbind", {{7, 3, 4}});
    ub.dim = d;
    const MultiOp fu = [&](const std::vector<Array>& in) { return unbind(in[0], ud); };
    EXPECT_GT(check_all(ub, DeviceMesh({2, 2}), {x}, fu), 1u);
    EXPECT_GT(check_all(ub, DeviceMesh({3}), {x}, fu), 1u);
  }
}

TEST(PropagationSimGaps, StackOnEveryNewDim) {
  const Array a = sim::iota({5, 3}, 1), b = sim::iota({5, 3}, 2), c = sim::iota({5, 3}, 3);
  for (int64_t d = 0; d <= 2; ++d) {
    OpCall st("stack", {{5, 3}, {5, 3}, {5, 3}});
    st.dim = d;
    const MultiOp f =
        one([&](const std::vector<Array>& in) { return stack(in, static_cast<size_t>(d)); });
    // R, S0, S1, P per dim: 16 on (2,2), less S1 twice (3 < 4) = 15; (3,): 4.
    EXPECT_EQ(check_all(st, DeviceMesh({2, 2}), {a, b, c}, f), 15u);
    EXPECT_EQ(check_all(st, DeviceMesh({3}), {a, b, c}, f), 4u);
  }
}

TEST(PropagationSimGaps, UnflattenAsAView) {
  // (12, 5) -> (4, 3, 5) and (5, 12) -> (5, 2, 6): the local piece reshaped to the local output.
  for (const auto& [in, dim, sizes, out] :
       {std::tuple{DimVector{12, 5}, int64_t{0}, DimVector{4, -1}, DimVector{4, 3, 5}},
        std::tuple{DimVector{5, 12}, int64_t{1}, DimVector{2, 6}, DimVector{5, 2, 6}}}) {
    OpCall call("unflatten", {in}, sizes);
    call.dim = dim;
    EXPECT_EQ(output_shapes(call)[0], out);
    const Array x = sim::iota(in, 1);
    for (const DeviceMesh& mesh : {DeviceMesh({2, 2}), DeviceMesh({3}), DeviceMesh({2})}) {
      size_t n = 0;
      for (const OpStrategy& s : candidate_strategies(call, mesh)) {
        const ShardSpec os = make_shard_spec(out, tensor::DType::kFloat64, mesh, s.outputs[0]);
        sim::check_strategy(
            call, mesh, s, {x}, Array{out, x.v},
            [&](const std::vector<Array>& l, const std::vector<ShardSpec>&, const MeshCoord& c) {
              Array r = l[0];
              r.shape = local_shape(os, c);
              EXPECT_EQ(sim::numel(r.shape), static_cast<int64_t>(r.v.size()));
              return r;
            });
        ++n;
      }
      EXPECT_GT(n, 1u);
    }
  }
}

TEST(PropagationSimGaps, ArgmaxAndVarOverWholeDims) {
  const Array x = sim::iota({4, 6, 3}, 5);
  for (int64_t d = 0; d < 3; ++d) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << d << " keepdim " << keepdim);
      const auto ud = static_cast<size_t>(d);
      OpCall am("argmax", {{4, 6, 3}}, {d});
      am.keepdim = keepdim;
      const MultiOp fa = one(
          [&](const std::vector<Array>& in) { return reduce_dim(in[0], ud, keepdim, argmax_of); });
      EXPECT_GT(check_all(am, DeviceMesh({2, 2}), {x}, fa), 1u);
      OpCall var("var", {{4, 6, 3}}, {d});
      var.keepdim = keepdim;
      const MultiOp fv =
          one([&](const std::vector<Array>& in) { return reduce_dim(in[0], ud, keepdim, var_of); });
      EXPECT_GT(check_all(var, DeviceMesh({3}), {x}, fv), 1u);
      // The reduced dim sharded with the output Partial (sum, or max for argmax) is wrong.
      const Placement p = Partial{ReduceOp::kSum};
      EXPECT_GT(error_of(DeviceMesh({2}), {{{p}}, {{Shard{d}}}}, {x}, fv), 1e-3);
      EXPECT_GT(error_of(DeviceMesh({2}), {{{Partial{ReduceOp::kMax}}}, {{Shard{d}}}}, {x}, fa),
                1e-3);
    }
  }
}

TEST(PropagationSimGaps, CrossEntropyEveryReductionAndTarget) {
  // Logits (N=4, C=5, L=6); class indices (4, 6) with every class used; probabilities (4, 5, 6)
  // (positive, summing to 1 over the classes); class weights.
  const Array x = sim::iota({4, 5, 6}, 1);
  Array idx{{4, 6}, {}};
  for (int64_t i = 0; i < 24; ++i) idx.v.push_back(static_cast<double>((i * 7 + i / 6) % 5));
  Array prob{{4, 5, 6}, std::vector<double>(120, 0)};
  sim::for_each_index({4, 6}, [&](const DimVector& o) {
    double z = 0;
    for (int64_t c = 0; c < 5; ++c) z += static_cast<double>(1 + (o[0] + 2 * c + o[1]) % 4);
    for (int64_t c = 0; c < 5; ++c) {
      prob.v[static_cast<size_t>(sim::flat(prob.shape, {o[0], c, o[1]}))] =
          static_cast<double>(1 + (o[0] + 2 * c + o[1]) % 4) / z;
    }
  });
  const Array w{{5}, {0.5, 1.0, 2.0, 1.5, 0.25}};
  for (const std::string red : {"none", "sum", "mean"}) {
    for (bool indices : {true, false}) {
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(::testing::Message() << red << " indices " << indices << " w " << weighted);
        std::vector<Array> in{x, indices ? idx : prob};
        if (weighted) in.push_back(w);
        OpCall call("cross_entropy");
        for (const Array& a : in) call.inputs.push_back(a.shape);
        call.reduction = red;
        const MultiOp f = one([&](const std::vector<Array>& l) { return cross_entropy(l, red); });
        // (2,2): R, N, L per dim = 9. mean drops [L, L] (6 -> 3, 3 -> 2, 1, 2, 1 rows: the
        // average of unequal counts' means is not the mean), and every sharded candidate when
        // weighted with class indices (divided by the picked weights' sum, which differs per rank).
        const size_t want = red != "mean" ? 9u : weighted && indices ? 1u : 8u;
        EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), in, f), want);
        check_all(call, DeviceMesh({3}), in, f);  // 4 rows on 3 ranks: mean filtered
      }
    }
  }
  // The weighted mean the table leaves out: the average of per-rank weighted means is wrong.
  const OpStrategy bad{{{Partial{ReduceOp::kAvg}}}, {{Shard{0}}, {Shard{0}}, {Replicate{}}}};
  EXPECT_GT(error_of(DeviceMesh({2}), bad, {x, idx, w},
                     one([](const std::vector<Array>& l) { return cross_entropy(l, "mean"); })),
            1e-3);
  // The class dim sharded: each rank's log-sum-exp sees only its classes.
  const OpStrategy vocab{{{Partial{}}}, {{Shard{1}}, {Shard{1}}}};
  EXPECT_GT(error_of(DeviceMesh({2}), vocab, {x, prob},
                     one([](const std::vector<Array>& l) { return cross_entropy(l, "sum"); })),
            1e-3);
}

}  // namespace
}  // namespace shardplan::mesh
