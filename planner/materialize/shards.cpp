#include "planner/materialize/shards.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace shardplan::planner {

RankShards::RankShards(RankShards&& other) noexcept { *this = std::move(other); }

RankShards& RankShards::operator=(RankShards&& other) noexcept {
  if (this != &other) {
    this->~RankShards();
    rank = other.rank;
    coord = std::move(other.coord);
    parts = std::move(other.parts);
    data = std::move(other.data);
    memory = other.memory;
    bytes = other.bytes;
    other.data.clear();
  }
  return *this;
}

RankShards::~RankShards() {
  for (std::byte* p : data) memory->release(p);
  data.clear();
}

RankShards allocate_shards(const MaterialLayout& layout, int64_t rank, ShardMemory& memory) {
  RankShards s;
  s.rank = rank;
  s.memory = &memory;
  const std::optional<mesh::MeshCoord> coord = layout.mesh().coordinate_of(rank);
  SP_CHECK(coord.has_value(), "rank ", rank, " is not in the plan's mesh of ", layout.world_size(),
           " ranks");
  s.coord.assign(coord->begin(), coord->end());
  s.parts = layout.parameters_at(s.coord);
  s.data.reserve(s.parts.size());
  for (const LocalParameter& part : s.parts) {
    try {
      s.data.push_back(memory.allocate(part.bytes));
    } catch (const RuntimeFailure& e) {
      // The launcher's line names the rank and host already (cmd_materialize.cpp).
      throw RuntimeFailure(std::string(e.what()) + " for '" +
                           layout.parameters()[part.index].plan->name + "' on " + memory.device() +
                           " (" + std::to_string(s.bytes) + " bytes allocated before it)");
    }
    s.bytes += part.bytes;
  }
  return s;
}

void init_shards(const MaterialLayout& layout, RankShards& shards, ParameterSource& source,
                 const std::function<void(int64_t, int64_t)>& progress) {
  int64_t done = 0;
  for (size_t k = 0; k < shards.parts.size(); ++k) {
    const LocalParameter& part = shards.parts[k];
    shards.memory->fill_part(layout.parameters()[part.index], part, source, shards.data[k]);
    done += part.bytes;
    if (progress) progress(done, shards.bytes);
  }
}

uint64_t reference_checksum(const MaterialLayout& layout, size_t index, ParameterSource& source,
                            ShardMemory& memory, int64_t chunk_elements) {
  const MaterialParameter& m = layout.parameters()[index];
  const int64_t elem = static_cast<int64_t>(kernels::element_size(m.type));
  const int64_t chunk = std::max<int64_t>(1, std::min(chunk_elements, m.numel));
  const MemoryBuffer buffer(memory, chunk * elem);
  uint64_t sum = 0;
  // The tensor as a flat run of numel elements: a 1-d region per chunk.
  for (int64_t begin = 0; begin < m.numel; begin += chunk) {
    const int64_t n = std::min(chunk, m.numel - begin);
    memory.fill_flat(m, index, source, begin, n, buffer.data());
    const int64_t one = 1;
    sum += memory.checksum_region(m.type, kernels::FillRegion{1, &n, &one, &one, begin},
                                  buffer.data());
  }
  return sum;
}

int64_t global_index_of(const MaterialParameter& p, const LocalParameter& part, int64_t local) {
  const size_t n = part.ranges.size();
  int64_t global = 0;
  int64_t stride = 1;
  for (size_t d = n; d-- > 0;) {
    int64_t pos = local % part.local_shape[d];
    local /= part.local_shape[d];
    int64_t index = 0;
    for (const mesh::IndexRange& r : part.ranges[d]) {
      if (pos < r.size()) {
        index = r.begin + pos;
        break;
      }
      pos -= r.size();
    }
    global += index * stride;
    stride *= p.plan->shape[d];
  }
  return global;
}

}  // namespace shardplan::planner
