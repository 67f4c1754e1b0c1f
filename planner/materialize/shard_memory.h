// Where a rank's shards live: host memory (`--device cpu`) or one GPU (`--device cuda`), behind
// one interface so that allocation, filling, checksums and verification are the same code for
// both (docs/launching.md "Devices"). The CUDA side runs the kernels/ CUDA fills and checksums,
// bit-identical to the CPU ones; a build without CUDA, or a host without a GPU, refuses it.
//   std::unique_ptr<ShardMemory> mem = cuda_shard_memory(local_rank % gpus);   // or host_...
//   std::byte* p = mem->allocate(bytes);              // to_empty: nothing written
//   mem->fill_part(m, part, source, p);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"

namespace shardplan::planner {

class ShardMemory {
 public:
  virtual ~ShardMemory() = default;
  // "cpu", "cuda:3".
  virtual std::string device() const = 0;
  // Uninitialized memory for `bytes` (at least one byte is reserved for empty shards). Throws
  // RuntimeFailure naming the device and size when it runs out.
  virtual std::byte* allocate(int64_t bytes) = 0;
  virtual void release(std::byte* p) = 0;
  // Writes part `part` of parameter `m` (at `data`, laid out as part.local_shape) from `source`.
  virtual void fill_part(const MaterialParameter& m, const LocalParameter& part,
                         ParameterSource& source, std::byte* data) = 0;
  // kernels/checksum.h of the part: parts of disjoint shards add up to the whole tensor's.
  uint64_t checksum_part(const MaterialParameter& m, const LocalParameter& part,
                         const std::byte* data);
  // kernels/checksum.h of the box `region` laid out at `data`, computed where `data` lives.
  virtual uint64_t checksum_region(kernels::ElementType type, const kernels::FillRegion& region,
                                   const std::byte* data) = 0;
  // Elements [begin, begin + count) of parameter `index` in flat (row-major) order from `source`,
  // written contiguously at `data`: the unsharded reference verification compares with. A GPU
  // fills computed values itself and stages read ones through host memory.
  virtual void fill_flat(const MaterialParameter& m, size_t index, ParameterSource& source,
                         int64_t begin, int64_t count, std::byte* data) = 0;
  // kernels/region_copy.h: the box `region` of the local buffer `local` placed into the whole
  // tensor at `whole`, both in this memory.
  virtual void scatter_region(const std::byte* local, std::byte* whole, size_t element_bytes,
                              const kernels::FillRegion& region) = 0;
  // The offset of the first byte at which `a` and `b` (both in this memory) differ; -1 if none.
  virtual int64_t first_difference(const std::byte* a, const std::byte* b, int64_t bytes) = 0;
  // Copies `bytes` from `data` + `offset` (bytes) into host memory at `out`.
  virtual void to_host(const std::byte* data, int64_t offset, std::byte* out, int64_t bytes) = 0;
  // Copies `bytes` from host memory at `in` to `data` + `offset` (bytes).
  virtual void from_host(const std::byte* in, std::byte* data, int64_t offset, int64_t bytes) = 0;
  // Writes `bytes` zero bytes at `data` (gradient and optimizer buffers before the first step).
  virtual void zero(std::byte* data, int64_t bytes) = 0;
  // The device's memory in use as the system sees it, not as this process asked for it: the
  // resident set of this process on the host (/proc/self/statm), the driver's used bytes on a GPU
  // (cudaMemGetInfo). Differences of it are what `materialize --state` measures.
  virtual int64_t used_bytes() = 0;
};

// One buffer in `memory`, released with it: uninitialized (scratch), or zeroed (rehearsal
// buffers).
class MemoryBuffer {
 public:
  MemoryBuffer(ShardMemory& memory, int64_t bytes)
      : memory_(memory), data_(memory.allocate(bytes)) {}
  ~MemoryBuffer() { memory_.release(data_); }
  MemoryBuffer(const MemoryBuffer&) = delete;
  MemoryBuffer& operator=(const MemoryBuffer&) = delete;
  std::byte* data() const { return data_; }

 private:
  ShardMemory& memory_;
  std::byte* data_;
};

class ZeroedBuffer : public MemoryBuffer {
 public:
  ZeroedBuffer(ShardMemory& memory, int64_t bytes) : MemoryBuffer(memory, bytes) {
    memory.zero(data(), bytes < 1 ? 1 : bytes);
  }
};

std::unique_ptr<ShardMemory> host_shard_memory();
// The GPU of a rank with this local rank on its host: local_rank mod the visible GPUs (one rank
// per GPU is the launch this assumes). Throws shardplan::Error when this shardplan was built
// without CUDA or no GPU is visible: bad input, found before anything is allocated.
std::unique_ptr<ShardMemory> cuda_shard_memory(int64_t local_rank);

}  // namespace shardplan::planner
