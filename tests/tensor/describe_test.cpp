// describe / load_description: round trips keep layout, dtype and aliasing; hostile descriptions
// are rejected with a message naming the bad value; the shipped GPT-2 small description (written
// by PyTorch, scripts/export_description.py) loads with OpenAI's published parameter count.
#include "tensor/describe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "base/error.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

void expect_same_tensor(const Tensor& got, const Tensor& want, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(std::vector<int64_t>(got.sizes().begin(), got.sizes().end()),
            std::vector<int64_t>(want.sizes().begin(), want.sizes().end()));
  EXPECT_EQ(std::vector<int64_t>(got.strides().begin(), got.strides().end()),
            std::vector<int64_t>(want.strides().begin(), want.strides().end()));
  EXPECT_EQ(got.storage_offset(), want.storage_offset());
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.numel(), want.numel());
  EXPECT_EQ(got.is_contiguous(), want.is_contiguous());
  EXPECT_EQ(got.storage()->nbytes(), want.storage()->nbytes());
  EXPECT_EQ(got.requires_grad(), want.requires_grad());
  EXPECT_EQ(got.is_leaf(), want.is_leaf());
  EXPECT_EQ(got.is_parameter(), want.is_parameter());
  EXPECT_TRUE(got.is_meta());
}

// describe -> text -> load, then checks every tensor and that the description is unchanged.
NamedTensors round_trip(const NamedTensors& named) {
  const std::string text = describe_to_string(named);
  NamedTensors back = load_description_string(text, "round trip");
  EXPECT_EQ(back.size(), named.size());
  for (size_t i = 0; i < std::min(back.size(), named.size()); ++i) {
    EXPECT_EQ(back[i].first, named[i].first);
    expect_same_tensor(back[i].second, named[i].second, named[i].first);
  }
  EXPECT_EQ(describe_to_string(back), text);
  return back;
}

TEST(DescribeRoundTrip, Contiguous) {
  Tensor w = empty({4, 6});
  w.set_requires_grad(true);
  w.set_is_parameter(true);
  round_trip({{"w", w}});
  const json d = describe({{"w", w}});
  // The documented layout, written by hand: 4 * 6 float32 = 96 bytes.
  EXPECT_EQ(d["storages"], json::parse(R"([{"id": 0, "nbytes": 96, "device": "meta"}])"));
  EXPECT_EQ(d["tensors"][0],
            json::parse(R"({"name": "w", "sizes": [4, 6], "strides": [6, 1], "storage_offset": 0,
                            "dtype": "float32", "storage": 0, "view_of": null,
                            "requires_grad": true, "is_leaf": true, "is_parameter": true})"));
}

TEST(DescribeRoundTrip, TransposedViewOfAListedBase) {
  Tensor w = empty({4, 6}, {.dtype = DType::kBFloat16});
  NamedTensors back = round_trip({{"w", w}, {"w.T", transpose(w, 0, 1)}});
  EXPECT_EQ(describe({{"w", w}, {"w.T", transpose(w, 0, 1)}})["tensors"][1]["view_of"], "w");
  EXPECT_TRUE(back[1].second.is_view());
  EXPECT_TRUE(back[1].second.base().is_same(back[0].second));
  EXPECT_FALSE(back[1].second.is_contiguous());
}

TEST(DescribeRoundTrip, SlicedWithOffset) {
  Tensor x = empty({10, 8}, {.dtype = DType::kInt64});
  Tensor s = slice(x, 0, 3, 9, 2);  // rows 3, 5, 7: offset 24, stride 16
  ASSERT_EQ(s.storage_offset(), 24);
  NamedTensors back = round_trip({{"x", x}, {"rows", s}});
  EXPECT_EQ(back[1].second.storage_offset(), 24);
  EXPECT_EQ(back[1].second.stride(0), 16);
}

TEST(DescribeRoundTrip, ExpandedStrideZero) {
  Tensor b = empty({3, 1});
  Tensor e = expand(b, {3, 5});
  ASSERT_EQ(e.stride(1), 0);
  NamedTensors back = round_trip({{"b", b}, {"b.expanded", e}});
  EXPECT_EQ(back[1].second.stride(1), 0);
  EXPECT_TRUE(back[1].second.shares_storage(back[0].second));
}

