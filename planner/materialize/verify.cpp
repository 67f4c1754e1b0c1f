#include "planner/materialize/verify.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// Where the collectives that carry shard data or checksums run: `comms` over buffers in
// `memory`. That is the shards' own memory where the communicators move it (NCCL on device
// buffers, MPI on host ones) or where there is one rank (nothing moves); host memory otherwise,
// with the shards copied out first.
struct Wire {
  collectives::MeshCommunicators& comms;
  ShardMemory& memory;
  ShardMemory& shards;  // where the shards live
};

// An all-reduce of a host vector through a buffer in the wire's memory.
template <class T>
void reduce_on(collectives::Communicator& comm, ShardMemory& memory, std::vector<T>& values,
               ReduceElement e, ReduceOp op) {
  if (comm.size() == 1 || values.empty()) return;
  const auto bytes = static_cast<int64_t>(values.size() * sizeof(T));
  const MemoryBuffer buffer(memory, bytes);
  memory.from_host(reinterpret_cast<const std::byte*>(values.data()), buffer.data(), 0, bytes);
  comm.all_reduce(buffer.data(), values.size(), e, op);
  memory.to_host(buffer.data(), 0, reinterpret_cast<std::byte*>(values.data()), bytes);
}

// Replicas: over each non-pp dim, the shards a dim does not split must agree across its group.
void check_replicas(const MaterialLayout& l, const RankShards& s, const std::vector<uint64_t>& sums,
                    Wire& wire, VerifyReport& v) {
  // Indexed by parameter, not by part: the members of a dim's group may hold different
  // parameters (pipeline stages). A parameter a rank does not hold, or that the dim splits, gives
  // the neutral values, so min == max compares the holders only.
  const size_t p = l.parameters().size();
  std::vector<int64_t> part_of(p, -1);
  for (size_t k = 0; k < s.parts.size(); ++k) part_of[s.parts[k].index] = static_cast<int64_t>(k);
  for (size_t d = 0; d < wire.comms.dims.size(); ++d) {
    collectives::Communicator& group = *wire.comms.dims[d];
    if (d == kPpDim || group.size() == 1) continue;
    std::vector<uint64_t> lo(p, UINT64_MAX), hi(p, 0);
    for (size_t i = 0; i < p; ++i) {
      if (part_of[i] < 0 || shards_on(l.parameters()[i], static_cast<int64_t>(d))) continue;
      lo[i] = hi[i] = sums[static_cast<size_t>(part_of[i])];
    }
    reduce_on(group, wire.memory, lo, ReduceElement::kUInt64, ReduceOp::kMin);
    reduce_on(group, wire.memory, hi, ReduceElement::kUInt64, ReduceOp::kMax);
    for (size_t i = 0; i < p; ++i) {
      const MaterialParameter& m = l.parameters()[i];
      if (part_of[i] < 0 || shards_on(m, static_cast<int64_t>(d))) continue;
      ++v.replica_checks;
      if (lo[i] != hi[i]) {
        note(v, group.who() + ": '" + m.plan->name + "' differs between the replicas of mesh dim " +
                    l.mesh().dim_names()[d]);
      }
    }
  }
}

// Coverage: the shard leaders' checksums and counts add up to the whole tensor's. Each rank takes
// the reference checksum of every world-size-th parameter, where the shards live.
void check_coverage(const MaterialLayout& l, const RankShards& s, ParameterSource& source,
                    const std::vector<uint64_t>& sums, Wire& wire, VerifyReport& v) {
  collectives::Communicator& world = *wire.comms.world;
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
    reference[i] = reference_checksum(l, i, source, wire.shards);
  }
  reduce_on(world, wire.memory, total, ReduceElement::kUInt64, ReduceOp::kSum);
  reduce_on(world, wire.memory, counts, ReduceElement::kInt64, ReduceOp::kSum);
  reduce_on(world, wire.memory, reference, ReduceElement::kUInt64, ReduceOp::kSum);
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

// A shard's bytes in the wire's memory: the shard's own buffer when the wire is its memory, a
// copy otherwise.
class OnWire {
 public:
  OnWire(Wire& wire, const std::byte* data, int64_t bytes) : data_(data) {
    if (&wire.memory == &wire.shards) return;
    copy_ = std::make_unique<MemoryBuffer>(wire.memory, bytes);
    std::vector<std::byte> host(static_cast<size_t>(bytes));
    wire.shards.to_host(data, 0, host.data(), bytes);
    wire.memory.from_host(host.data(), copy_->data(), 0, bytes);
    data_ = copy_->data();
  }
  const std::byte* data() const { return data_; }

 private:
  const std::byte* data_;
  std::unique_ptr<MemoryBuffer> copy_;
};

