// Every candidate strategy of an op, executed rank by rank on small real arrays (each rank runs
// the op on its local pieces only), reassembles to the unsharded result. This checks the strategy
// tables against arithmetic, not against themselves: a wrong Shard dim or a wrong Partial shows up
// as wrong numbers. Meshes include uneven splits (3 ranks, sizes that do not divide).
#include "propagation_sim.h"

#include <gtest/gtest.h>

#include "mesh/op_strategy.h"
#include "mesh/sharding_propagation.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;
using sim::Array;

// Runs every candidate of `call` on `mesh` and returns how many were checked.
size_t check_all(const OpCall& call, const DeviceMesh& mesh, const std::vector<Array>& globals,
                 const Array& expected, const sim::LocalOp& op) {
  const auto cands = candidate_strategies(call, mesh);
  for (const OpStrategy& s : cands) sim::check_strategy(call, mesh, s, globals, expected, op);
  return cands.size();
}

sim::LocalOp einsum_op(std::string lhs, std::string rhs, std::string out) {
  return [=](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    return sim::einsum(lhs, rhs, out, in[0], in[1]);
  };
}

TEST(PropagationSim, MmEveryCandidateOn2dMesh) {
  const OpCall call{"mm", {{6, 5}, {5, 4}}};
  const Array a = sim::iota({6, 5}, 1), b = sim::iota({5, 4}, 2);
  const Array want = sim::einsum("mk", "kn", "mn", a, b);
  // 4 per-dim candidates squared, all shardable: 6, 5 and 4 are >= 4 shards.
  EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), {a, b}, want, einsum_op("mk", "kn", "mn")), 16u);
}

TEST(PropagationSim, MmUnevenOnThreeRanks) {
  const OpCall call{"mm", {{7, 4}, {4, 5}}};  // 7 rows -> 3,3,1; k=4 -> 2,2,0 (empty shard)
  const Array a = sim::iota({7, 4}, 3), b = sim::iota({4, 5}, 4);
  EXPECT_EQ(check_all(call, DeviceMesh({3}), {a, b}, sim::einsum("mk", "kn", "mn", a, b),
                      einsum_op("mk", "kn", "mn")),
            4u);
}

TEST(PropagationSim, BmmAndMatmulNdAt2d) {
  const Array a = sim::iota({4, 3, 5}, 1), b = sim::iota({4, 5, 2}, 2), w = sim::iota({5, 6}, 3);
  EXPECT_EQ(check_all({"bmm", {{4, 3, 5}, {4, 5, 2}}}, DeviceMesh({2, 2}), {a, b},
                      sim::einsum("bmk", "bkn", "bmn", a, b), einsum_op("bmk", "bkn", "bmn")),
            23u);  // 5 per dim squared, less m=3 and n=2 taking 4 shards
  // matmul (4,3,5) @ (5,6): the leading dim rides along like m.
  check_all({"matmul", {{4, 3, 5}, {5, 6}}}, DeviceMesh({2}), {a, w},
            sim::einsum("amk", "kn", "amn", a, w), einsum_op("amk", "kn", "amn"));
}

TEST(PropagationSim, LinearWithBiasIncludingPartialBias) {
  // linear: y = x w^T + b; under the contracting candidate the bias is Partial (each rank adds a
  // summand of it), which the simulator models as an uneven split summing to b.
  const Array x = sim::iota({3, 4, 6}, 1), w = sim::iota({5, 6}, 2), bias = sim::iota({5}, 3);
  Array want = sim::binary(sim::einsum("abk", "nk", "abn", x, w), bias, std::plus<>());
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    return sim::binary(sim::einsum("abk", "nk", "abn", in[0], in[1]), in[2], std::plus<>());
  };
  // Per dim: R, P (k), S0 and S1 (lhs batch dims), S2 (n) = 5 -> 25 on (2,2), less S0 twice (3 <
  // 4).
  EXPECT_EQ(
      check_all({"linear", {{3, 4, 6}, {5, 6}, {5}}}, DeviceMesh({2, 2}), {x, w, bias}, want, op),
      24u);
}

