// Broadcasting between an op's output and one of its inputs, for the strategy rules
// (docs/semantics.md §5.3, infer_broadcast_dims_map): dims align from the right, and an output dim
// maps to an input dim only when the sizes are equal (a size-1 or missing input dim is broadcast,
// so it holds no shard).
//   map_to_input(Shard{1}, {4, 8}, {8}) == Shard{0};   map_to_input(Shard{0}, {4, 8}, {8}) == R
#pragma once

#include <optional>

#include "base/dim_vector.h"
#include "mesh/placement.h"

namespace shardplan::mesh::detail {

// The input dim output dim `out_dim` maps to, or nullopt when it is broadcast.
std::optional<int64_t> input_dim_of(int64_t out_dim, const shardplan::DimVector& out_shape,
                                    const shardplan::DimVector& in_shape);
// The input placement that yields output placement `p`: Shard re-indexed (or Replicate on a
// broadcast dim); Replicate and Partial unchanged.
Placement map_to_input(const Placement& p, const shardplan::DimVector& out_shape,
                       const shardplan::DimVector& in_shape);
// `in` broadcasts to `out` (every aligned dim equal or 1, no more dims than `out`).
bool broadcasts_to(const shardplan::DimVector& in, const shardplan::DimVector& out);
// The broadcast shape of several shapes, or nullopt when they do not broadcast.
std::optional<shardplan::DimVector> broadcast_shapes(
    const std::vector<shardplan::DimVector>& shapes);

}  // namespace shardplan::mesh::detail
