// The runtime collectives a materialized plan issues, on the group of one mesh dim or on the whole
// world (docs/launching.md "Communicators"). Buffers are bytes plus an element type for the
// reductions; every call is blocking and collective over the group unless it says otherwise.
//   std::unique_ptr<Communicator> world = ...;           // MpiCommunicator, or SelfCommunicator
//   std::vector<uint64_t> sums = {...};
//   world->all_reduce(sums.data(), sums.size(), ReduceElement::kUInt64, ReduceOp::kSum);
//
// Note [Communicator errors]
// A backend checks every call it makes; a failure throws shardplan::RuntimeFailure naming the
// rank, the host and the call ("rank 3 on node7: MPI_Allreduce: MPI_ERR_TRUNCATE ..."). What
// happens next is the launcher-facing policy of materialize (docs/launching.md "Faults"): one rank
// that cannot go on aborts the whole job, so no rank is left waiting in a collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shardplan::collectives {

// Element types the reductions understand. Gathers, scatters, broadcasts and point-to-point
// transfers move bytes and need none.
enum class ReduceElement { kUInt64, kInt64, kFloat32, kFloat64, kBFloat16 };
enum class ReduceOp { kSum, kMin, kMax };

size_t reduce_element_size(ReduceElement e);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int64_t rank() const = 0;  // within this group, 0 .. size() - 1
  virtual int64_t size() const = 0;
  // "rank 3 on node7": how errors and reports name this process (its world rank).
  virtual std::string who() const = 0;

  // Every rank gives `bytes` bytes; `out` receives size() * bytes, rank r's at r * bytes.
  virtual void all_gather(const void* in, void* out, size_t bytes) = 0;
  // Ranks may give different byte counts: `out` receives them concatenated in rank order and
  // `counts` holds each rank's count (every rank learns all of them).
  virtual void all_gather_varying(const void* in, size_t bytes, std::vector<std::byte>& out,
                                  std::vector<size_t>& counts) = 0;
  // `in` holds size() blocks of `count` elements; rank r ends with the reduction of block r.
  virtual void reduce_scatter(const void* in, void* out, size_t count, ReduceElement e,
                              ReduceOp op) = 0;
  // In place over `count` elements.
  virtual void all_reduce(void* data, size_t count, ReduceElement e, ReduceOp op) = 0;
  // `in` holds size() blocks of `bytes`; block r goes to rank r, whose `out` block s comes from
  // rank s.
  virtual void all_to_all(const void* in, void* out, size_t bytes) = 0;
  virtual void broadcast(void* data, size_t bytes, int64_t root) = 0;
  // Point to point (not collective). A send is matched by the recv of the same tag.
  virtual void send(const void* data, size_t bytes, int64_t peer, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int64_t peer, int tag) = 0;
  virtual void barrier() = 0;
};

// The group of a single process: every collective is a copy (or nothing). What materialize uses
// for a one-rank plan run without a launcher, and what tests of the logic above the backends use.
class SelfCommunicator final : public Communicator {
 public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  std::string who() const override;
  void all_gather(const void* in, void* out, size_t bytes) override;
  void all_gather_varying(const void* in, size_t bytes, std::vector<std::byte>& out,
                          std::vector<size_t>& counts) override;
  void reduce_scatter(const void* in, void* out, size_t count, ReduceElement e,
                      ReduceOp op) override;
  void all_reduce(void* data, size_t count, ReduceElement e, ReduceOp op) override;
  void all_to_all(const void* in, void* out, size_t bytes) override;
  void broadcast(void* data, size_t bytes, int64_t root) override;
  void send(const void* data, size_t bytes, int64_t peer, int tag) override;
  void recv(void* data, size_t bytes, int64_t peer, int tag) override;
  void barrier() override {}
};

// The color of the group of mesh dim `dim` through `coord` when a backend splits the world into
// per-dim groups: the coordinates on every other dim, flattened row-major (the key is
// coord[dim]). Ranks share a color exactly when they differ only on `dim`.
int64_t mesh_split_color(std::span<const int64_t> shape, std::span<const int64_t> coord,
                         size_t dim);

// The same for the group of several mesh dims `dims` (ascending): ranks share a color exactly when
// they differ only on `dims`, and the key orders a group's ranks row-major over `dims` (their
// rank in it). With one dim the color is mesh_split_color's and the key the coordinate.
int64_t mesh_group_color(std::span<const int64_t> shape, std::span<const int64_t> coord,
                         std::span<const size_t> dims);
int64_t mesh_group_key(std::span<const int64_t> shape, std::span<const int64_t> coord,
                       std::span<const size_t> dims);

// The world and one communicator per mesh dim: dims[d] is the group of ranks that differ from
// this one only in their coordinate on dim d (DeviceMesh.get_group(d)).
struct MeshCommunicators {
  std::unique_ptr<Communicator> world;
  std::vector<std::unique_ptr<Communicator>> dims;
};

}  // namespace shardplan::collectives
