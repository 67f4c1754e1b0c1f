// Indexing views: expand, select, narrow, slice (PyTorch's non-strict view ops, docs/semantics.md
// §5.5: what cannot stay sharded is replicated, then the op runs locally). Every rank must be able
// to take its output piece from its input piece alone:
//  * expand: a dim broadcast from size 1 (or a new leading dim) has no input dim to carry a shard,
//    so the input is whole there (Replicate); a dim that keeps its size keeps its shard (the
//    Broadcast vs InputDim dim map of docs/semantics.md §5.5);
//  * select / narrow / slice: the indexed dim cannot stay sharded, since the picked rows sit on
//    some ranks only and the output's torch.chunk split of the new size would not line up with
//    them; the other dims follow, re-indexed past a removed dim. A slice keeping the whole dim
//    is the identity and keeps its shard: its bounds clamp to each rank's piece, so the same call
//    runs locally. A whole-dim narrow does not: its length would overrun a rank's piece.
//    (docs/semantics.md §5.5 has a PyTorch rule for expand only; the select/narrow/slice rules are
//    derived here.)
// All four pick or copy elements, a linear map, so Partial(sum) passes through. The local call
// takes the rank's sizes where the global call names sizes (expand's kept dims; -1 needs none),
// as DTensor rewrites the size arguments of view ops.
// as_strided is refused: its sizes and strides address the global storage, which no rank holds.
#include <algorithm>
#include <limits>
#include <string>

#include "base/error.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

using shardplan::DimVector;

bool is_slice_op(const std::string& op) {
  return op == "expand" || op == "select" || op == "narrow" || op == "slice";
}

DimVector expand_target(const OpCall& call) {
  const DimVector& in = call.inputs[0];
  const DimVector& want = call.dims;
  SP_CHECK(want.size() >= in.size(), "op 'expand': the number of sizes provided (", want.size(),
           ") must be greater or equal to the number of dimensions in the tensor (", in.size(),
           ")");
  const size_t lead = want.size() - in.size();
  DimVector out(want.size(), 0);
  for (size_t i = 0; i < want.size(); ++i) {
    if (i < lead) {
      SP_CHECK(want[i] >= 0, "op 'expand': size ", want[i], " of new leading dim ", i,
               " must be >= 0 (-1 is only allowed for existing dims)");
      out[i] = want[i];
      continue;
    }
    const int64_t s = in[i - lead];
    const int64_t t = want[i] == -1 ? s : want[i];
    SP_CHECK(t >= 0 && (t == s || s == 1), "op 'expand': cannot expand ", in, " to ", want,
             " (dim ", i, " has size ", s, ", only size-1 dims expand)");
    out[i] = t;
  }
  return out;
}

// The indexed dim of select/narrow/slice, normalised (0-d inputs refused as PyTorch does).
int64_t indexed_dim(const OpCall& call) {
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  SP_CHECK(nd > 0, "op '", call.op, "': cannot be applied to a 0-d tensor");
  return wrap_dim(call, call.dim, nd);
}

}  // namespace

std::optional<std::vector<DimVector>> slice_output_shapes(const OpCall& call) {
  if (call.op == "as_strided") {
    SP_FAIL(
        "op 'as_strided' has no sharding strategy: its sizes and strides address the global ",
        "storage, which no rank holds (use a view, narrow or slice, or replicate the input and ",
        "call it on the local tensor)");
  }
  if (!is_slice_op(call.op)) return std::nullopt;
  check_arity(call, 1, 1);
  if (call.op == "expand") return std::vector<DimVector>{expand_target(call)};
  DimVector out = call.inputs[0];
  const int64_t d = indexed_dim(call);
  const int64_t size = out[static_cast<size_t>(d)];
  if (call.op == "select") {
    SP_CHECK(call.start >= -size && call.start < size, "op 'select': index ", call.start,
             " out of range for dim ", d, " of size ", size);
    out.erase(static_cast<size_t>(d));
  } else if (call.op == "narrow") {
    const int64_t start = call.start < 0 ? call.start + size : call.start;
    SP_CHECK(start >= 0 && start <= size && call.length >= 0 && call.length <= size - start,
             "op 'narrow': start ", call.start, " + length ", call.length, " exceeds dim ", d,
             " of size ", size);
    out[static_cast<size_t>(d)] = call.length;
  } else {  // slice, with Python's clamping of start and end
    SP_CHECK(call.step > 0, "op 'slice': step must be positive, got ", call.step);
    int64_t start = call.start, end = call.end.value_or(std::numeric_limits<int64_t>::max());
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, start, size);
    out[static_cast<size_t>(d)] = (end - start + call.step - 1) / call.step;
  }
  return std::vector<DimVector>{out};
}

std::optional<std::vector<DimStrategy>> slice_strategies(const OpCall& call) {
  if (!is_slice_op(call.op)) return std::nullopt;
  const DimVector& in = call.inputs[0];
  const DimVector out = slice_output_shapes(call)->front();
  std::vector<DimStrategy> r{{{Replicate{}}, {Replicate{}}}};
  const auto nd = static_cast<int64_t>(in.size());
  if (call.op == "expand") {
    const auto lead = static_cast<int64_t>(out.size()) - nd;
    for (int64_t d = 0; d < nd; ++d) {
      if (in[static_cast<size_t>(d)] == out[static_cast<size_t>(d + lead)]) {
        r.push_back({{Shard{d + lead}}, {Shard{d}}});
      }
    }
  } else {
    const int64_t id = indexed_dim(call);
    for (int64_t d = 0; d < nd; ++d) {
      if (d == id) {
        // Only a slice that keeps the whole dim (the identity) keeps its shard.
        if (call.op == "slice" && out[static_cast<size_t>(d)] == in[static_cast<size_t>(d)]) {
          r.push_back({{Shard{d}}, {Shard{d}}});
        }
        continue;
      }
      const int64_t o = call.op == "select" && d > id ? d - 1 : d;
      r.push_back({{Shard{o}}, {Shard{d}}});
    }
  }
  r.push_back({{Partial{}}, {Partial{}}});
  return r;
}

std::optional<std::vector<Placement>> slice_followed_input(const OpCall& call,
                                                           const std::vector<Placement>& current) {
  if (!is_slice_op(call.op)) return std::nullopt;
  const std::vector<DimStrategy> table = *slice_strategies(call);
  std::vector<Placement> r = current;
  for (Placement& p : r) {
    if (!p.is_any_shard()) continue;
    // A strided shard has no rule here either: replicate it like a shard that cannot be kept.
    const bool kept = !p.is_strided_shard() &&
                      std::any_of(table.begin(), table.end(),
                                  [&](const DimStrategy& s) { return s.inputs[0] == p; });
    if (!kept) p = Replicate{};
  }
  return r;
}

}  // namespace shardplan::mesh::detail
