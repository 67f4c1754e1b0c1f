#include "planner/materialize/verify.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/fill_reference.h"
#include "kernels/splitmix64.h"
#include "planner/candidate/candidate_mesh.h"

namespace shardplan::planner {
namespace {

using collectives::ReduceElement;
using collectives::ReduceOp;

constexpr size_t kMaxMessages = 8;

void note(VerifyReport& v, std::string message) {
  ++v.failures;
  if (v.messages.size() < kMaxMessages) v.messages.push_back(std::move(message));
}

bool shards_on(const MaterialParameter& m, int64_t dim) {
  return std::find(m.shard_dims.begin(), m.shard_dims.end(), dim) != m.shard_dims.end();
}

// Local element `index` of a part, read alone (from the GPU when the part is there).
uint64_t element_bits(ShardMemory& memory, const std::byte* data, int64_t index, size_t elem) {
  std::byte buf[8] = {};
  memory.to_host(data, index * static_cast<int64_t>(elem), buf, static_cast<int64_t>(elem));
  uint64_t bits = 0;
  std::memcpy(&bits, buf, elem);
  return bits;
}

// Replicas: over each non-pp dim, the shards a dim does not split must agree across its group.
void check_replicas(const MaterialLayout& l, const RankShards& s, const std::vector<uint64_t>& sums,
                    collectives::MeshCommunicators& comms, VerifyReport& v) {
  // Indexed by parameter, not by part: the members of a dim's group may hold different
  // parameters (pipeline stages). A parameter a rank does not hold, or that the dim splits, gives
  // the neutral values, so min == max compares the holders only.
  const size_t p = l.parameters().size();
  std::vector<int64_t> part_of(p, -1);
  for (size_t k = 0; k < s.parts.size(); ++k) part_of[s.parts[k].index] = static_cast<int64_t>(k);
  for (size_t d = 0; d < comms.dims.size(); ++d) {
    if (d == kPpDim || comms.dims[d]->size() == 1) continue;
    std::vector<uint64_t> lo(p, UINT64_MAX), hi(p, 0);
    for (size_t i = 0; i < p; ++i) {
      if (part_of[i] < 0 || shards_on(l.parameters()[i], static_cast<int64_t>(d))) continue;
      lo[i] = hi[i] = sums[static_cast<size_t>(part_of[i])];
    }
    comms.dims[d]->all_reduce(lo.data(), p, ReduceElement::kUInt64, ReduceOp::kMin);
    comms.dims[d]->all_reduce(hi.data(), p, ReduceElement::kUInt64, ReduceOp::kMax);
    for (size_t i = 0; i < p; ++i) {
      const MaterialParameter& m = l.parameters()[i];
      if (part_of[i] < 0 || shards_on(m, static_cast<int64_t>(d))) continue;
      ++v.replica_checks;
      if (lo[i] != hi[i]) {
        note(v, comms.world->who() + ": '" + m.plan->name +
                    "' differs between the replicas of mesh dim " + l.mesh().dim_names()[d]);
      }
    }
  }
}

// Coverage: the shard leaders' checksums and counts add up to the whole tensor's.
void check_coverage(const MaterialLayout& l, const RankShards& s, ParameterSource& source,
                    const std::vector<uint64_t>& sums, collectives::Communicator& world,
                    VerifyReport& v) {
  const size_t p = l.parameters().size();
  std::vector<uint64_t> total(p, 0), reference(p, 0);
  std::vector<int64_t> counts(p, 0);
  for (size_t k = 0; k < s.parts.size(); ++k) {
    if (!s.parts[k].shard_leader) continue;
    total[s.parts[k].index] = sums[k];
    counts[s.parts[k].index] = s.parts[k].numel;
  }
  for (size_t i = static_cast<size_t>(world.rank()); i < p;
       i += static_cast<size_t>(world.size())) {
    reference[i] = reference_checksum(l, i, source);
  }
  world.all_reduce(total.data(), p, ReduceElement::kUInt64, ReduceOp::kSum);
  world.all_reduce(counts.data(), p, ReduceElement::kInt64, ReduceOp::kSum);
  world.all_reduce(reference.data(), p, ReduceElement::kUInt64, ReduceOp::kSum);
  v.whole_checksums = total;
  for (size_t i = 0; i < p; ++i) {
    const MaterialParameter& m = l.parameters()[i];
    if (counts[i] != m.numel || total[i] != reference[i]) {
      if (world.rank() == 0) {
        note(v,
             "'" + m.plan->name + "': the shards hold " + std::to_string(counts[i]) +
                 " elements of " + std::to_string(m.numel) +
                 (total[i] != reference[i] ? " and their checksum is not the whole tensor's" : ""));
      }
    } else {
      ++v.covered;
    }
  }
}

// Samples: elements recomputed by the scalar reference.
void check_samples(const MaterialLayout& l, const RankShards& s, ParameterSource& source,
                   const std::string& who, VerifyReport& v) {
  for (size_t k = 0; k < s.parts.size(); ++k) {
    const LocalParameter& part = s.parts[k];
    if (part.numel == 0) continue;
    const MaterialParameter& m = l.parameters()[part.index];
    const size_t elem = kernels::element_size(m.type);
    for (int64_t j = 0; j < std::min(kSamplesPerShard, part.numel); ++j) {
      const uint64_t h = kernels::splitmix64(
          m.fill.tensor_key ^
          kernels::splitmix64(static_cast<uint64_t>(s.rank) * 131 + static_cast<uint64_t>(j)));
      const int64_t local =
          j == 0 ? part.numel - 1 : static_cast<int64_t>(h % static_cast<uint64_t>(part.numel));
      const int64_t global = global_index_of(m, part, local);
      ++v.samples;
      const uint64_t want = source.element_bits(part.index, global);
      if (element_bits(*s.memory, s.data[k], local, elem) != want) {
        note(v, who + ": '" + m.plan->name + "' element " + std::to_string(global) +
                    " is not the reference fill's");
      }
    }
  }
}

// Copies the box `region` of a local buffer into the unsharded tensor.
void copy_box(const kernels::FillRegion& region, const std::byte* local, std::byte* whole,
              size_t elem) {
  const int n = region.ndim;
  std::vector<int64_t> i(static_cast<size_t>(n), 0);
  for (int d = 0; d < n; ++d) {
    if (region.sizes[d] == 0) return;
  }
  while (true) {
    int64_t src = 0;
    int64_t dst = region.global_offset;
    for (int d = 0; d < n; ++d) {
      src += i[static_cast<size_t>(d)] * region.dst_strides[d];
      dst += i[static_cast<size_t>(d)] * region.global_strides[d];
    }
    std::memcpy(whole + static_cast<size_t>(dst) * elem, local + static_cast<size_t>(src) * elem,
                elem);
    int d = n - 1;
    for (; d >= 0; --d) {
      if (++i[static_cast<size_t>(d)] < region.sizes[d]) break;
      i[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

// Gather: every tensor whole on rank 0, compared with the unsharded fill.
void check_gathered(const MaterialLayout& l, const RankShards& s, ParameterSource& source,
                    collectives::Communicator& world, VerifyReport& v) {
  std::vector<const LocalParameter*> mine(l.parameters().size(), nullptr);
  std::vector<std::byte*> mine_data(l.parameters().size(), nullptr);
  for (size_t k = 0; k < s.parts.size(); ++k) {
    if (!s.parts[k].shard_leader) continue;
    mine[s.parts[k].index] = &s.parts[k];
    mine_data[s.parts[k].index] = s.data[k];
  }
  std::vector<std::byte> gathered, whole, reference;
  std::vector<size_t> counts;
  for (size_t i = 0; i < l.parameters().size(); ++i) {
    const MaterialParameter& m = l.parameters()[i];
    const size_t bytes = mine[i] ? static_cast<size_t>(mine[i]->bytes) : 0;
    // The collective moves host bytes: a part on a GPU is copied out first.
    std::vector<std::byte> host(bytes);
    if (bytes > 0) s.memory->to_host(mine_data[i], 0, host.data(), static_cast<int64_t>(bytes));
    world.all_gather_varying(host.data(), bytes, gathered, counts);
    if (world.rank() != 0) continue;
    const size_t elem = kernels::element_size(m.type);
    whole.assign(static_cast<size_t>(m.numel) * elem, std::byte{0});
    size_t offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] == 0) {
        continue;
      }
      const std::optional<mesh::MeshCoord> coord = l.mesh().coordinate_of(static_cast<int64_t>(r));
      std::vector<int64_t> sub;
      for (const int64_t d : m.shard_dims) sub.push_back((*coord)[static_cast<size_t>(d)]);
      const LocalParameter part = l.local_part(i, sub);
      for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t local_offset) {
        copy_box(region, gathered.data() + offset + static_cast<size_t>(local_offset) * elem,
                 whole.data(), elem);
      });
      offset += counts[r];
    }
    reference.resize(whole.size());
    const int64_t one = 1;
    const kernels::FillRegion flat{1, &m.numel, &one, &one, 0};
    source.read_box(i, flat, reference.data());
    ++v.gathered;
    if (whole != reference) {
      note(v, "'" + m.plan->name + "' gathered from its shards differs from the unsharded fill");
    }
  }
}

}  // namespace

