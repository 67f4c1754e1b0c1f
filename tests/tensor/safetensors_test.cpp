// safetensors headers and indexes: fixtures written by an independent Python writer
// (scripts/gen_safetensors_fixtures.py) read back with the byte ranges checked against the bytes it
// wrote; a sparse 141 GB Llama-3-70B checkpoint read by touching only 8 + N bytes; every rule of
// Note [Untrusted safetensors headers] rejected with a message naming the file and the field.
#include "tensor/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "base/error.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::StEntry;

const fs::path kData = fs::path(SHARDPLAN_TEST_DATA_DIR) / "safetensors";

// A fresh folder per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("shardplan_st_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` as `name` in the folder and returns its path.
  fs::path file(const std::string& name, std::string_view bytes) {
    test::write_bytes(dir_ / name, bytes);
    return dir_ / name;
  }
  // The error message of reading `bytes` as a safetensors file (fails the test if it loads).
  std::string header_error(std::string_view bytes) {
    const fs::path p = file("bad.safetensors", bytes);
    try {
      read_safetensors_header(p);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos)
          << "message does not name the file: " << e.what();
      return e.what();
    }
    ADD_FAILURE() << "loaded without error";
    return "";
  }
  // Header text over a zero-filled data buffer of `data_bytes`.
  std::string header_error(std::string_view header, int64_t data_bytes) {
    return header_error(test::file_bytes(header, data_bytes));
  }

  fs::path dir_;
};

// Reads through to a file, counting calls and bytes.
class CountingReader : public ByteReader {
 public:
  explicit CountingReader(std::unique_ptr<ByteReader> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  void read_at(int64_t offset, std::span<char> out) const override {
    ++reads;
    bytes += static_cast<int64_t>(out.size());
    inner_->read_at(offset, out);
  }
  mutable int64_t reads = 0;
  mutable int64_t bytes = 0;

 private:
  std::unique_ptr<ByteReader> inner_;
};

// rchar of /proc/self/io: bytes this process read through read()/pread() (-1 if unavailable).
int64_t proc_read_bytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

std::string hex_of_range(const fs::path& path, int64_t offset, int64_t nbytes) {
  std::string bytes(static_cast<size_t>(nbytes), '\0');
  open_file_reader(path)->read_at(offset, bytes);
  std::string hex;
  char buf[3];
  for (const char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(c));
    hex += buf;
  }
  return hex;
}

json expected_fixtures() {
  std::ifstream in(kData / "expected.json");
  return json::parse(in);
}

// Each tensor of `file` (a key of expected.json) matches what the Python writer wrote: dtype,
// shape, absolute offset, size, and the bytes at that range.
void expect_matches_writer(const Checkpoint& ck, size_t file, const std::string& key) {
  const json want = expected_fixtures()["files"][key];
  const CheckpointFile& f = ck.files[file];
  EXPECT_EQ(f.header.header_bytes, want["header_bytes"].get<int64_t>());
  EXPECT_EQ(f.header.data_bytes, want["data_bytes"].get<int64_t>());
  for (const auto& [name, w] : want["tensors"].items()) {
    SCOPED_TRACE(name);
    const CheckpointTensor* t = ck.find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->file, file);
    EXPECT_EQ(safetensors_dtype_name(t->dtype), w["dtype"].get<std::string>());
    EXPECT_EQ(t->shape, DimVector(w["shape"].get<std::vector<int64_t>>()));
    EXPECT_EQ(t->offset, w["offset"].get<int64_t>());
    EXPECT_EQ(t->nbytes, w["nbytes"].get<int64_t>());
    EXPECT_EQ(hex_of_range(f.path, t->offset, t->nbytes), w["hex"].get<std::string>());
  }
}

// ---- Valid files ----

