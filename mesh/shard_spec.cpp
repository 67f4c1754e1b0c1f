#include "mesh/shard_spec.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/checked.h"
#include "base/error.h"
#include "base/json_fields.h"
#include "tensor/tensor.h"

namespace shardplan::mesh {

// Shapes print as [2, 3] (base/error.h); this namespace's own operator<< would hide it.
using ::shardplan::operator<<;

using shardplan::DimVector;

ShardSpec make_shard_spec(std::span<const int64_t> shape, tensor::DType dtype, DeviceMesh mesh,
                          std::vector<Placement> placements) {
  // Sizes first: contiguous_strides assumes a shape whose element count fits int64.
  (void)tensor::checked_numel(shape, "shard spec");
  const DimVector strides = tensor::contiguous_strides(shape);
  return make_shard_spec(shape, strides, dtype, std::move(mesh), std::move(placements));
}

ShardSpec make_shard_spec(const tensor::Tensor& t, DeviceMesh mesh,
                          std::vector<Placement> placements) {
  SP_CHECK(t.defined(), "shard spec: the tensor is undefined");
  return make_shard_spec(t.sizes(), t.strides(), t.dtype(), std::move(mesh), std::move(placements));
}

ShardSpec make_shard_spec(std::span<const int64_t> shape, std::span<const int64_t> strides,
                          tensor::DType dtype, DeviceMesh mesh, std::vector<Placement> placements) {
  // Sizes >= 0 and numel/bytes within int64, so every local count derived later fits too.
  const int64_t numel = tensor::checked_numel(shape, "shard spec");
  int64_t bytes = 0;
  SP_CHECK(mul_into(numel, tensor::itemsize(dtype), bytes), "shard spec: shape ", shape, " of ",
           dtype, " holds more than 2^63 bytes");
  SP_CHECK(strides.size() == shape.size(), "shard spec: strides ", strides, " have ",
           strides.size(), " entries for shape ", shape, ", expected one per dim");
  SP_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(), "placements [",
           to_string(placements), "] have ", placements.size(), " entries for a ", mesh.ndim(),
           "-d mesh of shape ", std::span<const int64_t>(mesh.shape()),
           ", expected one per mesh dim");
  const int64_t ndim = static_cast<int64_t>(shape.size());
  for (size_t md = 0; md < placements.size(); ++md) {
    Placement& p = placements[md];
    if (!p.is_any_shard()) continue;
    const int64_t d = p.shard_dim();
    SP_CHECK(d >= -ndim && d < ndim, "placement ", to_string(p), " on mesh dim ", md,
             " shards tensor dim ", d, ", but the tensor of shape ", shape, " has ", ndim,
             " dims, expected a dim in [", -ndim, ", ", ndim - 1, "]");
    const int64_t nd = d < 0 ? d + ndim : d;
    // Shard(-1) means the last dim (docs/semantics.md §2.1); store it normalised.
    if (p.is_shard()) {
      p = Shard{nd};
    } else {
      SP_CHECK(p.split_factor() >= 1, "placement ", to_string(p), " on mesh dim ", md,
               ": split_factor must be >= 1");
      p = StridedShard{nd, p.split_factor()};
    }
  }
  ShardSpec spec;
  spec.shape = DimVector(shape);
  spec.strides = DimVector(strides);
  spec.dtype = dtype;
  spec.mesh = std::move(mesh);
  spec.placements = std::move(placements);
  return spec;
}

