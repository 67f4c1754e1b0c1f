// Initialisation fills addressed by global element index: value = f(seed, tensor key, global
// index), so a shard filled alone on any rank, CPU or GPU, equals that slice of the whole tensor
// filled at once (docs/architecture.md §5, "Init is keyed on the global element index").
//   const uint64_t key = tensor_key_from_name("layers.0.attn.q.weight");
//   const FillSpec spec{FillKind::kNormal, /*mean=*/0.0, /*std=*/0.02, seed, key};
//   if (auto why = check_fill_spec(ElementType::kBFloat16, spec)) return error(*why);
//   fill_cpu(local_data, ElementType::kBFloat16, region, spec);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/element_type.h"
#include "kernels/region.h"

namespace shardplan::kernels {

enum class FillKind { kConstant, kUniform, kNormal, kTruncatedNormal, kLogIndex };

// constant: a (b ignored); uniform: [a, b); normal: mean a, standard deviation b; truncated
// normal: normal(a, b) restricted to [low, high] (torch.nn.init.trunc_normal_'s mean, std, a, b);
// log index: element i (the global flat index) is log(a + i), a a positive integer, and with a
// period b > 0 (an integer) log(a + i mod b), the index restarting every b elements (b 0: none):
// transformers' Mamba-2 A_log init, torch.log(torch.arange(a, a + n)), and Mamba-1's, the same
// arange over the last dim of [d_inner, N] expanded over the rows (period N), which compute in
// float32 (the default dtype) and are copied into the tensor, so every floating type but complex64
// stores that float32 value (float64 widened). The float32 value is the exact log rounded once
// (computed as det::log_scaled_f64, within an ulp of double, then rounded to float: CPU and CUDA
// alike); PyTorch's vectorized float32 log is within an ulp, not correctly rounded, and differs at
// a few indices (1.13 on x86: the first at a + i = 429; tests/data/log_arange_oracle.json). Per
// element type (Note [Uniform and normal rules] in kernels/random_fill.h for the formulas):
//  * float64 computes in double; float32/float16/bfloat16/fp8 compute in float and round to
//    nearest even into storage (fp8 e4m3fn: beyond +-464 gives NaN, PyTorch's rule).
//  * complex64: element g's real part is the float fill at index 2g and its imaginary part at
//    2g+1, i.e. exactly the fill of view_as_real(x) (a trailing dim of 2). Normal uses std/sqrt(2)
//    per part, as torch.Tensor.normal_ does for complex, so E|x - mean(1+i)|^2 = std^2.
//    Constant is a + 0i.
//  * integers and bool: constant a (an integer in the type's range; bool: a != 0); uniform draws
//    integers in [a, b) (a, b integers, a < b, both ends representable), like Tensor.random_(a, b):
//    a + (64 random bits mod (b - a)), bias < (b - a) / 2^64. Normal is rejected.
//  * truncated normal: floating types except complex64 (PyTorch has no complex erfinv either);
//    std > 0 and low < high with at least 20% of the normal's mass in [low, high] (Note
//    [Truncated normal by per-element rejection] in kernels/random_fill.h).
struct FillSpec {
  FillKind kind;
  double a;
  double b;
  uint64_t seed;
  uint64_t tensor_key;
  // kTruncatedNormal only (inclusive bounds; infinite means unbounded on that side).
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
};

// Why a spec is not valid for `type`, naming the values, or nullopt when it is. fill_cpu and
// fill_cuda treat an invalid spec as a bug (abort), so callers with user input check first.
std::optional<std::string> check_fill_spec(ElementType type, const FillSpec& spec);

// Fills the box `region` of the global tensor into `dst` (host memory, aligned to the element
// size; see kernels/region.h). Deterministic: the bytes depend only on (type, spec, global
// indices), never on the box, the strides or the thread count. Large fills run on up to
// max_threads threads (0: the hardware's, at most 8; small fills stay on the calling thread);
// uniform and normal fills of float-compute types use AVX2 or AVX-512 when the CPU has them.
void fill_cpu(void* dst, ElementType type, const FillRegion& region, const FillSpec& spec,
              int max_threads = 0);

// FNV-1a 64 of the fully qualified parameter name ("layers.0.attn.q.weight"): stable across runs,
// ranks and platforms, unlike std::hash. FNV offset basis and prime from the FNV reference
// (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
constexpr uint64_t tensor_key_from_name(std::string_view name) {
  uint64_t hash = 0xCBF29CE484222325u;
  for (const char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001B3u;
  }
  return hash;
}

}  // namespace shardplan::kernels