TEST(DescribeRoundTrip, ZeroSizeAndZeroDim) {
  Tensor z = empty({0, 5});
  Tensor scalar = empty({}, {.dtype = DType::kFloat64});
  NamedTensors back = round_trip({{"empty", z}, {"scalar", scalar}});
  EXPECT_EQ(back[0].second.numel(), 0);
  EXPECT_EQ(back[0].second.storage()->nbytes(), 0);
  EXPECT_EQ(back[1].second.dim(), 0);
  EXPECT_EQ(back[1].second.numel(), 1);
}

TEST(DescribeRoundTrip, EveryDtype) {
  NamedTensors named;
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    named.emplace_back(std::string(dtype_name(t)), empty({2, 3}, {.dtype = t}));
  }
  NamedTensors back = round_trip(named);
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    EXPECT_EQ(back[i].second.dtype(), t);
    // Independent of the code under test: 6 elements of the dtype's documented width.
    EXPECT_EQ(back[i].second.storage()->nbytes(), 6 * itemsize(t)) << dtype_name(t);
  }
  EXPECT_EQ(back[static_cast<int>(DType::kFloat8E4M3FN)].first, "float8_e4m3fn");
  EXPECT_EQ(back[static_cast<int>(DType::kComplex128)].second.storage()->nbytes(), 96);
}

TEST(DescribeAliasing, TwoViewsOfOneStorageComeBackAsViewsOfOneBase) {
  Tensor w = empty({4, 6});
  NamedTensors back = round_trip(
      {{"w", w}, {"top", slice(w, 0, 0, 2)}, {"bottom.T", transpose(slice(w, 0, 2, 4), 0, 1)}});
  EXPECT_TRUE(back[1].second.shares_storage(back[2].second));
  EXPECT_TRUE(back[1].second.shares_storage(back[0].second));
  for (int i : {1, 2}) {
    EXPECT_TRUE(back[i].second.is_view());
    EXPECT_TRUE(back[i].second.base().is_same(back[0].second));
  }
  EXPECT_EQ(back[2].second.storage_offset(), 12);
}

TEST(DescribeAliasing, ViewsWhoseBaseIsNotListedShareOneStorage) {
  Tensor w = empty({4, 6});
  const NamedTensors named = {{"top", slice(w, 0, 0, 2)}, {"bottom", slice(w, 0, 2, 4)}};
  const json d = describe(named);
  EXPECT_EQ(d["storages"].size(), 1u);
  EXPECT_EQ(d["storages"][0]["nbytes"], 96);  // the whole base's storage, not the slices
  EXPECT_TRUE(d["tensors"][0]["view_of"].is_null());
  EXPECT_TRUE(d["tensors"][1]["view_of"].is_null());
  NamedTensors back = load_description(d);
  EXPECT_TRUE(back[0].second.shares_storage(back[1].second));
  // As torch.load: the storage is shared, the view relation is not restored.
  EXPECT_FALSE(back[0].second.is_view());
  EXPECT_EQ(back[1].second.storage_offset(), 12);
}

TEST(DescribeAliasing, TiedWeightListedUnderTwoNamesStaysOneStorage) {
  Tensor wte = empty({10, 4});
  wte.set_requires_grad(true);
  wte.set_is_parameter(true);
  const NamedTensors named = {{"wte.weight", wte}, {"lm_head.weight", wte}};
  const json d = describe(named);
  EXPECT_EQ(d["storages"].size(), 1u);
  EXPECT_EQ(d["tensors"][1]["storage"], 0);
  NamedTensors back = round_trip(named);
  EXPECT_TRUE(back[0].second.shares_storage(back[1].second));
  const TensorSetSummary sum = summarize(back);
  EXPECT_EQ(sum.tensors, 2);
  EXPECT_EQ(sum.storages, 1);
  EXPECT_EQ(sum.parameters, 40);  // 10 * 4 once
  EXPECT_EQ(sum.bytes, 160);
}

TEST(DescribeAliasing, ViewOfMayNameALaterTensorAndChainsResolveToTheRoot) {
  const json d = json::parse(R"({"format": "shardplan.tensors", "version": 1,
    "storages": [{"id": 5, "nbytes": 96, "device": "meta"}],
    "tensors": [
      {"name": "c", "sizes": [6], "strides": [1], "storage_offset": 6, "dtype": "float32",
       "storage": 5, "view_of": "b"},
      {"name": "b", "sizes": [2, 6], "strides": [6, 1], "storage_offset": 6, "dtype": "float32",
       "storage": 5, "view_of": "a"},
      {"name": "a", "sizes": [4, 6], "strides": [6, 1], "storage_offset": 0, "dtype": "float32",
       "storage": 5}]})");
  NamedTensors back = load_description(d);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].first, "c");                               // the description's order is kept
  EXPECT_TRUE(back[0].second.base().is_same(back[2].second));  // PyTorch's ._base is the root
  EXPECT_TRUE(back[1].second.base().is_same(back[2].second));
  EXPECT_FALSE(back[2].second.is_view());
  // Defaults of the optional fields.
  EXPECT_FALSE(back[2].second.requires_grad());
  EXPECT_TRUE(back[2].second.is_leaf());
  EXPECT_FALSE(back[2].second.is_parameter());
}

