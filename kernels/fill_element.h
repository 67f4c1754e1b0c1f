// The per-element fill function shared by the CPU loop (init_fill_cpu.cpp) and the CUDA kernels
// (init_fill_cuda.cu), and its group form for the CUDA fill's contiguous path: same code, same
// bits.
//   FillParams p = make_fill_params(type, spec);           // host, once per fill
//   fill_one<ElementType::kBFloat16>(elem_ptr, p, global_index);  // host or device, per element
//   uint16_t four[4]; fill_group<ElementType::kBFloat16>(four, p, global_index / 4);
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/element_type.h"
#include "kernels/host_device.h"
#include "kernels/init_fill.h"
#include "kernels/random_fill.h"

namespace shardplan::kernels {

// A FillSpec with the per-type arithmetic done once on the host, passed by value to kernels.
struct FillParams {
  FillKind kind;
  uint64_t seed;
  uint64_t tensor_key;
  float f_a;   // float compute: constant value | uniform low | normal mean
  float f_b;   //                (unused)     | high - low  | std (complex: std / sqrt 2)
  double d_a;  // float64 compute, same meaning
  double d_b;
  float f_low;  // truncated normal bounds, float and float64 compute
  float f_high;
  double d_low;
  double d_high;
  int64_t i_lo;      // integers: constant value | uniform low
  uint64_t i_range;  //                          | b - a
};

// `spec` must pass check_fill_spec(type, spec).
inline FillParams make_fill_params(ElementType type, const FillSpec& spec) {
  FillParams p{};
  p.kind = spec.kind;
  p.seed = spec.seed;
  p.tensor_key = spec.tensor_key;
  p.f_a = static_cast<float>(spec.a);
  p.d_a = spec.a;
  switch (spec.kind) {
    case FillKind::kConstant:
      break;
    case FillKind::kUniform:
      p.f_b = static_cast<float>(spec.b) - p.f_a;  // width rounded in the compute precision
      p.d_b = spec.b - spec.a;
      break;
    case FillKind::kNormal:
      // PyTorch's normal_ on complex fills view_as_real with std / sqrt(2).
      p.f_b =
          static_cast<float>(type == ElementType::kComplex64 ? spec.b / std::sqrt(2.0) : spec.b);
      p.d_b = spec.b;
      break;
    case FillKind::kLogIndex:
      p.d_b = spec.b;  // the period, 0 for none
      break;
    case FillKind::kTruncatedNormal:
      p.f_b = static_cast<float>(spec.b);
      p.d_b = spec.b;
      p.f_low = static_cast<float>(spec.low);
      p.f_high = static_cast<float>(spec.high);
      p.d_low = spec.low;
      p.d_high = spec.high;
      break;
  }
  if (!is_floating(type)) {
    p.i_lo = type == ElementType::kBool && spec.kind == FillKind::kConstant
                 ? (spec.a != 0.0 ? 1 : 0)
                 : static_cast<int64_t>(spec.a);
    if (spec.kind == FillKind::kUniform) {
      p.i_range =
          static_cast<uint64_t>(static_cast<int64_t>(spec.b)) - static_cast<uint64_t>(p.i_lo);
    }
  }
  return p;
}

namespace detail {

SHARDPLAN_HD SHARDPLAN_INLINE unsigned float_lane(uint64_t index) {
  return static_cast<unsigned>(index % kFloatGroup);
}

SHARDPLAN_HD SHARDPLAN_INLINE unsigned wide_lane(uint64_t index) {
  return static_cast<unsigned>(index % kWideGroup);
}

// log(a + index) in float32, rounded once from det's double log (Note in init_fill.h); with a
// period, log(a + index mod period).
SHARDPLAN_HD SHARDPLAN_INLINE float log_index_f32(const FillParams& p, uint64_t index) {
  const auto period = static_cast<uint64_t>(p.d_b);
  const uint64_t i = period > 0 ? index % period : index;
  return static_cast<float>(det::log_scaled_f64(static_cast<uint64_t>(p.d_a) + i, 0));
}

SHARDPLAN_HD SHARDPLAN_INLINE float float_value(const FillParams& p, uint64_t index) {
  switch (p.kind) {
    case FillKind::kConstant:
      return p.f_a;
    case FillKind::kUniform:
      return uniform_f32(group_random_bits(p.seed, p.tensor_key, index / kFloatGroup),
                         float_lane(index), p.f_a, p.f_b);
    case FillKind::kNormal:
      return normal_f32(group_random_bits(p.seed, p.tensor_key, index / kFloatGroup),
                        float_lane(index), p.f_a, p.f_b);
    case FillKind::kTruncatedNormal:
      return truncated_normal_f32(p.seed, p.tensor_key, index, p.f_a, p.f_b, p.f_low, p.f_high);
    case FillKind::kLogIndex:
      return log_index_f32(p, index);
  }
  return 0.0f;
}

SHARDPLAN_HD SHARDPLAN_INLINE double double_value(const FillParams& p, uint64_t index) {
  switch (p.kind) {
    case FillKind::kConstant:
      return p.d_a;
    case FillKind::kUniform:
      return uniform_f64(group_random_bits(p.seed, p.tensor_key, index / kWideGroup),
                         wide_lane(index), p.d_a, p.d_b);
    case FillKind::kNormal:
      return normal_f64(group_random_bits(p.seed, p.tensor_key, index / kWideGroup),
                        wide_lane(index), p.d_a, p.d_b);
    case FillKind::kTruncatedNormal:
      return truncated_normal_f64(p.seed, p.tensor_key, index, p.d_a, p.d_b, p.d_low, p.d_high);
    case FillKind::kLogIndex:
      return static_cast<double>(log_index_f32(p, index));  // the float32 value, widened
  }
  return 0.0;
}

// Wrapping add: i_lo + offset stays inside [a, b) by construction.
SHARDPLAN_HD SHARDPLAN_INLINE int64_t integer_from_bits(const FillParams& p, uint64_t bits) {
  return static_cast<int64_t>(static_cast<uint64_t>(p.i_lo) + bits % p.i_range);
}

SHARDPLAN_HD SHARDPLAN_INLINE int64_t integer_value(const FillParams& p, uint64_t index) {
  if (p.kind != FillKind::kUniform) return p.i_lo;
  const Uint4x32 r = group_random_bits(p.seed, p.tensor_key, index / kWideGroup);
  return integer_from_bits(p, wide_lane_bits(r, wide_lane(index)));
}

// The storage bits of a value computed in float or double, or of an integer.
template <ElementType T>
struct Storage;
template <>
struct Storage<ElementType::kFloat64> {
  using type = double;
};
template <>
struct Storage<ElementType::kFloat32> {
  using type = float;
};
template <>
struct Storage<ElementType::kFloat16> {
  using type = uint16_t;
};
template <>
struct Storage<ElementType::kBFloat16> {
  using type = uint16_t;
};
template <>
struct Storage<ElementType::kFloat8E4M3FN> {
  using type = uint8_t;
};
template <>
struct Storage<ElementType::kFloat8E5M2> {
  using type = uint8_t;
};
template <>
struct Storage<ElementType::kInt64> {
  using type = int64_t;
};
template <>
struct Storage<ElementType::kInt32> {
  using type = int32_t;
};
template <>
struct Storage<ElementType::kInt16> {
  using type = int16_t;
};
template <>
struct Storage<ElementType::kInt8> {
  using type = int8_t;
};
template <>
struct Storage<ElementType::kUInt8> {
  using type = uint8_t;
};
template <>
struct Storage<ElementType::kBool> {
  using type = uint8_t;
};

template <ElementType T>
SHARDPLAN_HD SHARDPLAN_INLINE typename Storage<T>::type from_float(float v) {
  if constexpr (T == ElementType::kFloat32) {
    return v;
  } else if constexpr (T == ElementType::kFloat16) {
    return float_to_fp16_bits(v);
  } else if constexpr (T == ElementType::kBFloat16) {
    return float_to_bf16_bits_branch_free(v);  // float_to_bf16_bits' bits, no branches
  } else if constexpr (T == ElementType::kFloat8E4M3FN) {
    return float_to_fp8e4m3fn_bits(v);
  } else {
    static_assert(T == ElementType::kFloat8E5M2);
    return float_to_fp8e5m2_bits(v);
  }
}

}  // namespace detail

// Writes the value of global element `index` into `elem` (one element of type T).
template <ElementType T>
SHARDPLAN_HD SHARDPLAN_INLINE void fill_one(void* elem, const FillParams& p, uint64_t index) {
  if constexpr (T == ElementType::kFloat64) {
    *static_cast<double*>(elem) = detail::double_value(p, index);
  } else if constexpr (T == ElementType::kComplex64) {
    // Real at 2g, imaginary at 2g + 1 (Note in init_fill.h); constant is a + 0i.
    float* parts = static_cast<float*>(elem);
    parts[0] = detail::float_value(p, 2 * index);
    parts[1] = p.kind == FillKind::kConstant ? 0.0f : detail::float_value(p, 2 * index + 1);
  } else if constexpr (is_floating(T)) {
    using S = typename detail::Storage<T>::type;
    *static_cast<S*>(elem) = detail::from_float<T>(detail::float_value(p, index));
  } else {
    using S = typename detail::Storage<T>::type;
    *static_cast<S*>(elem) = static_cast<S>(detail::integer_value(p, index));
  }
}

// Every type but complex64 (whose elements take two float values each) in groups.
template <ElementType T>
inline constexpr bool kGroupFillable = T != ElementType::kComplex64;

// Elements per Philox block for T (Note [Element random bits]).
template <ElementType T>
inline constexpr int kGroupSize =
    T == ElementType::kFloat64 || !is_floating(T) ? static_cast<int>(kWideGroup)
                                                  : static_cast<int>(kFloatGroup);

// The storage values of group `group`'s elements, out[lane] == what fill_one writes for global
// element group * kGroupSize<T> + lane: one Philox block and, for normal fills, one log and one
// sqrt per Box-Muller pair, for the whole group. The CUDA fill's contiguous path runs this.
template <ElementType T>
SHARDPLAN_HD SHARDPLAN_INLINE void fill_group(typename detail::Storage<T>::type* out,
                                              const FillParams& p, uint64_t group) {
  static_assert(kGroupFillable<T>);
  constexpr int kLanes = kGroupSize<T>;
  using S = typename detail::Storage<T>::type;
  if constexpr (T == ElementType::kFloat64) {
    double v[kLanes];
    if (p.kind == FillKind::kConstant) {
      v[0] = v[1] = p.d_a;
    } else if (p.kind == FillKind::kLogIndex) {
      for (int lane = 0; lane < kLanes; ++lane) {
        v[lane] = detail::double_value(p, group * kLanes + static_cast<uint64_t>(lane));
      }
    } else if (p.kind == FillKind::kUniform) {
      const Uint4x32 r = group_random_bits(p.seed, p.tensor_key, group);
      v[0] = uniform_f64(r, 0, p.d_a, p.d_b);
      v[1] = uniform_f64(r, 1, p.d_a, p.d_b);
    } else {
      const Uint4x32 r = group_random_bits(p.seed, p.tensor_key, group);
      v[0] = normal_f64(r, 0, p.d_a, p.d_b);
      v[1] = normal_f64(r, 1, p.d_a, p.d_b);
      if (p.kind == FillKind::kTruncatedNormal) {
        for (int lane = 0; lane < kLanes; ++lane) {
          if (!(v[lane] >= p.d_low && v[lane] <= p.d_high)) {
            v[lane] =
                truncated_normal_retry_f64(v[lane], p.seed, p.tensor_key, group * kWideGroup + lane,
                                           p.d_a, p.d_b, p.d_low, p.d_high);
          }
        }
      }
    }
    for (int lane = 0; lane < kLanes; ++lane) out[lane] = v[lane];
  } else if constexpr (is_floating(T)) {
    float v[kLanes];
    if (p.kind == FillKind::kConstant) {
      for (int lane = 0; lane < kLanes; ++lane) v[lane] = p.f_a;
    } else if (p.kind == FillKind::kLogIndex) {
      for (int lane = 0; lane < kLanes; ++lane) {
        v[lane] = detail::float_value(p, group * kLanes + static_cast<uint64_t>(lane));
      }
    } else {
      const Uint4x32 r = group_random_bits(p.seed, p.tensor_key, group);
      if (p.kind == FillKind::kUniform) {
        for (int lane = 0; lane < kLanes; ++lane) {
          v[lane] = uniform_f32(r, static_cast<unsigned>(lane), p.f_a, p.f_b);
        }
      } else {
        for (int pair = 0; pair < kLanes / 2; ++pair) {
          const NormalPairF32 z = standard_normal_pair_f32(r.x[2 * pair], r.x[2 * pair + 1]);
          v[2 * pair] = fp::fma(p.f_b, z.even, p.f_a);
          v[2 * pair + 1] = fp::fma(p.f_b, z.odd, p.f_a);
        }
        if (p.kind == FillKind::kTruncatedNormal) {
          for (int lane = 0; lane < kLanes; ++lane) {
            if (!(v[lane] >= p.f_low && v[lane] <= p.f_high)) {
              v[lane] = truncated_normal_retry_f32(v[lane], p.seed, p.tensor_key,
                                                   group * kFloatGroup + lane, p.f_a, p.f_b,
                                                   p.f_low, p.f_high);
            }
          }
        }
      }
    }
    if constexpr (T == ElementType::kBFloat16 || T == ElementType::kFloat16) {
      // Two lanes per conversion (Note [Paired narrow conversions on the GPU]).
      for (int lane = 0; lane < kLanes; lane += 2) {
        const uint32_t pair = T == ElementType::kBFloat16
                                  ? floats_to_bf16_pair(v[lane], v[lane + 1])
                                  : floats_to_fp16_pair(v[lane], v[lane + 1]);
        out[lane] = static_cast<uint16_t>(pair);
        out[lane + 1] = static_cast<uint16_t>(pair >> 16);
      }
    } else {
      for (int lane = 0; lane < kLanes; ++lane) out[lane] = detail::from_float<T>(v[lane]);
    }
  } else {
    if (p.kind != FillKind::kUniform) {
      for (int lane = 0; lane < kLanes; ++lane) out[lane] = static_cast<S>(p.i_lo);
    } else {
      const Uint4x32 r = group_random_bits(p.seed, p.tensor_key, group);
      for (int lane = 0; lane < kLanes; ++lane) {
        out[lane] = static_cast<S>(
            detail::integer_from_bits(p, wide_lane_bits(r, static_cast<unsigned>(lane))));
      }
    }
  }
}

}  // namespace shardplan::kernels