TEST(PropagationSim, AddmmBiasBroadcast) {
  const Array bias = sim::iota({4}, 5), a = sim::iota({3, 6}, 1), b = sim::iota({6, 4}, 2);
  const Array want = sim::binary(sim::einsum("mk", "kn", "mn", a, b), bias, std::plus<>());
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    return sim::binary(sim::einsum("mk", "kn", "mn", in[1], in[2]), in[0], std::plus<>());
  };
  EXPECT_EQ(check_all({"addmm", {{4}, {3, 6}, {6, 4}}}, DeviceMesh({3}), {bias, a, b}, want, op),
            4u);
}

TEST(PropagationSim, PointwiseAddAndMulWithBroadcastAndPartial) {
  const Array a = sim::iota({4, 6}, 1), b = sim::iota({6}, 2);
  auto run = [](std::function<double(double, double)> f) {
    return [f](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
      return sim::binary(in[0], in[1], f);
    };
  };
  // add: R, S0 (b stays R), S1 (b S0), P+P -> 4 per dim, 16 less S0 on both (4 rows < 6).
  EXPECT_EQ(check_all({"add", {{4, 6}, {6}}}, DeviceMesh({2, 3}), {a, b},
                      sim::binary(a, b, std::plus<>()), run(std::plus<>())),
            15u);
  // mul: R, S0, S1, P*R, R*P -> 5 per dim (no P*P: the cross terms would be missing).
  EXPECT_EQ(check_all({"mul", {{4, 6}, {6}}}, DeviceMesh({2, 2}), {a, b},
                      sim::binary(a, b, std::multiplies<>()), run(std::multiplies<>())),
            25u);
}

TEST(PropagationSim, PartialTimesPartialWouldBeWrong) {
  // The candidate the table leaves out, run anyway: the reassembled value is not a*b. Guards the
  // simulator against accepting anything.
  const Array a = sim::iota({2, 3}, 1), b = sim::iota({2, 3}, 2);
  const OpStrategy bad{{{Partial{}}}, {{Partial{}}, {Partial{}}}};
  const DeviceMesh mesh({2});
  std::vector<ShardSpec> specs;
  std::vector<Array> outs;
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<Array> loc;
    for (const Array* g : {&a, &b}) {
      loc.push_back(sim::local_piece(
          *g, make_shard_spec(g->shape, tensor::DType::kFloat64, mesh, {Partial{}}), MeshCoord{r}));
    }
    outs.push_back(sim::binary(loc[0], loc[1], std::multiplies<>()));
  }
  const Array got = sim::assemble(
      outs, make_shard_spec(DimVector{2, 3}, tensor::DType::kFloat64, mesh, bad.outputs[0]));
  const Array want = sim::binary(a, b, std::multiplies<>());
  double diff = 0;
  for (size_t i = 0; i < want.v.size(); ++i) diff += std::abs(got.v[i] - want.v[i]);
  EXPECT_GT(diff, 1e-3);
  const auto cands = single_dim_strategies({"mul", {{2, 3}, {2, 3}}});
  EXPECT_EQ(
      std::count(cands.begin(), cands.end(), DimStrategy{{Partial{}}, {Partial{}, Partial{}}}), 0);
}

Array reduce(const Array& x, const std::vector<int64_t>& dims, bool keepdim, ReduceOp op) {
  DimVector out;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    const bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!red)
      out.push_back(x.shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  const double init = op == ReduceOp::kMax ? -1e300 : 0.0;
  Array r{out, std::vector<double>(static_cast<size_t>(sim::numel(out)), init)};
  std::vector<int64_t> count(r.v.size(), 0);
  sim::for_each_index(x.shape, [&](const DimVector& idx) {
    DimVector o;
    for (size_t d = 0; d < idx.size(); ++d) {
      const bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
      if (!red)
        o.push_back(idx[d]);
      else if (keepdim)
        o.push_back(0);
    }
    const auto f = static_cast<size_t>(sim::flat(out, o));
    const double v = x.v[static_cast<size_t>(sim::flat(x.shape, idx))];
    r.v[f] = op == ReduceOp::kMax ? std::max(r.v[f], v) : r.v[f] + v;
    ++count[f];
  });
  if (op == ReduceOp::kAvg) {
    for (size_t i = 0; i < r.v.size(); ++i) r.v[i] /= static_cast<double>(count[i]);
  }
  return r;
}