TEST(DescribeDevices, WrittenAsGivenLoadedOnMetaUnlessKept) {
  Tensor c = empty({2, 3}, {.dtype = std::nullopt, .device = Device::cpu()});
  const json d = describe({{"c", c}});
  EXPECT_EQ(d["storages"][0]["device"], "cpu");
  EXPECT_TRUE(load_description(d)[0].second.is_meta());
  const Tensor kept = load_description(d, {.map_location = std::nullopt})[0].second;
  EXPECT_TRUE(kept.device().is_cpu());
  EXPECT_NE(kept.data_ptr(), nullptr);
}

TEST(DescribeIds, StableAndDeterministic) {
  Tensor a = empty({2}), b = empty({3}), c = empty({4});
  const NamedTensors named = {{"b", b}, {"a", a}, {"b.view", slice(b, 0, 1)}, {"c", c}};
  const json d = describe(named);
  // Ids follow first appearance in the list, not creation order or process-wide storage ids.
  EXPECT_EQ(d["tensors"][0]["storage"], 0);
  EXPECT_EQ(d["tensors"][1]["storage"], 1);
  EXPECT_EQ(d["tensors"][2]["storage"], 0);
  EXPECT_EQ(d["tensors"][3]["storage"], 2);
  EXPECT_EQ(describe_to_string(named), describe_to_string(named));
  // The same layout built again (new storages, new process ids) describes identically.
  Tensor b2 = empty({3});
  const NamedTensors again = {
      {"b", b2}, {"a", empty({2})}, {"b.view", slice(b2, 0, 1)}, {"c", empty({4})}};
  EXPECT_EQ(describe_to_string(again), describe_to_string(named));
  EXPECT_EQ(json::parse(describe_to_string(named)), d);
}

TEST(DescribeIds, DescribeRejectsDuplicateAndUndefined) {
  Tensor a = empty({2});
  try {
    describe({{"a", a}, {"a", a}});
    FAIL() << "expected shardplan::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"a\" is listed twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(describe({{"u", Tensor()}}), Error);
  EXPECT_THROW(describe({{"", a}}), Error);
}

TEST(Summarize, DisjointSlicesCountBothOverlapsOnce) {
  Tensor w = empty({4, 6});
  Tensor top = slice(w, 0, 0, 2), bottom = slice(w, 0, 2, 4), middle = slice(w, 0, 1, 3);
  for (Tensor* t : {&top, &bottom, &middle}) t->set_is_parameter(true);
  EXPECT_EQ(summarize({{"top", top}, {"bottom", bottom}}).parameters, 24);
  EXPECT_EQ(summarize({{"top", top}, {"middle", middle}}).parameters, 18);  // rows 0..2
  Tensor buffer = empty({5});                                               // not a parameter
  const TensorSetSummary s = summarize({{"top", top}, {"buffer", buffer}});
  EXPECT_EQ(s.parameters, 12);
  EXPECT_EQ(s.storages, 2);
  EXPECT_EQ(s.bytes, 96 + 20);
}

// ---- Rejections: each bad field of an otherwise valid description ----

// w [4, 6] float32 on storage 0 (96 bytes), its transpose, and b [4] on storage 1.
json valid_description() {
  return json::parse(R"({"format": "shardplan.tensors", "version": 1,
    "storages": [{"id": 0, "nbytes": 96, "device": "meta"}, {"id": 1, "nbytes": 16, "device": "cpu"}],
    "tensors": [
      {"name": "w", "sizes": [4, 6], "strides": [6, 1], "storage_offset": 0, "dtype": "float32",
       "storage": 0, "view_of": null, "requires_grad": true, "is_leaf": true, "is_parameter": true},
      {"name": "w.T", "sizes": [6, 4], "strides": [1, 6], "storage_offset": 0, "dtype": "float32",
       "storage": 0, "view_of": "w", "requires_grad": true, "is_leaf": false, "is_parameter": false},
      {"name": "b", "sizes": [4], "strides": [1], "storage_offset": 0, "dtype": "float32",
       "storage": 1, "view_of": null, "requires_grad": false, "is_leaf": true, "is_parameter": false}
    ]})");
}

