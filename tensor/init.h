// Initializing materialized tensors through kernels/ fills keyed on the global element index:
// a shard filled alone equals the same slice of the whole tensor filled at once.
//   Tensor w = empty({1024, 1024}, {DType::kBFloat16, Device::cpu()});
//   init_normal(w, InitKey{/*seed=*/42, "layers.0.mlp.up.weight"}, 0.0, 0.02);
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/element_type.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {

// Which stream of random numbers a tensor draws: the run's seed and the tensor's fully qualified
// name (hashed by kernels::tensor_key_from_name), so every rank derives the same key.
struct InitKey {
  uint64_t seed = 0;
  std::string_view name;
};

// Where a local tensor sits in its global tensor: the local element at multi-index i is the global
// element at (global_offset + i) of a row-major tensor of shape `global_sizes`. An unsharded tensor
// is its own global tensor (the default: offsets 0, sizes = its sizes).
struct GlobalBox {
  std::span<const int64_t> global_sizes;
  std::span<const int64_t> global_offset;
};

// The kernels/ element type of `t` (complex128 has none: shardplan::Error).
kernels::ElementType kernel_element_type(DType t);

// Fill `t` (cpu memory; meta tensors are rejected) with a constant.
void fill_constant(const Tensor& t, Scalar value);
// Normal(mean, std) / Uniform[low, high) values of the global tensor; `box` places a shard.
void init_normal(const Tensor& t, InitKey key, double mean, double std, const GlobalBox* box = nullptr);
void init_uniform(const Tensor& t, InitKey key, double low, double high,
                  const GlobalBox* box = nullptr);

}  // namespace shardplan::tensor
