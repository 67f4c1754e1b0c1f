#include "tensor/device.h"

#include <charconv>
#include <optional>

#include "base/enum_names.h"
#include "base/error.h"

namespace shardplan::tensor {

namespace {
constexpr EnumName<DeviceType> kDeviceTypeNames[] = {
    {"meta", DeviceType::kMeta}, {"cpu", DeviceType::kCpu}, {"cuda", DeviceType::kCuda}};
}  // namespace

std::string to_string(const Device& d) {
  std::string out(enum_name(d.type, kDeviceTypeNames));
  if (d.is_cuda() && d.index >= 0) out += ":" + std::to_string(d.index);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << to_string(d); }

Device parse_device(std::string_view s) {
  // A bare type ("cuda" is the current device), or "cuda:N".
  const size_t colon = s.find(':');
  const std::optional<DeviceType> type = find_enum_name(s.substr(0, colon), kDeviceTypeNames);
  if (type && colon == std::string_view::npos) return {*type, -1};
  if (type == DeviceType::kCuda && colon + 1 < s.size()) {
    int32_t idx = -1;
    const char* first = s.data() + colon + 1;
    const char* last = s.data() + s.size();
    auto [p, ec] = std::from_chars(first, last, idx);
    if (ec == std::errc() && p == last && idx >= 0) return Device::cuda(idx);
  }
  SP_FAIL("unknown device '", s, "', expected one of: ", enum_names_list(kDeviceTypeNames),
          " or cuda:N with N >= 0");
}

}  // namespace shardplan::tensor
