// One 64-bit word of device memory, released on scope exit (also when a later CUDA check throws):
// the accumulator of the CUDA checksum and the first-difference search. CUDA builds only.
//   DeviceWord sum;  kernel<<<...>>>(..., sum.get());
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/internal/cuda_check.h"

namespace shardplan::kernels::internal {

class DeviceWord {
 public:
  DeviceWord() { SHARDPLAN_CUDA_CHECK(cudaMalloc(&ptr_, sizeof(unsigned long long))); }
  ~DeviceWord() { cudaFree(ptr_); }
  DeviceWord(const DeviceWord&) = delete;
  DeviceWord& operator=(const DeviceWord&) = delete;
  unsigned long long* get() const { return ptr_; }

 private:
  unsigned long long* ptr_ = nullptr;
};

}  // namespace shardplan::kernels::internal