TEST(PropagationSim, ReductionsSumMeanAmax) {
  const Array x = sim::iota({4, 6, 2}, 1);
  for (auto [name, op] : {std::pair{"sum", ReduceOp::kSum}, std::pair{"mean", ReduceOp::kAvg},
                          std::pair{"amax", ReduceOp::kMax}}) {
    for (bool keepdim : {false, true}) {
      OpCall call{name, {{4, 6, 2}}};
      call.dims = {1};
      call.keepdim = keepdim;
      // op by value in the capture list: clang before 16 cannot capture a structured binding.
      auto local = [&, op = op](const std::vector<Array>& in, const std::vector<ShardSpec>&,
                                const MeshCoord&) { return reduce(in[0], {1}, keepdim, op); };
      // amax: Partial inputs are Partial(sum) in the simulator, so skip the P->P(max) candidate.
      for (const OpStrategy& s : candidate_strategies(call, DeviceMesh({2, 2}))) {
        if (op == ReduceOp::kMax && s.inputs[0][0].is_partial()) continue;
        if (op == ReduceOp::kMax && s.inputs[0][1].is_partial()) continue;
        sim::check_strategy(call, DeviceMesh({2, 2}), s, {x}, reduce(x, {1}, keepdim, op), local);
      }
    }
  }
}

TEST(PropagationSim, MeanOverUnevenShardsHasNoAvgCandidate) {
  // 5 rows on 2 ranks: 3 and 2; the average of the two means (of 3 and of 2) is not the mean.
  OpCall call{"mean", {{5, 2}}};
  call.dims = {0};
  for (const OpStrategy& s : candidate_strategies(call, DeviceMesh({2}))) {
    EXPECT_FALSE(s.outputs[0][0].is_partial(ReduceOp::kAvg) && s.inputs[0][0].is_shard()) << s;
  }
}

// A view op run locally: the local piece reshaped (row-major data unchanged) to the local output
// shape of the chosen output placements.
void check_view(const OpCall& call, const DeviceMesh& mesh, const DimVector& out_shape) {
  const Array x = sim::iota(call.inputs[0], 1);
  const Array want{out_shape, x.v};
  size_t n = 0;
  for (const OpStrategy& s : candidate_strategies(call, mesh)) {
    const ShardSpec out_spec =
        make_shard_spec(out_shape, tensor::DType::kFloat64, mesh, s.outputs[0]);
    auto op = [&](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord& c) {
      Array r = in[0];
      r.shape = local_shape(out_spec, c);
      EXPECT_EQ(sim::numel(r.shape), static_cast<int64_t>(r.v.size()));
      return r;
    };
    sim::check_strategy(call, mesh, s, {x}, want, op);
    ++n;
  }
  EXPECT_GT(n, 1u);
}

TEST(PropagationSim, ViewFlattenSplitAndMerge) {
  check_view({"view", {{8, 4}}, {32}}, DeviceMesh({4}), {32});    // flatten, S0 kept
  check_view({"view", {{16}}, {4, 4}}, DeviceMesh({4}), {4, 4});  // split, 4 % 4 == 0
  check_view({"reshape", {{6, 2, 5}}, {12, 5}}, DeviceMesh({2, 3}), {12, 5});
  check_view({"reshape", {{4, 6}}, {2, 2, 3, 2}}, DeviceMesh({2, 2}), {2, 2, 3, 2});
  check_view({"reshape", {{4, 6}}, {8, 3}}, DeviceMesh({2}), {8, 3});  // 4x6 -> 8x3: one group
  OpCall un{"unsqueeze", {{6, 4}}};
  un.dim = 1;
  check_view(un, DeviceMesh({2, 2}), {6, 1, 4});
  OpCall fl{"flatten", {{2, 3, 4}}};
  fl.dim = 1;
  fl.dim1 = 2;
  check_view(fl, DeviceMesh({3}), {2, 12});
}

