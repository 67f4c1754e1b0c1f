#include "planner/materialize/shard_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "base/error.h"
#include "kernels/checksum.h"
#include "kernels/checksum_cuda.h"
#include "kernels/device_memory.h"
#include "kernels/init_fill_cuda.h"
#include "kernels/region_copy.h"
#include "kernels/region_copy_cuda.h"

namespace shardplan::planner {
namespace {

// The part's boxes filled from `source` into host memory at `data`.
void fill_part_on_host(const MaterialParameter& m, const LocalParameter& part,
                       ParameterSource& source, std::byte* data) {
  const size_t elem = kernels::element_size(m.type);
  for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t local_offset) {
    source.read_box(part.index, region, data + static_cast<size_t>(local_offset) * elem);
  });
}

// Elements [begin, begin + count) of parameter `index`, flat, into host memory at `data`.
void read_flat(size_t index, ParameterSource& source, int64_t begin, int64_t count,
               std::byte* data) {
  const int64_t one = 1;
  source.read_box(index, kernels::FillRegion{1, &count, &one, &one, begin}, data);
}

// This process's resident set: the second field of /proc/self/statm, in pages. Linux only; 0
// where it cannot be read (the measurement then says 0, which --check-memory never trips on).
int64_t resident_set_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<int64_t>(resident) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

