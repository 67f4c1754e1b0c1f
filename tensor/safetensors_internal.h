// Helpers shared by the safetensors sources (byte reader, header parser, checkpoint index,
// checkpoint-vs-model check); internal to tensor/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tensor/base/checked.h"
#include "tensor/base/error.h"
#include "tensor/base/strict_json.h"

namespace shardplan::tensor::safetensors_detail {

// Untrusted text in messages: quoted, escaped and cut short (tensor/base/strict_json.h).
inline std::string quote(std::string_view s) { return quote_json(s); }

// a + b for offsets and sizes read from a file, refused (bad input) when it overflows int64.
inline int64_t checked_add(int64_t a, int64_t b, std::string_view source, std::string_view what) {
  int64_t out = 0;
  SP_CHECK(add_into(a, b, out), source, ": ", what, " overflows int64");
  return out;
}

}  // namespace shardplan::tensor::safetensors_detail
