// The vectorized uniform and normal float fills (kernels/internal/fill_simd.h): the lane functions
// of kernels/internal/fill_lanes.h in a loop the compiler vectorizes, compiled once for AVX2 + FMA
// (with Philox written in intrinsics there) and once for AVX-512 through function target
// attributes, chosen at run time. The rest of the
// binary stays baseline x86-64 (no -march flag), so it runs on any x86-64 CPU.
//
// Built with -fopenmp-simd (only `#pragma omp simd`, no OpenMP runtime) and -fno-math-errno (so
// sqrtf is the bare instruction, which vectorizes; its result is the same correctly rounded value)
// by kernels/CMakeLists.txt, which keeps this file out of the unity batches.
#include <cstring>

#include "kernels/internal/fill_simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SHARDPLAN_FILL_SIMD_X86 1
#include <immintrin.h>

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

// The float value of lane j = index mod 4 from its group's Philox words.
template <FillKind kKind>
[[gnu::always_inline]] inline float simd_value_from_words(const LaneParams& p,
                                                          const lanes::PhiloxOut& w, uint32_t j) {
  if constexpr (kKind == FillKind::kNormal) {
    return lanes::normal_f32(lanes::pair_radius_word(w, j), lanes::pair_angle_word(w, j), j, p.a,
                             p.b);
  } else {
    return lanes::uniform_f32(lanes::lane_word(w, j), p.a, p.b);
  }
}

// The value of global element `index`, as float (Note [Element random bits]: the block of group
// index / 4, lane index mod 4).
template <FillKind kKind>
[[gnu::always_inline]] inline float simd_lane_value(const LaneParams& p, uint64_t index) {
  const uint64_t group = index >> 2;
  const lanes::PhiloxOut w =
      lanes::philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), p.key_lo,
                    p.key_hi, p.seed_lo, p.seed_hi);
  return simd_value_from_words<kKind>(p, w, static_cast<uint32_t>(index) & 3u);
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
//
// `words` (AVX2, see philox_words_avx2): the four Philox words of each lane's group, computed
// beforehand; nullptr: Philox runs inside the loop.
template <FillKind kKind, class Out, bool kWordsGiven = false>
[[gnu::always_inline]] inline void simd_block(const FillParams& params, uint64_t first,
                                              uint64_t step, Out* dst,
                                              const uint32_t (*words)[kSimdBlock] = nullptr) {
  static_assert(sizeof(Out) == 4 || sizeof(Out) == 2);
  const LaneParams p = lane_params(params);
  uint8_t bytes[sizeof(Out) * kSimdBlock];
#pragma omp simd
  for (int lane = 0; lane < kSimdBlock; ++lane) {
    float value;
    if constexpr (kWordsGiven) {
      const lanes::PhiloxOut w{words[0][lane], words[1][lane], words[2][lane], words[3][lane]};
      value = simd_value_from_words<kKind>(
          p, w, static_cast<uint32_t>(first + static_cast<uint64_t>(lane) * step) & 3u);
    } else {
      value = simd_lane_value<kKind>(p, first + static_cast<uint64_t>(lane) * step);
    }
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

// Note [Group lanes]
// Every four consecutive elements share one Philox block, and a normal pair shares its log and
// sqrt (Note [Element random bits] in kernels/random_fill.h). One element per lane computes each
// block four times and each log twice; on a contiguous run (step 1, whole tensors and row or
// column shards alike) a lane takes a whole group instead: Philox once, four values, written to 4
// consecutive elements. Measured on one Zen 4 core (bench_init_fill_bench, normal, 1 thread):
// AVX-512 float32 1.68 -> 2.98 GiB/s, bfloat16 0.87 -> 1.52; AVX2 0.99 -> 2.01 and 0.49 -> 1.11.
// The 4 * kSimdBlock elements of groups first_group + lane, lane < kSimdBlock, into dst. Bytes
// again, for the vector length (simd_block).
template <FillKind kKind, class Out, bool kWordsGiven = false>
[[gnu::always_inline]] inline void simd_group_block(const FillParams& params, uint64_t first_group,
                                                    Out* dst,
                                                    const uint32_t (*words)[kSimdBlock] = nullptr) {
  static_assert(sizeof(Out) == 4 || sizeof(Out) == 2);
  const LaneParams p = lane_params(params);
  uint8_t bytes[4 * sizeof(Out) * kSimdBlock];
#pragma omp simd
  for (int lane = 0; lane < kSimdBlock; ++lane) {
    lanes::PhiloxOut w;
    if constexpr (kWordsGiven) {
      w = lanes::PhiloxOut{words[0][lane], words[1][lane], words[2][lane], words[3][lane]};
    } else {
      const uint64_t group = first_group + static_cast<uint64_t>(lane);
      w = lanes::philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), p.key_lo,
                        p.key_hi, p.seed_lo, p.seed_hi);
    }
    float v[4];
    if constexpr (kKind == FillKind::kNormal) {
      lanes::normal_pair_f32(w.w0, w.w1, p.a, p.b, &v[0], &v[1]);
      lanes::normal_pair_f32(w.w2, w.w3, p.a, p.b, &v[2], &v[3]);
    } else {
      v[0] = lanes::uniform_f32(w.w0, p.a, p.b);
      v[1] = lanes::uniform_f32(w.w1, p.a, p.b);
      v[2] = lanes::uniform_f32(w.w2, p.a, p.b);
      v[3] = lanes::uniform_f32(w.w3, p.a, p.b);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int at = static_cast<int>(sizeof(Out)) * (4 * lane + j);
      if constexpr (sizeof(Out) == 4) {
        const uint32_t bits = fp::bits(v[j]);
        bytes[at] = static_cast<uint8_t>(bits);
        bytes[at + 1] = static_cast<uint8_t>(bits >> 8);
        bytes[at + 2] = static_cast<uint8_t>(bits >> 16);
        bytes[at + 3] = static_cast<uint8_t>(bits >> 24);
      } else {
        const uint16_t bits = lanes::float_to_bf16_bits(v[j]);
        bytes[at] = static_cast<uint8_t>(bits);
        bytes[at + 1] = static_cast<uint8_t>(bits >> 8);
      }
    }
  }
  std::memcpy(dst, bytes, sizeof bytes);
}

