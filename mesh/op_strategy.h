// Sharding strategies of one op (docs/semantics.md §5): what an op call looks like to the
// propagation rules (global shapes and static arguments), the per-mesh-dim candidate lists each op
// family writes, and their expansion to the whole mesh (Cartesian product + shardability filter).
//   OpCall mm{"mm", {{8, 16}, {16, 32}}};
//   std::vector<DimStrategy> d = single_dim_strategies(mm);   // [R,R,R] [P,S1,S0] [S0,S0,R] ...
//   std::vector<OpStrategy> all = candidate_strategies(mm, DeviceMesh({2, 2}));   // 16 before
//   filter
// Families live in strategies_<family>.cpp; sharding_propagation.h picks one candidate by cost.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "base/dim_vector.h"
#include "mesh/device_mesh.h"
#include "mesh/placement.h"

namespace shardplan::mesh {

// One call of an op on global (unsharded) shapes. `inputs` are the tensor arguments in the op's
// argument order (PyTorch's schema order: addmm is (self, mat1, mat2), linear (input, weight[,
// bias]), embedding (weight, indices), layer_norm (input[, weight[, bias]])). The static arguments
// each family reads are listed beside them; unused ones are ignored.
struct OpCall {
  OpCall() = default;
  OpCall(std::string op_name, std::vector<shardplan::DimVector> input_shapes = {},
         shardplan::DimVector dims_arg = {})
      : op(std::move(op_name)), inputs(std::move(input_shapes)), dims(std::move(dims_arg)) {}