TEST(PropagationSim, TransposeAndPermute) {
  const Array x = sim::iota({4, 6, 3}, 2);
  OpCall call{"permute", {{4, 6, 3}}, {2, 0, 1}};
  Array want{{3, 4, 6}, {}};
  sim::for_each_index(want.shape, [&](const DimVector& o) {
    want.v.push_back(x.v[static_cast<size_t>(sim::flat(x.shape, DimVector{o[1], o[2], o[0]}))]);
  });
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    const Array& a = in[0];
    Array r{{a.shape[2], a.shape[0], a.shape[1]}, {}};
    sim::for_each_index(r.shape, [&](const DimVector& o) {
      r.v.push_back(a.v[static_cast<size_t>(sim::flat(a.shape, DimVector{o[1], o[2], o[0]}))]);
    });
    return r;
  };
  // R, S0..S2, P per dim = 25, less S0 (4 < 6) and S2 (3 < 6) on both mesh dims.
  EXPECT_EQ(check_all(call, DeviceMesh({3, 2}), {x}, want, op), 23u);
}

TEST(PropagationSim, EmbeddingRowwiseMaskedPartial) {
  // weight (7, 3) over 2 ranks: rows 0-3 and 4-6. Each rank looks up the indices in its range,
  // writes zeros for the others; the sum over ranks is the lookup.
  const Array w = sim::iota({7, 3}, 1);
  const Array idx{{2, 3}, {0, 6, 3, 4, 4, 1}};
  Array want{{2, 3, 3}, {}};
  for (double i : idx.v) {
    for (int64_t e = 0; e < 3; ++e)
      want.v.push_back(w.v[static_cast<size_t>(i) * 3 + static_cast<size_t>(e)]);
  }
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>& specs,
               const MeshCoord& c) {
    const Array &wl = in[0], &il = in[1];
    // The rank's first vocab row: rows are only split when weight dim 0 is sharded.
    const int64_t row0 = global_offset(specs[0], c)[0];
    const int64_t rows = wl.shape[0];
    Array r{il.shape, {}};
    r.shape.push_back(wl.shape[1]);
    for (double i : il.v) {
      const int64_t local = static_cast<int64_t>(i) - row0;
      const bool mine = rows > 0 && local >= 0 && local < rows;
      for (int64_t e = 0; e < wl.shape[1]; ++e) {
        r.v.push_back(mine ? wl.v[static_cast<size_t>(local * wl.shape[1] + e)] : 0.0);
      }
    }
    return r;
  };
  // Per dim: R, colwise S(2)/S1, rowwise P/S0, batch S0 and S1 of the indices = 5.
  // Partial inputs do not occur (no candidate takes one), so the simulator's split is unused.
  EXPECT_EQ(check_all({"embedding", {{7, 3}, {2, 3}}}, DeviceMesh({2}), {w, idx}, want, op), 5u);
  EXPECT_EQ(check_all({"embedding", {{7, 3}, {2, 3}}}, DeviceMesh({3}), {w, idx}, want, op), 4u);
}

TEST(PropagationSim, CatAlongOtherDimsAndSoftmaxRows) {
  const Array a = sim::iota({4, 2}, 1), b = sim::iota({4, 3}, 2);
  Array want{{4, 5}, {}};
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 2; ++c) want.v.push_back(a.v[static_cast<size_t>(r * 2 + c)]);
    for (int64_t c = 0; c < 3; ++c) want.v.push_back(b.v[static_cast<size_t>(r * 3 + c)]);
  }
  auto cat1 = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    Array r{{in[0].shape[0], in[0].shape[1] + in[1].shape[1]}, {}};
    for (int64_t i = 0; i < in[0].shape[0]; ++i) {
      for (const Array* x : {&in[0], &in[1]}) {
        for (int64_t c = 0; c < x->shape[1]; ++c)
          r.v.push_back(x->v[static_cast<size_t>(i * x->shape[1] + c)]);
      }
    }
    return r;
  };
  OpCall call{"cat", {{4, 2}, {4, 3}}};
  call.dim = 1;
  EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), {a, b}, want, cat1), 9u);  // R, S0, P per dim
}

TEST(PropagationSim, ChosenStrategyOfPropagateReassembles) {
  // Rowwise linear of docs/semantics.md §5.2: x S(-1), w S(1) -> Partial output, no redistribution.
  const DeviceMesh mesh({4});
  const ShardSpec x = make_shard_spec(DimVector{2, 8}, tensor::DType::kFloat64, mesh, {Shard{1}});
  const ShardSpec w = make_shard_spec(DimVector{3, 8}, tensor::DType::kFloat64, mesh, {Shard{1}});
  const Propagation p = propagate(OpCall("linear"), {x, w});
  EXPECT_EQ(p.strategy.outputs[0], std::vector<Placement>{Partial{}});
  EXPECT_FALSE(p.needs_redistribution());
  const Array xa = sim::iota({2, 8}, 1), wa = sim::iota({3, 8}, 2);
  sim::check_strategy({"linear", {{2, 8}, {3, 8}}}, mesh, p.strategy, {xa, wa},
                      sim::einsum("ak", "nk", "an", xa, wa), einsum_op("ak", "nk", "an"));
}

}  // namespace
}  // namespace shardplan::mesh