// A contiguous run (step 1) by whole groups: blocks of kSimdBlock groups from the group of
// `first`; a block that sticks out of the run (its first or last group partly outside) is
// computed into a local buffer and its overlap copied.
template <class Out, class GroupBlock>
[[gnu::always_inline]] inline void simd_group_run(const FillParams& p, uint64_t first,
                                                  int64_t count, Out* dst, GroupBlock block) {
  constexpr uint64_t kElements = 4 * kSimdBlock;
  const uint64_t end = first + static_cast<uint64_t>(count);
  for (uint64_t group = first >> 2; 4 * group < end; group += kSimdBlock) {
    const uint64_t begin = 4 * group;
    if (begin >= first && begin + kElements <= end) {
      block(p, group, dst + (begin - first));
      continue;
    }
    Out block_out[kElements];
    block(p, group, block_out);
    const uint64_t lo = begin > first ? begin : first;
    const uint64_t hi = begin + kElements < end ? begin + kElements : end;
    std::memcpy(dst + (lo - first), block_out + (lo - begin), (hi - lo) * sizeof(Out));
  }
}

template <class Out, class Block>
[[gnu::always_inline]] inline void simd_run(const FillParams& p, uint64_t first, uint64_t step,
                                            int64_t count, Out* dst, Block block) {
  int64_t i = 0;
  for (; i + kSimdBlock <= count; i += kSimdBlock) {
    block(p, first + static_cast<uint64_t>(i) * step, step, dst + i);
  }
  if (i < count) {
    Out tail[kSimdBlock];
    block(p, first + static_cast<uint64_t>(i) * step, step, tail);
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

// hi and lo halves of the 32x32->64 products a * m in 8 lanes. AVX2 has no 32-bit high multiply
// and no 64-bit one: vpmuludq multiplies the even lanes (the low words of the 64-bit halves), the
// odd lanes are shifted down and multiplied likewise, and the halves are blended back.
SHARDPLAN_TARGET_AVX2 inline void mul_hi_lo_avx2(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Philox's four words (lanes::philox, the same rounds) of the groups of elements first + lane *
// step, lane < kSimdBlock, written with AVX2 intrinsics; simd_block turns them into values. Why not
// the vectorizer, as for AVX-512: GCC turns each 32x32->64 product into a round trip between 32-
// and 64-bit lanes (~25 shuffles per product for 32 lanes), where mul_hi_lo_avx2 needs 7 operations
// per 8 lanes. kWays vectors go through the rounds side by side so that their multiplies overlap.
// One Zen 4 core, normal float32: 180M elements/s with the vectorizer's Philox; 180M, 225M and
// 260M with 1, 2 and 4 ways here.
SHARDPLAN_TARGET_AVX2 void philox_words_avx2(const LaneParams& p, uint64_t first, uint64_t step,
                                             uint32_t (*words)[kSimdBlock]) {
  // Unrolled whatever the optimization level (-O2 would keep the c arrays in memory).
  constexpr int kWays = 4;
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  for (int v = 0; v < kSimdBlock; v += 8 * kWays) {
    __m256i c0[kWays], c1[kWays], c2[kWays], c3[kWays];
#pragma GCC unroll 4
    for (int w = 0; w < kWays; ++w) {
      alignas(32) uint32_t lo[8], hi[8];
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const uint64_t group = (first + static_cast<uint64_t>(v + 8 * w + l) * step) >> 2;
        lo[l] = static_cast<uint32_t>(group);
        hi[l] = static_cast<uint32_t>(group >> 32);
      }
      c0[w] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
      c1[w] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
      c2[w] = _mm256_set1_epi32(static_cast<int>(p.key_lo));
      c3[w] = _mm256_set1_epi32(static_cast<int>(p.key_hi));
    }
    uint32_t k0 = p.seed_lo, k1 = p.seed_hi;
#pragma GCC unroll 10
    for (int round = 0; round < kPhiloxRounds; ++round) {
      const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
#pragma GCC unroll 4
      for (int w = 0; w < kWays; ++w) {
        __m256i hi0, lo0, hi1, lo1;
        mul_hi_lo_avx2(c0[w], m0, &hi0, &lo0);
        mul_hi_lo_avx2(c2[w], m1, &hi1, &lo1);
        c0[w] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[w]), key0);
        c1[w] = lo1;
        c2[w] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[w]), key1);
        c3[w] = lo0;
      }
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
#pragma GCC unroll 4
    for (int w = 0; w < kWays; ++w) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&words[0][v + 8 * w]), c0[w]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&words[1][v + 8 * w]), c1[w]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&words[2][v + 8 * w]), c2[w]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&words[3][v + 8 * w]), c3[w]);
    }
  }
}

