// DeviceMesh: an n-d array of global ranks with optional dim names (PyTorch's DeviceMesh,
// docs/semantics.md §1). Row-major and strided layouts are stored as (offset, strides), never per
// rank, so a 1,000,000-rank mesh costs a few words; an arbitrary rank list is stored once, as
// given.
//   DeviceMesh m({2, 4}, {"dp", "tp"});           // ranks [[0,1,2,3],[4,5,6,7]]
//   m.coordinate_of(6) == MeshCoord{1, 2};  m.group_ranks(0, 1) == {1, 5}
//   m.slice({"tp"}, 5).ranks() == {4, 5, 6, 7}
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dim_vector.h"

namespace shardplan::mesh {

// The index of a rank along each mesh dim (not a tensor index).
using MeshCoord = shardplan::DimVector;

class DeviceMesh {
 public:
  // A 0-d mesh with one rank (rank 0); rarely useful, but makes DeviceMesh default-constructible.
  DeviceMesh();
  // init_device_mesh: ranks arange(prod(shape)) reshaped row-major (docs/semantics.md §1.2).
  // `dim_names` is empty or one unique non-empty name per dim. Throws shardplan::Error on a
  // size < 1, an overflowing product or bad names.
  explicit DeviceMesh(std::vector<int64_t> shape, std::vector<std::string> dim_names = {});
  // An arbitrary layout: `ranks` lists the global ranks in row-major order of `shape`. Ranks must
  // be
  // >= 0 and distinct, and their count must equal prod(shape). A list that happens to be an affine
  // layout (e.g. a transposed arange) is recognised and stored as such.
  static DeviceMesh from_ranks(std::vector<int64_t> shape, std::vector<int64_t> ranks,
                               std::vector<std::string> dim_names = {});

  // A strided layout: rank at coord = offset + sum coord[d] * strides[d]. Strides must make ranks
  // distinct in the "nested" sense (each stride larger than the span of the smaller ones), else
  // shardplan::Error. DeviceMesh({2,4}) == from_strides({2,4}, 0, {4,1}).
  static DeviceMesh from_strides(std::vector<int64_t> shape, int64_t offset,
                                 std::vector<int64_t> strides,
                                 std::vector<std::string> dim_names = {});

  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  // Total number of ranks.
  int64_t size() const { return size_; }
  // Extent of mesh dim `mesh_dim` (may be negative, counted from the end).
  int64_t size(int64_t mesh_dim) const;
  const std::vector<int64_t>& shape() const { return shape_; }
  // Empty when the mesh has no names.
  const std::vector<std::string>& dim_names() const { return names_; }
  bool has_dim_names() const { return !names_.empty(); }
  // The mesh dim called `name`; throws shardplan::Error if unnamed or unknown.
  int64_t dim_index(const std::string& name) const;
  // True for the default init_device_mesh layout (arange, row-major).
  bool is_row_major_arange() const;

  // True when the layout is stored as (offset, strides) rather than a rank list.
  bool is_strided() const { return explicit_ == nullptr; }
  // The strided layout (meaningful only when is_strided(); size-1 dims have stride 0).
  int64_t layout_offset() const { return offset_; }
  const std::vector<int64_t>& layout_strides() const { return strides_; }

  // The global rank at `coord` (one entry per mesh dim, each in range; SP_CHECK otherwise).
  int64_t rank_at(std::span<const int64_t> coord) const;
  // The rank at row-major position `flat_index` of the array (0 <= flat_index < size()).
  int64_t rank_at_flat_index(int64_t flat_index) const;
  // Where `rank` sits (docs/semantics.md §1.3); std::nullopt if the mesh does not contain it.
  // O(ndim) for strided layouts, O(log size) for explicit lists.
  std::optional<MeshCoord> coordinate_of(int64_t rank) const;
  bool contains(int64_t rank) const { return coordinate_of(rank).has_value(); }
  // Every rank in row-major order. Materialises size() integers: for tests and small meshes.
  std::vector<int64_t> ranks() const;

  // The process group along mesh dim `mesh_dim` that contains `rank` (docs/semantics.md §1.4): the
  // ranks whose coordinates equal rank's on every other dim, ordered by their coordinate on
  // `mesh_dim` (so the rank's index in it is its coordinate there, PyTorch's get_local_rank).
  // Throws if `rank` is not in the mesh.
  std::vector<int64_t> group_ranks(int64_t mesh_dim, int64_t rank) const;
  // Number of groups along `mesh_dim` = size() / size(mesh_dim).
  int64_t num_groups(int64_t mesh_dim) const;
  // Group number `group_index` along `mesh_dim`, groups numbered row-major over the other dims
  // (0 <= group_index < num_groups(mesh_dim)); enumerates groups without a rank to start from.
  std::vector<int64_t> group_ranks_by_index(int64_t mesh_dim, int64_t group_index) const;

