// Pointwise ops with broadcasting and Partial linearity (docs/semantics.md §5.3), and reductions
// over dims.
// Note [Partial linearity]
// A rank holding a Partial(sum) summand x_r may apply f locally only if f(sum x_r) = sum f(x_r):
//  * add/sub of two Partial(sum) inputs: (sum a_r) + (sum b_r) = sum (a_r + b_r)   -> all Partial.
//    add of Partial and Replicate would add the replicated term n times: not a candidate.
//  * mul/div by a Replicate factor: (sum a_r) * b = sum (a_r * b) -> Partial input and output, the
//    other input Replicate. Partial * Partial would need the cross terms: not a candidate.
//  * unary linear ops (neg, mul/div by a scalar, dtype cast) keep Partial(sum) and Partial(avg);
//    every other unary op (relu, exp, silu...) gets no Partial candidate, so the input is reduced.
//  * maximum/minimum of two Partial(max)/(min) inputs stay Partial(max)/(min).
// Reductions: summing a sharded dim leaves each rank its piece's sum: Partial(sum); mean -> Partial
// (avg) (only for even shards, checked over the whole mesh); amax/amin -> Partial(max)/(min).
#include <algorithm>
#include <set>
#include <string>

#include "base/error.h"
#include "mesh/broadcast_map.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

const std::set<std::string>& unary_nonlinear() {
  static const std::set<std::string> s{
      "relu", "exp",  "log", "sqrt",       "rsqrt",  "sin",     "cos", "tanh",       "sigmoid",
      "silu", "gelu", "abs", "reciprocal", "square", "dropout", "erf", "logical_not"};
  return s;
}
const std::set<std::string>& unary_linear() {
  static const std::set<std::string> s{"neg", "mul_scalar", "div_scalar",
                                       "to",  "clone",      "contiguous"};
  return s;
}
const std::set<std::string>& binary_ops() {
  static const std::set<std::string> s{"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                       "eq",  "ne",  "lt",  "le",  "gt",  "ge",      "where"};
  return s;
}

bool is_pointwise(const std::string& op) {
  return unary_nonlinear().count(op) || unary_linear().count(op) || binary_ops().count(op);
}

void check_pointwise_arity(const OpCall& call) {
  if (call.op == "where")
    check_arity(call, 3, 3);
  else if (binary_ops().count(call.op))
    check_arity(call, 2, 2);
  else
    check_arity(call, 1, 1);
}

const std::set<std::string>& reduction_ops() {
  static const std::set<std::string> s{"sum", "mean", "amax", "amin"};
  return s;
}

ReduceOp reduce_op_of(const std::string& op) {
  if (op == "mean") return ReduceOp::kAvg;
  if (op == "amax") return ReduceOp::kMax;
  if (op == "amin") return ReduceOp::kMin;
  return ReduceOp::kSum;
}

}  // namespace

std::optional<std::vector<shardplan::DimVector>> pointwise_output_shapes(const OpCall& call) {
  if (!is_pointwise(call.op)) return std::nullopt;
  check_pointwise_arity(call);
  auto out = broadcast_shapes(call.inputs);
  SP_CHECK(out.has_value(), "op '", call.op, "': input shapes do not broadcast: ", call);
  return std::vector<shardplan::DimVector>{*out};
}

std::optional<std::vector<DimStrategy>> pointwise_strategies(const OpCall& call) {
  if (!is_pointwise(call.op)) return std::nullopt;
  const shardplan::DimVector out = *broadcast_shapes(call.inputs);
  const size_t n = call.inputs.size();
  std::vector<DimStrategy> r;
  r.push_back({{Replicate{}}, std::vector<Placement>(n, Replicate{})});
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    DimStrategy s{{Shard{d}}, {}};
    for (const auto& in : call.inputs) s.inputs.push_back(map_to_input(Shard{d}, out, in));
    r.push_back(std::move(s));
  }
  // Partial candidates (Note [Partial linearity]).
  auto all = [&](Placement p) { return DimStrategy{{p}, std::vector<Placement>(n, p)}; };
  if (unary_linear().count(call.op)) {
    r.push_back(all(Partial{ReduceOp::kSum}));
    r.push_back(all(Partial{ReduceOp::kAvg}));
  } else if (call.op == "add" || call.op == "sub") {
    r.push_back(all(Partial{ReduceOp::kSum}));
  } else if (call.op == "mul") {
    r.push_back({{Partial{}}, {Partial{}, Replicate{}}});
    r.push_back({{Partial{}}, {Replicate{}, Partial{}}});
  } else if (call.op == "div") {
    r.push_back({{Partial{}}, {Partial{}, Replicate{}}});  // only the numerator is linear
  } else if (call.op == "maximum") {
    r.push_back(all(Partial{ReduceOp::kMax}));
  } else if (call.op == "minimum") {
    r.push_back(all(Partial{ReduceOp::kMin}));
  }
  return r;
}