template <FillKind kKind, class Out>
SHARDPLAN_TARGET_AVX2 void simd_run_avx2(const FillParams& p, uint64_t first, uint64_t step,
                                         int64_t count, Out* dst) {
  if (step == 1) {
    simd_group_run(p, first, count, dst,
                   [](const FillParams& params, uint64_t group, Out* out) SHARDPLAN_TARGET_AVX2 {
                     uint32_t words[4][kSimdBlock];
                     // Elements 4 * (group + lane): Philox of group + lane.
                     philox_words_avx2(lane_params(params), 4 * group, 4, words);
                     simd_group_block<kKind, Out, true>(params, group, out, words);
                   });
    return;
  }
  simd_run(p, first, step, count, dst,
           [](const FillParams& params, uint64_t block_first, uint64_t block_step, Out* out)
               SHARDPLAN_TARGET_AVX2 {
                 uint32_t words[4][kSimdBlock];
                 philox_words_avx2(lane_params(params), block_first, block_step, words);
                 simd_block<kKind, Out, true>(params, block_first, block_step, out, words);
               });
}

// Philox's four words of groups first_group + lane, lane < kSimdBlock, in a loop of their own:
// the vectorizer maps the products to AVX-512's 32-bit multiplies, and the value loop that
// follows has no Philox in it (one loop with both did not vectorize well: 0.37 against 2 GB/s).
SHARDPLAN_TARGET_AVX512 void philox_words_avx512(const LaneParams& p, uint64_t first_group,
                                                 uint32_t (*words)[kSimdBlock]) {
#pragma omp simd
  for (int lane = 0; lane < kSimdBlock; ++lane) {
    const uint64_t group = first_group + static_cast<uint64_t>(lane);
    const lanes::PhiloxOut w =
        lanes::philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), p.key_lo,
                      p.key_hi, p.seed_lo, p.seed_hi);
    words[0][lane] = w.w0;
    words[1][lane] = w.w1;
    words[2][lane] = w.w2;
    words[3][lane] = w.w3;
  }
}

template <FillKind kKind, class Out>
SHARDPLAN_TARGET_AVX512 void simd_run_avx512(const FillParams& p, uint64_t first, uint64_t step,
                                             int64_t count, Out* dst) {
  if (step == 1) {
    simd_group_run(p, first, count, dst,
                   [](const FillParams& params, uint64_t group, Out* out) SHARDPLAN_TARGET_AVX512 {
                     uint32_t words[4][kSimdBlock];
                     philox_words_avx512(lane_params(params), group, words);
                     simd_group_block<kKind, Out, true>(params, group, out, words);
                   });
    return;
  }
  simd_run(p, first, step, count, dst,
           [](const FillParams& params, uint64_t block_first, uint64_t block_step, Out* out)
               SHARDPLAN_TARGET_AVX512 {
                 simd_block<kKind, Out>(params, block_first, block_step, out);
               });
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
