// ShardSpec: a global meta tensor (shape, strides, dtype) laid out over a DeviceMesh with one
// Placement per mesh dim (PyTorch's DTensorSpec), and the free functions giving each rank's local
// shard: shape, global offset, strides, bytes, and the global index ranges it holds
// (docs/semantics.md §2).
//   ShardSpec s = make_shard_spec({10, 5}, DType::kBFloat16, DeviceMesh({2, 2}),
//                                 parse_placements("S0,S0"));
//   local_shape(s, {0, 1}) == {2, 5};  global_offset(s, {0, 1}) == {3, 0}   // rows 3..4
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dim_vector.h"
#include "mesh/device_mesh.h"
#include "mesh/placement.h"
#include "tensor/dtype.h"

namespace shardplan::tensor {
class Tensor;
}

namespace shardplan::mesh {

struct ShardSpec {
  shardplan::DimVector shape;    // global sizes; INVARIANT: each >= 0, numel and bytes fit in int64
  shardplan::DimVector strides;  // global strides (elements); INVARIANT: same length as shape
  tensor::DType dtype = tensor::DType::kFloat32;
  DeviceMesh mesh;
  // INVARIANT: one per mesh dim; Shard/StridedShard dims normalised into [0, ndim); split_factor
  // >= 1.
  std::vector<Placement> placements;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  friend bool operator==(const ShardSpec&, const ShardSpec&) = default;
};

// Validates and normalises (negative Shard dims -> dim + ndim). One shardplan::Error each for: a
// placements list whose length is not mesh.ndim(), a Shard/StridedShard dim the tensor lacks, a
// split_factor < 1, a negative size, an overflowing numel or byte count. Strides default to
// contiguous. Empty shards are allowed here, as in PyTorch's distribute_tensor; is_shardable and
// check_shardable say whether a layout avoids them.
ShardSpec make_shard_spec(std::span<const int64_t> shape, tensor::DType dtype, DeviceMesh mesh,
                          std::vector<Placement> placements);
ShardSpec make_shard_spec(std::span<const int64_t> shape, std::span<const int64_t> strides,
                          tensor::DType dtype, DeviceMesh mesh, std::vector<Placement> placements);
// Shape, strides and dtype taken from a (meta) tensor.
ShardSpec make_shard_spec(const tensor::Tensor& t, DeviceMesh mesh,
                          std::vector<Placement> placements);

// PyTorch's is_tensor_shardable (docs/semantics.md §5.1.7): for every tensor dim, the product of
// the sizes of the mesh dims sharding it (times the split_factor of a StridedShard, §2.5) is at
// most the dim's size. Uneven shards pass, and torch.chunk can still leave trailing shards empty
// (5 on 4 ranks: 2,2,1,0).
bool is_shardable(const ShardSpec& spec);
// Throws shardplan::Error naming the first dim that is not shardable and the numbers involved.
void check_shardable(const ShardSpec& spec);
// Every sharded dim divides evenly at every level (is_tensor_evenly_shardable).
bool is_evenly_shardable(const ShardSpec& spec);
// Product of mesh sizes over mesh dims whose placement is a (strided) shard
// (DTensorSpec.num_shards).
int64_t num_shards(const ShardSpec& spec);
// All placements Replicate.
bool is_replicated(const ShardSpec& spec);

// One level of torch.chunk (docs/semantics.md §2.2): element count and first index of chunk `r` of
// `n` elements split `k` ways. Trailing chunks may be empty: (5, 4) -> sizes 2,2,1,0; an empty
// chunk's offset is min(c*r, n) (use the ShardSpec functions for the global sentinel).
struct ChunkPiece {
  int64_t size = 0;
  int64_t offset = 0;
};
ChunkPiece chunk_piece(int64_t n, int64_t k, int64_t r);

// A rank's local shard: its sizes and the global index of its first element per tensor dim.
struct LocalShard {
  shardplan::DimVector shape;
  shardplan::DimVector offset;
  friend bool operator==(const LocalShard&, const LocalShard&) = default;
};

// compute_local_shape_and_global_offset (docs/semantics.md §2.3-2.5) for mesh coordinate `coord`:
// mesh dims applied left to right, each chunking the current local size; offsets compose through
// the index list. A dim whose shard is empty gets offset = global size (the sentinel DCP uses to
// drop it). Throws if `coord` is not a coordinate of spec.mesh.
LocalShard local_shape_and_offset(const ShardSpec& spec, std::span<const int64_t> coord);
// The same for a global rank; a rank not in the mesh gets shape {0} and an empty offset (§1.3).
LocalShard local_shape_and_offset_for_rank(const ShardSpec& spec, int64_t rank);
shardplan::DimVector local_shape(const ShardSpec& spec, std::span<const int64_t> coord);
shardplan::DimVector global_offset(const ShardSpec& spec, std::span<const int64_t> coord);
// Strides of the local shard as materialised (a clone of the chunk): dense strides in the memory
// order of the global strides. Equals PyTorch's compute_local_stride (§2.4) whenever the sharding
// is even: (4,8,4) strides (32,1,8) with S(2) on 2 ranks -> (16,1,8).
shardplan::DimVector local_strides(const ShardSpec& spec, std::span<const int64_t> coord);
// numel(local shape) * itemsize.
int64_t local_bytes(const ShardSpec& spec, std::span<const int64_t> coord);

// Half-open global index range [begin, end) along one tensor dim.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};
// For each tensor dim, the global indices the shard at `coord` holds, as ranges in local order:
// local position p along dim d is the p-th index of the concatenated ranges. One range for plain
// shards (none when empty), several for a StridedShard. Unsharded dims give [0, size) (none if
// the size is 0).
// The shard holds exactly the Cartesian product of its dims' index sets.
std::vector<std::vector<IndexRange>> global_index_ranges(const ShardSpec& spec,
                                                         std::span<const int64_t> coord);

// "ShardSpec(shape=[10, 5], dtype=bfloat16, mesh=DeviceMesh(...), placements=[S0,S0])"
std::ostream& operator<<(std::ostream& os, const ShardSpec& spec);
std::string to_string(const ShardSpec& spec);
size_t hash_value(const ShardSpec& spec);

// JSON: {"shape":[...], "strides":[...], "dtype":"bfloat16", "mesh":{...},
// "placements":["S0","R"]}.
void to_json(nlohmann::json& j, const ShardSpec& spec);
// Reads what to_json writes ("strides" optional: contiguous; "dtype" optional: float32), checked
// field by field and then by make_shard_spec; unknown keys are refused. `j` is the value at `path`
// ("" for the document) of `origin`; every bad input is a shardplan::Error naming the field
// ("shard spec: field 'mesh.shape': ...", "shard spec: field 'placements[0]': ...").
ShardSpec shard_spec_from_json(const nlohmann::json& j, std::string_view origin = "shard spec",
                               std::string_view path = "");
// shard_spec_from_json with origin "shard spec" (j.get<ShardSpec>() calls it).
void from_json(const nlohmann::json& j, ShardSpec& spec);

}  // namespace shardplan::mesh

template <>
struct std::hash<shardplan::mesh::ShardSpec> {
  size_t operator()(const shardplan::mesh::ShardSpec& s) const noexcept {
    return shardplan::mesh::hash_value(s);
  }
};
