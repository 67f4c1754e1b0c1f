// Einsum-style strategies for the matmul family (docs/semantics.md §5.2): dims of the equation are
// batch (in the output and both inputs), contracting (in both inputs, not the output), lhs-only and
// rhs-only. Sharding a batch / lhs-only / rhs-only dim splits the output the same way; sharding a
// contracting dim on both inputs leaves each rank a summand of the output: Partial(sum).
#include <algorithm>
#include <string>

#include "base/error.h"
#include "mesh/broadcast_map.h"
#include "mesh/op_strategy.h"

namespace shardplan::mesh::detail {

namespace {

// "ab mk, kn -> ab mn": one letter per dim of each operand.
struct Equation {
  std::string lhs, rhs, out;
};

// Batch dims of N-d operands get letters from here (never k, m or n).
constexpr const char* kBatchLetters = "abcdefghij";

int64_t pos(const std::string& s, char c) {
  const auto p = s.find(c);
  return p == std::string::npos ? -1 : static_cast<int64_t>(p);
}

std::vector<DimStrategy> einsum_strategies(const Equation& eq) {
  std::string batch, contract, lhs_only, rhs_only;
  for (char c : eq.lhs) {
    const bool in_rhs = pos(eq.rhs, c) >= 0, in_out = pos(eq.out, c) >= 0;
    if (in_rhs && in_out)
      batch += c;
    else if (in_rhs)
      contract += c;
    else if (in_out)
      lhs_only += c;
  }
  for (char c : eq.rhs) {
    if (pos(eq.lhs, c) < 0 && pos(eq.out, c) >= 0) rhs_only += c;
  }
  for (std::string* g : {&batch, &contract, &lhs_only, &rhs_only}) std::sort(g->begin(), g->end());

  auto sh = [](const std::string& s, char c) -> Placement {
    return pos(s, c) >= 0 ? Placement(Shard{pos(s, c)}) : Placement(Replicate{});
  };
  std::vector<DimStrategy> r;
  r.push_back({{Replicate{}}, {Replicate{}, Replicate{}}});
  for (char c : batch) r.push_back({{sh(eq.out, c)}, {sh(eq.lhs, c), sh(eq.rhs, c)}});
  for (char c : contract) r.push_back({{Partial{}}, {sh(eq.lhs, c), sh(eq.rhs, c)}});
  for (char c : lhs_only) r.push_back({{sh(eq.out, c)}, {sh(eq.lhs, c), Replicate{}}});
  for (char c : rhs_only) r.push_back({{sh(eq.out, c)}, {Replicate{}, sh(eq.rhs, c)}});
  return r;
}

void check_equal(const OpCall& call, int64_t a, int64_t b, const char* what) {
  SP_CHECK(a == b, "op '", call.op, "': ", what, " sizes differ (", a, " vs ", b, ")");
}

// The equation of matmul-like `a @ b` (matmul's 1-d/2-d/N-d cases, mm, bmm), checking sizes.
Equation matmul_equation(const OpCall& call, const shardplan::DimVector& a,
                         const shardplan::DimVector& b) {
  const auto na = a.size(), nb = b.size();
  SP_CHECK(na >= 1 && nb >= 1, "op '", call.op, "': operands must be at least 1-d, got ", na,
           "-d and ", nb, "-d");
  check_equal(call, a[na - 1], nb == 1 ? b[0] : b[nb - 2], "contracted");
  if (na == 1 && nb == 1) return {"k", "k", ""};
  if (na == 1 && nb == 2) return {"k", "kn", "n"};
  if (na == 2 && nb == 1) return {"mk", "k", "m"};
  if (nb == 2) {  // N-d @ 2-d: the leading dims of a ride along like m (lhs-only)
    SP_CHECK(na - 2 <= 10, "op '", call.op, "': too many batch dims");
    const std::string bl(kBatchLetters, na - 2);
    return {bl + "mk", "kn", bl + "mn"};
  }
  // Both N-d: the batch dims must match exactly (broadcast batch dims have no strategy here).
  SP_CHECK(na == nb && na <= 12, "op '", call.op, "' has no sharding strategy for broadcast batch ",
           "dims (", na, "-d @ ", nb, "-d); expand the operands first");
  for (size_t d = 0; d + 2 < na; ++d) check_equal(call, a[d], b[d], "batch");
  const std::string bl(kBatchLetters, na - 2);
  return {bl + "mk", bl + "kn", bl + "mn"};
}

shardplan::DimVector equation_output(const Equation& eq, const shardplan::DimVector& a,
                                  const shardplan::DimVector& b) {
  shardplan::DimVector out;
  for (char c : eq.out) {
    const int64_t p = pos(eq.lhs, c);
    out.push_back(p >= 0 ? a[static_cast<size_t>(p)] : b[static_cast<size_t>(pos(eq.rhs, c))]);
  }
  return out;
}

// The equation of `call` and the index of its two matrix operands in call.inputs, plus the index
// of a bias added to the output (-1 when none).
struct MatmulForm {
  Equation eq;
  size_t lhs = 0, rhs = 1;
  int64_t bias = -1;
  shardplan::DimVector out_shape;
};

std::optional<MatmulForm> matmul_form(const OpCall& call) {
  const auto& in = call.inputs;
  MatmulForm f;
  if (call.op == "mm" || call.op == "bmm" || call.op == "matmul" || call.op == "dot") {
    check_arity(call, 2, 2);
    const size_t want = call.op == "mm" ? 2 : call.op == "bmm" ? 3 : call.op == "dot" ? 1 : 0;
    if (want) {
      SP_CHECK(in[0].size() == want && in[1].size() == want, "op '", call.op, "': expected two ",
               want, "-d operands, got ", in[0].size(), "-d and ", in[1].size(), "-d");
    }
    f.eq = matmul_equation(call, in[0], in[1]);
  } else if (call.op == "addmm" || call.op == "baddbmm") {
    check_arity(call, 3, 3);
    const size_t want = call.op == "addmm" ? 2 : 3;
    SP_CHECK(in[1].size() == want && in[2].size() == want, "op '", call.op, "': expected two ",
             want, "-d matrices, got ", in[1].size(), "-d and ", in[2].size(), "-d");
    f.eq = matmul_equation(call, in[1], in[2]);
    f.lhs = 1, f.rhs = 2, f.bias = 0;
  } else if (call.op == "linear") {
    // y = x w^T (+ b): x (..., k), w (n, k): the weight's rows are the output features.
    check_arity(call, 2, 3);
    SP_CHECK(in[1].size() == 2, "op 'linear': weight must be 2-d, got ", in[1].size(), "-d");
    SP_CHECK(!in[0].empty() && in[0].size() <= 11, "op 'linear': input must be 1-d to 11-d");
    check_equal(call, in[0].back(), in[1][1], "in_features");
    const std::string bl(kBatchLetters, in[0].size() - 1);
    f.eq = {bl + "k", "nk", bl + "n"};
    if (in.size() == 3) f.bias = 2;
  } else {
    return std::nullopt;
  }
  f.out_shape = equation_output(f.eq, in[f.lhs], in[f.rhs]);
  if (f.bias >= 0) {
    const auto& b = in[static_cast<size_t>(f.bias)];
    SP_CHECK(broadcasts_to(b, f.out_shape), "op '", call.op, "': bias ", b,
             " does not broadcast to the output ", f.out_shape);
  }
  return f;
}

}  // namespace

std::optional<std::vector<shardplan::DimVector>> matmul_output_shapes(const OpCall& call) {
  auto f = matmul_form(call);
  if (!f) return std::nullopt;
  return std::vector<shardplan::DimVector>{f->out_shape};
}

std::optional<std::vector<DimStrategy>> matmul_strategies(const OpCall& call) {
  auto f = matmul_form(call);
  if (!f) return std::nullopt;
  std::vector<DimStrategy> base = einsum_strategies(f->eq);
  std::vector<DimStrategy> r;
  for (const DimStrategy& s : base) {
    DimStrategy d;
    d.outputs = s.outputs;
    d.inputs.assign(call.inputs.size(), Replicate{});
    d.inputs[f->lhs] = s.inputs[0];
    d.inputs[f->rhs] = s.inputs[1];
    if (f->bias >= 0) {
      // The bias follows the output through broadcasting; under a Partial output each rank adds
      // bias/n (replicate -> partial is local, §5.2).
      const auto b = static_cast<size_t>(f->bias);
      d.inputs[b] = map_to_input(s.outputs[0], f->out_shape, call.inputs[b]);
    }
    r.push_back(std::move(d));
  }
  return r;
}

}  // namespace shardplan::mesh::detail
