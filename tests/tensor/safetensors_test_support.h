// A small safetensors writer for tests and benchmarks, independent of the reader under test: it
// lays tensors out back to back from a hand-written itemsize table and writes the 8-byte
// little-endian length, the header and (optionally sparse) data.
//   auto h = test::make_header({{"w", "F32", {2, 3}}});   // h.json, h.data_bytes == 24
//   test::write_safetensors(dir / "m.safetensors", h.json, h.data_bytes);
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::tensor::test {

struct StEntry {
  std::string name;
  std::string dtype;  // the format's spelling: "F32", "BF16", ...
  std::vector<int64_t> shape;
};

struct StHeader {
  std::string json;        // the header text
  int64_t data_bytes = 0;  // what the entries' data_offsets cover
};

// Bytes per element, from the format's specification (not from tensor/dtype.h).
inline int64_t st_itemsize(const std::string& dtype) {
  static const std::map<std::string, int64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"F32", 4}, {"I64", 8},     {"F64", 8},     {"C64", 8}};
  return kSizes.at(dtype);
}

// Entries in the given order, each starting where the previous ends; `metadata` is raw JSON text
// for "__metadata__" (empty: none).
inline StHeader make_header(const std::vector<StEntry>& entries, const std::string& metadata = "") {
  StHeader h;
  h.json = "{";
  if (!metadata.empty()) h.json += "\"__metadata__\":" + metadata;
  for (const StEntry& e : entries) {
    int64_t bytes = st_itemsize(e.dtype);
    std::string shape;
    for (const int64_t d : e.shape) {
      bytes *= d;
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    if (h.json.size() > 1) h.json += ",";
    h.json += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(h.data_bytes) + "," +
              std::to_string(h.data_bytes + bytes) + "]}";
    h.data_bytes += bytes;
  }
  h.json += "}";
  return h;
}

// The 8-byte little-endian length followed by `header`.
inline std::string length_prefixed(std::string_view header, uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out.append(header);
}
inline std::string length_prefixed(std::string_view header) {
  return length_prefixed(header, header.size());
}

// A whole file in memory: prefix, header, `data_bytes` zero bytes.
inline std::string file_bytes(std::string_view header, int64_t data_bytes) {
  return length_prefixed(header).append(static_cast<size_t>(data_bytes), '\0');
}

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Prefix and header, then the file is extended to hold `data_bytes` more without writing them
// (a sparse file: a 141 GB checkpoint costs a few kB of disk). False if the file system refuses.
inline bool write_safetensors(const std::filesystem::path& path, std::string_view header,
                              int64_t data_bytes) {
  const std::string prefix = length_prefixed(header);
  write_bytes(path, prefix);
  return ::truncate(path.c_str(), static_cast<off_t>(prefix.size()) + data_bytes) == 0;
}

// The 723 tensors of Llama-3-70B (Meta's config.json: hidden 8192, intermediate 28672, 64 heads,
// 8 kv heads of 128, vocab 128256, 80 layers, untied lm_head) in Hugging Face's names, bf16.
inline std::vector<StEntry> llama3_70b_entries() {
  constexpr int64_t kHidden = 8192, kInter = 28672, kKv = 8 * 128, kVocab = 128256, kLayers = 80;
  std::vector<StEntry> out = {{"model.embed_tokens.weight", "BF16", {kVocab, kHidden}}};
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "self_attn.q_proj.weight", "BF16", {kHidden, kHidden}});
    out.push_back({p + "self_attn.k_proj.weight", "BF16", {kKv, kHidden}});
    out.push_back({p + "self_attn.v_proj.weight", "BF16", {kKv, kHidden}});
    out.push_back({p + "self_attn.o_proj.weight", "BF16", {kHidden, kHidden}});
    out.push_back({p + "mlp.gate_proj.weight", "BF16", {kInter, kHidden}});
    out.push_back({p + "mlp.up_proj.weight", "BF16", {kInter, kHidden}});
    out.push_back({p + "mlp.down_proj.weight", "BF16", {kHidden, kInter}});
    out.push_back({p + "input_layernorm.weight", "BF16", {kHidden}});
    out.push_back({p + "post_attention_layernorm.weight", "BF16", {kHidden}});
  }
  out.push_back({"model.norm.weight", "BF16", {kHidden}});
  out.push_back({"lm_head.weight", "BF16", {kVocab, kHidden}});
  return out;
}

}  // namespace shardplan::tensor::test
