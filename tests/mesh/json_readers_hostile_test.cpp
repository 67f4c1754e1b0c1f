// The mesh layer's JSON readers under hostile input (tests/tensor/json_hostile_support.h): every
// malformed document is a shardplan::Error naming the field, never a library exception.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_fields.h"
#include "mesh/device_mesh.h"
#include "mesh/module_boundaries.h"
#include "mesh/placement.h"
#include "mesh/shard_spec.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::mesh {
namespace {

using nlohmann::json;
using test::BadDoc;
using test::Reader;
using ::testing::HasSubstr;
using ::testing::StrEq;

Reader mesh_reader(const char* valid) {
  return {"device mesh", [](const json& j) { (void)device_mesh_from_json(j); }, json::parse(valid)};
}

Reader placement_reader() {
  return {"placement", [](const json& j) { (void)placement_from_json(j); }, json("SS0:2")};
}

Reader shard_spec_reader() {
  return {"shard spec", [](const json& j) { (void)shard_spec_from_json(j); },
          json::parse(R"({"shape":[8,6],"strides":[6,1],"dtype":"float16",
                          "mesh":{"shape":[2,2],"dim_names":["dp","tp"]},
                          "placements":["S0","SS1:2"]})")};
}

Reader boundary_reader() {
  return {"boundary redistribution",
          [](const json& j) { (void)boundary_redistribution_from_json(j); },
          json::parse(R"({"module":"model.layers.0.mlp","role":"output","from":["S0","P"],
                          "to":["S0","S1"],"shape":[2,16,4096],"dtype":"bfloat16"})")};
}

// ---- the field reader's own additions

TEST(JsonFieldsHelpers, ArrayStringsParsedAndObjectErrors) {
  const json j = json::parse(R"({"a":[1],"s":["x","y"],"bad":["x",2],"d":"bf16","e":"nope"})");
  JsonFields f(j, "doc.json");
  EXPECT_EQ(f.array("a").size(), 1u);
  EXPECT_EQ(f.strings("s"), (std::vector<std::string>{"x", "y"}));
  EXPECT_THAT([&] { (void)f.strings("bad"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("doc.json: field 'bad': element 1: expected a string, got 2")));
  EXPECT_EQ(f.parsed("d", tensor::parse_dtype), tensor::DType::kBFloat16);
  EXPECT_THAT(
      [&] { (void)f.parsed("e", tensor::parse_dtype); },
      ::testing::ThrowsMessage<Error>(HasSubstr("doc.json: field 'e': unknown dtype 'nope'")));
  EXPECT_THAT([&] { (void)f.array("d"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("doc.json: field 'd': expected an array, got \"bf16\"")));
  EXPECT_THAT([&] { f.fail_object("shapes disagree"); },
              ::testing::ThrowsMessage<Error>(StrEq("doc.json: shapes disagree")));
  const json inner = json::parse(R"({"m":{"k":1}})");
  JsonFields outer(inner, "doc.json");
  JsonFields m = outer.object("m");
  EXPECT_THAT([&] { m.fail_object("shapes disagree"); },
              ::testing::ThrowsMessage<Error>(StrEq("doc.json: field 'm': shapes disagree")));
  EXPECT_THAT([] { fail_json_field("x.json", "p[2]", "bad"); },
              ::testing::ThrowsMessage<Error>(StrEq("x.json: field 'p[2]': bad")));
  // A refusal naming the document already is not prefixed twice.
  EXPECT_THAT([] { fail_json_field("shard spec", "", "shard spec: shape [-1]"); },
              ::testing::ThrowsMessage<Error>(StrEq("shard spec: shape [-1]")));
}

// ---- tables of malformed documents

TEST(DeviceMeshJsonHostile, MalformedDocumentsNameTheField) {
  test::expect_errors(
      mesh_reader(R"({"shape":[2]})"),
      {
          {R"([2, 4])", {"device mesh: field '<document>': expected a JSON object, got array"}},
          {R"("2x4")", {"expected a JSON object, got string"}},
          {R"(null)", {"expected a JSON object, got null"}},
          {R"({})", {"device mesh: field 'shape': missing (required)"}},
          {R"({"shape":"2x4"})", {"field 'shape': expected an array of integers, got \"2x4\""}},
          {R"({"shape":{"0":2}})", {"field 'shape': expected an array of integers"}},
          {R"({"shape":[2,"4"]})", {"field 'shape': element 1: expected an integer >= 1"}},
          {R"({"shape":[2.0]})", {"field 'shape': element 0: expected an integer >= 1, got 2.0"}},
          {R"({"shape":[2.5]})", {"field 'shape': element 0", "got 2.5"}},
          {R"({"shape":[0]})", {"field 'shape': element 0: expected an integer >= 1, got 0"}},
          {R"({"shape":[-2]})", {"field 'shape': element 0", "got -2"}},
          {R"({"shape":[[2]]})", {"field 'shape': element 0", "got [2]"}},
          {R"({"shape":[18446744073709551615]})",
           {"field 'shape': element 0: expected an integer >= 1, got 18446744073709551615"}},
          {R"({"shape":[9223372036854775808]})", {"field 'shape': element 0"}},
          {R"({"shape":[1e300]})", {"field 'shape': element 0"}},
          {R"({"shape":[4611686018427387904, 4]})",
           {"device mesh: mesh shape", "has more than 2^63 ranks"}},
          {R"({"shape":[2],"dim_names":"dp"})",
           {"field 'dim_names': expected an array of strings"}},
          {R"({"shape":[2],"dim_names":[1]})",
           {"field 'dim_names': element 0: expected a string, got 1"}},
          {R"({"shape":[2],"dim_names":["dp","tp"]})",
           {"device mesh: mesh dim names (dp,tp): got 2 names for a 1-d mesh"}},
          {R"({"shape":[2,2],"dim_names":["dp","dp"]})", {"'dp' appears twice"}},
          {R"({"shape":[2],"ranks":{"0":1}})", {"field 'ranks': expected an array of integers"}},
          {R"({"shape":[2],"ranks":[0,-1]})",
           {"field 'ranks': element 1: expected an integer >= 0, got -1"}},
          {R"({"shape":[2],"ranks":[0,1.0]})", {"field 'ranks': element 1"}},
          {R"({"shape":[2],"ranks":[0]})",
           {"device mesh: mesh shape [2] holds 2 ranks but the rank list has 1"}},
          {R"({"shape":[2],"ranks":[3,3]})", {"device mesh: mesh rank list: rank 3 appears"}},
          {R"({"shape":[2],"ranks":[0,1],"strides":[1]})",
           {"field 'strides': given with \"ranks\", expected at most one layout"}},
          {R"({"shape":[2],"offset":3})", {"field 'offset': given without \"strides\""}},
          {R"({"shape":[2],"strides":[1],"offset":-1})",
           {"field 'offset': expected an integer >= 0, got -1"}},
          {R"({"shape":[2],"strides":[1],"offset":1.5})", {"field 'offset'", "got 1.5"}},
          {R"({"shape":[2],"strides":[1],"offset":"3"})", {"field 'offset'"}},
          {R"({"shape":[2],"strides":[true]})", {"field 'strides': element 0", "got true"}},
          {R"({"shape":[2],"strides":1})", {"field 'strides': expected an array of integers"}},
          {R"({"shape":[2,2],"strides":[1,1]})",
           {"device mesh: mesh strides", "not a valid layout"}},
          {R"({"shape":[2],"strides":[9223372036854775807],"offset":9})", {"not a valid layout"}},
          {R"({"shape":[2],"shapes":[2]})", {"device mesh: field 'shapes': unknown key"}},
      });
}

TEST(PlacementJsonHostile, NonStringsAndBadSyntaxAreNamedErrors) {
  test::expect_errors(
      placement_reader(),
      {
          {R"(0)", {"placement: expected a placement string such as \"S0\", got 0"}},
          {R"(null)", {"placement: expected a placement string", "got null"}},
          {R"(["S0"])", {"got [\"S0\"]"}},
          {R"({"dim":0})", {"got {\"dim\":0}"}},
          {R"(1.5)", {"got 1.5"}},
          {R"("")", {"placement: placement '' is not valid"}},
          {R"("S")", {"placement 'S' is not valid: expected S<dim>"}},
          {R"("Sx")", {"placement 'Sx' is not valid"}},
          {R"("S99999999999999999999")", {"is not valid"}},
          {R"("SS0:0")", {"split_factor must be >= 1, got 0"}},
          {R"("SS0")", {"placement 'SS0' is not valid"}},
          {R"("Pfoo")", {"placement 'Pfoo' is not valid"}},
          {R"("psum")", {"placement 'psum' is not valid"}},
      });
  // The list reader names the entry.
  EXPECT_THAT([] { (void)placements_from_json(json::parse(R"(["S0", 1])"), "plan.json", "p"); },
              ::testing::ThrowsMessage<Error>(StrEq(
                  "plan.json: field 'p[1]': expected a placement string such as \"S0\", got 1")));
  EXPECT_THAT([] { (void)placements_from_json(json::parse(R"("S0,R")"), "plan.json", "p"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("field 'p': expected an array")));
  EXPECT_EQ(placements_from_json(json::parse(R"(["S0","Pmax"])")),
            (std::vector<Placement>{Shard{0}, Partial{ReduceOp::kMax}}));
}

TEST(ShardSpecJsonHostile, MalformedDocumentsNameTheField) {
  const char* mesh = R"("mesh":{"shape":[2]})";
  auto doc = [&](const std::string& fields) { return "{" + fields + "," + mesh + "}"; };
  test::expect_errors(
      shard_spec_reader(),
      {
          {R"([])", {"shard spec: field '<document>': expected a JSON object, got array"}},
          {doc(R"("placements":["S0"])"), {"shard spec: field 'shape': missing (required)"}},
          {R"({"shape":[4],"placements":["S0"]})", {"field 'mesh': missing (required)"}},
          {doc(R"("shape":[4])"), {"field 'placements': missing (required)"}},
          {doc(R"("shape":"4","placements":["S0"])"), {"field 'shape': expected an array"}},
          {doc(R"("shape":[4,-6],"placements":["S0"])"),
           {"field 'shape': element 1: expected an integer >= 0, got -6"}},
          {doc(R"("shape":[4.0],"placements":["S0"])"), {"field 'shape': element 0", "got 4.0"}},
          {doc(R"("shape":[9223372036854775808],"placements":["S0"])"),
           {"field 'shape': element 0"}},
          {doc(R"("shape":[9223372036854775807,9223372036854775807],"placements":["R"])"),
           {"shard spec: shape [9223372036854775807, 9223372036854775807] has more elements than "
            "int64 can count"}},
          {doc(R"("shape":[4],"strides":[-1],"placements":["S0"])"),
           {"field 'strides': element 0: expected an integer >= 0, got -1"}},
          {doc(R"("shape":[4],"strides":[1,1],"placements":["S0"])"),
           {"shard spec: strides [1, 1] have 2 entries for shape [4]"}},
          {doc(R"("shape":[4],"dtype":16,"placements":["S0"])"),
           {"field 'dtype': expected a string, got 16"}},
          {doc(R"("shape":[4],"dtype":"float17","placements":["S0"])"),
           {"field 'dtype': unknown dtype 'float17'"}},
          {R"({"shape":[4],"mesh":[2],"placements":["S0"]})",
           {"field 'mesh': expected a JSON object, got array"}},
          {R"({"shape":[4],"mesh":{"shape":[0]},"placements":["S0"]})",
           {"shard spec: field 'mesh.shape': element 0: expected an integer >= 1, got 0"}},
          {R"({"shape":[4],"mesh":{"shape":[2],"bogus":1},"placements":["S0"]})",
           {"shard spec: field 'mesh.bogus': unknown key"}},
          {R"({"shape":[4],"mesh":{"shape":[2],"ranks":[1,1]},"placements":["S0"]})",
           {"shard spec: field 'mesh': mesh rank list: rank 1 appears"}},
          {doc(R"("shape":[4],"placements":"S0")"),
           {"field 'placements': expected an array of placements"}},
          {doc(R"("shape":[4],"placements":[0])"),
           {"field 'placements[0]': expected a placement string such as \"S0\", got 0"}},
          {doc(R"("shape":[4],"placements":["S"])"),
           {"field 'placements[0]': placement 'S' is not valid"}},
          {doc(R"("shape":[4],"placements":["S0","R"])"),
           {"shard spec: placements [S0,R] have 2 entries for a 1-d mesh"}},
          {doc(R"("shape":[4],"placements":["S5"])"), {"shards tensor dim 5"}},
          {doc(R"("shape":[4],"placements":["S0"],"placement":["S0"])"),
           {"shard spec: field 'placement': unknown key"}},
      });
  // The default origin through nlohmann's get<>, and a named origin with a path.
  EXPECT_THAT([] { (void)json::parse(R"({"shape":[4]})").get<ShardSpec>(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("shard spec: field 'mesh': missing")));
  EXPECT_THAT(
      [] {
        (void)shard_spec_from_json(json::parse(R"({"shape":[4],"mesh":{"shape":[2.5]}})"),
                                   "plan.json", "tensors[3]");
      },
      ::testing::ThrowsMessage<Error>(HasSubstr(
          "plan.json: field 'tensors[3].mesh.shape': element 0: expected an integer >= 1")));
  EXPECT_THAT([] { (void)json::parse(R"({"shape":"2"})").get<DeviceMesh>(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("device mesh: field 'shape'")));
  EXPECT_THAT([] { (void)json(3).get<Placement>(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("placement: expected a placement string")));
}

TEST(BoundaryRedistributionJsonHostile, MalformedDocumentsNameTheField) {
  auto with = [](const char* key, const json& v) {
    json j = boundary_reader().valid;
    j[key] = v;
    return j.dump();
  };
  auto without = [](const char* key) {
    json j = boundary_reader().valid;
    j.erase(key);
    return j.dump();
  };
  test::expect_errors(
      boundary_reader(),
      {
          {R"("x")", {"boundary redistribution: field '<document>': expected a JSON object"}},
          {without("module"), {"boundary redistribution: field 'module': missing (required)"}},
          {without("to"), {"field 'to': missing (required)"}},
          {without("dtype"), {"field 'dtype': missing (required)"}},
          {with("module", 5), {"field 'module': expected a string, got 5"}},
          {with("role", nullptr), {"field 'role': expected a string, got null"}},
          {with("role", "middle"),
           {"field 'role': unknown boundary role 'middle', expected one of: input, output"}},
          {with("from", "S0,P"), {"field 'from': expected an array of placements"}},
          {with("from", json::array({"S0", 1})), {"field 'from[1]': expected a placement string"}},
          {with("to", json::array({"S0"})),
           {"field 'to': 1 placements, expected 2 (one per mesh dim, as 'from' has)"}},
          {with("to", json::array({"S0", "Q"})), {"field 'to[1]': placement 'Q' is not valid"}},
          {with("shape", json::array({2, -16})),
           {"field 'shape': element 1: expected an integer >= 0, got -16"}},
          {with("shape", json::array({2, 16.5})), {"field 'shape': element 1", "got 16.5"}},
          {with("shape", json::object()), {"field 'shape': expected an array of integers"}},
          {with("dtype", json::array()), {"field 'dtype': expected a string, got []"}},
          {with("dtype", "bfloat17"), {"field 'dtype': unknown dtype 'bfloat17'"}},
          {with("fqn", "m"), {"field 'fqn': unknown key"}},
      });
}

// ---- every field, every kind of value; then random mutations

TEST(MeshJsonReadersHostile, EveryFieldTakesEveryKindOfValue) {
  for (const Reader& r :
       {mesh_reader(R"({"shape":[2,4],"dim_names":["dp","tp"]})"),
        mesh_reader(R"({"shape":[2,3],"offset":3,"strides":[12,4],"dim_names":["a","b"]})"),
        mesh_reader(R"({"shape":[3],"ranks":[2,0,1]})"), placement_reader(), shard_spec_reader(),
        boundary_reader()}) {
    test::sweep_fields(r);
  }
}

TEST(MeshJsonReadersHostile, RandomlyMutatedDocumentsThrowOnlyShardplanErrors) {
  uint32_t seed = 20240601;
  for (const Reader& r : {mesh_reader(R"({"shape":[2,4],"dim_names":["dp","tp"]})"),
                          mesh_reader(R"({"shape":[2,3],"offset":3,"strides":[12,4]})"),
                          mesh_reader(R"({"shape":[3],"ranks":[2,0,1]})"), placement_reader(),
                          shard_spec_reader(), boundary_reader()}) {
    const int refused = test::fuzz(r, 300, seed++);
    EXPECT_GT(refused, 30) << r.name << ": the mutations should break most documents";
  }
}

}  // namespace
}  // namespace shardplan::mesh