VerifyReport verify_shards(const MaterialLayout& layout, const RankShards& shards,
                           ParameterSource& source, collectives::MeshCommunicators& comms,
                           int64_t gather_limit_bytes) {
  VerifyReport v;
  std::vector<uint64_t> sums(shards.parts.size());
  for (size_t k = 0; k < shards.parts.size(); ++k) {
    const LocalParameter& part = shards.parts[k];
    sums[k] = shards.memory->checksum_part(layout.parameters()[part.index], part, shards.data[k]);
  }
  check_replicas(layout, shards, sums, comms, v);
  check_coverage(layout, shards, source, sums, *comms.world, v);
  check_samples(layout, shards, source, comms.world->who(), v);
  int64_t model_bytes = 0;
  for (const MaterialParameter& m : layout.parameters()) {
    model_bytes += m.numel * static_cast<int64_t>(kernels::element_size(m.type));
  }
  if (model_bytes <= gather_limit_bytes) check_gathered(layout, shards, source, *comms.world, v);
  int64_t failures = v.failures;
  comms.world->all_reduce(&failures, 1, ReduceElement::kInt64, ReduceOp::kSum);
  v.failures = failures;
  int64_t gathered = v.gathered;
  comms.world->broadcast(&gathered, sizeof gathered, 0);
  v.gathered = gathered;
  return v;
}

}  // namespace shardplan::planner
