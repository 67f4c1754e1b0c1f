// Where a tensor's storage lives: meta (no data), cpu, or cuda:N.
//   Device d = parse_device("cuda:1");  d.is_cuda();  to_string(d) == "cuda:1"
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace shardplan::tensor {

enum class DeviceType : uint8_t { kMeta, kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kMeta;
  // -1 = "the current device" for cuda (as torch.device("cuda")); always -1 for meta and cpu.
  int32_t index = -1;

  static Device meta() { return {DeviceType::kMeta, -1}; }
  static Device cpu() { return {DeviceType::kCpu, -1}; }
  static Device cuda(int32_t index) { return {DeviceType::kCuda, index}; }

  bool is_meta() const { return type == DeviceType::kMeta; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  friend bool operator==(const Device&, const Device&) = default;
};

std::string to_string(const Device& d);
std::ostream& operator<<(std::ostream& os, const Device& d);
// "meta", "cpu", "cuda", "cuda:3". Throws shardplan::Error naming the value otherwise.
Device parse_device(std::string_view s);

}  // namespace shardplan::tensor
