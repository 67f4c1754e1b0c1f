// Ops that join tensors or cut one into pieces along a dim, beside cat/split (strategies_nn.cpp):
//  * stack(tensors, dim): cat on a new dim. The new dim exists in no input, so it cannot be
//    sharded; every input dim may be, all inputs alike, landing one place right of the new dim.
//  * chunk(t, chunks, dim): split into ceil(size / chunks)-sized pieces (PyTorch's sizes, the
//    last piece shorter, fewer pieces than asked when they run out); unbind(t, dim): one piece per
//    index, dim removed. As for split, the cut dim must be whole on every rank (a piece's rows
//    would sit on some ranks only) and the other dims keep their shards in every output.
// All three copy elements, a linear map, so Partial(sum) passes through.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

using shardplan::DimVector;

bool is_stack_op(const std::string& op) { return op == "stack" || op == "chunk" || op == "unbind"; }

// The cut dim of chunk/unbind, normalised (0-d inputs refused as PyTorch does).
int64_t cut_dim(const OpCall& call) {
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  SP_CHECK(nd > 0, "op '", call.op, "': expects at least a 1-d tensor");
  return wrap_dim(call, call.dim, nd);
}

}  // namespace

std::optional<std::vector<DimVector>> stack_output_shapes(const OpCall& call) {
  if (!is_stack_op(call.op)) return std::nullopt;
  if (call.op == "stack") {
    check_arity(call, 1, 1 << 20);
    const DimVector& a = call.inputs[0];
    for (size_t i = 1; i < call.inputs.size(); ++i) {
      SP_CHECK(call.inputs[i] == a, "op 'stack': every input must have shape ", a, ", input ", i,
               " has ", call.inputs[i]);
    }
    const int64_t d = wrap_dim(call, call.dim, static_cast<int64_t>(a.size()) + 1);
    DimVector out = a;
    out.insert(static_cast<size_t>(d), static_cast<int64_t>(call.inputs.size()));
    return std::vector<DimVector>{out};
  }
  check_arity(call, 1, 1);
  const DimVector& a = call.inputs[0];
  const int64_t d = cut_dim(call);
  const int64_t size = a[static_cast<size_t>(d)];
  std::vector<DimVector> outs;
  if (call.op == "unbind") {
    DimVector piece = a;
    piece.erase(static_cast<size_t>(d));
    outs.assign(static_cast<size_t>(size), piece);
    return outs;
  }
  SP_CHECK(call.chunks > 0, "op 'chunk': chunks must be > 0, got ", call.chunks);
  DimVector piece = a;
  if (size == 0) {  // PyTorch keeps the requested number of empty pieces
    piece[static_cast<size_t>(d)] = 0;
    outs.assign(static_cast<size_t>(call.chunks), piece);
    return outs;
  }
  const int64_t each = (size + call.chunks - 1) / call.chunks;
  for (int64_t begin = 0; begin < size; begin += each) {
    piece[static_cast<size_t>(d)] = std::min(each, size - begin);
    outs.push_back(piece);
  }
  return outs;
}

std::optional<std::vector<DimStrategy>> stack_strategies(const OpCall& call) {
  if (!is_stack_op(call.op)) return std::nullopt;
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  const size_t n_in = call.inputs.size();
  const size_t n_out = stack_output_shapes(call)->size();
  auto make = [&](Placement out, Placement in) {
    return DimStrategy{std::vector<Placement>(n_out, out), std::vector<Placement>(n_in, in)};
  };
  std::vector<DimStrategy> r{make(Replicate{}, Replicate{})};
  if (call.op == "stack") {
    const int64_t nd_out = wrap_dim(call, call.dim, nd + 1);
    for (int64_t d = 0; d < nd; ++d) r.push_back(make(Shard{d < nd_out ? d : d + 1}, Shard{d}));
  } else {
    const int64_t cd = cut_dim(call);
    for (int64_t d = 0; d < nd; ++d) {
      if (d == cd) continue;
      r.push_back(make(Shard{call.op == "unbind" && d > cd ? d - 1 : d}, Shard{d}));
    }
  }
  r.push_back(make(Partial{}, Partial{}));
  return r;
}

}  // namespace shardplan::mesh::detail
