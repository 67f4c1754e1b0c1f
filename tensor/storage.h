// Storage: the memory block that views share. On meta it has a size and an identity but no data;
// `materialize_storage` gives a real block on cpu (or cuda when built with CUDA).
//   StoragePtr s = make_storage(4096, Device::meta());   // s->data() == nullptr
#pragma once

#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace shardplan::tensor {

class StorageImpl {
 public:
  StorageImpl(int64_t nbytes, Device device);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  // Process-unique, never reused: two tensors alias iff their storages have the same id.
  int64_t id() const { return id_; }
  int64_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }
  // nullptr on meta (and for zero-byte storages).
  void* data() const { return data_; }

 private:
  int64_t id_;
  int64_t nbytes_;  // INVARIANT: >= 0
  Device device_;
  void* data_ = nullptr;  // INVARIANT: null iff device is meta or nbytes == 0
};

using StoragePtr = std::shared_ptr<StorageImpl>;

// A storage of `nbytes` on `device`: meta holds no memory; cpu memory is allocated uninitialized
// (64-byte aligned); cuda needs a CUDA build and a GPU. Throws shardplan::Error otherwise.
StoragePtr make_storage(int64_t nbytes, Device device);

}  // namespace shardplan::tensor
