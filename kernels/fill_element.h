// The one per-element fill function shared by the CPU loop (init_fill_cpu.cpp) and the CUDA kernel
// (init_fill_cuda.cu): same code, same bits.
//   FillParams p = make_fill_params(type, spec);           // host, once per fill
//   fill_one<ElementType::kBFloat16>(elem_ptr, p, global_index);  // host or device, per element
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

SHARDPLAN_HD SHARDPLAN_INLINE float float_value(const FillParams& p, uint64_t index) {
  switch (p.kind) {
    case FillKind::kConstant:
      return p.f_a;
    case FillKind::kUniform:
      return uniform_f32(element_random_bits(p.seed, p.tensor_key, index), p.f_a, p.f_b);
    case FillKind::kNormal:
      return normal_f32(element_random_bits(p.seed, p.tensor_key, index), p.f_a, p.f_b);
    case FillKind::kTruncatedNormal:
      return truncated_normal_f32(p.seed, p.tensor_key, index, p.f_a, p.f_b, p.f_low, p.f_high);
  }
  return 0.0f;
}

SHARDPLAN_HD SHARDPLAN_INLINE double double_value(const FillParams& p, uint64_t index) {
  switch (p.kind) {
    case FillKind::kConstant:
      return p.d_a;
    case FillKind::kUniform:
      return uniform_f64(element_random_bits(p.seed, p.tensor_key, index), p.d_a, p.d_b);
    case FillKind::kNormal:
      return normal_f64(element_random_bits(p.seed, p.tensor_key, index), p.d_a, p.d_b);
    case FillKind::kTruncatedNormal:
      return truncated_normal_f64(p.seed, p.tensor_key, index, p.d_a, p.d_b, p.d_low, p.d_high);
  }
  return 0.0;
}

SHARDPLAN_HD SHARDPLAN_INLINE int64_t integer_value(const FillParams& p, uint64_t index) {
  if (p.kind != FillKind::kUniform) return p.i_lo;
  const Uint4x32 r = element_random_bits(p.seed, p.tensor_key, index);
  // Wrapping add: i_lo + offset stays inside [a, b) by construction.
  return static_cast<int64_t>(static_cast<uint64_t>(p.i_lo) + join64(r.x[0], r.x[1]) % p.i_range);
}

}  // namespace detail

// Writes the value of global element `index` into `elem` (one element of type T).
template <ElementType T>
SHARDPLAN_HD SHARDPLAN_INLINE void fill_one(void* elem, const FillParams& p, uint64_t index) {
  if constexpr (T == ElementType::kFloat64) {
    *static_cast<double*>(elem) = detail::double_value(p, index);
  } else if constexpr (T == ElementType::kFloat32) {
    *static_cast<float*>(elem) = detail::float_value(p, index);
  } else if constexpr (T == ElementType::kFloat16) {
    *static_cast<uint16_t*>(elem) = float_to_fp16_bits(detail::float_value(p, index));
  } else if constexpr (T == ElementType::kBFloat16) {
    *static_cast<uint16_t*>(elem) = float_to_bf16_bits(detail::float_value(p, index));
  } else if constexpr (T == ElementType::kFloat8E4M3FN) {
    *static_cast<uint8_t*>(elem) = float_to_fp8e4m3fn_bits(detail::float_value(p, index));
  } else if constexpr (T == ElementType::kFloat8E5M2) {
    *static_cast<uint8_t*>(elem) = float_to_fp8e5m2_bits(detail::float_value(p, index));
  } else if constexpr (T == ElementType::kComplex64) {
    // Real at 2g, imaginary at 2g + 1 (Note in init_fill.h); constant is a + 0i.
    float* parts = static_cast<float*>(elem);
    parts[0] = detail::float_value(p, 2 * index);
    parts[1] = p.kind == FillKind::kConstant ? 0.0f : detail::float_value(p, 2 * index + 1);
  } else if constexpr (T == ElementType::kInt64) {
    *static_cast<int64_t*>(elem) = detail::integer_value(p, index);
  } else if constexpr (T == ElementType::kInt32) {
    *static_cast<int32_t*>(elem) = static_cast<int32_t>(detail::integer_value(p, index));
  } else if constexpr (T == ElementType::kInt16) {
    *static_cast<int16_t*>(elem) = static_cast<int16_t>(detail::integer_value(p, index));
  } else if constexpr (T == ElementType::kInt8) {
    *static_cast<int8_t*>(elem) = static_cast<int8_t>(detail::integer_value(p, index));
  } else {
    static_assert(T == ElementType::kUInt8 || T == ElementType::kBool);
    *static_cast<uint8_t*>(elem) = static_cast<uint8_t>(detail::integer_value(p, index));
  }
}

}  // namespace shardplan::kernels