TEST_F(SafetensorsTest, HandWrittenHeaderGivesEntriesOffsetsAndMetadata) {
  // Offsets by hand: a = 2*3 f32 = 24 bytes [0, 24); b = 4 bf16 = 8 bytes [24, 32).
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  const fs::path p = file("m.safetensors", test::file_bytes(header, 32));
  const SafetensorsHeader h = read_safetensors_header(p);
  EXPECT_EQ(h.header_bytes, static_cast<int64_t>(header.size()));
  EXPECT_EQ(h.data_start(), 8 + static_cast<int64_t>(header.size()));
  EXPECT_EQ(h.data_bytes, 32);
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(h.tensors.size(), 2u);  // file order kept
  EXPECT_EQ(h.tensors[0], (SafetensorsEntry{"b", DType::kBFloat16, {4}, 24, 32}));
  EXPECT_EQ(h.tensors[1], (SafetensorsEntry{"a", DType::kFloat32, {2, 3}, 0, 24}));

  const Checkpoint ck = read_checkpoint(p);
  ASSERT_EQ(ck.tensors.size(), 2u);  // sorted by name
  EXPECT_EQ(ck.tensors[0].name, "a");
  EXPECT_EQ(ck.tensors[0].offset, h.data_start());
  EXPECT_EQ(ck.tensors[0].strides, (DimVector{3, 1}));
  EXPECT_EQ(ck.tensors[1].offset, h.data_start() + 24);
  EXPECT_EQ(ck.numel(), 10);
  EXPECT_EQ(ck.nbytes(), 32);
  EXPECT_TRUE(ck.index_metadata.is_null());
}

TEST_F(SafetensorsTest, FixtureFromIndependentWriterMatchesByteForByte) {
  const Checkpoint ck = read_checkpoint(kData / "tiny.safetensors");
  ASSERT_EQ(ck.files.size(), 1u);
  EXPECT_EQ(ck.tensors.size(), 6u);
  expect_matches_writer(ck, 0, "tiny.safetensors");
  EXPECT_EQ(ck.files[0].header.metadata.at("note"), "shardplan fixture");
  // A scalar (shape []) is one element; a [0, 4] tensor none.
  EXPECT_EQ(ck.find("step")->shape.size(), 0u);
  EXPECT_EQ(ck.find("step")->nbytes, 8);
  EXPECT_EQ(ck.find("empty")->nbytes, 0);
  // The writer pads the header to 8 bytes with spaces, as the reference one does.
  EXPECT_EQ(ck.files[0].header.data_start() % 8, 0);
}

TEST_F(SafetensorsTest, ShardedFixtureThroughIndex) {
  const Checkpoint ck = read_checkpoint(kData / "sharded" / "model.safetensors.index.json");
  ASSERT_EQ(ck.files.size(), 2u);
  EXPECT_EQ(ck.files[0].path.filename(), "model-00001-of-00002.safetensors");
  expect_matches_writer(ck, 0, "sharded/model-00001-of-00002.safetensors");
  expect_matches_writer(ck, 1, "sharded/model-00002-of-00002.safetensors");
  EXPECT_EQ(ck.tensors.size(), 5u);
  EXPECT_EQ(ck.nbytes(), expected_fixtures()["total_size"].get<int64_t>());
  EXPECT_EQ(ck.index_metadata["total_size"], expected_fixtures()["total_size"]);
  // The folder finds the index.
  EXPECT_EQ(read_checkpoint(kData / "sharded"), ck);
}

TEST_F(SafetensorsTest, EveryFormatDTypeName) {
  // The format's names (safetensors README "Format"/Dtype) and their element sizes.
  const std::vector<std::pair<std::string, DType>> names = {
      {"BOOL", DType::kBool},          {"U8", DType::kUInt8},        {"I8", DType::kInt8},
      {"I16", DType::kInt16},          {"I32", DType::kInt32},       {"I64", DType::kInt64},
      {"F8_E4M3", DType::kFloat8E4M3FN}, {"F8_E5M2", DType::kFloat8E5M2}, {"F16", DType::kFloat16},
      {"BF16", DType::kBFloat16},      {"F32", DType::kFloat32},     {"F64", DType::kFloat64},
      {"C64", DType::kComplex64}};
  std::vector<StEntry> entries;
  for (const auto& [name, dtype] : names) entries.push_back({"t_" + name, name, {3}});
  const test::StHeader h = test::make_header(entries);
  const SafetensorsHeader got = parse_safetensors_header(h.json, h.data_bytes, "mem");
  ASSERT_EQ(got.tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(got.tensors[i].dtype, names[i].second) << names[i].first;
    EXPECT_EQ(got.tensors[i].end - got.tensors[i].begin, 3 * test::st_itemsize(names[i].first));
    EXPECT_EQ(safetensors_dtype_name(names[i].second), names[i].first);
  }
  EXPECT_THROW(safetensors_dtype_name(DType::kComplex128), Error);
}