// Loads `d` expecting shardplan::Error whose message contains every fragment.
void expect_rejected(const json& d, std::initializer_list<std::string> fragments) {
  try {
    load_description(d);
    ADD_FAILURE() << "expected shardplan::Error for " << d.dump();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    for (const std::string& f : fragments) {
      EXPECT_NE(what.find(f), std::string::npos) << "message lacks '" << f << "': " << what;
    }
  }
}

TEST(DescribeReject, ValidDescriptionLoads) {
  NamedTensors back = load_description(valid_description());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE(back[1].second.base().is_same(back[0].second));
  EXPECT_TRUE(back[2].second.is_meta());  // "cpu" mapped to meta by default
}

TEST(DescribeReject, NotAnObject) { expect_rejected(json::array(), {"JSON object", "an array"}); }

TEST(DescribeReject, MissingField) {
  json d = valid_description();
  d["tensors"][0].erase("dtype");
  expect_rejected(d, {"tensors[0] \"w\"", "missing field 'dtype'"});
  d = valid_description();
  d.erase("storages");
  expect_rejected(d, {"missing field 'storages'"});
}

TEST(DescribeReject, IllTypedField) {
  json d = valid_description();
  d["tensors"][0]["sizes"] = "4x6";
  expect_rejected(d, {"tensors[0] \"w\"", "sizes is \"4x6\"", "array of non-negative integers"});
  d = valid_description();
  d["tensors"][2]["requires_grad"] = "yes";
  expect_rejected(d, {"tensors[2] \"b\"", "requires_grad is \"yes\"", "true or false"});
  d = valid_description();
  d["storages"][0]["nbytes"] = 96.5;
  expect_rejected(d, {"storages[0]", "nbytes is 96.5", "non-negative integer"});
  d = valid_description();
  d["tensors"][1]["view_of"] = 3;
  expect_rejected(d, {"tensors[1] \"w.T\"", "view_of is 3"});
  d = valid_description();
  d["tensors"] = json::object();
  expect_rejected(d, {"tensors is an object", "expected an array"});
}

TEST(DescribeReject, UnknownField) {
  json d = valid_description();
  d["tensors"][0]["stride"] = json::array({6, 1});
  expect_rejected(d, {"tensors[0] \"w\"", "unknown field \"stride\""});
}

TEST(DescribeReject, UnknownFormat) {
  json d = valid_description();
  d["format"] = "torch.save";
  expect_rejected(d, {"format is \"torch.save\"", "\"shardplan.tensors\""});
}

TEST(DescribeReject, UnknownVersion) {
  json d = valid_description();
  d["version"] = 2;
  expect_rejected(d, {"version is 2", "reads version 1"});
}

TEST(DescribeReject, UnknownDtype) {
  json d = valid_description();
  d["tensors"][2]["dtype"] = "float17";
  expect_rejected(d, {"tensors[2] \"b\"", "float17"});
}

TEST(DescribeReject, UnknownDevice) {
  json d = valid_description();
  d["storages"][1]["device"] = "tpu:0";
  expect_rejected(d, {"storages[1] (id 1)", "tpu:0"});
}

TEST(DescribeReject, NegativeSize) {
  json d = valid_description();
  d["tensors"][0]["sizes"][1] = -6;
  expect_rejected(d, {"tensors[0] \"w\"", "sizes[1] is -6", "non-negative integer"});
}

TEST(DescribeReject, NegativeStride) {
  json d = valid_description();
  d["tensors"][0]["strides"][0] = -6;
  expect_rejected(d, {"tensors[0] \"w\"", "strides[0] is -6"});
}

TEST(DescribeReject, NegativeOffset) {
  json d = valid_description();
  d["tensors"][2]["storage_offset"] = -2;
  expect_rejected(d, {"tensors[2] \"b\"", "storage_offset is -2"});
}

TEST(DescribeReject, NegativeNbytes) {
  json d = valid_description();
  d["storages"][0]["nbytes"] = -96;
  expect_rejected(d, {"storages[0] (id 0)", "nbytes is -96"});
}

TEST(DescribeReject, IntegerBeyondInt64) {
  json d = valid_description();
  d["storages"][0]["nbytes"] = UINT64_MAX;
  expect_rejected(d, {"nbytes is 18446744073709551615", "more than int64"});
}

