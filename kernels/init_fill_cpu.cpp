// CPU fill and spec validation. The per-element work is fill_one (kernels/fill_element.h), shared
// with CUDA; this file validates, splits the region over threads and walks it in runs, handing
// uniform and normal float runs to the vectorized kernels (kernels/internal/fill_simd.h), which
// give fill_one's bits (Note [Fast fill lanes] in kernels/internal/fill_lanes.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels/fill_element.h"
#include "kernels/init_fill.h"
#include "kernels/internal/check.h"
#include "kernels/internal/dispatch.h"
#include "kernels/internal/fill_simd.h"
#include "kernels/internal/region_walk.h"

namespace shardplan::kernels {
namespace {

std::string describe(ElementType type, const FillSpec& spec) {
  const char* kind = spec.kind == FillKind::kConstant   ? "constant"
                     : spec.kind == FillKind::kUniform  ? "uniform"
                     : spec.kind == FillKind::kNormal   ? "normal"
                     : spec.kind == FillKind::kLogIndex ? "log index"
                                                        : "truncated normal";
  char buf[200];
  const int n = std::snprintf(buf, sizeof buf, "%s fill of %.*s (a=%.17g, b=%.17g", kind,
                              static_cast<int>(element_type_name(type).size()),
                              element_type_name(type).data(), spec.a, spec.b);
  if (spec.kind == FillKind::kTruncatedNormal && n > 0 && n < static_cast<int>(sizeof buf)) {
    std::snprintf(buf + n, sizeof buf - n, ", low=%.17g, high=%.17g", spec.low, spec.high);
  }
  return std::string(buf) + ")";
}

// Inclusive range of the integer types, as doubles (exact: all are powers of two or 0/1 apart).
struct IntRange {
  double min;
  double max;
};

IntRange int_range(ElementType type) {
  switch (type) {
    case ElementType::kInt64:
      return {-0x1p63, 0x1p63 - 1024.0};  // largest double below 2^63
    case ElementType::kInt32:
      return {-0x1p31, 0x1p31 - 1.0};
    case ElementType::kInt16:
      return {-32768.0, 32767.0};
    case ElementType::kInt8:
      return {-128.0, 127.0};
    case ElementType::kUInt8:
      return {0.0, 255.0};
    default:
      return {0.0, 1.0};  // bool
  }
}

bool is_integral(double x) { return std::isfinite(x) && std::trunc(x) == x; }

// Share of N(mean, std) inside [low, high]: Phi(beta) - Phi(alpha), Phi(x) = erfc(-x / sqrt 2) / 2.
// libm is fine here: this only decides whether the FillSpec is accepted, it never feeds a value.
double normal_mass_between(double mean, double std, double low, double high) {
  const auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  return phi((high - mean) / std) - phi((low - mean) / std);
}

// Rejection sampling needs enough acceptance to make the clamp fallback negligible (Note
// [Truncated normal by per-element rejection]).
constexpr double kMinTruncatedNormalAcceptance = 0.2;

std::optional<std::string> check_truncated_normal(ElementType type, const FillSpec& spec,
                                                  double mean, double std) {
  if (type == ElementType::kComplex64) {
    return describe(type, spec) + ": truncated normal needs a real floating element type";
  }
  if (!std::isfinite(mean) || !std::isfinite(std) || !(std > 0.0)) {
    return describe(type, spec) + ": expected finite mean a and finite std b > 0";
  }
  const bool in_double = type == ElementType::kFloat64;
  const double low = in_double ? spec.low : static_cast<double>(static_cast<float>(spec.low));
  const double high = in_double ? spec.high : static_cast<double>(static_cast<float>(spec.high));
  if (!(low < high)) return describe(type, spec) + ": expected low < high";
  const double acceptance = normal_mass_between(mean, std, low, high);
  if (!(acceptance >= kMinTruncatedNormalAcceptance)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": only %.3g of the normal's mass lies in [low, high]",
                  acceptance);
    return describe(type, spec) + buf + ", at least 0.2 is supported";
  }
  return std::nullopt;
}

std::optional<std::string> check_floating(ElementType type, const FillSpec& spec) {
  const bool in_double = type == ElementType::kFloat64;
  // The same rounding make_fill_params applies: parameters are cast to the compute precision.
  const double a = in_double ? spec.a : static_cast<double>(static_cast<float>(spec.a));
  const double b = in_double ? spec.b : static_cast<double>(static_cast<float>(spec.b));
  switch (spec.kind) {
    case FillKind::kConstant:
      return std::nullopt;  // NaN and infinities are legitimate constants
    case FillKind::kUniform: {
      if (!std::isfinite(a) || !std::isfinite(b) || !(a <= b)) {
        return describe(type, spec) + ": expected finite a <= b";
      }
      const double width =
          in_double ? b - a : static_cast<double>(static_cast<float>(b) - static_cast<float>(a));
      if (!std::isfinite(width)) return describe(type, spec) + ": b - a overflows";
      return std::nullopt;
    }
    case FillKind::kNormal:
      if (!std::isfinite(a) || !std::isfinite(b) || !(b >= 0.0)) {
        return describe(type, spec) + ": expected finite mean a and finite std b >= 0";
      }
      return std::nullopt;
    case FillKind::kTruncatedNormal:
      return check_truncated_normal(type, spec, a, b);
    case FillKind::kLogIndex:
      // det::log_scaled_f64 takes a + index up to 2^53; no tensor reaches 2^52 elements.
      if (type == ElementType::kComplex64) {
        return describe(type, spec) + ": log index needs a real floating element type";
      }
      if (!is_integral(spec.a) || !(spec.a >= 1.0) || !(spec.a <= 0x1p52)) {
        return describe(type, spec) + ": expected an integer a in [1, 2^52]";
      }
      if (!is_integral(spec.b) || !(spec.b >= 0.0) || !(spec.b <= 0x1p52)) {
        return describe(type, spec) + ": expected a period b, an integer in [0, 2^52] (0: none)";
      }
      return std::nullopt;
  }
  return describe(type, spec) + ": unknown FillKind";
}

std::optional<std::string> check_integer(ElementType type, const FillSpec& spec) {
  const IntRange range = int_range(type);
  switch (spec.kind) {
    case FillKind::kConstant:
      if (type == ElementType::kBool) {
        if (std::isnan(spec.a)) return describe(type, spec) + ": expected a number";
        return std::nullopt;  // a != 0 -> true
      }
      if (!is_integral(spec.a) || spec.a < range.min || spec.a > range.max) {
        return describe(type, spec) + ": expected an integer a within the type's range";
      }
      return std::nullopt;
    case FillKind::kUniform:
      if (!is_integral(spec.a) || !is_integral(spec.b) || !(spec.a < spec.b) ||
          spec.a < range.min || spec.b - 1.0 > range.max) {
        return describe(type, spec) +
               ": expected integers a < b with a and b - 1 within the type's range";
      }
      return std::nullopt;
    case FillKind::kNormal:
    case FillKind::kTruncatedNormal:
      return describe(type, spec) + ": normal needs a floating element type";
    case FillKind::kLogIndex:
      return describe(type, spec) + ": log index needs a floating element type";
  }
  return describe(type, spec) + ": unknown FillKind";
}

}  // namespace