// Gather: every tensor whole on rank 0, compared byte for byte with the unsharded source there.
// Each distinct shard's leader sends it to rank 0 (parameters in order, then ranks in order, so
// every send meets its receive); rank 0 places each into the whole tensor in the wire's memory
// and compares it with the reference filled there. Every rank can tell from the layout who sends
// what, so no sizes travel.
void check_gathered(const MaterialLayout& l, const RankShards& s, ParameterSource& source,
                    Wire& wire, VerifyReport& v) {
  collectives::Communicator& world = *wire.comms.world;
  constexpr int kTag = 0x5EF;
  const size_t p = l.parameters().size();
  // Rank 0's view: each parameter's leaders and their parts.
  std::vector<std::vector<std::pair<int64_t, LocalParameter>>> leaders(p);
  if (world.rank() == 0) {
    for (int64_t r = 0; r < world.size(); ++r) {
      for (LocalParameter& part : l.rank_parameters(r)) {
        if (part.shard_leader && part.bytes > 0) leaders[part.index].emplace_back(r, part);
      }
    }
  }
  std::vector<int64_t> mine(p, -1);
  for (size_t k = 0; k < s.parts.size(); ++k) {
    if (s.parts[k].shard_leader && s.parts[k].bytes > 0)
      mine[s.parts[k].index] = static_cast<int64_t>(k);
  }
  for (size_t i = 0; i < p; ++i) {
    const MaterialParameter& m = l.parameters()[i];
    if (world.rank() != 0) {
      if (mine[i] < 0) continue;
      const auto k = static_cast<size_t>(mine[i]);
      const OnWire part(wire, s.data[k], s.parts[k].bytes);
      world.send(part.data(), static_cast<size_t>(s.parts[k].bytes), 0, kTag);
      continue;
    }
    const size_t elem = kernels::element_size(m.type);
    const int64_t bytes = m.numel * static_cast<int64_t>(elem);
    const MemoryBuffer whole(wire.memory, bytes);
    wire.memory.zero(whole.data(), std::max<int64_t>(bytes, 1));
    for (const auto& [r, part] : leaders[i]) {
      std::unique_ptr<MemoryBuffer> received;
      std::unique_ptr<OnWire> own;
      const std::byte* data = nullptr;
      if (r == 0) {
        own = std::make_unique<OnWire>(wire, s.data[static_cast<size_t>(mine[i])], part.bytes);
        data = own->data();
      } else {
        received = std::make_unique<MemoryBuffer>(wire.memory, part.bytes);
        world.recv(received->data(), static_cast<size_t>(part.bytes), r, kTag);
        data = received->data();
      }
      for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t local_offset) {
        wire.memory.scatter_region(data + static_cast<size_t>(local_offset) * elem, whole.data(),
                                   elem, region);
      });
    }
    const MemoryBuffer reference(wire.memory, bytes);
    wire.memory.fill_flat(m, i, source, 0, m.numel, reference.data());
    ++v.gathered;
    const int64_t at = wire.memory.first_difference(whole.data(), reference.data(), bytes);
    if (at >= 0) {
      note(v, "'" + m.plan->name + "' gathered from its shards differs from the unsharded " +
                  source.name() + " at element " + std::to_string(at / static_cast<int64_t>(elem)));
    }
  }
}

}  // namespace

VerifyReport verify_shards(const MaterialLayout& layout, const RankShards& shards,
                           ParameterSource& source, collectives::MeshCommunicators& comms,
                           collectives::MeshCommunicators* data_comms, int64_t gather_limit_bytes) {
  VerifyReport v;
  // The wire (see Wire): the data communicators over the shards' memory when there are some or
  // nothing moves, the host communicators over host copies otherwise.
  std::unique_ptr<ShardMemory> host;
  const bool on_shards = data_comms != nullptr || comms.world->size() == 1;
  if (!on_shards) host = host_shard_memory();
  Wire wire{on_shards && data_comms != nullptr ? *data_comms : comms,
            on_shards ? *shards.memory : *host, *shards.memory};
  v.wire = comms.world->size() == 1 ? VerifyWire::kLocal
           : on_shards              ? VerifyWire::kShardMemory
                                    : VerifyWire::kHostCopies;
  std::vector<uint64_t> sums(shards.parts.size());
  for (size_t k = 0; k < shards.parts.size(); ++k) {
    const LocalParameter& part = shards.parts[k];
    sums[k] = shards.memory->checksum_part(layout.parameters()[part.index], part, shards.data[k]);
  }
  check_replicas(layout, shards, sums, wire, v);
  check_coverage(layout, shards, source, sums, wire, v);
  check_samples(layout, shards, source, comms.world->who(), v);
  int64_t model_bytes = 0;
  for (const MaterialParameter& m : layout.parameters()) {
    model_bytes += m.numel * static_cast<int64_t>(kernels::element_size(m.type));
  }
  if (model_bytes <= gather_limit_bytes) check_gathered(layout, shards, source, wire, v);
  // The tallies are the report's, not shard data: host communicators.
  int64_t failures = v.failures;
  comms.world->all_reduce(&failures, 1, ReduceElement::kInt64, ReduceOp::kSum);
  v.failures = failures;
  int64_t gathered = v.gathered;
  comms.world->broadcast(&gathered, sizeof gathered, 0);
  v.gathered = gathered;
  return v;
}

}  // namespace shardplan::planner