TEST_F(SafetensorsTest, ZeroSizeTensorsMayShareAnOffset) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
      R"("b":{"dtype":"F16","shape":[2,0,3],"data_offsets":[0,0]},)"
      R"("c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  EXPECT_EQ(parse_safetensors_header(header, 2, "mem").tensors.size(), 3u);
  EXPECT_EQ(parse_safetensors_header("{}", 0, "mem").tensors.size(), 0u);
  EXPECT_EQ(parse_safetensors_header("{}      ", 0, "mem").tensors.size(), 0u);
}

// Reading a 141 GB checkpoint touches 8 + N bytes: two reads, counted through the reader and,
// independently, by the kernel's rchar counter.
TEST_F(SafetensorsTest, HugeSparseFileReadsOnlyTheHeader) {
  const test::StHeader h = test::make_header(test::llama3_70b_entries(), R"({"format":"pt"})");
  const fs::path p = dir_ / "model.safetensors";
  if (!test::write_safetensors(p, h.json, h.data_bytes)) GTEST_SKIP() << "no sparse files here";
  ASSERT_EQ(static_cast<int64_t>(fs::file_size(p)), 8 + static_cast<int64_t>(h.json.size()) + h.data_bytes);

  CountingReader reader(open_file_reader(p));
  const int64_t rchar_before = proc_read_bytes();
  const SafetensorsHeader got = read_safetensors_header(reader, p.string());
  const int64_t rchar_after = proc_read_bytes();
  EXPECT_EQ(reader.reads, 2);
  EXPECT_EQ(reader.bytes, 8 + static_cast<int64_t>(h.json.size()));
  // rchar also counts proc_read_bytes' own read of /proc/self/io (well under a page).
  if (rchar_before >= 0) {
    EXPECT_GE(rchar_after - rchar_before, reader.bytes);
    EXPECT_LT(rchar_after - rchar_before, reader.bytes + 4096);
  }

  ASSERT_EQ(got.tensors.size(), 723u);
  Checkpoint ck = read_checkpoint(p);
  // Meta's published Llama-3-70B parameter count, in bf16.
  EXPECT_EQ(ck.numel(), 70'553'706'496);
  EXPECT_EQ(ck.nbytes(), 2 * 70'553'706'496);
  EXPECT_EQ(ck.find("lm_head.weight")->offset + ck.find("lm_head.weight")->nbytes,
            static_cast<int64_t>(fs::file_size(p)));
}

// An index over 30 sparse shards: each shard's header is read once, nothing else.
TEST_F(SafetensorsTest, ShardedIndexOpensEachShardOnce) {
  const std::vector<StEntry> all = test::llama3_70b_entries();
  constexpr size_t kShards = 30;
  json weight_map = json::object();
  int64_t total = 0, header_bytes = 0;
  for (size_t s = 0; s < kShards; ++s) {
    std::vector<StEntry> part;
    for (size_t i = s; i < all.size(); i += kShards) part.push_back(all[i]);
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, kShards);
    const test::StHeader h = test::make_header(part);
    if (!test::write_safetensors(dir_ / name, h.json, h.data_bytes)) GTEST_SKIP();
    for (const StEntry& e : part) weight_map[e.name] = name;
    total += h.data_bytes;
    header_bytes += 8 + static_cast<int64_t>(h.json.size());
  }
  const std::string index =
      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump();
  std::map<std::string, int> opens;
  int64_t bytes = 0;
  const Checkpoint ck = read_checkpoint_index(index, dir_ / "model.safetensors.index.json",
                                              [&](const fs::path& p) -> std::unique_ptr<ByteReader> {
                                                ++opens[p.filename().string()];
                                                struct Tally : CountingReader {
                                                  using CountingReader::CountingReader;
                                                  int64_t* sink = nullptr;
                                                  ~Tally() override { *sink += bytes; }
                                                };
                                                auto r = std::make_unique<Tally>(open_file_reader(p));
                                                r->sink = &bytes;
                                                return r;
                                              });
  EXPECT_EQ(opens.size(), kShards);
  for (const auto& [name, n] : opens) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(bytes, header_bytes);
  EXPECT_EQ(ck.tensors.size(), 723u);
  EXPECT_EQ(ck.numel(), 70'553'706'496);
  EXPECT_EQ(ck.file_of(*ck.find("model.layers.0.mlp.up_proj.weight")).filename(),
            "model-00007-of-00030.safetensors");  // entry 6 (0-based) -> shard index 6 -> file 7
}

TEST_F(SafetensorsTest, NamedMetaTensorsAndJsonRoundTrip) {
  const Checkpoint ck = read_checkpoint(kData / "tiny.safetensors");
  const NamedTensors named = to_named_tensors(ck);
  ASSERT_EQ(named.size(), ck.tensors.size());
  EXPECT_EQ(named[0].first, "embed.weight");  // name order
  EXPECT_EQ(named[0].second.sizes(), (DimVector{3, 2}));
  EXPECT_EQ(named[0].second.dtype(), DType::kBFloat16);
  EXPECT_TRUE(named[0].second.is_meta());
  EXPECT_EQ(named[0].second.nbytes(), ck.find("embed.weight")->nbytes);

  json j = ck;
  Checkpoint back = j.get<Checkpoint>();
  EXPECT_EQ(back.tensors, ck.tensors);
  EXPECT_EQ(json(back), j);
  EXPECT_EQ(j["tensors"][0]["dtype"], "BF16");
}

// ---- The length prefix ----

TEST_F(SafetensorsTest, RejectsFileShorterThanTheLength) {
  EXPECT_NE(header_error(std::string("abc")).find("file has 3 bytes, expected at least 8"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBelowTwo) {
  EXPECT_NE(header_error(test::length_prefixed("{", 1)).find("header length 1 is too small"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsHeaderLengthAboveTheCap) {
  const std::string msg = header_error(test::length_prefixed("{}", 100'000'001));
  EXPECT_NE(msg.find("header length 100000001 exceeds the limit of 100000000"), std::string::npos);
  // 2^64 - 1 must not wrap into a small signed number.
  EXPECT_NE(header_error(test::length_prefixed("{}", ~uint64_t{0})).find("18446744073709551615"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondTheFile) {
  EXPECT_NE(header_error(test::length_prefixed("{}", 64)).find("header length 64 runs past the end "
                                                               "of the file (10 bytes)"),
            std::string::npos);
}

// ---- JSON ----

TEST_F(SafetensorsTest, RejectsInvalidJson) {
  EXPECT_NE(header_error(R"({"a": {"dtype": "F32",)", 0).find("header is not valid JSON (at byte"),
            std::string::npos);
  EXPECT_NE(header_error("{} x", 0).find("not valid JSON"), std::string::npos);
  // Invalid UTF-8 inside a string.
  EXPECT_NE(header_error("{\"a\xff\": 1}", 0).find("not valid JSON"), std::string::npos);
}

TEST_F(SafetensorsTest, RejectsNonObjectHeader) {
  EXPECT_NE(header_error("[1, 2]", 0).find("header is an array, expected a JSON object"),
            std::string::npos);
  EXPECT_NE(header_error("42", 0).find("header is the number 42, expected a JSON object"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsDeepNestingAtTheFormatsDepth) {
  // A million levels inside a shape: rejected at the 4th level, before anything deep is built.
  const std::string deep = R"({"w":{"dtype":"F32","shape":)" + std::string(1'000'000, '[');
  const std::string msg = header_error(deep, 0);
  EXPECT_NE(msg.find("tensor \"w\": shape entry 0 is an array: the header nests deeper than the "
                     "format's 3 levels"),
            std::string::npos)
      << msg;
  const std::string meta = R"({"__metadata__":{"k":{"x":{"y":{}}}}})";
  EXPECT_NE(header_error(meta, 0).find("__metadata__ value of \"k\" is an object, expected a string"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsDuplicateKeys) {
  const std::string e = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_NE(header_error(R"({"w":)" + e + R"(,"w":)" + e + "}", 1).find(
                "duplicate tensor \"w\" in the header"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)
                .find("tensor \"w\": duplicate key \"dtype\""),
            std::string::npos);
  EXPECT_NE(header_error(R"({"__metadata__":{},"__metadata__":{}})", 0)
                .find("duplicate key \"__metadata__\""),
            std::string::npos);
  EXPECT_NE(header_error(R"({"__metadata__":{"a":"1","a":"2"}})", 0)
                .find("duplicate key \"a\" in __metadata__"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsNonStringMetadataValues) {
  EXPECT_NE(header_error(R"({"__metadata__":{"step":3}})", 0)
                .find("__metadata__ value of \"step\" is the number 3, expected a string"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"__metadata__":["a"]})", 0)
                .find("__metadata__ is an array, expected an object of strings"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsMalformedEntries) {
  EXPECT_NE(header_error(R"({"w":[1]})", 0).find("tensor \"w\" is an array, expected an object"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"crc":1}})", 1)
                .find("tensor \"w\": unknown field \"crc\", expected dtype, shape, data_offsets"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1)
                .find("tensor \"w\": missing field \"shape\""),
            std::string::npos);
  EXPECT_NE(header_error(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)
                .find("empty name"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,1]}})", 1)
                .find("tensor \"w\": shape is the number 3, expected a list of non-negative"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsDTypeNames) {
  EXPECT_NE(header_error(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4)
                .find("tensor \"w\": dtype \"F33\" is not a safetensors dtype, expected one of "
                      "BOOL, U8"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", 2)
                .find("dtype \"U16\" is a safetensors dtype shardplan has no element type for"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4)
                .find("tensor \"w\": dtype is the number 4, expected a dtype name"),
            std::string::npos);
  EXPECT_THROW(parse_safetensors_dtype("bf16"), Error);  // the format is case-sensitive
}

TEST_F(SafetensorsTest, RejectsShapeEntries) {
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})", 0)
                .find("tensor \"w\": shape entry 1 is -1, expected a non-negative integer"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}})", 2)
                .find("tensor \"w\": shape entry 0 is 2.0, expected an integer"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0)
                .find("shape entry 0 is 9223372036854775808, expected an integer below 2^63"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", 2)
                .find("shape entry 0 is the string \"2\""),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsSizeOverflowAndMismatch) {
  // 2^32 * 2^32 elements overflow before itemsize; a wrapped product must not pass as 0 bytes.
  EXPECT_NE(header_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)
                .find("tensor \"w\": shape [4294967296, 4294967296] of F32 holds more than 2^63 "
                      "bytes"),
            std::string::npos);
  // 0 bytes, but the strides of [0, 2^62, 2^62] overflow: read_checkpoint_index built them, a
  // signed overflow (seen while triaging a fuzz_cli_args finding; fuzz_safetensors_index
  // reproduces it).
  EXPECT_NE(header_error(R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0)
                .find("tensor \"w\": shape [0, 4611686018427387904, 4611686018427387904] has "
                      "non-zero sizes whose product overflows int64"),
            std::string::npos);
  // [2, 3] F16 = 12 bytes by hand; the offsets claim 10.
  EXPECT_NE(header_error(R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,10]}})", 10)
                .find("tensor \"w\": data_offsets [0, 10] span 10 bytes, expected 12 (shape [2, "
                      "3] of F16)"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsDataOffsets) {
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 4)
                .find("tensor \"w\": data_offsets [4, 2] has begin after end"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1)
                .find("tensor \"w\": data_offsets has 1 entries, expected 2"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1)
                .find("tensor \"w\": data_offsets has more than 2 entries"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 4)
                .find("tensor \"w\": data_offsets [0, 8] end beyond the data buffer of 4 bytes"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsOverlapsHolesAndTrailingBytes) {
  // b starts inside a [0, 8).
  EXPECT_NE(header_error(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                         8)
                .find("tensor \"b\": data_offsets [4, 8] overlap tensor \"a\" [0, 8]"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                         10)
                .find("tensor \"b\": data_offsets [6, 10] leave a hole of 2 bytes after tensor "
                      "\"a\""),
            std::string::npos);
  EXPECT_NE(header_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 7)
                .find("the data buffer has 3 bytes after the last tensor (\"a\")"),
            std::string::npos);
}

// ---- Indexes ----

class SafetensorsIndexTest : public SafetensorsTest {
 protected:
  // Two shards: a.safetensors {x: U8[2]}, b.safetensors {y: U8[3]}.
  void SetUp() override {
    SafetensorsTest::SetUp();
    const test::StHeader a = test::make_header({{"x", "U8", {2}}});
    const test::StHeader b = test::make_header({{"y", "U8", {3}}});
    file("a.safetensors", test::file_bytes(a.json, a.data_bytes));
    file("b.safetensors", test::file_bytes(b.json, b.data_bytes));
  }
  std::string index_error(const std::string& text) {
    const fs::path p = file("model.safetensors.index.json", text);
    try {
      read_checkpoint(p);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loaded without error";
    return "";
  }
};

TEST_F(SafetensorsIndexTest, ValidIndexAndTotalSize) {
  const fs::path p = file("model.safetensors.index.json",
                          R"({"metadata":{"total_size":5},"weight_map":{"x":"a.safetensors","y":"b.safetensors"}})");
  const Checkpoint ck = read_checkpoint(p);
  EXPECT_EQ(ck.files.size(), 2u);
  EXPECT_EQ(ck.file_of(*ck.find("y")), dir_ / "b.safetensors");
  EXPECT_EQ(ck.find("y")->offset, 8 + ck.files[1].header.header_bytes);
}

TEST_F(SafetensorsIndexTest, RejectsBadIndexes) {
  const std::string p = (dir_ / "model.safetensors.index.json").string();
  auto has = [&](const std::string& text, const std::string& needle) {
    const std::string msg = index_error(text);
    EXPECT_NE(msg.find(needle), std::string::npos) << "got: " << msg;
    EXPECT_NE(msg.find(dir_.string()), std::string::npos) << "no file named: " << msg;
  };
  has(R"({"metadata":{}})", "missing \"weight_map\" object");
  has(R"({"weight_map":[]})", "missing \"weight_map\" object");
  has(R"({"weight_map":{"x":1}})", "weight_map[\"x\"] is a number, expected a file name");
  has(R"({"weight_map":{"x":"/etc/passwd"}})",
      "weight_map[\"x\"] is \"/etc/passwd\", expected a file name in the index's folder");
  has(R"({"weight_map":{"x":"../a.safetensors"}})", "expected a file name in the index's folder");
  has(R"({"weight_map":{"x":"c.safetensors"}})",
      "weight_map names \"c.safetensors\" (for tensor \"x\"), which cannot be read");
  has(R"({"weight_map":{"x":"a.safetensors","z":"a.safetensors","y":"b.safetensors"}})",
      "weight_map maps tensor \"z\" to \"a.safetensors\", which has no such tensor");
  has(R"({"weight_map":{"x":"a.safetensors","y":"a.safetensors"}})",
      "weight_map maps tensor \"y\" to \"a.safetensors\", which has no such tensor");
  has(R"({"metadata":{"total_size":6},"weight_map":{"x":"a.safetensors","y":"b.safetensors"}})",
      "metadata.total_size is 6 bytes, but the tensors hold 5");
  has(R"({"metadata":{"total_size":-5},"weight_map":{"x":"a.safetensors","y":"b.safetensors"}})",
      "metadata.total_size is -5, expected a non-negative integer");
  has(R"({"weight_map":{"x":"a.safetensors","x":"a.safetensors"}})", "duplicate key \"x\"");
  has(R"({"weight_map":{},"extra":1})", "unknown key \"extra\"");
  has(R"({"metadata":)" + std::string(100'000, '[') , "JSON nested deeper than 16 levels");
  has("{", "not valid JSON");
}

TEST_F(SafetensorsIndexTest, RejectsTensorOfAShardMissingFromTheMap) {
  // a.safetensors holds x and w; the index maps only x there.
  const test::StHeader a = test::make_header({{"x", "U8", {2}}, {"w", "U8", {1}}});
  file("a.safetensors", test::file_bytes(a.json, a.data_bytes));
  const std::string msg = index_error(R"({"weight_map":{"x":"a.safetensors"}})");
  EXPECT_NE(msg.find("a.safetensors: tensor \"w\" is not mapped to this file by "),
            std::string::npos)
      << msg;
}

TEST_F(SafetensorsTest, FolderWithoutCheckpointIsAnError) {
  try {
    read_checkpoint(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds neither model.safetensors.index.json nor "
                                         "model.safetensors"),
              std::string::npos);
  }
  EXPECT_THROW(read_checkpoint(dir_ / "nope.safetensors"), Error);
}

}  // namespace
}  // namespace shardplan::tensor
