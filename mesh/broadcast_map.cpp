#include "mesh/broadcast_map.h"

#include <algorithm>

namespace shardplan::mesh::detail {

std::optional<int64_t> input_dim_of(int64_t out_dim, const shardplan::DimVector& out_shape,
                                    const shardplan::DimVector& in_shape) {
  const int64_t lead =
      static_cast<int64_t>(out_shape.size()) - static_cast<int64_t>(in_shape.size());
  const int64_t d = out_dim - lead;
  if (d < 0 || d >= static_cast<int64_t>(in_shape.size())) return std::nullopt;
  if (in_shape[static_cast<size_t>(d)] != out_shape[static_cast<size_t>(out_dim)])
    return std::nullopt;
  return d;
}

Placement map_to_input(const Placement& p, const shardplan::DimVector& out_shape,
                       const shardplan::DimVector& in_shape) {
  if (!p.is_shard()) return p;
  const auto d = input_dim_of(p.shard_dim(), out_shape, in_shape);
  return d ? Placement(Shard{*d}) : Placement(Replicate{});
}

bool broadcasts_to(const shardplan::DimVector& in, const shardplan::DimVector& out) {
  if (in.size() > out.size()) return false;
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[lead + d]) return false;
  }
  return true;
}

std::optional<shardplan::DimVector> broadcast_shapes(
    const std::vector<shardplan::DimVector>& shapes) {
  size_t nd = 0;
  for (const auto& s : shapes) nd = std::max(nd, s.size());
  shardplan::DimVector out(nd, 1);
  for (const auto& s : shapes) {
    const size_t lead = nd - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& o = out[lead + d];
      if (s[d] == o || s[d] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[d];
    }
  }
  return out;
}

}  // namespace shardplan::mesh::detail