  std::string op;
  std::vector<shardplan::DimVector> inputs;
  // Reductions (sum, mean, amax, amin): the reduced dims (empty = all). permute: the permutation.
  // view/reshape: the target shape (one -1 allowed). split: the sizes of the pieces.
  shardplan::DimVector dims;
  // softmax/log_softmax, cat, split, transpose (first dim), unsqueeze, squeeze: the dim.
  int64_t dim = 0;
  int64_t dim1 = 1;  // transpose: the second dim
  bool keepdim = false;
  // layer_norm / rms_norm: how many trailing dims are normalized (the normalized_shape's length).
  int64_t normalized_ndim = 1;
  // Indexing (select, narrow, slice, chunk; `dim` is the indexed dim): select's index; narrow's and
  // slice's start (slice: Python clamping, negative counts from the end).
  int64_t start = 0;
  std::optional<int64_t> end;  // slice: the exclusive end (none: to the end of the dim)
  int64_t step = 1;            // slice
  int64_t length = 0;          // narrow
  int64_t chunks = 1;          // chunk: the number of pieces asked for
  // cross_entropy: "none", "mean" or "sum". expand: `dims` is the target shape (-1 keeps a size);
  // unflatten: `dims` are the sizes `dim` splits into (one -1 allowed); stack: `dim` is the new
  // dim; argmax and var: `dims` are the reduced dims (argmax: at most one; empty = all).
  std::string reduction = "mean";
};

// The placements of every output and every input on ONE mesh dim (what PyTorch's strategy authors
// write as [out, in1, in2, ...]).
struct DimStrategy {
  std::vector<Placement> outputs;
  std::vector<Placement> inputs;
  friend bool operator==(const DimStrategy&, const DimStrategy&) = default;
};

// A whole-mesh candidate: per output and per input, one Placement per mesh dim.
struct OpStrategy {
  std::vector<std::vector<Placement>> outputs;
  std::vector<std::vector<Placement>> inputs;
  friend bool operator==(const OpStrategy&, const OpStrategy&) = default;
};

// The global output shapes of `call` (checked: an input count or shape the op rejects is a
// shardplan::Error naming the op).
std::vector<shardplan::DimVector> output_shapes(const OpCall& call);

// The per-mesh-dim candidate list of `call` on a mesh dim of `mesh_dim_size` ranks, in the
// family's documented order. A missing strategy is a shardplan::Error "op 'X' has no sharding
// strategy". (The size matters only to view ops, whose rules depend on divisibility.)
std::vector<DimStrategy> single_dim_strategies(const OpCall& call, int64_t mesh_dim_size = 2);

// expand_to_full_mesh_op_strategy (§5.1.6): the Cartesian product of the per-dim lists over the
// mesh dims (mesh dim 0 varies slowest), keeping candidates whose inputs are all shardable (§5.1.7)
// and that pass the family's whole-mesh checks (view ops: divisibility by the product of the mesh
// dims sharding one tensor dim; mean: even shards under Partial(avg)).
std::vector<OpStrategy> candidate_strategies(const OpCall& call, const DeviceMesh& mesh);

// True for ops whose strategies need no redistribution to be taken (`view`, `_unsafe_view`,
// `unflatten`): propagation raises instead of redistributing their input (§5.5 strict views).
bool is_strict_view(const std::string& op);

std::ostream& operator<<(std::ostream& os, const DimStrategy& s);
std::ostream& operator<<(std::ostream& os, const OpStrategy& s);
std::ostream& operator<<(std::ostream& os, const OpCall& call);

namespace detail {
// Family entry points (strategies_*.cpp). Each returns std::nullopt when `call.op` is not one of
// its ops.
std::optional<std::vector<DimStrategy>> matmul_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> pointwise_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> reduction_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> nn_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> join_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> view_strategies(const OpCall& call, int64_t mesh_dim_size);
// Indexing views (strategies_slice.cpp: expand, select, narrow, slice; as_strided is refused),
// pieces (strategies_stack.cpp: stack, chunk, unbind) and the reductions that are not
// Partial-linear (strategies_stats.cpp: argmax, var, cross_entropy).
std::optional<std::vector<DimStrategy>> slice_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> stack_strategies(const OpCall& call);
std::optional<std::vector<DimStrategy>> stats_strategies(const OpCall& call);
// Pointwise ops follow one input (docs/semantics.md §5.3): the in-place/out= argument is not
// modelled, so the input with the most shards (tie: more dims, then the earliest). Returns the
// output placements that following it gives (Shard re-indexed into the broadcast shape; a Partial
// the op cannot keep becomes Replicate), or nullopt for ops that are not pointwise.
std::optional<std::vector<Placement>> pointwise_followed_output(
    const OpCall& call, const std::vector<std::vector<Placement>>& current, const DeviceMesh& mesh);
// View ops keep what they can and replicate the rest (docs/semantics.md §5.5, non-strict views):
// the input placements a view of `current` runs on (a Shard the view cannot keep becomes
// Replicate), or nullopt for ops that are not views.
std::optional<std::vector<Placement>> view_followed_input(const OpCall& call,
                                                          const std::vector<Placement>& current,
                                                          const DeviceMesh& mesh);
// Whole-mesh checks of a candidate (true for ops of other families): views need divisibility by
// the product of the mesh dims sharding one tensor dim; attention with grouped-query heads needs
// the kv heads split evenly.
bool view_candidate_ok(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s);
// Why a view op cannot keep input dim `in_dim` sharded `shards` ways ("" when it can), in
// PyTorch's words ("Attempted to flatten unevenly sharded dimension ...").
std::string view_keep_refusal(const OpCall& call, int64_t in_dim, int64_t shards);
bool nn_candidate_ok(const OpCall& call, const DeviceMesh& mesh, const OpStrategy& s);
std::optional<std::vector<shardplan::DimVector>> matmul_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> pointwise_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> reduction_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> nn_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> join_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> view_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> slice_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> stack_output_shapes(const OpCall& call);
std::optional<std::vector<shardplan::DimVector>> stats_output_shapes(const OpCall& call);
// Non-strict indexing views keep the shards they can and replicate the rest (like
// view_followed_input): the input placements they run on, or nullopt for other ops.
std::optional<std::vector<Placement>> slice_followed_input(const OpCall& call,
                                                           const std::vector<Placement>& current);
// Normalises `dim` against `ndim` (negative counts from the end); error names the op.
int64_t wrap_dim(const OpCall& call, int64_t dim, int64_t ndim);
// The reduced dims of a reduction-like op (sum, mean, amax, amin, argmax, var): `call.dims`
// normalised against input 0 and sorted, all dims when empty; a repeated dim is an error.
std::vector<int64_t> reduced_dims(const OpCall& call);
// Checks the number of tensor inputs.
void check_arity(const OpCall& call, size_t min_inputs, size_t max_inputs);
}  // namespace detail

}  // namespace shardplan::mesh
