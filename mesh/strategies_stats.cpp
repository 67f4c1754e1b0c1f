// Reductions that are not Partial-linear: argmax, var and cross_entropy.
//  * argmax over a sharded dim: each rank's local argmax is an index into its own piece, and the
//    winner needs the (value, index) pairs of all ranks; no Placement reduces that, so the reduced
//    dim must be whole (Replicate). A Partial input is not reducible either (the argmax of a sum is
//    not a function of the ranks' argmaxes). The other dims keep their shards.
//  * var: the variance of a union is not the sum, mean or max of the pieces' variances (it needs
//    each piece's mean and count too), and var(sum of summands) is not the sum of their
//    variances: the reduced dims are Replicate and no Partial input or output, like argmax.
//    (PyTorch has no rule for either; this is the mathematically correct one.)
//  * cross_entropy(input, target[, weight]): the loss of one row needs the log-softmax over the
//    class dim (dim 1, or 0 for a 1-d input), so the class dim is Replicate; the batch/sequence
//    dims shard input and target alike, the weight stays whole. The reduction decides the output:
//    "none" keeps the shard; "sum" gives Partial(sum); "mean" gives Partial(avg), exact only when
//    every rank averages as many rows (the even-shard filter of candidate_strategies) and no
//    target equals ignore_index (a meta planner cannot see target values: it assumes none do);
//    "mean" with a class weight and class indices divides by the sum of the picked weights, which
//    differs per rank: no sharded candidate (with probabilities it divides by the row count: kept).
//    The vocab-parallel loss (class dim sharded, log-sum-exp combined across ranks, as PyTorch's
//    loss_parallel) is a later topic: it is not a per-rank local op.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

using shardplan::DimVector;

bool is_stats_op(const std::string& op) {
  return op == "argmax" || op == "var" || op == "cross_entropy";
}

// argmax/var: the reduced dims (detail::reduced_dims); argmax takes one dim or all.
std::vector<int64_t> reduced(const OpCall& call) {
  SP_CHECK(call.op != "argmax" || call.dims.size() <= 1,
           "op 'argmax': reduces one dim or all, got ", call.dims.size(), " dims");
  return reduced_dims(call);
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int64_t class_dim(const DimVector& input) { return input.size() == 1 ? 0 : 1; }

// cross_entropy: true when the target holds class indices (input's shape without the class dim),
// false for class probabilities (input's shape); anything else is an error.
bool indices_target(const OpCall& call) {
  const DimVector& x = call.inputs[0];
  const DimVector& t = call.inputs[1];
  DimVector loss = x;
  loss.erase(static_cast<size_t>(class_dim(x)));
  SP_CHECK(t == loss || t == x, "op 'cross_entropy': target ", t, " must be class indices ", loss,
           " or class probabilities ", x);
  return t == loss;
}

}  // namespace

std::optional<std::vector<DimVector>> stats_output_shapes(const OpCall& call) {
  if (!is_stats_op(call.op)) return std::nullopt;
  if (call.op == "cross_entropy") {
    check_arity(call, 2, 3);
    const DimVector& x = call.inputs[0];
    SP_CHECK(!x.empty(), "op 'cross_entropy': input must have a class dim, got a 0-d tensor");
    SP_CHECK(call.reduction == "none" || call.reduction == "mean" || call.reduction == "sum",
             "op 'cross_entropy': reduction '", call.reduction, "' is not one of none, mean, sum");
    indices_target(call);
    const int64_t c = x[static_cast<size_t>(class_dim(x))];
    if (call.inputs.size() == 3) {
      SP_CHECK(call.inputs[2] == DimVector{c}, "op 'cross_entropy': weight ", call.inputs[2],
               " must be [", c, "] (one per class)");
    }
    if (call.reduction != "none") return std::vector<DimVector>{DimVector{}};
    DimVector loss = x;
    loss.erase(static_cast<size_t>(class_dim(x)));
    return std::vector<DimVector>{loss};
  }
  check_arity(call, 1, 1);
  const DimVector& x = call.inputs[0];
  const std::vector<int64_t> red = reduced(call);
  DimVector out;
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    const bool r = contains(red, d);
    SP_CHECK(call.op != "argmax" || !r || x[static_cast<size_t>(d)] > 0, "op 'argmax': cannot ",
             "reduce the empty dim ", d, " of ", x);
    if (!r)
      out.push_back(x[static_cast<size_t>(d)]);
    else if (call.keepdim)
      out.push_back(1);
  }
  return std::vector<DimVector>{out};
}

std::optional<std::vector<DimStrategy>> stats_strategies(const OpCall& call) {
  if (!is_stats_op(call.op)) return std::nullopt;
  const size_t n = call.inputs.size();
  const auto nd = static_cast<int64_t>(call.inputs[0].size());
  std::vector<DimStrategy> r{{{Replicate{}}, std::vector<Placement>(n, Replicate{})}};
  if (call.op != "cross_entropy") {
    const std::vector<int64_t> red = reduced(call);
    int64_t out_d = 0;  // position of input dim d in the output
    for (int64_t d = 0; d < nd; ++d) {
      const bool rd = contains(red, d);
      if (!rd) r.push_back({{Shard{out_d}}, {Shard{d}}});
      if (!rd || call.keepdim) ++out_d;
    }
    return r;
  }
  const int64_t cd = class_dim(call.inputs[0]);
  const bool indices = indices_target(call);
  if (call.reduction == "mean" && n == 3 && indices) return r;  // a ratio of two sums
  for (int64_t d = 0; d < nd; ++d) {
    if (d == cd) continue;
    const int64_t loss_d = d > cd ? d - 1 : d;
    const Placement out = call.reduction == "none"  ? Placement(Shard{loss_d})
                          : call.reduction == "sum" ? Placement(Partial{ReduceOp::kSum})
                                                    : Placement(Partial{ReduceOp::kAvg});
    DimStrategy s{{out}, {Shard{d}, Shard{indices ? loss_d : d}}};
    if (n == 3) s.inputs.push_back(Replicate{});
    r.push_back(std::move(s));
  }
  return r;
}

}  // namespace shardplan::mesh::detail
