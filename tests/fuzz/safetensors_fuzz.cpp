// fuzz_safetensors: a whole .safetensors file (the 8-byte length prefix, the JSON header, the data
// buffer) read through the in-memory ByteReader, as read_checkpoint reads a file
// (Note [Untrusted safetensors headers] in tensor/safetensors.h). A header that parses must
// describe a data buffer that its tensors cover exactly, and each tensor must become a meta tensor.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/checked.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::tensor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  SafetensorsHeader h;
  if (!fuzz::run([&] { h = read_safetensors_header(*memory_reader(bytes), "fuzz.safetensors"); })) {
    return 0;
  }
  FUZZ_CHECK(h.header_bytes >= 2 && h.data_start() + h.data_bytes == static_cast<int64_t>(size));
  int64_t covered = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    FUZZ_CHECK(0 <= e.begin && e.begin <= e.end && e.end <= h.data_bytes);
    const std::optional<int64_t> numel = checked_product(e.shape);
    FUZZ_CHECK(numel.has_value());
    int64_t nbytes = 0;
    FUZZ_CHECK(mul_into(*numel, itemsize(e.dtype), nbytes) && nbytes == e.end - e.begin);
    covered += e.end - e.begin;
    FUZZ_CHECK(safetensors_dtype_name(e.dtype) != "");
    fuzz::run([&] { (void)empty(e.shape, {.dtype = e.dtype}); });
  }
  FUZZ_CHECK(covered == h.data_bytes);
  // The header text alone, with the data size the prefix implies, parses to the same header.
  const std::string_view text = bytes.substr(8, static_cast<size_t>(h.header_bytes));
  FUZZ_CHECK(parse_safetensors_header(text, h.data_bytes, "fuzz.safetensors") == h);
  return 0;
}
