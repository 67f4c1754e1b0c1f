// View ops (docs/semantics.md §5.5): reshape-like ops are described by groups of input dims whose
// product equals a group of output dims (size-1 dims stand alone). Within a group only the leftmost
// input dim may stay sharded, and only where every rank's piece is still one contiguous run of the
// output:
//  * flatten (several input dims -> one): the leftmost input dim must divide evenly, else a rank's
//    rows would not line up with the torch.chunk split of the flattened dim;
//  * split (one input dim -> several): the first output piece must divide evenly by the shards;
//  * permute / transpose / t only re-index dims: any sharding carries over.
// Views are linear, so Partial passes through. `view` and `unflatten` (PyTorch's unflatten is a
// view() of the split shape: one input dim -> several) are strict (sharding_propagation.h refuses
// to redistribute for them); reshape, flatten, squeeze and unsqueeze replicate what cannot be kept.
#include <numeric>
#include <sstream>
#include <string>

#include "base/checked.h"
#include "base/error.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

using shardplan::DimVector;

bool is_reshape_like(const std::string& op) {
  return op == "view" || op == "_unsafe_view" || op == "reshape" || op == "flatten" ||
         op == "unsqueeze" || op == "squeeze" || op == "unflatten";
}
bool is_permute_like(const std::string& op) {
  return op == "permute" || op == "transpose" || op == "t";
}

int64_t numel(const OpCall& call, const DimVector& s) {
  int64_t n = 1;
  for (int64_t v : s) {
    SP_CHECK(v >= 0 && mul_into(n, v, n), "op '", call.op, "': shape ", s,
             " has a negative size or overflows int64");
  }
  return n;
}

// The target shape of a reshape-like op (one -1 inferred for view/reshape).
DimVector reshape_target(const OpCall& call) {
  const DimVector& in = call.inputs[0];
  const auto nd = static_cast<int64_t>(in.size());
  if (call.op == "flatten") {
    const int64_t s = wrap_dim(call, call.dim, nd), e = wrap_dim(call, call.dim1, nd);
    SP_CHECK(s <= e, "op 'flatten': start_dim ", s, " after end_dim ", e);
    DimVector out;
    for (int64_t d = 0; d < s; ++d) out.push_back(in[static_cast<size_t>(d)]);
    int64_t p = 1;
    for (int64_t d = s; d <= e; ++d) p *= in[static_cast<size_t>(d)];
    out.push_back(p);
    for (int64_t d = e + 1; d < nd; ++d) out.push_back(in[static_cast<size_t>(d)]);
    if (nd == 0) return DimVector{1};
    return out;
  }
  if (call.op == "unsqueeze") {
    const int64_t d = wrap_dim(call, call.dim, nd + 1);
    DimVector out = in;
    out.insert(static_cast<size_t>(d), 1);
    return out;
  }
  if (call.op == "squeeze") {
    DimVector out;
    std::vector<bool> drop(in.size(), call.dims.empty());
    for (int64_t d : call.dims) drop[static_cast<size_t>(wrap_dim(call, d, nd))] = true;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!(drop[d] && in[d] == 1)) out.push_back(in[d]);
    }
    return out;
  }
  // view / reshape with at most one -1; unflatten: the same, on the one dim it splits.
  const bool unflat = call.op == "unflatten";
  const int64_t ud = unflat ? wrap_dim(call, call.dim, nd) : 0;
  if (unflat) SP_CHECK(!call.dims.empty(), "op 'unflatten': sizes must be non-empty");
  const int64_t n = unflat ? in[static_cast<size_t>(ud)] : numel(call, in);
  DimVector out = call.dims;
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      SP_CHECK(infer < 0, "op '", call.op, "': only one dim can be -1 in ", out);
      infer = static_cast<int64_t>(d);
      continue;
    }
    SP_CHECK(out[d] >= 0, "op '", call.op, "': invalid size ", out[d], " in ", out);
    SP_CHECK(mul_into(known, out[d], known), "op '", call.op, "': shape ", out, " overflows int64");
  }
  if (infer >= 0) {
    SP_CHECK(known > 0 && n % known == 0, "op '", call.op, "': shape ", out,
             " is invalid for input of size ", n);
    out[static_cast<size_t>(infer)] = n / known;
  } else {
    SP_CHECK(known == n, "op '", call.op, "': shape ", out, " is invalid for input of size ", n);
  }
  if (!unflat) return out;
  DimVector full;
  for (int64_t d = 0; d < ud; ++d) full.push_back(in[static_cast<size_t>(d)]);
  for (int64_t s : out) full.push_back(s);
  for (int64_t d = ud + 1; d < nd; ++d) full.push_back(in[static_cast<size_t>(d)]);
  return full;
}