std::optional<std::string> check_fill_spec(ElementType type, const FillSpec& spec) {
  return is_floating(type) ? check_floating(type, spec) : check_integer(type, spec);
}

void fill_cpu(void* dst, ElementType type, const FillRegion& region, const FillSpec& spec,
              int max_threads) {
  internal::fill_cpu_on(internal::best_fill_isa(), max_threads, dst, type, region, spec);
}

namespace internal {
namespace {

// Note [Threaded CPU fill]
// Every element's value depends only on its global index (Note [Element random bits]), so the walk
// order [0, numel) can be cut into contiguous ranges, one per thread, and the bytes are the same
// for any number of threads. Below kMinElementsPerFillThread elements per thread a thread's start
// (tens of microseconds) would be a visible share of its work (a 128K-element normal range takes
// ~0.25 ms on one core with AVX-512, ~8 ms with the scalar loop). Cuts fall on multiples of
// kFillCutAlign elements so that two threads do not write into one cache line. At most
// kMaxFillThreads unless the caller asks for more: ranks that materialize side by side on one node
// share its cores.
constexpr int kMaxFillThreads = 8;
constexpr int64_t kMinElementsPerFillThread = int64_t{1} << 17;
constexpr int64_t kFillCutAlign = 1024;

int fill_thread_count(int64_t numel, int max_threads) {
  int limit = max_threads;
  if (limit <= 0) {
    const unsigned hardware = std::thread::hardware_concurrency();
    limit = std::clamp(static_cast<int>(hardware), 1, kMaxFillThreads);
  }
  const int64_t by_size = std::max<int64_t>(1, numel / kMinElementsPerFillThread);
  return static_cast<int>(std::min<int64_t>(limit, by_size));
}

// fill_one's conversion of a float-compute value to storage (float32, float16, bfloat16, fp8).
template <ElementType T>
void store_float_value(char* elem, float value) {
  using S = typename detail::Storage<T>::type;
  const S bits = detail::from_float<T>(value);
  std::memcpy(elem, &bits, sizeof bits);
}

// Storage types whose random fills compute in float, one value per element (complex64: two).
constexpr bool computes_in_float(ElementType t) {
  return is_floating(t) && t != ElementType::kFloat64;
}

// The run of `count` elements at buffer element dst_offset + i * ds with global index
// global + i * gs. `fast` (nullptr: none) takes uniform and normal runs of float-compute types.
template <ElementType T>
void fill_run(char* base, int64_t dst_offset, int64_t ds, int64_t global, int64_t gs, int64_t count,
              const FillParams& p, const FloatRunKernels* fast) {
  constexpr int64_t kSize = static_cast<int64_t>(element_size(T));
  const auto first = static_cast<uint64_t>(global);
  const auto step = static_cast<uint64_t>(gs);
  if constexpr (computes_in_float(T)) {
    if (fast != nullptr && (p.kind == FillKind::kUniform || p.kind == FillKind::kNormal)) {
      const bool normal = p.kind == FillKind::kNormal;
      const FloatRunF32 run_f32 = normal ? fast->normal_f32 : fast->uniform_f32;
      float* const dst_f32 = reinterpret_cast<float*>(base) + dst_offset;
      if constexpr (T == ElementType::kComplex64) {
        // Element g is floats 2g and 2g + 1 (Note in init_fill.h): a contiguous run of complex
        // elements is a contiguous float run of twice the length.
        if (ds == 1 && gs == 1) {
          run_f32(p, 2 * first, 1, 2 * count, reinterpret_cast<float*>(base) + 2 * dst_offset);
          return;
        }
      } else if (T == ElementType::kFloat32 && ds == 1) {
        run_f32(p, first, step, count, dst_f32);
        return;
      } else if (T == ElementType::kBFloat16 && ds == 1) {
        const FloatRunBf16 run_bf16 = normal ? fast->normal_bf16 : fast->uniform_bf16;
        run_bf16(p, first, step, count, reinterpret_cast<uint16_t*>(base) + dst_offset);
        return;
      } else {
        // A strided destination, or float16 / fp8: float values a chunk at a time, then stored.
        constexpr int64_t kChunk = 256;
        float values[kChunk];
        for (int64_t i = 0; i < count; i += kChunk) {
          const int64_t m = std::min(kChunk, count - i);
          run_f32(p, first + static_cast<uint64_t>(i) * step, step, m, values);
          for (int64_t j = 0; j < m; ++j) {
            store_float_value<T>(base + (dst_offset + (i + j) * ds) * kSize, values[j]);
          }
        }
        return;
      }
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    fill_one<T>(base + (dst_offset + i * ds) * kSize, p, first + static_cast<uint64_t>(i) * step);
  }
}

// Elements [begin, end) of the walk order.
template <ElementType T>
void fill_range(char* base, const CompactRegion& r, const FillParams& p,
                const FloatRunKernels* fast, int64_t begin, int64_t end) {
  const int64_t ds = r.ndim > 0 ? r.dst_strides[r.ndim - 1] : 1;
  const int64_t gs = r.ndim > 0 ? r.global_strides[r.ndim - 1] : 1;
  for_each_run(r, begin, end, [&](int64_t dst_offset, int64_t global, int64_t count) {
    fill_run<T>(base, dst_offset, ds, global, gs, count, p, fast);
  });
}

}  // namespace

void fill_cpu_on(FillIsa isa, int max_threads, void* dst, ElementType type,
                 const FillRegion& region, const FillSpec& spec) {
  const std::optional<std::string> error = check_fill_spec(type, spec);
  SHARDPLAN_KERNELS_CHECK(!error, error->c_str());
  const CompactRegion compact = compact_region(region);
  const FillParams params = make_fill_params(type, spec);
  const FloatRunKernels* const fast = float_run_kernels(isa);
  char* const base = static_cast<char*>(dst);
  const int64_t numel = compact.numel;
  const int threads = fill_thread_count(numel, max_threads);
  dispatch_element_type(type, [&](auto tag) {
    constexpr ElementType kType = decltype(tag)::value;
    if (threads <= 1) {
      fill_range<kType>(base, compact, params, fast, 0, numel);
      return;
    }
    // Note [Threaded CPU fill]: range t is [t * per, (t + 1) * per) clipped to numel.
    int64_t per = (numel + threads - 1) / threads;
    per = (per + kFillCutAlign - 1) / kFillCutAlign * kFillCutAlign;
    std::vector<std::thread> workers;
    for (int t = 1; t < threads && t * per < numel; ++t) {
      const int64_t begin = t * per;
      const int64_t end = std::min(numel, begin + per);
      try {
        workers.emplace_back(
            [=, &compact, &params] { fill_range<kType>(base, compact, params, fast, begin, end); });
      } catch (const std::system_error&) {
        fill_range<kType>(base, compact, params, fast, begin, end);  // no thread to be had
      }
    }
    fill_range<kType>(base, compact, params, fast, 0, std::min(numel, per));
    for (std::thread& worker : workers) worker.join();
  });
}

}  // namespace internal
}  // namespace shardplan::kernels
