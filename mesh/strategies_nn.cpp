// Strategies of the neural-network ops (embedding, softmax, norms, attention) and of cat/split.
// Common rule: an op that mixes elements along some dims (the softmax dim, the normalized dims,
// the attention sequence and head-feature dims) can only run locally when those dims are whole on
// every rank, so its candidates shard only the other dims.
#include <span>
#include <string>

#include "base/error.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

using shardplan::DimVector;

bool is_norm(const std::string& op) { return op == "layer_norm" || op == "rms_norm"; }
bool is_softmax(const std::string& op) { return op == "softmax" || op == "log_softmax"; }
bool is_sdpa(const std::string& op) { return op == "scaled_dot_product_attention"; }

// Validates attention shapes: q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev].
DimVector sdpa_output(const OpCall& call) {
  check_arity(call, 3, 3);
  const auto &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  const size_t nd = q.size();
  SP_CHECK(nd >= 3 && k.size() == nd && v.size() == nd, "op '", call.op,
           "': q, k, v must have the same rank >= 3, got ", q, ", ", k, ", ", v);
  for (size_t d = 0; d + 3 < nd; ++d) {
    SP_CHECK(q[d] == k[d] && q[d] == v[d], "op '", call.op, "': batch dim ", d, " differs");
  }
  const int64_t hq = q[nd - 3], hkv = k[nd - 3];
  SP_CHECK(v[nd - 3] == hkv && hkv > 0 && hq % hkv == 0, "op '", call.op, "': ", hq,
           " query heads are not a multiple of ", hkv, " kv heads (v has ", v[nd - 3], ")");
  SP_CHECK(k[nd - 2] == v[nd - 2] && q[nd - 1] == k[nd - 1], "op '", call.op,
           "': key/value sequence or head dims do not match: ", q, ", ", k, ", ", v);
  DimVector out = q;
  out[nd - 1] = v[nd - 1];
  return out;
}

}  // namespace

std::optional<std::vector<DimVector>> nn_output_shapes(const OpCall& call) {
  if (call.op == "embedding") {
    check_arity(call, 2, 2);
    const auto& w = call.inputs[0];
    SP_CHECK(w.size() == 2, "op 'embedding': weight must be 2-d, got ", w);
    DimVector out = call.inputs[1];
    out.push_back(w[1]);
    return std::vector<DimVector>{out};
  }
  if (is_softmax(call.op)) {
    check_arity(call, 1, 1);
    wrap_dim(call, call.dim, static_cast<int64_t>(call.inputs[0].size()));
    return std::vector<DimVector>{call.inputs[0]};
  }
  if (is_norm(call.op)) {
    check_arity(call, 1, call.op == "layer_norm" ? 3 : 2);
    const auto& x = call.inputs[0];
    const int64_t nn = call.normalized_ndim;
    SP_CHECK(nn >= 1 && nn <= static_cast<int64_t>(x.size()), "op '", call.op, "': ", nn,
             " normalized dims for a ", x.size(), "-d input");
    const DimVector tail(std::span<const int64_t>(x).last(static_cast<size_t>(nn)));
    for (size_t i = 1; i < call.inputs.size(); ++i) {
      SP_CHECK(call.inputs[i] == tail, "op '", call.op, "': weight/bias ", call.inputs[i],
               " must equal the normalized shape ", tail);
    }
    return std::vector<DimVector>{x};
  }
  if (is_sdpa(call.op)) return std::vector<DimVector>{sdpa_output(call)};
  return std::nullopt;
}