// A group of input dims and output dims with equal products (size-1 dims excluded).
struct Group {
  std::vector<int64_t> in, out;
};

std::vector<Group> view_groups(const DimVector& in, const DimVector& out) {
  std::vector<int64_t> a, b;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1) a.push_back(static_cast<int64_t>(d));
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] != 1) b.push_back(static_cast<int64_t>(d));
  }
  std::vector<Group> groups;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    Group g{{a[i]}, {b[j]}};
    int64_t pa = in[static_cast<size_t>(a[i++])], pb = out[static_cast<size_t>(b[j++])];
    while (pa != pb) {
      if (pa < pb) {
        SP_ASSERT(i < a.size());
        g.in.push_back(a[i]);
        pa *= in[static_cast<size_t>(a[i++])];
      } else {
        SP_ASSERT(j < b.size());
        g.out.push_back(b[j]);
        pb *= out[static_cast<size_t>(b[j++])];
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

// Output dim that input dim `d` lands on when its sharding is kept, or -1; `why` gets the reason
// when it cannot be kept `shards` ways.
int64_t kept_dim(const OpCall& call, int64_t d, int64_t shards, std::string* why) {
  const DimVector& in = call.inputs[0];
  if (is_permute_like(call.op)) {
    const auto nd = static_cast<int64_t>(in.size());
    if (call.op == "permute") {
      for (size_t o = 0; o < call.dims.size(); ++o) {
        if (wrap_dim(call, call.dims[o], nd) == d) return static_cast<int64_t>(o);
      }
      SP_ASSERT(false);
    }
    const int64_t a = call.op == "t" ? 0 : wrap_dim(call, call.dim, nd);
    const int64_t b = call.op == "t" ? (nd == 2 ? 1 : 0) : wrap_dim(call, call.dim1, nd);
    return d == a ? b : d == b ? a : d;
  }
  const DimVector out = reshape_target(call);
  if (numel(call, in) == 0) {
    *why = "a view of an empty tensor keeps no sharding";
    return -1;
  }
  if (in[static_cast<size_t>(d)] == 1) {
    *why = "a size-1 dim cannot stay sharded";
    return -1;
  }
  for (const Group& g : view_groups(in, out)) {
    bool mine = false;
    for (int64_t x : g.in) mine = mine || x == d;
    if (!mine) continue;
    std::ostringstream os;
    if (g.in[0] != d) {
      os << "Attempted to flatten multiple dimensions, with dimension " << d
         << " being sharded; only the leftmost flattened dim " << g.in[0] << " may be";
    } else if (g.in.size() > 1 && in[static_cast<size_t>(d)] % shards != 0) {
      os << "Attempted to flatten unevenly sharded dimension " << d << " (size "
         << in[static_cast<size_t>(d)] << " over " << shards << " shards)";
    } else if (g.out.size() > 1 && out[static_cast<size_t>(g.out[0])] % shards != 0) {
      os << "Attempted to split the sharded dimension " << d << " into "
         << out[static_cast<size_t>(g.out[0])] << " x ...; the first piece does not divide by "
         << shards << " shards";
    } else {
      return g.out[0];
    }
    *why = os.str();
    return -1;
  }
  SP_ASSERT(false, "input dim ", d, " of ", in, " is in no view group of the view to ", out);
  return -1;
}

}  // namespace

std::optional<std::vector<DimVector>> view_output_shapes(const OpCall& call) {
  if (!is_reshape_like(call.op) && !is_permute_like(call.op)) return std::nullopt;
  check_arity(call, 1, 1);
  const DimVector& in = call.inputs[0];
  const auto nd = static_cast<int64_t>(in.size());
  if (is_reshape_like(call.op)) return std::vector<DimVector>{reshape_target(call)};
  DimVector out = in;
  if (call.op == "permute") {
    SP_CHECK(static_cast<int64_t>(call.dims.size()) == nd, "op 'permute': ", call.dims.size(),
             " dims given for a ", nd, "-d tensor");
    std::vector<bool> seen(in.size(), false);
    for (size_t o = 0; o < call.dims.size(); ++o) {
      const int64_t d = wrap_dim(call, call.dims[o], nd);
      SP_CHECK(!seen[static_cast<size_t>(d)], "op 'permute': dim ", d, " repeated");
      seen[static_cast<size_t>(d)] = true;
      out[o] = in[static_cast<size_t>(d)];
    }
  } else if (call.op == "t") {
    SP_CHECK(nd <= 2, "op 't': expects a tensor of at most 2 dims, got ", nd);
    if (nd == 2) std::swap(out[0], out[1]);
  } else {
    std::swap(out[static_cast<size_t>(wrap_dim(call, call.dim, nd))],
              out[static_cast<size_t>(wrap_dim(call, call.dim1, nd))]);
  }
  return std::vector<DimVector>{out};
}

std::string view_keep_refusal(const OpCall& call, int64_t in_dim, int64_t shards) {
  std::string why;
  kept_dim(call, in_dim, shards, &why);
  return why;
}

std::optional<std::vector<DimStrategy>> view_strategies(const OpCall& call, int64_t mesh_dim_size) {
  if (!is_reshape_like(call.op) && !is_permute_like(call.op)) return std::nullopt;
  std::vector<DimStrategy> r{{{Replicate{}}, {Replicate{}}}};
  std::string why;
  for (int64_t d = 0; d < static_cast<int64_t>(call.inputs[0].size()); ++d) {
    const int64_t o = kept_dim(call, d, mesh_dim_size, &why);
    if (o >= 0) r.push_back({{Shard{o}}, {Shard{d}}});
  }
  r.push_back({{Partial{}}, {Partial{}}});
  return r;
}

std::optional<std::vector<Placement>> view_followed_input(const OpCall& call,
                                                          const std::vector<Placement>& current,
                                                          const DeviceMesh& mesh) {
  if (auto r = slice_followed_input(call, current)) return r;
  if (!is_reshape_like(call.op) && !is_permute_like(call.op)) return std::nullopt;
  std::vector<Placement> r = current;
  std::string why;
  for (size_t md = 0; md < r.size(); ++md) {
    if (!r[md].is_any_shard()) continue;
    const int64_t d = r[md].shard_dim();
    int64_t shards = 1;
    for (size_t k = 0; k < current.size(); ++k) {
      if (current[k].is_any_shard() && current[k].shard_dim() == d) {
        shards *= mesh.size(static_cast<int64_t>(k));
      }
    }
    // A strided shard has no view rule: replicate it like an unkeepable shard.
    if (r[md].is_strided_shard() || kept_dim(call, d, shards, &why) < 0) r[md] = Replicate{};
  }
  return r;
}

bool view_candidate_ok(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s) {
  if (!is_reshape_like(call.op)) return true;  // permutes keep anything; other families: n/a
  const auto& ps = s.inputs[0];
  std::string why;
  for (int64_t d = 0; d < static_cast<int64_t>(call.inputs[0].size()); ++d) {
    int64_t shards = 1;
    for (size_t md = 0; md < ps.size(); ++md) {
      if (ps[md].is_shard(d)) shards *= mesh.size(static_cast<int64_t>(md));
    }
    if (shards > 1 && kept_dim(call, d, shards, &why) < 0) return false;
  }
  return true;
}

}  // namespace shardplan::mesh::detail