namespace {

// For tensor dim d: the number of shards (product of the sizes of the mesh dims sharding it) times
// the split factors of its strided shards; false on overflow.
bool required_size(const ShardSpec& spec, int64_t d, int64_t* need) {
  *need = 1;
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    const Placement& p = spec.placements[md];
    if (!p.is_any_shard() || p.shard_dim() != d) continue;
    if (!mul_into(*need, spec.mesh.shape()[md], *need) ||
        !mul_into(*need, p.split_factor(), *need)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool is_shardable(const ShardSpec& spec) {
  for (int64_t d = 0; d < spec.ndim(); ++d) {
    int64_t need = 0;
    if (!required_size(spec, d, &need) || spec.shape[static_cast<size_t>(d)] < need) return false;
  }
  return true;
}

void check_shardable(const ShardSpec& spec) {
  for (int64_t d = 0; d < spec.ndim(); ++d) {
    int64_t need = 0;
    const bool fits = required_size(spec, d, &need);
    const int64_t n = spec.shape[static_cast<size_t>(d)];
    SP_CHECK(fits && n >= need, "placements [", to_string(spec.placements), "] on mesh ",
             std::span<const int64_t>(spec.mesh.shape()), " split tensor dim ", d, " of size ", n,
             " (shape ", spec.shape, ") into ", fits ? std::to_string(need) : "more than 2^63",
             " shards, expected at most ", n, " shards (more shards than elements)");
  }
}

bool is_evenly_shardable(const ShardSpec& spec) {
  DimVector cur = spec.shape;
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    const Placement& p = spec.placements[md];
    if (!p.is_any_shard()) continue;
    const size_t d = static_cast<size_t>(p.shard_dim());
    const int64_t k = spec.mesh.shape()[md];
    // A strided shard is even when every one of its split_factor pieces splits evenly.
    int64_t unit = 0;
    if (!mul_into(k, p.split_factor(), unit) || cur[d] % unit != 0) return false;
    cur[d] /= k;
  }
  return true;
}

int64_t num_shards(const ShardSpec& spec) {
  int64_t n = 1;
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    if (spec.placements[md].is_any_shard()) n *= spec.mesh.shape()[md];
  }
  return n;
}

bool is_replicated(const ShardSpec& spec) {
  for (const Placement& p : spec.placements) {
    if (!p.is_replicate()) return false;
  }
  return true;
}

ChunkPiece chunk_piece(int64_t n, int64_t k, int64_t r) {
  SP_ASSERT(n >= 0 && k >= 1 && r >= 0 && r < k, "chunk_piece(", n, ", ", k, ", ", r, ")");
  // torch.chunk: c = ceil(n/k) elements per chunk, the last non-empty one shorter, the rest empty.
  const int64_t c = n / k + (n % k != 0);
  // Chunk r starts at c * r, empty when that is at or past n; compared without computing c * r
  // or start + c, which pass int64 for sizes and meshes near 2^63.
  if (c == 0 || r > (n - 1) / c) return {0, n};
  const int64_t start = c * r;
  return {std::min(n - start, c), start};
}

namespace {

void check_coord(const ShardSpec& spec, std::span<const int64_t> coord) {
  const std::vector<int64_t>& ms = spec.mesh.shape();
  SP_CHECK(coord.size() == ms.size(), "mesh coordinate ", coord, " has ", coord.size(),
           " entries, expected ", ms.size(), " for mesh shape ", std::span<const int64_t>(ms));
  for (size_t md = 0; md < coord.size(); ++md) {
    SP_CHECK(coord[md] >= 0 && coord[md] < ms[md], "mesh coordinate ", coord,
             " is out of range for mesh shape ", std::span<const int64_t>(ms));
  }
}

bool has_strided_shard(const ShardSpec& spec) {
  for (const Placement& p : spec.placements) {
    if (p.is_strided_shard()) return true;
  }
  return false;
}

// Appends local positions [a, b) of the index list `from` (ranges in local order) to `to`, merging
// a range that continues the previous one.
void select_positions(const std::vector<IndexRange>& from, int64_t a, int64_t b,
                      std::vector<IndexRange>* to) {
  int64_t s = 0;  // local position of the current range's first element
  for (const IndexRange& r : from) {
    const int64_t lo = std::max(a, s), hi = std::min(b, s + r.size());
    if (lo < hi) {
      const IndexRange piece{r.begin + (lo - s), r.begin + (hi - s)};
      if (!to->empty() && to->back().end == piece.begin) {
        to->back().end = piece.end;
      } else {
        to->push_back(piece);
      }
    }
    s += r.size();
    if (s >= b) break;
  }
}

// The general algorithm of docs/semantics.md §2.4 with index lists as ranges (needed for strided
// shards).
std::vector<std::vector<IndexRange>> ranges_general(const ShardSpec& spec,
                                                    std::span<const int64_t> coord,
                                                    DimVector* local) {
  std::vector<std::vector<IndexRange>> lists(spec.shape.size());
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] > 0) lists[d].push_back({0, spec.shape[d]});
  }
  *local = spec.shape;
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    const Placement& p = spec.placements[md];
    if (!p.is_any_shard()) continue;
    const size_t d = static_cast<size_t>(p.shard_dim());
    const int64_t k = spec.mesh.shape()[md], i = coord[md], n = (*local)[d];
    std::vector<IndexRange> next;
    int64_t size = 0;
    // docs/semantics.md §2.5: chunk into split_factor pieces, each piece into k; this rank takes
    // sub-chunk i of every piece. A plain Shard is the split_factor == 1 case.
    for (int64_t j = 0; j < p.split_factor(); ++j) {
      const ChunkPiece piece = chunk_piece(n, p.split_factor(), j);
      if (piece.size == 0) break;  // pieces shrink: the rest are empty too
      const ChunkPiece sub = chunk_piece(piece.size, k, i);
      if (sub.size == 0) continue;
      select_positions(lists[d], piece.offset + sub.offset, piece.offset + sub.offset + sub.size,
                       &next);
      size += sub.size;
    }
    lists[d] = std::move(next);
    (*local)[d] = size;
  }
  return lists;
}

