#include <cuda_runtime.h>

#include "kernels/device_memory.h"

namespace shardplan::kernels {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    return 0;
  }
  return n;
}

bool cuda_allocate(size_t bytes, int device, void** out, std::string* error) {
  if (device >= 0) {
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
      *error = std::string("cudaSetDevice(") + std::to_string(device) + "): " + cudaGetErrorString(e);
      return false;
    }
  }
  const cudaError_t e = cudaMalloc(out, bytes);
  if (e != cudaSuccess) {
    *error = "cudaMalloc(" + std::to_string(bytes) + " bytes) on cuda:" + std::to_string(device) +
             ": " + cudaGetErrorString(e);
    *out = nullptr;
    return false;
  }
  return true;
}

bool cuda_synchronize(int device, std::string* error) {
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) {
    *error = "cudaSetDevice(" + std::to_string(device) + ")";
    return false;
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *error =
        "cudaDeviceSynchronize on cuda:" + std::to_string(device) + ": " + cudaGetErrorString(e);
    return false;
  }
  return true;
}

bool cuda_copy(void* dst, const void* src, size_t bytes, bool to_device, int device,
               std::string* error) {
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) {
    *error = "cudaSetDevice(" + std::to_string(device) + ")";
    return false;
  }
  cudaError_t e =
      cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *error = std::string("cudaMemcpy(") + std::to_string(bytes) + " bytes, " +
             (to_device ? "to" : "from") + " cuda:" + std::to_string(device) +
             "): " + cudaGetErrorString(e);
    return false;
  }
  return true;
}

bool cuda_zero(void* ptr, size_t bytes, int device, std::string* error) {
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) {
    *error = "cudaSetDevice(" + std::to_string(device) + ")";
    return false;
  }
  cudaError_t e = cudaMemset(ptr, 0, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *error = "cudaMemset(" + std::to_string(bytes) + " bytes) on cuda:" + std::to_string(device) +
             ": " + cudaGetErrorString(e);
    return false;
  }
  return true;
}

bool cuda_used_bytes(int device, size_t* used, std::string* error) {
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) {
    *error = "cudaSetDevice(" + std::to_string(device) + ")";
    return false;
  }
  size_t free = 0, total = 0;
  const cudaError_t e = cudaMemGetInfo(&free, &total);
  if (e != cudaSuccess) {
    *error = std::string("cudaMemGetInfo on cuda:") + std::to_string(device) + ": " +
             cudaGetErrorString(e);
    return false;
  }
  *used = total - free;
  return true;
}

void cuda_free(void* ptr, int device) {
  if (device >= 0) cudaSetDevice(device);
  cudaFree(ptr);  // a failure here cannot be acted on in a destructor; memory is lost either way
}

}  // namespace shardplan::kernels
