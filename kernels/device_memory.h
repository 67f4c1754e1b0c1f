// Device memory for materialized storages on cuda (built only with SHARDPLAN_HAVE_CUDA).
// Errors come back as text so this layer needs no project headers; tensor/ turns them into errors.
//   void* p = nullptr; std::string err;
//   if (!cuda_allocate(bytes, /*device=*/0, &p, &err)) report(err);
#pragma once

#include <cstddef>
#include <string>

namespace shardplan::kernels {

// Number of visible CUDA devices; 0 when there is no driver or no GPU (never fails).
int cuda_device_count();
// cudaMalloc on `device` (-1: the current one). On failure returns false and says why in *error.
bool cuda_allocate(size_t bytes, int device, void** out, std::string* error);
void cuda_free(void* ptr, int device);
// Waits for everything enqueued on `device`. False + *error on failure.
bool cuda_synchronize(int device, std::string* error);
// cudaMemcpy between host and `device` memory (to_device: host -> device), then waits for the
// device, so kernels enqueued before on the legacy stream have finished. False + *error on failure.
bool cuda_copy(void* dst, const void* src, size_t bytes, bool to_device, int device,
               std::string* error);
// cudaMemset(ptr, 0, bytes) on `device`, then waits. False + *error on failure.
bool cuda_zero(void* ptr, size_t bytes, int device, std::string* error);
// The driver's view of `device`'s memory in use (total - free from cudaMemGetInfo): what every
// process and context on it holds. False + *error on failure.
bool cuda_used_bytes(int device, size_t* used, std::string* error);

}  // namespace shardplan::kernels