// One (strided) shard level of ranges_general in closed form: the n current positions are cut
// into pieces of c = ceil(n / split_factor) (the last non-empty one shorter) and this rank takes
// sub-chunk i of k of each. Size and position mapping are O(1), where listing the pieces is
// O(split_factor): SS0:72957295 took seconds per rank, a split factor near 2^63 forever.
struct ShardLevel {
  int64_t piece = 0;              // c
  int64_t full = 0;               // pieces before the last non-empty one, each c long
  ChunkPiece sub_full, sub_last;  // this rank's sub-chunk of a full piece and of the last one

  ShardLevel(int64_t n, int64_t split_factor, int64_t k, int64_t i) {
    if (n == 0) return;
    piece = chunk_piece(n, split_factor, 0).size;
    full = (n - 1) / piece;  // ceil(n / c) - 1
    sub_full = chunk_piece(piece, k, i);
    sub_last = chunk_piece(n - full * piece, k, i);
  }
  int64_t size() const { return full * sub_full.size + sub_last.size; }
  // The position before this level of local position q < size().
  int64_t previous(int64_t q) const {
    const int64_t in_full = full * sub_full.size;
    if (q < in_full) return q / sub_full.size * piece + sub_full.offset + q % sub_full.size;
    return full * piece + sub_last.offset + (q - in_full);
  }
};

}  // namespace

LocalShard local_shape_and_offset(const ShardSpec& spec, std::span<const int64_t> coord) {
  check_coord(spec, coord);
  LocalShard out{spec.shape, DimVector(spec.shape.size(), 0)};
  if (has_strided_shard(spec)) [[unlikely]] {
    // global_index_ranges' first index per dim, level by level without listing the ranges.
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      std::vector<ShardLevel> levels;
      int64_t n = spec.shape[d];
      for (size_t md = 0; md < spec.placements.size(); ++md) {
        const Placement& p = spec.placements[md];
        if (!p.is_any_shard() || static_cast<size_t>(p.shard_dim()) != d) continue;
        levels.emplace_back(n, p.split_factor(), spec.mesh.shape()[md], coord[md]);
        n = levels.back().size();
      }
      out.shape[d] = n;
      int64_t first = 0;  // local position 0, mapped back through the levels
      for (auto it = levels.rbegin(); it != levels.rend(); ++it) first = it->previous(first);
      out.offset[d] = n == 0 ? spec.shape[d] : first;
    }
    return out;
  }
  // Plain shards: the index list of every level is one contiguous range, so the first index is
  // the sum of the per-level chunk offsets (docs/semantics.md §2.3).
  for (size_t md = 0; md < spec.placements.size(); ++md) {
    const Placement& p = spec.placements[md];
    if (!p.is_shard()) continue;
    const size_t d = static_cast<size_t>(p.shard_dim());
    const ChunkPiece c = chunk_piece(out.shape[d], spec.mesh.shape()[md], coord[md]);
    out.shape[d] = c.size;
    out.offset[d] += c.offset;
  }
  // Empty shard -> offset = global size (docs/semantics.md §2.4 sentinel); an unsharded empty dim
  // already has offset 0 == its size.
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.shape[d] == 0) out.offset[d] = spec.shape[d];
  }
  return out;
}

