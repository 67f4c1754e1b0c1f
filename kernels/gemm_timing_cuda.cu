// cuBLAS GEMM and copy timing (kernels/gemm_timing.h). cuBLAS is loaded at run time by name
// (dlopen), not linked: mapping libcublas and libcublasLt into every shardplan process grew the
// resident set of a plain `shardplan plan` by about 120 MB, past the search's memory budget, for
// a library that only `rehearse --device cuda` calls.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm_timing.h"

#ifndef SHARDPLAN_CUBLAS_MAJOR  // kernels/CMakeLists.txt sets it from the toolkit's version
#define SHARDPLAN_CUBLAS_MAJOR "13"
#endif

namespace shardplan::kernels {
namespace {

// The three cuBLAS entry points the timing calls, from the library found at run time.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  // The C entry point (the header also has a C++ overload taking cudaDataType_t for the compute
  // type, an inline wrapper the library does not export).
  using Gemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, long long,
                                  const void*, cudaDataType, int, long long, const void*, void*,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);
  Gemm gemm = nullptr;
};

// Loaded once; nullptr with *error saying why when no cuBLAS of this CUDA major is found.
const Cublas* load_cublas(std::string* error) {
  static const Cublas* loaded = []() -> const Cublas* {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so." SHARDPLAN_CUBLAS_MAJOR, "libcublas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
    }
    if (lib == nullptr) return nullptr;
    auto* c = new Cublas;  // lives as long as the process, as the library does
    c->create = reinterpret_cast<decltype(c->create)>(dlsym(lib, "cublasCreate_v2"));
    c->destroy = reinterpret_cast<decltype(c->destroy)>(dlsym(lib, "cublasDestroy_v2"));
    c->gemm = reinterpret_cast<decltype(c->gemm)>(dlsym(lib, "cublasGemmStridedBatchedEx"));
    if (c->create == nullptr || c->destroy == nullptr || c->gemm == nullptr) return nullptr;
    return c;
  }();
  if (loaded == nullptr) {
    *error = "cuBLAS (libcublas.so." SHARDPLAN_CUBLAS_MAJOR
             ") could not be loaded: put the CUDA toolkit's lib64 folder on LD_LIBRARY_PATH, or "
             "skip the layer timing with --no-compute";
  }
  return loaded;
}

// Owns what one timing allocates; frees it on every path.
struct Scratch {
  std::vector<void*> buffers;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t handle = nullptr;
  const Cublas* cublas = nullptr;
  ~Scratch() {
    for (void* b : buffers) cudaFree(b);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (handle) cublas->destroy(handle);
  }
  bool allocate(size_t bytes, void** out, std::string* error) {
    const cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
      *error = "cudaMalloc(" + std::to_string(bytes) + " bytes): " + cudaGetErrorString(e);
      return false;
    }
    buffers.push_back(*out);
    return true;
  }
  bool events(std::string* error) {
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
      *error = "cudaEventCreate failed";
      return false;
    }
    return true;
  }
};

// Small values in [-1/8, 1/8), a hash of the index: no host transfer, no generator state.
__global__ void fill_small(__nv_bfloat16* x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    x[i] = __float2bfloat16(static_cast<float>(h & 0xFFFFu) / 262144.0f - 0.125f);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median seconds of `repeats` calls of `enqueue` (false: it failed and set *error) after
// `warmup` untimed ones, each between the scratch's two events on the legacy stream.
template <class Enqueue>
bool median_event_seconds(Scratch& s, int warmup, int repeats, const char* what, Enqueue enqueue,
                          double* seconds, std::string* error) {
  std::vector<double> times;
  // Every call checked: an unrecorded event or a failed enqueue would time nothing (0 s).
  auto failed = [&](cudaError_t rc, const char* call) {
    if (rc == cudaSuccess) return false;
    *error = std::string(what) + ": " + call + ": " + cudaGetErrorString(rc);
    return true;
  };
  for (int i = 0; i < warmup + repeats; ++i) {
    if (failed(cudaEventRecord(s.start), "cudaEventRecord")) return false;
    if (!enqueue()) return false;
    if (failed(cudaEventRecord(s.stop), "cudaEventRecord") ||
        failed(cudaEventSynchronize(s.stop), "cudaEventSynchronize")) {
      return false;
    }
    float ms = 0;
    if (failed(cudaEventElapsedTime(&ms, s.start, s.stop), "cudaEventElapsedTime")) return false;
    if (!(ms > 0)) {
      *error = std::string(what) + ": the events measured " + std::to_string(ms) +
               " ms, expected a positive time";
      return false;
    }
    if (i >= warmup) times.push_back(ms * 1e-3);
  }
  *seconds = median(times);
  return true;
}

}  // namespace