class HostMemory final : public ShardMemory {
 public:
  std::string device() const override { return "cpu"; }
  std::byte* allocate(int64_t bytes) override {
    // new std::byte[n] default-initializes: the pages are not written (to_empty's contract).
    std::byte* p = new (std::nothrow) std::byte[static_cast<size_t>(std::max<int64_t>(bytes, 1))];
    if (p == nullptr) {
      throw RuntimeFailure("out of host memory allocating " + std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void release(std::byte* p) override { delete[] p; }
  void fill_part(const MaterialParameter& m, const LocalParameter& part, ParameterSource& source,
                 std::byte* data) override {
    fill_part_on_host(m, part, source, data);
  }
  uint64_t checksum_region(kernels::ElementType type, const kernels::FillRegion& region,
                           const std::byte* data) override {
    return kernels::checksum_cpu(data, type, region);
  }
  void fill_flat(const MaterialParameter& /*m*/, size_t index, ParameterSource& source,
                 int64_t begin, int64_t count, std::byte* data) override {
    read_flat(index, source, begin, count, data);
  }
  void scatter_region(const std::byte* local, std::byte* whole, size_t element_bytes,
                      const kernels::FillRegion& region) override {
    kernels::scatter_region_cpu(local, whole, element_bytes, region);
  }
  int64_t first_difference(const std::byte* a, const std::byte* b, int64_t bytes) override {
    const auto at = std::mismatch(a, a + bytes, b);
    return at.first == a + bytes ? -1 : at.first - a;
  }
  void to_host(const std::byte* data, int64_t offset, std::byte* out, int64_t bytes) override {
    std::memcpy(out, data + offset, static_cast<size_t>(bytes));
  }
  void from_host(const std::byte* in, std::byte* data, int64_t offset, int64_t bytes) override {
    std::memcpy(data + offset, in, static_cast<size_t>(bytes));
  }
  void zero(std::byte* data, int64_t bytes) override {
    std::memset(data, 0, static_cast<size_t>(bytes));
  }
  int64_t used_bytes() override { return resident_set_bytes(); }
};

#if SHARDPLAN_HAVE_CUDA
// Fills run on the GPU from the init rules (kernels/init_fill_cuda.h); a checkpoint's bytes are
// read into host memory part by part and copied over.
class CudaMemory final : public ShardMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  std::string device() const override { return "cuda:" + std::to_string(device_); }
  std::byte* allocate(int64_t bytes) override {
    void* p = nullptr;
    std::string error;
    if (!kernels::cuda_allocate(static_cast<size_t>(std::max<int64_t>(bytes, 1)), device_, &p,
                                &error)) {
      throw RuntimeFailure(error);
    }
    return static_cast<std::byte*>(p);
  }
  void release(std::byte* p) override { kernels::cuda_free(p, device_); }
  void fill_part(const MaterialParameter& m, const LocalParameter& part, ParameterSource& source,
                 std::byte* data) override {
    if (part.bytes == 0) return;
    const kernels::FillSpec* spec = source.fill_spec(part.index);
    if (spec != nullptr) {
      const size_t elem = kernels::element_size(m.type);
      for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t local_offset) {
        kernels::fill_cuda(data + static_cast<size_t>(local_offset) * elem, m.type, region, *spec,
                           nullptr);
      });
      synchronize();
      return;
    }
    std::vector<std::byte> staged(static_cast<size_t>(part.bytes));
    fill_part_on_host(m, part, source, staged.data());
    from_host(staged.data(), data, 0, part.bytes);
  }
  uint64_t checksum_region(kernels::ElementType type, const kernels::FillRegion& region,
                           const std::byte* data) override {
    return kernels::checksum_cuda(data, type, region, nullptr);
  }
  void fill_flat(const MaterialParameter& m, size_t index, ParameterSource& source, int64_t begin,
                 int64_t count, std::byte* data) override {
    if (count == 0) return;
    const kernels::FillSpec* spec = source.fill_spec(index);
    if (spec != nullptr) {
      const int64_t one = 1;
      kernels::fill_cuda(data, m.type, kernels::FillRegion{1, &count, &one, &one, begin}, *spec,
                         nullptr);
      synchronize();
      return;
    }
    std::vector<std::byte> staged(static_cast<size_t>(count) * kernels::element_size(m.type));
    read_flat(index, source, begin, count, staged.data());
    from_host(staged.data(), data, 0, static_cast<int64_t>(staged.size()));
  }
  void scatter_region(const std::byte* local, std::byte* whole, size_t element_bytes,
                      const kernels::FillRegion& region) override {
    kernels::scatter_region_cuda(local, whole, element_bytes, region, nullptr);
  }
  int64_t first_difference(const std::byte* a, const std::byte* b, int64_t bytes) override {
    return kernels::first_difference_cuda(a, b, static_cast<size_t>(bytes), nullptr);
  }
  void to_host(const std::byte* data, int64_t offset, std::byte* out, int64_t bytes) override {
    std::string error;
    if (!kernels::cuda_copy(out, data + offset, static_cast<size_t>(bytes), false, device_,
                            &error)) {
      throw RuntimeFailure(error);
    }
  }
  void from_host(const std::byte* in, std::byte* data, int64_t offset, int64_t bytes) override {
    std::string error;
    if (!kernels::cuda_copy(data + offset, in, static_cast<size_t>(bytes), true, device_, &error)) {
      throw RuntimeFailure(error);
    }
  }
  void zero(std::byte* data, int64_t bytes) override {
    std::string error;
    if (!kernels::cuda_zero(data, static_cast<size_t>(bytes), device_, &error)) {
      throw RuntimeFailure(error);
    }
  }
  int64_t used_bytes() override {
    size_t used = 0;
    std::string error;
    if (!kernels::cuda_used_bytes(device_, &used, &error)) throw RuntimeFailure(error);
    return static_cast<int64_t>(used);
  }

 private:
  void synchronize() {
    std::string error;
    if (!kernels::cuda_synchronize(device_, &error)) throw RuntimeFailure(error);
  }

  int device_;
};
#endif

}  // namespace

uint64_t ShardMemory::checksum_part(const MaterialParameter& m, const LocalParameter& part,
                                    const std::byte* data) {
  const size_t elem = kernels::element_size(m.type);
  uint64_t sum = 0;
  for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t local_offset) {
    sum += checksum_region(m.type, region, data + static_cast<size_t>(local_offset) * elem);
  });
  return sum;
}

std::unique_ptr<ShardMemory> host_shard_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<ShardMemory> cuda_shard_memory(int64_t local_rank) {
#if SHARDPLAN_HAVE_CUDA
  const int count = kernels::cuda_device_count();
  SP_CHECK(count > 0,
           "--device cuda: no CUDA device is visible, expected a GPU per rank or "
           "--device cpu");
  return std::make_unique<CudaMemory>(static_cast<int>(local_rank % count));
#else
  (void)local_rank;
  SP_FAIL(
      "--device cuda: this shardplan was built without CUDA (rebuild where the CUDA "
      "toolkit is installed), expected --device cpu");
#endif
}

}  // namespace shardplan::planner