  // mesh["dp", "cp"] for the caller `rank` (docs/semantics.md §1.5): the submesh over the named
  // dims, every other dim fixed at rank's coordinate. Names may come in any order; the submesh's
  // dims follow the requested order (what PyTorch's docstring shows; older PyTorch code only
  // accepted ascending order). Throws on an unnamed mesh, an unknown or repeated name, or a rank
  // not in the mesh.
  DeviceMesh slice(const std::vector<std::string>& names, int64_t rank) const;
  // The same by mesh dim indices, for unnamed meshes.
  DeviceMesh slice_dims(const std::vector<int64_t>& mesh_dims, int64_t rank) const;

  // Merges the named dims into one dim called `new_name` (default: names joined by "_", as
  // PyTorch's _flatten names "dp_cp"), placed at the lowest of their positions; its coordinate is
  // row-major over the named dims in the order given. (2,2,2) (dp,cp,tp) -> flatten_dims({dp,cp})
  // is (4,2) (dp_cp,tp), whose dp_cp group of rank 0 is [0,2,4,6] (docs/semantics.md §1.6). All
  // other dims are kept in order. The whole mesh is kept: slice the result to get PyTorch's 1-d
  // flattened submesh.
  DeviceMesh flatten_dims(const std::vector<std::string>& names, std::string new_name = "") const;
  DeviceMesh flatten_dims(const std::vector<int64_t>& mesh_dims, std::string new_name = "") const;
  // All dims into one (PyTorch's submesh._flatten()).
  DeviceMesh flatten(std::string new_name = "") const;

  // Equal = same shape, names and rank at every coordinate (PyTorch also compares device type and
  // thread id, which a planning mesh does not have).
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b);
  size_t hash() const;

 private:
  // Explicit rank list plus (rank, flat index) pairs sorted by rank for coordinate lookup.
  struct Explicit {
    std::vector<int64_t> ranks;
    std::vector<std::pair<int64_t, int64_t>> sorted;
  };

  // Builds the layout from an arbitrary list: affine if it is one, else explicit.
  void set_ranks(std::vector<int64_t> ranks);
  void check_names() const;
  MeshCoord unravel(int64_t flat_index) const;
  int64_t normalize_dim(int64_t mesh_dim) const;
  // slice/flatten: `mesh_dims` normalised, each at most once (else an error naming `what`);
  // `used` (one flag per mesh dim) marks the chosen ones.
  std::vector<int64_t> distinct_dims(const std::vector<int64_t>& mesh_dims, const char* what,
                                     std::vector<bool>& used) const;
  // A new mesh of `shape` whose rank at each coordinate is rank_of(coord) (enumerates it).
  DeviceMesh derived(std::vector<int64_t> shape, std::vector<std::string> names,
                     const std::function<int64_t(const MeshCoord&)>& rank_of) const;

  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
  int64_t size_ = 1;
  // Affine layout: rank = offset_ + sum coord[d] * strides_[d]. INVARIANT when explicit_ is null:
  // strides_ of dims with size > 1 are positive and "nested" (sorted descending, each exceeds the
  // span of all smaller ones), so the layout is injective and invertible by division; strides of
  // size-1 dims are 0. affine_order_ lists the dims of size > 1 by descending stride.
  int64_t offset_ = 0;
  std::vector<int64_t> strides_;
  std::vector<int64_t> affine_order_;
  // Non-null for layouts that are not affine; shared so copies are cheap (it is immutable).
  std::shared_ptr<const Explicit> explicit_;
};

// "DeviceMesh([[0, 1], [2, 3]], dim_names=(dp, tp))"; large meshes print shape and layout only.
std::ostream& operator<<(std::ostream& os, const DeviceMesh& m);
std::string to_string(const DeviceMesh& m);

// JSON: {"shape":[2,4], "dim_names":["dp","tp"]} for the default layout; strided layouts add
// "offset" and "strides", explicit ones "ranks".
void to_json(nlohmann::json& j, const DeviceMesh& m);
// Reads any of the three forms; unknown keys are refused. `j` is the value at `path` ("" for the
// document) of `origin` (a file name, or what the document is). Every bad input is a
// shardplan::Error naming the field: "plan.json: field 'spec.mesh.shape': element 0: expected an
// integer >= 1, got 0".
DeviceMesh device_mesh_from_json(const nlohmann::json& j, std::string_view origin = "device mesh",
                                 std::string_view path = "");
// device_mesh_from_json with origin "device mesh" (j.get<DeviceMesh>() calls it).
void from_json(const nlohmann::json& j, DeviceMesh& m);

}  // namespace shardplan::mesh

template <>
struct std::hash<shardplan::mesh::DeviceMesh> {
  size_t operator()(const shardplan::mesh::DeviceMesh& m) const noexcept { return m.hash(); }
};
