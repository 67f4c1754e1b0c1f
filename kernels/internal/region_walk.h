// Host-side helpers shared by the fills and checksums: a FillRegion with size-1 dimensions dropped
// and mergeable neighbours merged, in a fixed-size value (so it can be passed to a CUDA kernel),
// and the CPU loop over it.
//   CompactRegion r = compact_region(region);
//   for_each_element(r, [&](int64_t dst_offset, int64_t global_index) { ... });
//   for_each_run(r, begin, end, [&](int64_t dst_offset, int64_t global_index, int64_t count) {});
#pragma once

#include <cstdint>

#include "kernels/internal/check.h"
#include "kernels/region.h"

namespace shardplan::kernels::internal {

// After compaction; a box of a tensor with up to 8 dimensions that cannot be merged is rejected.
inline constexpr int kMaxRegionDims = 8;

struct CompactRegion {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxRegionDims] = {};
  int64_t dst_strides[kMaxRegionDims] = {};
  int64_t global_strides[kMaxRegionDims] = {};
  int64_t global_offset = 0;
};

// Merging dims k and k+1 is valid when stepping k once equals stepping k+1 sizes[k+1] times, in the
// buffer and in the global index alike; then the pair is one dim of size sizes[k] * sizes[k+1].
// This keeps the CPU inner loop long and lets the CUDA kernel's index decomposition stay short.
inline CompactRegion compact_region(const FillRegion& region) {
  SHARDPLAN_KERNELS_CHECK(region.ndim >= 0, "FillRegion.ndim must be >= 0");
  CompactRegion out;
  out.global_offset = region.global_offset;
  out.numel = 1;
  for (int k = 0; k < region.ndim; ++k) {
    const int64_t size = region.sizes[k];
    SHARDPLAN_KERNELS_CHECK(size >= 0, "FillRegion sizes must be >= 0");
    if (size == 0) {
      out.ndim = 0;
      out.numel = 0;
      return out;
    }
    out.numel *= size;
    if (size == 1) continue;
    const int64_t ds = region.dst_strides[k];
    const int64_t gs = region.global_strides[k];
    if (out.ndim > 0) {
      const int last = out.ndim - 1;
      if (out.dst_strides[last] == ds * size && out.global_strides[last] == gs * size) {
        out.sizes[last] *= size;
        out.dst_strides[last] = ds;
        out.global_strides[last] = gs;
        continue;
      }
    }
    SHARDPLAN_KERNELS_CHECK(out.ndim < kMaxRegionDims,
                            "FillRegion has more than 8 dimensions that cannot be merged");
    out.sizes[out.ndim] = size;
    out.dst_strides[out.ndim] = ds;
    out.global_strides[out.ndim] = gs;
    ++out.ndim;
  }
  return out;
}

// Calls f(dst_offset, global_index) for every element, last dimension fastest.
template <class F>
void for_each_element(const CompactRegion& r, F&& f) {
  if (r.numel == 0) return;
  if (r.ndim == 0) {
    f(int64_t{0}, r.global_offset);
    return;
  }
  const int inner = r.ndim - 1;
  const int64_t n = r.sizes[inner];
  const int64_t ds = r.dst_strides[inner];
  const int64_t gs = r.global_strides[inner];
  int64_t index[kMaxRegionDims] = {};
  int64_t dst_base = 0;
  int64_t global_base = r.global_offset;
  while (true) {
    for (int64_t i = 0; i < n; ++i) f(dst_base + i * ds, global_base + i * gs);
    // Odometer over the outer dimensions.
    int k = inner - 1;
    for (; k >= 0; --k) {
      dst_base += r.dst_strides[k];
      global_base += r.global_strides[k];
      if (++index[k] < r.sizes[k]) break;
      dst_base -= r.sizes[k] * r.dst_strides[k];
      global_base -= r.sizes[k] * r.global_strides[k];
      index[k] = 0;
    }
    if (k < 0) return;
  }
}

// Elements [begin, end) of for_each_element's order (0 <= begin <= end <= r.numel), as runs along
// the innermost dimension: f(dst_offset, global_index, count) stands for the elements at
// dst_offset + i * ds with global index global_index + i * gs, 0 <= i < count, where ds and gs are
// the innermost strides r.dst_strides[r.ndim - 1], r.global_strides[r.ndim - 1].
// Splitting [0, numel) into ranges splits the work without changing which element gets which index
// (the threaded CPU fill hands each thread one range).
template <class F>
void for_each_run(const CompactRegion& r, int64_t begin, int64_t end, F&& f) {
  if (begin >= end) return;
  if (r.ndim == 0) {
    f(int64_t{0}, r.global_offset, int64_t{1});
    return;
  }
  const int inner = r.ndim - 1;
  const int64_t n = r.sizes[inner];
  // Odometer position of `begin`: the outer multi-index of its run and its place inside the run.
  int64_t index[kMaxRegionDims] = {};
  int64_t dst_base = 0;
  int64_t global_base = r.global_offset;
  int64_t outer = begin / n;
  int64_t within = begin % n;
  for (int k = inner - 1; k >= 0; --k) {
    index[k] = outer % r.sizes[k];
    outer /= r.sizes[k];
    dst_base += index[k] * r.dst_strides[k];
    global_base += index[k] * r.global_strides[k];
  }
  int64_t position = begin;
  while (true) {
    const int64_t count = n - within < end - position ? n - within : end - position;
    f(dst_base + within * r.dst_strides[inner], global_base + within * r.global_strides[inner],
      count);
    position += count;
    if (position >= end) return;
    within = 0;
    for (int k = inner - 1; k >= 0; --k) {
      dst_base += r.dst_strides[k];
      global_base += r.global_strides[k];
      if (++index[k] < r.sizes[k]) break;
      dst_base -= r.sizes[k] * r.dst_strides[k];
      global_base -= r.sizes[k] * r.global_strides[k];
      index[k] = 0;
    }
  }
}

}  // namespace shardplan::kernels::internal
