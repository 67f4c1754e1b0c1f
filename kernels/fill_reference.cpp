#include "kernels/fill_reference.h"

#include <cstring>

#include "kernels/fill_element.h"
#include "kernels/internal/dispatch.h"

namespace shardplan::kernels {

uint64_t fill_reference_bits(ElementType type, const FillSpec& spec, uint64_t global_index) {
  const FillParams params = make_fill_params(type, spec);
  alignas(8) unsigned char elem[8] = {};
  internal::dispatch_element_type(
      type, [&](auto tag) { fill_one<decltype(tag)::value>(elem, params, global_index); });
  uint64_t bits = 0;
  std::memcpy(&bits, elem, element_size(type));  // little-endian hosts (x86-64, aarch64)
  return bits;
}

}  // namespace shardplan::kernels
