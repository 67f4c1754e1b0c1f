// The vectorized float fills of the CPU fast path (kernels/init_fill_simd.cpp): uniform and normal
// values computed in float for 8 (AVX2 + FMA) or 16 (AVX-512) elements at a time, stored as
// float32 or bfloat16, bit-identical to fill_one (Note [Fast fill lanes] in fill_lanes.h).
//   const FloatRunKernels* k = float_run_kernels(best_fill_isa());  // nullptr: use fill_one
//   if (k) k->f32[normal](params, first_index, index_step, count, dst);
#pragma once

#include <cstdint>

#include "kernels/fill_element.h"
#include "kernels/init_fill.h"

namespace shardplan::kernels::internal {

// Instruction sets the fast path has code for. kScalar means fill_one element by element (any
// CPU, and every CPU without FMA: a software fma per operation would be slower than the scalar
// loop's library calls).
enum class FillIsa { kScalar, kAvx2, kAvx512 };

// Values of the elements with global indices first + i * step, 0 <= i < count, written to dst[i].
// params.kind must be kUniform or kNormal (float compute: float32, bfloat16, and the float parts of
// the other narrow types and complex64).
using FloatRunF32 = void (*)(const FillParams& params, uint64_t first, uint64_t step, int64_t count,
                             float* dst);
using FloatRunBf16 = void (*)(const FillParams& params, uint64_t first, uint64_t step,
                              int64_t count, uint16_t* dst);

struct FloatRunKernels {
  FloatRunF32 uniform_f32;
  FloatRunF32 normal_f32;
  FloatRunBf16 uniform_bf16;
  FloatRunBf16 normal_bf16;
};

// The widest instruction set this CPU (and OS) supports among the compiled-in ones.
FillIsa best_fill_isa();

// Whether this CPU can run `isa`'s kernels (kScalar: always).
bool fill_isa_supported(FillIsa isa);

// The kernels for `isa`, or nullptr for kScalar, for an isa this build has no code for (non-x86),
// or one this CPU cannot run.
const FloatRunKernels* float_run_kernels(FillIsa isa);

// fill_cpu with the fast path's instruction set chosen (kScalar, or one the CPU lacks: fill_one for
// every element) and max_threads as in fill_cpu. Tests run every path against each other.
void fill_cpu_on(FillIsa isa, int max_threads, void* dst, ElementType type,
                 const FillRegion& region, const FillSpec& spec);

}  // namespace shardplan::kernels::internal