LocalShard local_shape_and_offset_for_rank(const ShardSpec& spec, int64_t rank) {
  const std::optional<MeshCoord> c = spec.mesh.coordinate_of(rank);
  if (!c) return {DimVector{0}, DimVector{}};
  return local_shape_and_offset(spec, *c);
}

DimVector local_shape(const ShardSpec& spec, std::span<const int64_t> coord) {
  return local_shape_and_offset(spec, coord).shape;
}

DimVector global_offset(const ShardSpec& spec, std::span<const int64_t> coord) {
  return local_shape_and_offset(spec, coord).offset;
}

DimVector local_strides(const ShardSpec& spec, std::span<const int64_t> coord) {
  return tensor::infer_dense_strides(local_shape(spec, coord), spec.strides);
}

int64_t local_bytes(const ShardSpec& spec, std::span<const int64_t> coord) {
  // Cannot overflow: a local shard is no larger than the global tensor, checked at construction.
  int64_t n = tensor::itemsize(spec.dtype);
  for (int64_t s : local_shape(spec, coord)) n *= s;
  return n;
}

std::vector<std::vector<IndexRange>> global_index_ranges(const ShardSpec& spec,
                                                         std::span<const int64_t> coord) {
  check_coord(spec, coord);
  DimVector local;
  return ranges_general(spec, coord, &local);
}

std::ostream& operator<<(std::ostream& os, const ShardSpec& spec) {
  return os << "ShardSpec(shape=" << spec.shape << ", strides=" << spec.strides
            << ", dtype=" << spec.dtype << ", mesh=" << spec.mesh << ", placements=["
            << to_string(spec.placements) << "])";
}

std::string to_string(const ShardSpec& spec) {
  std::ostringstream os;
  os << spec;
  return os.str();
}

size_t hash_value(const ShardSpec& spec) {
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (int64_t s : spec.shape) mix(std::hash<int64_t>{}(s));
  for (int64_t s : spec.strides) mix(std::hash<int64_t>{}(s));
  mix(static_cast<size_t>(spec.dtype));
  mix(spec.mesh.hash());
  mix(hash_value(spec.placements));
  return h;
}

void to_json(nlohmann::json& j, const ShardSpec& spec) {
  j = nlohmann::json::object();
  j["shape"] = spec.shape.vec();
  j["strides"] = spec.strides.vec();
  j["dtype"] = std::string(tensor::dtype_name(spec.dtype));
  j["mesh"] = spec.mesh;
  j["placements"] = spec.placements;
}

ShardSpec shard_spec_from_json(const nlohmann::json& j, std::string_view origin,
                               std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  const std::vector<int64_t> shape = f.integers("shape", 0);
  std::optional<std::vector<int64_t>> strides;
  if (f.has("strides")) strides = f.integers("strides", 0);
  const tensor::DType dtype =
      f.has("dtype") ? f.parsed("dtype", tensor::parse_dtype) : tensor::DType::kFloat32;
  DeviceMesh mesh = device_mesh_from_json(f.get("mesh"), origin, f.join("mesh"));
  std::vector<Placement> placements =
      placements_from_json(f.get("placements"), origin, f.join("placements"));
  f.done();
  // make_shard_spec checks what crosses fields (one placement per mesh dim, shard dims in range).
  try {
    if (strides)
      return make_shard_spec(shape, *strides, dtype, std::move(mesh), std::move(placements));
    return make_shard_spec(shape, dtype, std::move(mesh), std::move(placements));
  } catch (const Error& e) {
    f.fail_object(e.what());
  }
}

void from_json(const nlohmann::json& j, ShardSpec& spec) { spec = shard_spec_from_json(j); }

}  // namespace shardplan::mesh
