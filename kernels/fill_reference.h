// One element of a fill, computed by the scalar per-element rule (fill_one in
// kernels/fill_element.h) and nothing else: the independent reference that `materialize --verify`
// recomputes sampled elements with, apart from the bulk path of fill_cpu under test.
//   uint64_t bits = fill_reference_bits(ElementType::kBFloat16, spec, /*global_index=*/12345);
#pragma once

#include <cstdint>

#include "kernels/element_type.h"
#include "kernels/init_fill.h"

namespace shardplan::kernels {

// The element's bytes read little-endian and zero-extended to 64 bits (complex64: real part in
// the low word), as checksum_cpu reads them. `spec` must pass check_fill_spec(type, spec).
uint64_t fill_reference_bits(ElementType type, const FillSpec& spec, uint64_t global_index);

}  // namespace shardplan::kernels
