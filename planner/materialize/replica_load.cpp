#include "planner/materialize/replica_load.h"

#include <algorithm>

#include "base/error.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {

std::vector<size_t> replica_dims(const MaterialLayout& layout, const MaterialParameter& m) {
  std::vector<size_t> dims;
  const std::vector<int64_t>& shape = layout.mesh().shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) == kPpDim || shape[d] <= 1) continue;
    if (std::find(m.shard_dims.begin(), m.shard_dims.end(), static_cast<int64_t>(d)) !=
        m.shard_dims.end()) {
      continue;
    }
    dims.push_back(d);
  }
  return dims;
}

mesh::IndexRange row_chunk(mesh::IndexRange rows, int64_t k, int64_t j) {
  const int64_t n = rows.size();
  return {rows.begin + n * j / k, rows.begin + n * (j + 1) / k};
}

namespace {

int64_t row_count(const LocalParameter& part) {
  return part.local_shape.empty() ? 1 : part.local_shape[0];
}

}  // namespace

LocalParameter part_rows(const LocalParameter& part, mesh::IndexRange rows) {
  LocalParameter sub = part;
  const int64_t all = row_count(part);
  SP_ASSERT(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= all, "rows [", rows.begin,
            ", ", rows.end, ") of a part of ", all);
  if (part.local_shape.empty()) {
    if (rows.size() == 0) sub.numel = sub.bytes = 0;
    return sub;
  }
  // Local positions [begin, end) of dim 0 across its ranges, in local order.
  std::vector<mesh::IndexRange> kept;
  int64_t at = 0;
  for (const mesh::IndexRange& r : part.ranges[0]) {
    const int64_t lo = std::max(at, rows.begin), hi = std::min(at + r.size(), rows.end);
    if (lo < hi) kept.push_back({r.begin + (lo - at), r.begin + (hi - at)});
    at += r.size();
  }
  sub.ranges[0] = std::move(kept);
  sub.local_shape[0] = rows.size();
  const int64_t row_elems = all == 0 ? 0 : part.numel / all;
  sub.numel = row_elems * rows.size();
  sub.bytes = all == 0 ? 0 : part.bytes / all * rows.size();
  return sub;
}

int64_t load_across_replicas(const MaterialLayout& layout, RankShards& shards,
                             ParameterSource& source, collectives::MeshCommunicators& comms,
                             const std::function<void(int64_t, int64_t)>& progress) {
  int64_t done = 0;
  int64_t received = 0;
  for (size_t k = 0; k < shards.parts.size(); ++k) {
    const LocalParameter& part = shards.parts[k];
    const MaterialParameter& m = layout.parameters()[part.index];
    const std::vector<size_t> dims = replica_dims(layout, m);
    const int64_t rows = row_count(part);
    const int64_t row_bytes = rows == 0 ? 0 : part.bytes / rows;
    // levels[i]: the rows the group of dims[i..] holds once dims[i + 1..] are gathered;
    // levels.back() is this rank's own leaf.
    std::vector<mesh::IndexRange> levels{{0, rows}};
    for (const size_t d : dims) {
      levels.push_back(row_chunk(levels.back(), layout.mesh().shape()[d], shards.coord[d]));
    }
    const mesh::IndexRange leaf = levels.back();
    if (leaf.size() > 0) {
      shards.memory->fill_part(m, part_rows(part, leaf), source,
                               shards.data[k] + leaf.begin * row_bytes);
    }
    for (size_t i = dims.size(); i-- > 0;) {
      const int64_t size = layout.mesh().shape()[dims[i]];
      collectives::Communicator& group = *comms.dims[dims[i]];
      for (int64_t j = 0; j < size; ++j) {
        const mesh::IndexRange r = row_chunk(levels[i], size, j);
        if (r.size() == 0) continue;
        group.broadcast(shards.data[k] + r.begin * row_bytes,
                        static_cast<size_t>(r.size() * row_bytes), j);
        if (j != shards.coord[dims[i]]) received += r.size() * row_bytes;
      }
    }
    done += part.bytes;
    if (progress) progress(done, shards.bytes);
  }
  return received;
}

}  // namespace shardplan::planner
