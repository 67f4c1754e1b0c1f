// The vectorized uniform and normal float fills (kernels/internal/fill_simd.h): the lane functions
// of kernels/internal/fill_lanes.h in a loop the compiler vectorizes, compiled once for AVX2 + FMA
// and once for AVX-512 through function target attributes, chosen at run time. The rest of the
// binary stays baseline x86-64 (no -march flag), so it runs on any x86-64 CPU.
//
// Built with -fopenmp-simd (only `#pragma omp simd`, no OpenMP runtime) and -fno-math-errno (so
// sqrtf is the bare instruction, which vectorizes; its result is the same correctly rounded value)
// by kernels/CMakeLists.txt, which keeps this file out of the unity batches.
#include <cstring>

#include "kernels/internal/fill_simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SHARDPLAN_FILL_SIMD_X86 1
#include "kernels/internal/fill_lanes.h"
#else
#define SHARDPLAN_FILL_SIMD_X86 0
#endif

namespace shardplan::kernels::internal {

#if SHARDPLAN_FILL_SIMD_X86
namespace {

// Elements per vector loop: one step of 64 byte lanes (simd_block). Short runs and the tail of a
// run compute a full block into a local buffer: a block costs about as much as two elements of
// the scalar loop.
constexpr int kSimdBlock = 64;

// FillParams' fields that a lane reads, copied out before the loop: a float store into dst could
// alias p.f_a for all the compiler knows, which would force reloads inside the vector loop.
struct LaneParams {
  uint32_t key_lo, key_hi, seed_lo, seed_hi;
  float a, b;
};

inline LaneParams lane_params(const FillParams& p) {
  return LaneParams{static_cast<uint32_t>(p.tensor_key),
                    static_cast<uint32_t>(p.tensor_key >> 32),
                    static_cast<uint32_t>(p.seed),
                    static_cast<uint32_t>(p.seed >> 32),
                    p.f_a,
                    p.f_b};
}

// The value of global element `index`, as float.
template <FillKind kKind>
[[gnu::always_inline]] inline float simd_lane_value(const LaneParams& p, uint64_t index) {
  const lanes::PhiloxOut w =
      lanes::philox(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), p.key_lo,
                    p.key_hi, p.seed_lo, p.seed_hi);
  if constexpr (kKind == FillKind::kNormal) {
    return lanes::normal_f32(w.w0, w.w1, p.a, p.b);
  } else {
    return lanes::uniform_f32(w.w0, p.a, p.b);
  }
}

// Elements first + lane * step for lane < kSimdBlock into dst[lane].
//
// Why the loop stores single bytes: GCC picks the vector length from the narrowest type in the
// loop. With float stores it takes 16 lanes (one zmm) per step and emits the block's iterations
// one after the other; each is one long dependency chain (ten Philox rounds, log, division, sqrt,
// cos) and the core idles on latencies. With byte stores it takes 64 lanes (32 with AVX2): every
// step becomes four independent zmm operations side by side. Measured on one Zen 4 core, float32
// normal: 250M elements/s with float stores, 380M with 16-bit stores, 505M with bytes. The bytes
// (of the little-endian float or bfloat16) go to a local buffer and are copied out with memcpy.
template <FillKind kKind, class Out>
[[gnu::always_inline]] inline void simd_block(const FillParams& params, uint64_t first,
                                              uint64_t step, Out* dst) {
  static_assert(sizeof(Out) == 4 || sizeof(Out) == 2);
  const LaneParams p = lane_params(params);
  uint8_t bytes[sizeof(Out) * kSimdBlock];
#pragma omp simd
  for (int lane = 0; lane < kSimdBlock; ++lane) {
    const uint64_t index = first + static_cast<uint64_t>(lane) * step;
    const float value = simd_lane_value<kKind>(p, index);
    if constexpr (sizeof(Out) == 4) {
      const uint32_t bits = fp::bits(value);
      bytes[4 * lane] = static_cast<uint8_t>(bits);
      bytes[4 * lane + 1] = static_cast<uint8_t>(bits >> 8);
      bytes[4 * lane + 2] = static_cast<uint8_t>(bits >> 16);
      bytes[4 * lane + 3] = static_cast<uint8_t>(bits >> 24);
    } else {
      const uint16_t bits = lanes::float_to_bf16_bits(value);
      bytes[2 * lane] = static_cast<uint8_t>(bits);
      bytes[2 * lane + 1] = static_cast<uint8_t>(bits >> 8);
    }
  }
  std::memcpy(dst, bytes, sizeof bytes);
}

template <FillKind kKind, class Out>
[[gnu::always_inline]] inline void simd_run(const FillParams& p, uint64_t first, uint64_t step,
                                            int64_t count, Out* dst) {
  int64_t i = 0;
  for (; i + kSimdBlock <= count; i += kSimdBlock) {
    simd_block<kKind>(p, first + static_cast<uint64_t>(i) * step, step, dst + i);
  }
  if (i < count) {
    Out tail[kSimdBlock];
    simd_block<kKind>(p, first + static_cast<uint64_t>(i) * step, step, tail);
    std::memcpy(dst + i, tail, static_cast<size_t>(count - i) * sizeof(Out));
  }
}

// GCC's and Clang's names for the features; __builtin_cpu_supports checks that the OS saves the
// registers too. Both compilers default to 256-bit vectors under AVX-512 (zmm code can lower the
// clock on some Intel parts); these loops are all arithmetic, and 512-bit vectors halve the
// instruction count. GCC takes that in the target string, Clang as min_vector_width.
#define SHARDPLAN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)
#define SHARDPLAN_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), min_vector_width(512)))
#else
#define SHARDPLAN_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))
#endif

template <FillKind kKind, class Out>
SHARDPLAN_TARGET_AVX2 void simd_run_avx2(const FillParams& p, uint64_t first, uint64_t step,
                                         int64_t count, Out* dst) {
  simd_run<kKind>(p, first, step, count, dst);
}

template <FillKind kKind, class Out>
SHARDPLAN_TARGET_AVX512 void simd_run_avx512(const FillParams& p, uint64_t first, uint64_t step,
                                             int64_t count, Out* dst) {
  simd_run<kKind>(p, first, step, count, dst);
}

constexpr FloatRunKernels kAvx2Kernels{
    simd_run_avx2<FillKind::kUniform, float>, simd_run_avx2<FillKind::kNormal, float>,
    simd_run_avx2<FillKind::kUniform, uint16_t>, simd_run_avx2<FillKind::kNormal, uint16_t>};

constexpr FloatRunKernels kAvx512Kernels{
    simd_run_avx512<FillKind::kUniform, float>, simd_run_avx512<FillKind::kNormal, float>,
    simd_run_avx512<FillKind::kUniform, uint16_t>, simd_run_avx512<FillKind::kNormal, uint16_t>};

}  // namespace

