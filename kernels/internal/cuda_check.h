// Checks a CUDA runtime call and throws std::runtime_error with the expression, CUDA's error name
// and string, and file:line (NCCL's checks.h pattern; kernels/ knows no rank, the caller adds it).
//   SHARDPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace shardplan::kernels::internal {

inline void cuda_check(cudaError_t status, const char* expr, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudaGetErrorName(status) + ": " +
                           cudaGetErrorString(status));
}

}  // namespace shardplan::kernels::internal

#define SHARDPLAN_CUDA_CHECK(expr) \
  ::shardplan::kernels::internal::cuda_check((expr), #expr, __FILE__, __LINE__)