namespace shardplan::mesh {
namespace {

// Random shapes (sizes 1..7, so uneven and empty shards occur) on random meshes (1-d to 3-d,
// sizes 1..3): every candidate of mm, add with broadcasting and reshape reassembles.
TEST(PropagationSim, RandomShapesAndMeshesProperty) {
  uint64_t state = 12345;
  auto next = [&](int64_t lo, int64_t hi) {  // xorshift; inclusive range
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return lo + static_cast<int64_t>(state % static_cast<uint64_t>(hi - lo + 1));
  };
  size_t checked = 0;
  for (int iter = 0; iter < 40; ++iter) {
    std::vector<int64_t> mshape;
    for (int64_t d = 0, nd = next(1, 3); d < nd; ++d) mshape.push_back(next(1, 3));
    const DeviceMesh mesh(mshape);
    const int64_t m = next(1, 7), k = next(1, 7), n = next(1, 7);
    const Array a = sim::iota({m, k}, 1 + iter), b = sim::iota({k, n}, 2 + iter);
    checked += check_all(OpCall("mm", {{m, k}, {k, n}}), mesh, {a, b},
                         sim::einsum("mk", "kn", "mn", a, b), einsum_op("mk", "kn", "mn"));
    const Array row = sim::iota({k}, 3 + iter), mat = sim::iota({m, k}, 4 + iter);
    checked += check_all(OpCall("add", {{m, k}, {k}}), mesh, {mat, row},
                         sim::binary(mat, row, std::plus<>()),
                         [](const std::vector<Array>& in, const std::vector<ShardSpec>&,
                            const MeshCoord&) { return sim::binary(in[0], in[1], std::plus<>()); });
    // reshape (m, k) -> (m * k) and (m, k) -> (k, m) as a view (same data, new shape).
    for (DimVector target : {DimVector{m * k}, DimVector{k, m}}) {
      const OpCall call("reshape", {{m, k}}, target);
      for (const OpStrategy& s : candidate_strategies(call, mesh)) {
        const ShardSpec out = make_shard_spec(target, tensor::DType::kFloat64, mesh, s.outputs[0]);
        sim::check_strategy(
            call, mesh, s, {mat}, Array{target, mat.v},
            [&](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord& c) {
              Array r = in[0];
              r.shape = local_shape(out, c);
              EXPECT_EQ(sim::numel(r.shape), static_cast<int64_t>(r.v.size()));
              return r;
            });
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 400u);
}

}  // namespace
}  // namespace shardplan::mesh

namespace shardplan::mesh {
namespace {

// softmax over the last dim of (rows..., n).
Array softmax_last(const Array& x) {
  const int64_t n = x.shape.back();
  Array r = x;
  for (size_t base = 0; n > 0 && base < x.v.size(); base += static_cast<size_t>(n)) {
    double mx = -1e300, sum = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x.v[base + static_cast<size_t>(i)]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x.v[base + static_cast<size_t>(i)] - mx);
    for (int64_t i = 0; i < n; ++i) {
      r.v[base + static_cast<size_t>(i)] = std::exp(x.v[base + static_cast<size_t>(i)] - mx) / sum;
    }
  }
  return r;
}

// Attention with grouped-query heads on (B, H, L, E) arrays: query head h reads kv head
// h / (Hq / Hkv), scores scaled by 1/sqrt(E), softmax over the keys.
Array attention(const Array& q, const Array& k, const Array& v) {
  const int64_t B = q.shape[0], Hq = q.shape[1], L = q.shape[2], E = q.shape[3];
  const int64_t Hkv = k.shape[1], S = k.shape[2], Ev = v.shape[3];
  Array out{{B, Hq, L, Ev}, {}};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t l = 0; l < L; ++l) {
        Array scores{{S}, {}};
        for (int64_t s = 0; s < S; ++s) {
          double dot = 0;
          for (int64_t e = 0; e < E; ++e) {
            dot += q.v[static_cast<size_t>(sim::flat(q.shape, {b, h, l, e}))] *
                   k.v[static_cast<size_t>(sim::flat(k.shape, {b, g, s, e}))];
          }
          scores.v.push_back(dot / std::sqrt(static_cast<double>(E)));
        }
        const Array p = softmax_last(scores);
        for (int64_t e = 0; e < Ev; ++e) {
          double acc = 0;
          for (int64_t s = 0; s < S; ++s) {
            acc += p.v[static_cast<size_t>(s)] *
                   v.v[static_cast<size_t>(sim::flat(v.shape, {b, g, s, e}))];
          }
          out.v.push_back(acc);
        }
      }
    }
  }
  return out;
}

