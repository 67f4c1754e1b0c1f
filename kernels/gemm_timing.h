// Timing of the device's own work for `shardplan rehearse --device cuda`: a bf16 GEMM through
// cuBLAS (fp32 accumulation, as the frameworks' linear layers run it) and a device-to-device copy,
// each timed with CUDA events on the current device. Defined only when the build has CUDA
// (SHARDPLAN_HAVE_CUDA=1); callers check that first.
//   double s = 0; std::string err;
//   if (!time_gemm_bf16_cuda({1, 8192, 4096, 4096}, 10, &s, &err)) report(err);
#pragma once

#include <cstdint>
#include <string>

namespace shardplan::kernels {

// C[batch][m x n] = A[batch][m x k] x B[batch][k x n], every operand bf16 and dense.
struct GemmDims {
  int64_t batch = 1;
  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 1;
};

// The median of `repeats` timed calls after two warm-ups, in seconds. Operands are filled with
// small random values (a GEMM on zeros draws less power and runs faster). False + *error when
// cuBLAS or the allocation fails, or a dimension is not positive or exceeds cuBLAS's int range.
bool time_gemm_bf16_cuda(const GemmDims& dims, int repeats, double* seconds, std::string* error);

// Bytes read plus written per second by cudaMemcpy of `bytes` device to device (the median of
// `repeats` after one warm-up): what Note [HBM efficiency] fits memory_efficiency to.
bool time_copy_cuda(int64_t bytes, int repeats, double* bytes_per_s, std::string* error);

// The current device's name, multiprocessors, total memory and the CUDA runtime's version
// ("13.0").
struct CudaDeviceFacts {
  std::string name;
  int64_t multiprocessors = 0;
  int64_t memory_bytes = 0;
  std::string runtime;
};
bool cuda_device_facts(CudaDeviceFacts* out, std::string* error);

}  // namespace shardplan::kernels