bool time_gemm_bf16_cuda(const GemmDims& d, int repeats, double* seconds, std::string* error) {
  if (d.batch < 1 || d.m < 1 || d.n < 1 || d.k < 1 || d.m > INT_MAX || d.n > INT_MAX ||
      d.k > INT_MAX || d.batch > INT_MAX || repeats < 1) {
    *error = "GEMM " + std::to_string(d.batch) + " x " + std::to_string(d.m) + " x " +
             std::to_string(d.n) + " x " + std::to_string(d.k) +
             ": expected positive dimensions within cuBLAS's int range";
    return false;
  }
  Scratch s;
  const int64_t a_elems = d.batch * d.m * d.k, b_elems = d.batch * d.k * d.n,
                c_elems = d.batch * d.m * d.n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  if (!s.allocate(static_cast<size_t>(a_elems) * 2, &a, error) ||
      !s.allocate(static_cast<size_t>(b_elems) * 2, &b, error) ||
      !s.allocate(static_cast<size_t>(c_elems) * 2, &c, error) || !s.events(error)) {
    return false;
  }
  fill_small<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), a_elems);
  fill_small<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b), b_elems);
  s.cublas = load_cublas(error);
  if (s.cublas == nullptr) return false;
  if (s.cublas->create(&s.handle) != CUBLAS_STATUS_SUCCESS) {
    *error = "cublasCreate failed";
    return false;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(d.m), n = static_cast<int>(d.n), k = static_cast<int>(d.k);
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's (n, m, k) with B first.
  auto call = [&]() {
    if (s.cublas->gemm(s.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, n,
                       d.k * d.n, a, CUDA_R_16BF, k, d.m * d.k, &beta, c, CUDA_R_16BF, n,
                       d.m * d.n, static_cast<int>(d.batch), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS) {
      return true;
    }
    *error = "cublasGemmStridedBatchedEx (bf16, fp32 compute) failed";
    return false;
  };
  return median_event_seconds(s, 2, repeats, "GEMM", call, seconds, error);
}

bool time_copy_cuda(int64_t bytes, int repeats, double* bytes_per_s, std::string* error) {
  if (bytes < 1 || repeats < 1) {
    *error = "copy of " + std::to_string(bytes) + " bytes: expected a positive size";
    return false;
  }
  Scratch s;
  void *from = nullptr, *to = nullptr;
  if (!s.allocate(static_cast<size_t>(bytes), &from, error) ||
      !s.allocate(static_cast<size_t>(bytes), &to, error) || !s.events(error)) {
    return false;
  }
  auto copy = [&]() {
    const cudaError_t rc =
        cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice);
    if (rc != cudaSuccess) *error = std::string("copy: cudaMemcpyAsync: ") + cudaGetErrorString(rc);
    return rc == cudaSuccess;
  };
  double seconds = 0;
  if (!median_event_seconds(s, 1, repeats, "copy", copy, &seconds, error)) return false;
  *bytes_per_s = 2.0 * static_cast<double>(bytes) / seconds;
  return true;
}

bool cuda_device_facts(CudaDeviceFacts* out, std::string* error) {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    *error = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  out->name = prop.name;
  out->multiprocessors = prop.multiProcessorCount;
  out->memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  out->runtime = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  return true;
}

}  // namespace shardplan::kernels
