// The field reader (base/json_fields.h): every malformed value is one shardplan::Error that
// names the document and the dotted field, and no nlohmann exception escapes.
#include "base/json_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace shardplan {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JsonFields, ReadsTypedValuesAndRefusesUnknownKeys) {
  const json j = json::parse(R"({"name": "m", "size": 4, "ok": true, "mesh": {"shape": [2, 4]}})");
  JsonFields doc(j, "plan.json");
  EXPECT_EQ(doc.str("name"), "m");
  EXPECT_EQ(doc.integer("size", 1), 4);
  EXPECT_TRUE(doc.boolean("ok"));
  JsonFields mesh = doc.object("mesh");
  EXPECT_EQ(mesh.integers("shape", 1), (std::vector<int64_t>{2, 4}));
  mesh.done();
  doc.done();
  const json extra = json::parse(R"({"name": "m", "nmae": "typo"})");
  JsonFields d2(extra, "plan.json");
  (void)d2.str("name");
  EXPECT_EQ(error_of([&] { d2.done(); }), "plan.json: field 'nmae': unknown key");
}

TEST(JsonFields, EveryBadValueNamesItsField) {
  const json j = json::parse(
      R"({"a": "x", "b": 2.5, "c": 18446744073709551615, "d": -3, "e": [1, "2"], "f": [], "g": 1})");
  JsonFields doc(j, "c.json");
  EXPECT_EQ(error_of([&] { doc.integer("a"); }),
            "c.json: field 'a': expected an integer, got \"x\"");
  EXPECT_EQ(error_of([&] { doc.integer("b"); }), "c.json: field 'b': expected an integer, got 2.5");
  // 2^64 - 1 is above int64: refused, never wrapped to -1.
  EXPECT_THAT(error_of([&] { doc.integer("c"); }), HasSubstr("field 'c': expected an integer"));
  EXPECT_EQ(error_of([&] { doc.integer("d", 1); }),
            "c.json: field 'd': expected an integer >= 1, got -3");
  EXPECT_EQ(error_of([&] { doc.integers("e"); }),
            "c.json: field 'e': element 1: expected an integer, got \"2\"");
  EXPECT_THAT(error_of([&] { doc.object("f"); }), HasSubstr("field 'f': expected a JSON object"));
  EXPECT_THAT(error_of([&] { doc.str("g"); }), HasSubstr("field 'g': expected a string, got 1"));
  EXPECT_EQ(error_of([&] { doc.str("missing"); }), "c.json: field 'missing': missing (required)");
  EXPECT_THAT(error_of([&] { JsonFields(json::array(), "c.json"); }),
              HasSubstr("c.json: field '<document>': expected a JSON object, got array"));
}

TEST(JsonFields, NestedPathsAndEnumerations) {
  enum class Fabric { kNvlink, kSharedMemory };
  static constexpr EnumName<Fabric> kNames[] = {{"nvlink", Fabric::kNvlink},
                                                {"shared_memory", Fabric::kSharedMemory}};
  const json j = json::parse(R"({"intra": {"fabric": "pcie", "bw": "fast"}})");
  JsonFields doc(j, "cluster.json");
  JsonFields intra = doc.object("intra");
  EXPECT_EQ(error_of([&] { intra.enumeration("fabric", kNames); }),
            "cluster.json: field 'intra.fabric': unknown value 'pcie', expected one of: nvlink, "
            "shared_memory");
  EXPECT_EQ(error_of([&] { intra.number("bw"); }),
            "cluster.json: field 'intra.bw': expected a number, got \"fast\"");
}

}  // namespace
}  // namespace shardplan
