#include "tensor/storage.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "base/error.h"
#include "tensor/free_list_allocator.h"

#if SHARDPLAN_HAVE_CUDA
#include "kernels/device_memory.h"
#endif

namespace shardplan::tensor {
namespace {

std::atomic<int64_t> g_next_storage_id{1};

// Ids are handed to each thread in blocks, so creating a storage (once per op output) costs no
// atomic read-modify-write on a shared cache line. Ids stay process-unique, never reused; only
// their order across threads is not creation order, which nothing relies on.
constexpr int64_t kIdBlock = 1024;

int64_t next_storage_id() {
  thread_local int64_t next = 0;
  thread_local int64_t end = 0;
  if (next == end) {
    next = g_next_storage_id.fetch_add(kIdBlock, std::memory_order_relaxed);
    end = next + kIdBlock;
  }
  return next++;
}

// 64 bytes: a cache line, and enough for any vector load of the element types we hold.
constexpr size_t kCpuAlignment = 64;

}  // namespace

StorageImpl::StorageImpl(int64_t nbytes, Device device)
    : id_(next_storage_id()), nbytes_(nbytes), device_(device) {
  SP_ASSERT(nbytes >= 0);
  if (device.is_meta() || nbytes == 0) return;
  if (device.is_cpu()) {
    const size_t rounded =
        (static_cast<size_t>(nbytes) + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    data_ = std::aligned_alloc(kCpuAlignment, rounded);
    SP_CHECK(data_ != nullptr, "out of memory allocating ", nbytes, " bytes on cpu");
    return;
  }
#if SHARDPLAN_HAVE_CUDA
  std::string why;
  SP_CHECK(kernels::cuda_allocate(static_cast<size_t>(nbytes), device.index, &data_, &why),
           "cannot allocate ", nbytes, " bytes on ", device, ": ", why);
#else
  SP_FAIL("cannot allocate on ", device, ": shardplan was built without CUDA");
#endif
}

StorageImpl::~StorageImpl() {
  if (data_ == nullptr) return;
  if (device_.is_cpu()) {
    std::free(data_);
    return;
  }
#if SHARDPLAN_HAVE_CUDA
  kernels::cuda_free(data_, device_.index);
#endif
}

StoragePtr make_storage(int64_t nbytes, Device device) {
  SP_CHECK(nbytes >= 0, "storage size must be non-negative, got ", nbytes, " bytes");
  // Per-thread free list: see tensor/free_list_allocator.h for why.
  return std::allocate_shared<StorageImpl>(FreeListAllocator<StorageImpl>{}, nbytes, device);
}

}  // namespace shardplan::tensor