std::optional<std::vector<Placement>> pointwise_followed_output(
    const OpCall& call, const std::vector<std::vector<Placement>>& current,
    const DeviceMesh& mesh) {
  if (!is_pointwise(call.op)) return std::nullopt;
  SP_ASSERT(current.size() == call.inputs.size());
  size_t follow = 0;
  int64_t best_shards = -1;
  for (size_t i = 0; i < current.size(); ++i) {
    int64_t shards = 1;
    for (size_t md = 0; md < current[i].size(); ++md) {
      if (current[i][md].is_any_shard()) shards *= mesh.size(static_cast<int64_t>(md));
    }
    if (shards > best_shards ||
        (shards == best_shards && call.inputs[i].size() > call.inputs[follow].size())) {
      follow = i, best_shards = shards;
    }
  }
  const shardplan::DimVector out = *broadcast_shapes(call.inputs);
  const auto lead = static_cast<int64_t>(out.size() - call.inputs[follow].size());
  const std::vector<DimStrategy> table = *pointwise_strategies(call);
  std::vector<Placement> r;
  for (const Placement& p : current[follow]) {
    if (p.is_any_shard()) {
      r.push_back(Shard{p.shard_dim() + lead});
    } else if (p.is_partial()) {
      const bool kept = std::any_of(table.begin(), table.end(),
                                    [&](const DimStrategy& s) { return s.outputs[0] == p; });
      r.push_back(kept ? p : Placement(Replicate{}));
    } else {
      r.push_back(p);
    }
  }
  return r;
}

std::optional<std::vector<shardplan::DimVector>> reduction_output_shapes(const OpCall& call) {
  if (!reduction_ops().count(call.op)) return std::nullopt;
  check_arity(call, 1, 1);
  const std::vector<int64_t> red = reduced_dims(call);
  shardplan::DimVector out;
  const auto& in = call.inputs[0];
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    const bool reduced = std::binary_search(red.begin(), red.end(), d);
    if (!reduced)
      out.push_back(in[static_cast<size_t>(d)]);
    else if (call.keepdim)
      out.push_back(1);
  }
  return std::vector<shardplan::DimVector>{out};
}

std::optional<std::vector<DimStrategy>> reduction_strategies(const OpCall& call) {
  if (!reduction_ops().count(call.op)) return std::nullopt;
  const std::vector<int64_t> red = reduced_dims(call);
  const ReduceOp op = reduce_op_of(call.op);
  std::vector<DimStrategy> r;
  r.push_back({{Replicate{}}, {Replicate{}}});
  int64_t out_d = 0;  // position of input dim d in the output
  for (int64_t d = 0; d < static_cast<int64_t>(call.inputs[0].size()); ++d) {
    const bool reduced = std::binary_search(red.begin(), red.end(), d);
    if (!reduced) r.push_back({{Shard{out_d}}, {Shard{d}}});
    if (!reduced || call.keepdim) ++out_d;
  }
  for (int64_t d : red) r.push_back({{Partial{op}}, {Shard{d}}});
  // A reduction of a Partial input: sum and mean are linear; max of per-rank maxima is the max.
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
    r.push_back({{Partial{ReduceOp::kSum}}, {Partial{ReduceOp::kSum}}});
    if (op == ReduceOp::kAvg) r.push_back({{Partial{ReduceOp::kAvg}}, {Partial{ReduceOp::kAvg}}});
  } else {
    r.push_back({{Partial{op}}, {Partial{op}}});
  }
  return r;
}

}  // namespace shardplan::mesh::detail
