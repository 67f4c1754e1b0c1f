#include "tensor/device.h"

#include <charconv>

#include "tensor/base/error.h"

namespace shardplan::tensor {

std::string to_string(const Device& d) {
  switch (d.type) {
    case DeviceType::kMeta:
      return "meta";
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return d.index < 0 ? "cuda" : "cuda:" + std::to_string(d.index);
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << to_string(d); }

Device parse_device(std::string_view s) {
  if (s == "meta") return Device::meta();
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(-1);
  if (s.substr(0, 5) == "cuda:" && s.size() > 5) {
    int32_t idx = -1;
    const auto* first = s.data() + 5;
    const auto* last = s.data() + s.size();
    auto [p, ec] = std::from_chars(first, last, idx);
    if (ec == std::errc() && p == last && idx >= 0) return Device::cuda(idx);
  }
  SP_FAIL("unknown device '", s, "'; expected meta, cpu, cuda or cuda:N with N >= 0");
}

}  // namespace shardplan::tensor
