#include "mesh/shard_classes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "base/checked.h"
#include "base/error.h"
#include "mesh/device_mesh.h"

namespace shardplan::mesh {
namespace {

// One size of a tensor dim's local shards: how many coordinates on its sharding mesh dims give
// it, the lexicographically first few of them and the first one's offset.
struct DimGroup {
  int64_t size = 0;
  int64_t count = 0;
  std::vector<int64_t> first;  // one index per sharding mesh dim, in mesh order
  int64_t offset = 0;
  std::vector<std::vector<int64_t>> firsts;  // the first kShownCoords, sorted; firsts[0] == first
};

using Coords = std::vector<std::vector<int64_t>>;

// The first kShownCoords of a sorted list with duplicates removed.
Coords first_few(Coords c) {
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  if (c.size() > static_cast<size_t>(kShownCoords)) c.resize(static_cast<size_t>(kShownCoords));
  return c;
}

// The mesh dims that shard tensor dim d, in mesh order.
std::vector<size_t> sharding_dims(const LayoutShape& l, size_t d) {
  std::vector<size_t> out;
  for (size_t m = 0; m < l.placements.size(); ++m) {
    const Placement& p = l.placements[m];
    if (p.is_any_shard() && static_cast<size_t>(p.shard_dim()) == d) out.push_back(m);
  }
  return out;
}

bool has_strided(const LayoutShape& l, const std::vector<size_t>& dims) {
  for (size_t m : dims) {
    if (l.placements[m].is_strided_shard()) return true;
  }
  return false;
}

// Merges groups of equal size, keeping the first coordinate.
std::vector<DimGroup> merged(std::vector<DimGroup> groups) {
  std::map<int64_t, DimGroup> by_size;
  for (DimGroup& g : groups) {
    auto [it, fresh] = by_size.try_emplace(g.size, g);
    if (fresh) continue;
    it->second.count += g.count;
    Coords all = it->second.firsts;
    all.insert(all.end(), g.firsts.begin(), g.firsts.end());
    it->second.firsts = first_few(std::move(all));
    if (g.first < it->second.first) {
      it->second.first = std::move(g.first);
      it->second.offset = g.offset;
    }
  }
  std::vector<DimGroup> out;
  for (auto& [size, g] : by_size) out.push_back(std::move(g));
  return out;
}

// Plain shards, level by level (Note [Shard classes]).
std::vector<DimGroup> plain_groups(int64_t n, const std::vector<int64_t>& ks) {
  std::vector<DimGroup> groups = {{n, 1, {}, 0, {{}}}};
  for (int64_t k : ks) {
    std::vector<DimGroup> next;
    for (const DimGroup& g : groups) {
      const int64_t size = g.size;
      const int64_t c = size / k + (size % k != 0);
      auto add = [&](int64_t piece_size, int64_t count, int64_t r) {
        if (count <= 0) return;
        DimGroup h{piece_size, g.count * count, g.first, g.offset, {}};
        h.first.push_back(r);
        if (piece_size > 0) h.offset += c * r;
        // The first few (parent, piece) pairs in lexicographic order: the parent's first few, each
        // with the group's first pieces r, r + 1, ...
        for (const std::vector<int64_t>& p : g.firsts) {
          for (int64_t q = r; q < r + count && h.firsts.size() < kShownCoords; ++q) {
            h.firsts.push_back(p);
            h.firsts.back().push_back(q);
          }
        }
        next.push_back(std::move(h));
      };
      if (c == 0) {
        add(0, k, 0);
        continue;
      }
      const int64_t full = size / c;                // pieces of c elements
      const int64_t nonempty = (size + c - 1) / c;  // full ones and at most one partial
      add(c, full, 0);
      if (nonempty > full) add(size - c * full, 1, full);
      add(0, k - nonempty, nonempty);
    }
    groups = merged(std::move(next));
  }
  return groups;
}

// A StridedShard dim: every coordinate of its sharding mesh dims through the ShardSpec rules.
std::vector<DimGroup> strided_groups(const LayoutShape& l, size_t d,
                                     const std::vector<size_t>& dims) {
  std::vector<int64_t> sub_shape;
  std::vector<Placement> sub_placements;
  int64_t combos = 1;
  for (size_t m : dims) {
    sub_shape.push_back(l.mesh_shape[m]);
    combos *= l.mesh_shape[m];
    SP_CHECK(combos <= kMaxStridedCombinations, "placements ", to_string(l.placements),
             ": a strided shard of tensor dim ", d, " over ", combos,
             "+ mesh coordinates, expected at most ", kMaxStridedCombinations);
    const Placement& p = l.placements[m];
    sub_placements.push_back(p.is_strided_shard() ? Placement::strided_shard(0, p.split_factor())
                                                  : Placement::shard(0));
  }
  const std::vector<int64_t> shape = {l.shape[d]};
  const ShardSpec spec =
      make_shard_spec(shape, tensor::DType::kFloat32, DeviceMesh(sub_shape), sub_placements);
  std::vector<DimGroup> groups;
  std::vector<int64_t> coord(sub_shape.size(), 0);
  for (int64_t i = 0; i < combos; ++i) {
    const LocalShard s = local_shape_and_offset(spec, coord);
    groups.push_back({s.shape[0], 1, coord, s.offset[0], {coord}});
    if (groups.size() > 64) groups = merged(std::move(groups));
    for (size_t k = coord.size(); k-- > 0;) {  // next coordinate, row-major
      if (++coord[k] < sub_shape[k]) break;
      coord[k] = 0;
    }
  }
  return merged(std::move(groups));
}

std::vector<DimGroup> dim_groups(const LayoutShape& l, size_t d) {
  const std::vector<size_t> dims = sharding_dims(l, d);
  if (has_strided(l, dims)) return strided_groups(l, d, dims);
  std::vector<int64_t> ks;
  for (size_t m : dims) ks.push_back(l.mesh_shape[m]);
  return plain_groups(l.shape[d], ks);
}

}  // namespace

LayoutShape layout_shape(std::span<const int64_t> shape, std::span<const int64_t> mesh_shape,
                         std::vector<Placement> placements) {
  LayoutShape l;
  SP_CHECK(!mesh_shape.empty(), "--mesh: expected at least one mesh dim");
  for (int64_t s : mesh_shape) {
    SP_CHECK(s >= 1, "--mesh: size ", s, ", expected every mesh dim >= 1");
    const std::optional<int64_t> r = checked_mul(l.ranks, s);
    SP_CHECK(r.has_value() && *r <= kMaxSummarisedRanks, "--mesh ",
             std::vector<int64_t>(mesh_shape.begin(), mesh_shape.end()), " has more than ",
             kMaxSummarisedRanks, " ranks, expected at most 10^15");
    l.ranks = *r;
  }
  SP_CHECK(placements.size() == mesh_shape.size(), "--placements ", to_string(placements), " has ",
           placements.size(), " placements for a ", mesh_shape.size(),
           "-d mesh, expected one per mesh dim");
  // The placement rules (shard dims in range, split factors, numel in int64) on a one-rank mesh
  // of the same rank count per dim 1: they do not depend on the mesh sizes.
  const std::vector<int64_t> ones(mesh_shape.size(), 1);
  const ShardSpec check =
      make_shard_spec(shape, tensor::DType::kFloat32, DeviceMesh(ones), placements);
  l.shape = check.shape;
  l.mesh_shape.assign(mesh_shape.begin(), mesh_shape.end());
  l.placements = std::move(placements);
  return l;
}

std::vector<ShardClass> shard_classes(const LayoutShape& l) {
  const size_t nd = l.shape.size();
  std::vector<std::vector<DimGroup>> per_dim(nd);
  std::vector<std::vector<size_t>> dims(nd);
  std::vector<bool> used(l.mesh_shape.size(), false);
  for (size_t d = 0; d < nd; ++d) {
    dims[d] = sharding_dims(l, d);
    for (size_t m : dims[d]) used[m] = true;
    per_dim[d] = dim_groups(l, d);
  }
  int64_t free_ranks = 1;
  std::vector<size_t> free_dims;
  for (size_t m = 0; m < used.size(); ++m) {
    if (!used[m]) {
      free_ranks *= l.mesh_shape[m];
      free_dims.push_back(m);
    }
  }
  // The first few coordinates of the mesh dims that shard nothing, row-major.
  Coords free_firsts;
  std::vector<int64_t> at(free_dims.size(), 0);
  for (int64_t i = 0; i < std::min<int64_t>(free_ranks, kShownCoords); ++i) {
    free_firsts.push_back(at);
    for (size_t k = at.size(); k-- > 0;) {
      if (++at[k] < l.mesh_shape[free_dims[k]]) break;
      at[k] = 0;
    }
  }
  std::vector<ShardClass> out;
  std::vector<size_t> pick(nd, 0);
  while (true) {
    ShardClass c;
    c.count = free_ranks;
    c.first_coord.assign(l.mesh_shape.size(), 0);
    c.local_shape = l.shape;
    c.first_offset = DimVector(nd, 0);
    // The class's first few coordinates: products of the per-dim first few and of the free
    // dims' first few (the k smallest of a product of independent parts use only the k smallest
    // of each part).
    Coords cands = {std::vector<int64_t>(l.mesh_shape.size(), 0)};
    auto combine = [&](const std::vector<size_t>& mesh_dims, const Coords& parts) {
      Coords next;
      for (const std::vector<int64_t>& base : cands) {
        for (const std::vector<int64_t>& part : parts) {
          next.push_back(base);
          for (size_t k = 0; k < mesh_dims.size(); ++k) next.back()[mesh_dims[k]] = part[k];
        }
      }
      cands = first_few(std::move(next));
    };
    for (size_t d = 0; d < nd; ++d) {
      const DimGroup& g = per_dim[d][pick[d]];
      c.count *= g.count;  // cannot overflow: the counts partition at most l.ranks ranks
      c.local_shape[d] = g.size;
      c.first_offset[d] = g.size == 0 ? l.shape[d] : g.offset;
      for (size_t k = 0; k < dims[d].size(); ++k) c.first_coord[dims[d][k]] = g.first[k];
      combine(dims[d], g.firsts);
    }
    combine(free_dims, free_firsts);
    c.coords = std::move(cands);
    out.push_back(std::move(c));
    // Next combination of per-dim groups, the last tensor dim fastest.
    bool advanced = false;
    for (size_t d = nd; d-- > 0;) {
      if (++pick[d] < per_dim[d].size()) {
        advanced = true;
        break;
      }
      pick[d] = 0;
    }
    if (!advanced) break;
  }
  std::sort(out.begin(), out.end(), [&](const ShardClass& a, const ShardClass& b) {
    return a.first_coord < b.first_coord;
  });
  return out;
}

LocalShard rank_shard(const LayoutShape& l, std::span<const int64_t> coord) {
  SP_CHECK(coord.size() == l.mesh_shape.size(), "--coord has ", coord.size(),
           " entries, expected one per mesh dim (", l.mesh_shape.size(), ")");
  for (size_t m = 0; m < coord.size(); ++m) {
    SP_CHECK(coord[m] >= 0 && coord[m] < l.mesh_shape[m], "--coord entry ", m, " is ", coord[m],
             ", expected 0 to ", l.mesh_shape[m] - 1);
  }
  LocalShard out{l.shape, DimVector(l.shape.size(), 0)};
  for (size_t d = 0; d < l.shape.size(); ++d) {
    const std::vector<size_t> dims = sharding_dims(l, d);
    if (dims.empty()) continue;
    if (has_strided(l, dims)) {
      std::vector<int64_t> sub_shape, sub_coord;
      std::vector<Placement> sub_placements;
      for (size_t m : dims) {
        sub_shape.push_back(l.mesh_shape[m]);
        sub_coord.push_back(coord[m]);
        const Placement& p = l.placements[m];
        sub_placements.push_back(p.is_strided_shard()
                                     ? Placement::strided_shard(0, p.split_factor())
                                     : Placement::shard(0));
      }
      const std::vector<int64_t> shape = {l.shape[d]};
      const LocalShard s = local_shape_and_offset(
          make_shard_spec(shape, tensor::DType::kFloat32, DeviceMesh(sub_shape), sub_placements),
          sub_coord);
      out.shape[d] = s.shape[0];
      out.offset[d] = s.offset[0];
      continue;
    }
    for (size_t m : dims) {
      const ChunkPiece c = chunk_piece(out.shape[d], l.mesh_shape[m], coord[m]);
      out.shape[d] = c.size;
      out.offset[d] += c.offset;
    }
    if (out.shape[d] == 0) out.offset[d] = l.shape[d];
  }
  return out;
}

std::vector<int64_t> coord_of_rank(const LayoutShape& l, int64_t rank) {
  SP_CHECK(rank >= 0 && rank < l.ranks, "--rank ", rank, ", expected 0 to ", l.ranks - 1);
  std::vector<int64_t> c(l.mesh_shape.size());
  for (size_t m = c.size(); m-- > 0;) {
    c[m] = rank % l.mesh_shape[m];
    rank /= l.mesh_shape[m];
  }
  return c;
}

int64_t rank_of_coord(const LayoutShape& l, std::span<const int64_t> coord) {
  int64_t r = 0;
  for (size_t m = 0; m < coord.size(); ++m) r = r * l.mesh_shape[m] + coord[m];
  return r;
}

}  // namespace shardplan::mesh
