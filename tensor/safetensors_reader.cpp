// Byte readers of safetensors files: a file read with pread (base/file_io.h) or a memory
// buffer. See Note [safetensors format] and Note [Untrusted safetensors headers] in
// tensor/safetensors.h.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/strict_json.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
namespace fs = std::filesystem;

namespace {

// ---- Readers ----

// A checkpoint file read through base/file_io.h: a bad path is bad input, an OS read error
// a RuntimeFailure (exit 1), a file shorter than its header says is bad input (truncated).
class FileReader final : public ByteReader {
 public:
  explicit FileReader(const fs::path& path) : file_(path, "safetensors file") {}
  int64_t size() const override { return file_.size(); }
  void read_at(int64_t offset, std::span<char> out) const override { file_.read_at(offset, out); }

 private:
  ReadOnlyFile file_;
};

class MemoryReader final : public ByteReader {
 public:
  explicit MemoryReader(std::string_view bytes) : bytes_(bytes) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void read_at(int64_t offset, std::span<char> out) const override {
    SP_ASSERT(offset >= 0 && offset + static_cast<int64_t>(out.size()) <= size());
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
  }

 private:
  std::string_view bytes_;
};

}  // namespace

// ---- Readers ----

std::unique_ptr<ByteReader> open_file_reader(const fs::path& path) {
  return std::make_unique<FileReader>(path);
}

std::unique_ptr<ByteReader> memory_reader(std::string_view bytes) {
  return std::make_unique<MemoryReader>(bytes);
}

}  // namespace shardplan::tensor