TEST(PropagationSim, SoftmaxRowsStayLocal) {
  const Array x = sim::iota({4, 3, 5}, 1);
  OpCall call("softmax", {{4, 3, 5}});
  call.dim = -1;
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    return softmax_last(in[0]);
  };
  // R, S0, S1 per dim = 9, less S1 twice (3 < 4).
  EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), {x}, softmax_last(x), op), 8u);
}

TEST(PropagationSim, AttentionOverBatchAndGroupedHeads) {
  // 4 query heads over 2 kv heads: 2-way head split keeps each kv head with its query heads.
  const Array q = sim::iota({2, 4, 3, 2}, 1), k = sim::iota({2, 2, 5, 2}, 2),
              v = sim::iota({2, 2, 5, 3}, 3);
  const OpCall call("scaled_dot_product_attention", {{2, 4, 3, 2}, {2, 2, 5, 2}, {2, 2, 5, 3}});
  auto op = [](const std::vector<Array>& in, const std::vector<ShardSpec>&, const MeshCoord&) {
    return attention(in[0], in[1], in[2]);
  };
  const Array want = attention(q, k, v);
  EXPECT_EQ(output_shapes(call)[0], (DimVector{2, 4, 3, 3}));
  // (2,2): R, S0 (batch), S1 (heads) per dim; S0 twice drops (B = 2 < 4), S1 twice drops
  // (2 kv heads cannot take 4 ways) -> 7.
  EXPECT_EQ(check_all(call, DeviceMesh({2, 2}), {q, k, v}, want, op), 7u);
  // The candidate the GQA filter removes on 4 ranks would pair query heads with the wrong kv
  // head: run it anyway and see the numbers differ.
  const Array q4 = sim::iota({1, 8, 2, 2}, 4), k4 = sim::iota({1, 2, 3, 2}, 5),
              v4 = sim::iota({1, 2, 3, 2}, 6);
  const DeviceMesh m4({4});
  std::vector<Array> outs;
  const std::vector<Placement> heads{Shard{1}};
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<Array> loc;
    for (const Array* g : {&q4, &k4, &v4}) {
      loc.push_back(sim::local_piece(
          *g, make_shard_spec(g->shape, tensor::DType::kFloat64, m4, heads), MeshCoord{r}));
    }
    // Ranks 2 and 3 get no kv head at all (2 heads chunked 4 ways): nothing to attend to.
    if (loc[1].shape[1] == 0) {
      outs.push_back(Array{{1, 2, 2, 2}, std::vector<double>(8, 0.0)});
      continue;
    }
    outs.push_back(attention(loc[0], loc[1], loc[2]));
  }
  const Array got = sim::assemble(
      outs, make_shard_spec(DimVector{1, 8, 2, 2}, tensor::DType::kFloat64, m4, heads));
  const Array ref = attention(q4, k4, v4);
  double diff = 0;
  for (size_t i = 0; i < ref.v.size(); ++i) diff += std::abs(got.v[i] - ref.v[i]);
  EXPECT_GT(diff, 1e-3);
  for (const OpStrategy& s : candidate_strategies(
           OpCall("scaled_dot_product_attention", {{1, 8, 2, 2}, {1, 2, 3, 2}, {1, 2, 3, 2}}),
           m4)) {
    EXPECT_NE(s.inputs[0], heads) << s;
  }
}

}  // namespace
}  // namespace shardplan::mesh
