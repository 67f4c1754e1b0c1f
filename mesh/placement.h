// Placement: how one mesh dim lays a tensor out over its ranks (PyTorch DTensor placements,
// docs/semantics.md §2.1). A closed sum type; one Placement per mesh dim.
//   std::vector<Placement> p = parse_placements("S0,R");   // {Shard{0}, Replicate{}}
//   p[0].is_shard() && p[0].shard_dim() == 0;  to_string(p[1]) == "R"
//
// Why a matmul output is Partial (OneFlow's SBP note, restated for mesh (2,) and y = x @ w with
// x (4,6) and w (6,8)):
//   x placed [S(1)]: rank 0 holds x[:, 0:3], rank 1 holds x[:, 3:6]   (the contracted dim k is
//   split) w placed [S(0)]: rank 0 holds w[0:3, :], rank 1 holds w[3:6, :]   (same k split, same
//   ranks) Each rank multiplies its pieces: rank r computes y_r = x[:, kr] @ w[kr, :], a full (4,8)
//   tensor. The true y = sum over k of x[:,k] w[k,:] = y_0 + y_1, so neither rank holds y: each
//   holds a summand. That is Partial(sum): the value is the sum over the mesh dim, and an
//   all_reduce (-> R) or a reduce_scatter (-> S) turns it into a real layout. With x [S(0)] and w
//   [R] instead, rank r holds rows 2r..2r+1 of y exactly: [S(0)], no communication needed.
//
// Command-line syntax (docs/architecture.md §4.4), produced by to_string and read by
// parse_placement:
//   S<d>       Shard(d); d may be negative ("S-1") and is normalised against a tensor later
//   R          Replicate
//   P | Psum   Partial(sum);  Pavg, Pmax, Pmin, Pprod: Partial with that reduce op
//   SS<d>:<f>  _StridedShard(dim=d, split_factor=f), e.g. "SS0:2" (our choice; PyTorch has none)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace shardplan::mesh {

// The reduction a Partial placement stands for (PyTorch's reduce_op strings).
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin, kProd };

// "sum", "avg", "max", "min", "prod".
std::string_view reduce_op_name(ReduceOp op);

// Tensor dim `dim` is split over the mesh dim's ranks with torch.chunk semantics (docs/semantics.md
// §2.2).
struct Shard {
  int64_t dim = 0;
  friend bool operator==(const Shard&, const Shard&) = default;
};

// Every rank of the mesh dim holds the whole (current-level) tensor.
struct Replicate {
  friend bool operator==(const Replicate&, const Replicate&) = default;
};

// Every rank holds a partial value; the real value is `op` over the mesh dim's ranks.
struct Partial {
  ReduceOp op = ReduceOp::kSum;
  friend bool operator==(const Partial&, const Partial&) = default;
};

// PyTorch's _StridedShard (docs/semantics.md §2.5): chunk dim `dim` into `split_factor` pieces,
// chunk each piece over the k ranks, rank i holds the concatenation of every piece's i-th
// sub-chunk. Expresses "sharded by a later mesh dim first" (FSDP over TP: [SS(0, tp), S(0)] on mesh
// (dp, tp)). INVARIANT (checked by make_shard_spec, not here): split_factor >= 1.
struct StridedShard {
  int64_t dim = 0;
  int64_t split_factor = 1;
  friend bool operator==(const StridedShard&, const StridedShard&) = default;
};

class Placement {
 public:
  using Variant = std::variant<Shard, Replicate, Partial, StridedShard>;

  Placement() : v_(Replicate{}) {}
  Placement(Shard s) : v_(s) {}         // NOLINT: implicit, so {Shard{0}, Replicate{}} reads well
  Placement(Replicate r) : v_(r) {}     // NOLINT
  Placement(Partial p) : v_(p) {}       // NOLINT
  Placement(StridedShard s) : v_(s) {}  // NOLINT

  static Placement shard(int64_t dim) { return Shard{dim}; }
  static Placement replicate() { return Replicate{}; }
  static Placement partial(ReduceOp op = ReduceOp::kSum) { return Partial{op}; }
  static Placement strided_shard(int64_t dim, int64_t split_factor) {
    return StridedShard{dim, split_factor};
  }

  // Plain Shard only (a StridedShard is NOT is_shard(); use is_any_shard() for both).
  bool is_shard() const { return std::holds_alternative<Shard>(v_); }
  bool is_shard(int64_t dim) const { return is_shard() && std::get<Shard>(v_).dim == dim; }
  bool is_strided_shard() const { return std::holds_alternative<StridedShard>(v_); }
  // Shard or StridedShard: the placement splits a tensor dim.
  bool is_any_shard() const { return is_shard() || is_strided_shard(); }
  bool is_replicate() const { return std::holds_alternative<Replicate>(v_); }
  bool is_partial() const { return std::holds_alternative<Partial>(v_); }
  bool is_partial(ReduceOp op) const { return is_partial() && std::get<Partial>(v_).op == op; }

  // The split tensor dim of a Shard or StridedShard (SP_ASSERT otherwise).
  int64_t shard_dim() const;
  // split_factor of a StridedShard, 1 for a plain Shard (SP_ASSERT otherwise).
  int64_t split_factor() const;
  // The reduce op of a Partial (SP_ASSERT otherwise).
  ReduceOp reduce_op() const;

  const Variant& variant() const { return v_; }

  // Strict equality: StridedShard(d, f) != Shard(d). Older PyTorch made them compare equal to skip
  // an all-gather while hashing split_factor (inconsistent with its own hash); they hold different
  // elements, so here they differ.
  friend bool operator==(const Placement&, const Placement&) = default;

 private:
  Variant v_;
};

// "S0", "R", "P" (sum), "Pavg", "Pmax", "Pmin", "Pprod", "SS0:2" (see the syntax at the top).
std::string to_string(const Placement& p);
// "S0,R,P": one entry per mesh dim.
std::string to_string(const std::vector<Placement>& ps);
std::ostream& operator<<(std::ostream& os, const Placement& p);
std::ostream& operator<<(std::ostream& os, const std::vector<Placement>& ps);

// Parses one placement (case-sensitive, whitespace around it ignored). Throws shardplan::Error
// naming the text and the accepted forms.
Placement parse_placement(std::string_view text);
// Parses a comma-separated list, e.g. "S0,R". An empty list is an error.
std::vector<Placement> parse_placements(std::string_view text);

size_t hash_value(const Placement& p);
size_t hash_value(const std::vector<Placement>& ps);

// JSON: the command-line string ("S0", "SS0:2", "Pmax").
void to_json(nlohmann::json& j, const Placement& p);
// Reads the string at `path` ("" for the document) of `origin`; a non-string or a bad placement is
// a shardplan::Error naming the field: "plan.json: field 'placements[1]': placement 'X' is not
// valid: expected S<dim> ...".
Placement placement_from_json(const nlohmann::json& j, std::string_view origin = "placement",
                              std::string_view path = "");
// An array of placements (one per mesh dim), its entries named "<path>[i]".
std::vector<Placement> placements_from_json(const nlohmann::json& j,
                                            std::string_view origin = "placements",
                                            std::string_view path = "");
// placement_from_json with origin "placement" (j.get<Placement>() calls it).
void from_json(const nlohmann::json& j, Placement& p);

}  // namespace shardplan::mesh

template <>
struct std::hash<shardplan::mesh::Placement> {
  size_t operator()(const shardplan::mesh::Placement& p) const noexcept {
    return shardplan::mesh::hash_value(p);
  }
};
