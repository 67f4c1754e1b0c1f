// Annotations for functions that must compile, and give identical results, on the CPU and in CUDA.
//   SHARDPLAN_HD SHARDPLAN_INLINE float twice(float x) { return x + x; }
// nvcc sees __host__ __device__; a plain C++ compiler sees nothing: kernels/ builds without CUDA.
#pragma once

#if defined(__CUDACC__)
#define SHARDPLAN_HD __host__ __device__
#define SHARDPLAN_INLINE __forceinline__
#else
#define SHARDPLAN_HD
#define SHARDPLAN_INLINE inline
#endif