std::optional<std::vector<DimStrategy>> nn_strategies(const OpCall& call) {
  const size_t n = call.inputs.size();
  std::vector<DimStrategy> r;
  auto all_r = [&] { return DimStrategy{{Replicate{}}, std::vector<Placement>(n, Replicate{})}; };
  if (call.op == "embedding") {
    // [out, weight, indices] (§5.4).
    const auto idx_nd = static_cast<int64_t>(call.inputs[1].size());
    r.push_back(all_r());
    r.push_back({{Shard{idx_nd}}, {Shard{1}, Replicate{}}});  // colwise: embedding dim split
    // Row-wise: rank r holds vocab rows [off, off+size); it looks up the indices in its range
    // (shifted by -off) and writes zeros for the others (the mask), so the ranks' outputs sum to
    // the real one: Partial(sum) from replicated indices, no communication before the op
    // (PyTorch's _MaskPartial).
    r.push_back({{Partial{}}, {Shard{0}, Replicate{}}});
    for (int64_t d = 0; d < idx_nd; ++d) r.push_back({{Shard{d}}, {Replicate{}, Shard{d}}});
    return r;
  }
  int64_t free_dims = 0;  // dims [0, free_dims) may be sharded
  if (is_softmax(call.op)) {
    const auto nd = static_cast<int64_t>(call.inputs[0].size());
    const int64_t sm = wrap_dim(call, call.dim, nd);
    r.push_back(all_r());
    for (int64_t d = 0; d < nd; ++d) {
      if (d != sm) r.push_back({{Shard{d}}, {Shard{d}}});
    }
    return r;
  }
  if (is_norm(call.op)) {
    free_dims = static_cast<int64_t>(call.inputs[0].size()) - call.normalized_ndim;
  } else if (is_sdpa(call.op)) {
    free_dims = static_cast<int64_t>(call.inputs[0].size()) - 2;  // batch dims and heads
  } else {
    return std::nullopt;
  }
  r.push_back(all_r());
  for (int64_t d = 0; d < free_dims; ++d) {
    DimStrategy s{{Shard{d}}, std::vector<Placement>(n, Replicate{})};
    // Norms: only x is split, weight and bias stay whole; attention: q, k and v alike.
    for (size_t i = 0; i < (is_sdpa(call.op) ? n : 1); ++i) s.inputs[i] = Shard{d};
    r.push_back(std::move(s));
  }
  return r;
}

bool nn_candidate_ok(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s) {
  if (!is_sdpa(call.op)) return true;
  // Grouped-query attention: query head h uses kv head h / (Hq/Hkv). Splitting both head dims the
  // same number of ways keeps each rank's query heads with their kv heads only if the kv heads
  // split evenly (then every rank holds whole groups).
  const size_t hd = call.inputs[0].size() - 3;
  const int64_t hq = call.inputs[0][hd], hkv = call.inputs[1][hd];
  if (hq == hkv) return true;
  int64_t ways = 1;
  for (size_t md = 0; md < s.inputs[1].size(); ++md) {
    if (s.inputs[1][md].is_shard(static_cast<int64_t>(hd)))
      ways *= mesh.size(static_cast<int64_t>(md));
  }
  return hkv % ways == 0;
}

std::optional<std::vector<DimVector>> join_output_shapes(const OpCall& call) {
  if (call.op == "cat") {
    check_arity(call, 1, 1 << 20);
    const auto& a = call.inputs[0];
    const int64_t d = wrap_dim(call, call.dim, static_cast<int64_t>(a.size()));
    DimVector out = a;
    for (size_t i = 1; i < call.inputs.size(); ++i) {
      const auto& b = call.inputs[i];
      bool same = b.size() == a.size();
      for (size_t e = 0; same && e < a.size(); ++e)
        same = e == static_cast<size_t>(d) || a[e] == b[e];
      SP_CHECK(same, "op 'cat': input ", i, " ", b, " does not match ", a, " outside dim ", d);
      out[static_cast<size_t>(d)] += b[static_cast<size_t>(d)];
    }
    return std::vector<DimVector>{out};
  }
  if (call.op == "split") {
    check_arity(call, 1, 1);
    const auto& a = call.inputs[0];
    const int64_t d = wrap_dim(call, call.dim, static_cast<int64_t>(a.size()));
    int64_t total = 0;
    std::vector<DimVector> outs;
    for (int64_t piece : call.dims) {
      SP_CHECK(piece >= 0, "op 'split': negative piece size ", piece);
      total += piece;
      DimVector o = a;
      o[static_cast<size_t>(d)] = piece;
      outs.push_back(o);
    }
    SP_CHECK(!outs.empty() && total == a[static_cast<size_t>(d)], "op 'split': piece sizes sum to ",
             total, ", expected dim ", d, " size ", a[static_cast<size_t>(d)]);
    return outs;
  }
  return std::nullopt;
}

std::optional<std::vector<DimStrategy>> join_strategies(const OpCall& call) {
  if (call.op != "cat" && call.op != "split") return std::nullopt;
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  const int64_t jd = wrap_dim(call, call.dim, nd);
  const size_t n_in = call.inputs.size();
  const size_t n_out = call.op == "cat" ? 1 : call.dims.size();
  auto all = [&](Placement p) {
    return DimStrategy{std::vector<Placement>(n_out, p), std::vector<Placement>(n_in, p)};
  };
  // Any dim but the joined/split one may stay sharded; both ops are linear, so Partial passes.
  std::vector<DimStrategy> r{all(Replicate{})};
  for (int64_t d = 0; d < nd; ++d) {
    if (d != jd) r.push_back(all(Shard{d}));
  }
  r.push_back(all(Partial{}));
  return r;
}

}  // namespace shardplan::mesh::detail