bool fill_isa_supported(FillIsa isa) {
  // libgcc fills the CPU model from a constructor; a fill from another static initializer could
  // run first. The call is idempotent and cheap.
  __builtin_cpu_init();
  switch (isa) {
    case FillIsa::kScalar:
      return true;
    case FillIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case FillIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             fill_isa_supported(FillIsa::kAvx2);
  }
  return false;
}

const FloatRunKernels* float_run_kernels(FillIsa isa) {
  if (!fill_isa_supported(isa)) return nullptr;
  switch (isa) {
    case FillIsa::kAvx2:
      return &kAvx2Kernels;
    case FillIsa::kAvx512:
      return &kAvx512Kernels;
    case FillIsa::kScalar:
      break;
  }
  return nullptr;
}

#else  // not x86-64: fill_one everywhere

bool fill_isa_supported(FillIsa isa) { return isa == FillIsa::kScalar; }

const FloatRunKernels* float_run_kernels(FillIsa) { return nullptr; }

#endif

FillIsa best_fill_isa() {
  static const FillIsa best = fill_isa_supported(FillIsa::kAvx512) ? FillIsa::kAvx512
                              : fill_isa_supported(FillIsa::kAvx2) ? FillIsa::kAvx2
                                                                   : FillIsa::kScalar;
  return best;
}

}  // namespace shardplan::kernels::internal