TEST(DescribeReject, SizesStridesLengthMismatch) {
  json d = valid_description();
  d["tensors"][0]["strides"] = json::array({6, 1, 1});
  expect_rejected(d, {"tensors[0] \"w\"", "strides [6, 1, 1] has 3 entries", "sizes [4, 6] has 2"});
}

TEST(DescribeReject, NumelOverflow) {
  json d = valid_description();
  d["tensors"][2]["sizes"] = json::array({int64_t{1} << 62, 4});
  d["tensors"][2]["strides"] = json::array({4, 1});
  expect_rejected(d, {"tensors[2] \"b\"", "[4611686018427387904, 4]", "more elements than int64"});
}

TEST(DescribeReject, ByteOverflow) {
  json d = valid_description();
  d["tensors"][2]["sizes"] = json::array({int64_t{1} << 61});  // numel fits; 8 bytes each do not
  d["tensors"][2]["dtype"] = "float64";
  expect_rejected(
      d, {"tensors[2] \"b\"", "[2305843009213693952]", "float64", "more bytes than int64"});
}

TEST(DescribeReject, AddressOverflow) {
  json d = valid_description();
  d["tensors"][2]["sizes"] = json::array({2, 2});
  d["tensors"][2]["strides"] = json::array({int64_t{1} << 62, int64_t{1} << 62});
  expect_rejected(d, {"tensors[2] \"b\"", "address more elements than int64"});
}

TEST(DescribeReject, StorageTooSmall) {
  json d = valid_description();
  d["tensors"][0]["storage_offset"] = 1;  // 24 elements from element 1: 100 bytes of 96
  expect_rejected(d, {"tensors[0] \"w\"", "need 100 bytes but storage 0 holds 96 bytes"});
  d = valid_description();
  d["tensors"][2]["dtype"] = "float64";  // 4 float64 = 32 bytes of 16
  expect_rejected(d, {"tensors[2] \"b\"", "need 32 bytes but storage 1 holds 16 bytes"});
}

TEST(DescribeReject, DanglingStorageId) {
  json d = valid_description();
  d["tensors"][2]["storage"] = 7;
  expect_rejected(d, {"tensors[2] \"b\"", "storage 7 is not the id"});
}

TEST(DescribeReject, DuplicateStorageId) {
  json d = valid_description();
  d["storages"][1]["id"] = 0;
  expect_rejected(d, {"storages[1] (id 0)", "duplicate storage id 0", "storages[0]"});
}

TEST(DescribeReject, DuplicateTensorName) {
  json d = valid_description();
  d["tensors"][2]["name"] = "w";
  expect_rejected(d, {"tensors[2] \"w\"", "duplicate tensor name", "tensors[0]"});
}

TEST(DescribeReject, EmptyTensorName) {
  json d = valid_description();
  d["tensors"][2]["name"] = "";
  expect_rejected(d, {"tensors[2]", "name is empty"});
}

TEST(DescribeReject, ViewOfUnknownTensor) {
  json d = valid_description();
  d["tensors"][1]["view_of"] = "v";
  expect_rejected(d, {"tensors[1] \"w.T\"", "view_of \"v\" names no tensor"});
}

TEST(DescribeReject, ViewOfCycle) {
  json d = valid_description();
  d["tensors"][0]["view_of"] = "w.T";  // w -> w.T -> w
  expect_rejected(d, {"cycle", "w -> w.T -> w"});
  d = valid_description();
  d["tensors"][0]["view_of"] = "w";  // itself
  expect_rejected(d, {"tensors[0] \"w\"", "cycle", "w -> w"});
}

TEST(DescribeReject, ViewOfAcrossStorages) {
  json d = valid_description();
  d["tensors"][2]["view_of"] = "w";
  expect_rejected(
      d, {"tensors[2] \"b\"", "view_of \"w\" is on storage 0", "this tensor is on storage 1"});
}

TEST(DescribeReject, RequiresGradOnIntegerDtype) {
  json d = valid_description();
  d["tensors"][0]["dtype"] = "int32";
  expect_rejected(d, {"tensors[0] \"w\"", "requires_grad is true but dtype int32"});
}

// ---- Text and files ----

class DescribeFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shardplan_describe_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& contents) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p;
  }
  static std::string error_of(const fs::path& p) {
    try {
      load_description_file(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST_F(DescribeFile, RoundTripsThroughAFile) {
  Tensor w = empty({3, 4}, {.dtype = DType::kFloat16});
  const fs::path p = write("ok.json", describe_to_string({{"w", w}, {"w.T", transpose(w, 0, 1)}}));
  NamedTensors back = load_description_file(p);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[1].second.base().is_same(back[0].second));
}

TEST_F(DescribeFile, NotJsonNamesFileAndBytePosition) {
  // The 'x' is the 12th byte: {"format": x
  const fs::path p = write("bad.json", R"({"format": x})");
  const std::string what = error_of(p);
  EXPECT_NE(what.find(p.string()), std::string::npos) << what;
  EXPECT_NE(what.find("not valid JSON (at byte 12)"), std::string::npos) << what;
}

TEST_F(DescribeFile, ParserMessagesStayShortAndPrintable) {
  std::string what = error_of(write("binary.json", "\xff\xfe{"));
  EXPECT_NE(what.find("not valid JSON (at byte 1)"), std::string::npos) << what;
  EXPECT_NE(what.find("\\xff"), std::string::npos) << what;
  // An unterminated megabyte string: the parser quotes all of it; the message must not.
  what = error_of(write("long.json", "{\"format\": \"" + std::string(1 << 20, 'a')));
  EXPECT_LT(what.size(), 400u) << what.size();
}

TEST_F(DescribeFile, EmptyFileIsNotJson) {
  const std::string what = error_of(write("empty.json", ""));
  EXPECT_NE(what.find("not valid JSON"), std::string::npos) << what;
}

TEST_F(DescribeFile, NestingTooDeep) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string what = error_of(write("deep.json", deep));
  EXPECT_NE(what.find("nested deeper than 64 levels"), std::string::npos) << what;
}

// nlohmann keeps the last of two equal keys; a description that says nbytes twice is ambiguous.
TEST_F(DescribeFile, DuplicateKeysAreRejected) {
  const std::string text = valid_description().dump();
  const size_t at = text.find("\"nbytes\":");
  ASSERT_NE(at, std::string::npos);
  const std::string twice = text.substr(0, at) + "\"nbytes\":8," + text.substr(at);
  const fs::path p = write("dup.json", twice);
  const std::string what = error_of(p);
  EXPECT_EQ(what.rfind(p.string() + ": duplicate key \"nbytes\" in one object", 0), 0u) << what;
  // The same key in two different objects is fine.
  EXPECT_NO_THROW(load_description_file(write("ok.json", text)));
}

TEST_F(DescribeFile, SchemaErrorsStartWithThePath) {
  json d = valid_description();
  d["tensors"][0]["sizes"][0] = -4;
  const fs::path p = write("neg.json", d.dump());
  const std::string what = error_of(p);
  EXPECT_EQ(what.rfind(p.string() + ": tensors[0] \"w\": sizes[0] is -4", 0), 0u) << what;
}

TEST_F(DescribeFile, MissingFileAndDirectory) {
  std::string what = error_of(dir_ / "nope.json");
  EXPECT_NE(what.find("cannot open tensor description"), std::string::npos) << what;
  EXPECT_NE(what.find("nope.json"), std::string::npos) << what;
  what = error_of(dir_);
  EXPECT_NE(what.find("is a directory"), std::string::npos) << what;
}

// ---- The shipped example: written by PyTorch, counted by us ----

TEST(Gpt2SmallExample, LoadsWithThePublishedParameterCount) {
  const fs::path p =
      fs::path(SHARDPLAN_TEST_DATA_DIR) / "../../configs/examples/gpt2-small.description.json";
  const NamedTensors named = load_description_file(p);
  const TensorSetSummary s = summarize(named);
  // OpenAI's published GPT-2 small size (124M; 124,439,808 with the tied LM head counted once).
  EXPECT_EQ(s.parameters, 124'439'808);

  const Tensor* wte = nullptr;
  const Tensor* lm_head = nullptr;
  for (const auto& [name, t] : named) {
    EXPECT_TRUE(t.is_meta()) << name;
    if (name == "transformer.wte.weight") wte = &t;
    if (name == "lm_head.weight") lm_head = &t;
  }
  ASSERT_NE(wte, nullptr);
  ASSERT_NE(lm_head, nullptr);
  EXPECT_TRUE(wte->shares_storage(*lm_head));
  EXPECT_EQ(wte->size(0), 50257);
  EXPECT_EQ(wte->size(1), 768);

  // Our own description of what we loaded is the file's (less its free-form metadata).
  std::ifstream in(p);
  json file = json::parse(in);
  file.erase("metadata");
  EXPECT_EQ(describe(named), file);
}

}  // namespace
}  // namespace shardplan::tensor
