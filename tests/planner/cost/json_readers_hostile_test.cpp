// The planner's JSON readers (planner/cost/model_state_memory.h) refuse malformed documents with a
// named field and never let a library exception escape (harness:
// tests/tensor/json_hostile_support.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "planner/cost/model_state_memory.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::planner {
namespace {

using nlohmann::json;
using ::shardplan::test::Reader;

Reader mixed_precision_reader() {
  return {"mixed precision", [](const json& j) { (void)j.get<MixedPrecision>(); },
          json(MixedPrecision::adam_bf16_fp32_grads())};
}
Reader memory_reader() {
  return {"model state memory", [](const json& j) { (void)j.get<ModelStateMemory>(); },
          json(model_state_memory(7'000'000'000, MixedPrecision{}, 2, 8))};
}

TEST(PlannerJsonReaders, RoundTripThroughTheFieldReader) {
  EXPECT_EQ(json(MixedPrecision::adam_fp32()).get<MixedPrecision>(), MixedPrecision::adam_fp32());
  // Beyond int64: the uint64 counts of ModelStateMemory still read back.
  ModelStateMemory m;
  m.num_params = uint64_t{1} << 63;
  m.param_bytes = uint64_t{1} << 63;
  EXPECT_EQ(json(m).get<ModelStateMemory>(), m);
}

TEST(PlannerJsonReadersHostile, MalformedDocumentsNameTheField) {
  auto set = [](json j, const char* pointer, const json& v) {
    j[json::json_pointer(pointer)] = v;
    return j.dump();
  };
  test::expect_errors(
      mixed_precision_reader(),
      {
          {R"([2,2,4,8])", {"mixed precision: field '<document>': expected a JSON object"}},
          {R"({"param_bytes":2,"grad_bytes":2,"master_bytes":4})",
           {"mixed precision: field 'optimizer_state_bytes': missing (required)"}},
          {set(json(MixedPrecision{}), "/grad_bytes", -2),
           {"field 'grad_bytes': expected an integer >= 0, got -2"}},
          {set(json(MixedPrecision{}), "/param_bytes", 2.5), {"field 'param_bytes'", "got 2.5"}},
          {set(json(MixedPrecision{}), "/fp8", true), {"field 'fp8': unknown key"}},
      });
  const json mem = memory_reader().valid;
  test::expect_errors(
      memory_reader(),
      {
          {set(mem, "/zero_stage", 4),
           {"field 'zero_stage': expected an integer in [0, 3], got 4"}},
          {set(mem, "/dp", 0), {"field 'dp': expected an integer >= 1, got 0"}},
          {set(mem, "/num_params", -1), {"field 'num_params': expected an integer >= 0, got -1"}},
          {set(mem, "/param_bytes", "7"), {"field 'param_bytes'", "got \"7\""}},
          {set(mem, "/total_bytes", 1),
           {"field 'total_bytes': 1, expected param_bytes + grad_bytes + optimizer_bytes = "}},
          {R"({"num_params":1,"zero_stage":0,"dp":1,"param_bytes":18446744073709551615,
               "grad_bytes":1,"optimizer_bytes":0,"total_bytes":0})",
           {"field 'total_bytes'", "more than uint64 holds"}},
      });
}

TEST(PlannerJsonReadersHostile, EveryFieldTakesEveryKindOfValue) {
  for (const Reader& r : {mixed_precision_reader(), memory_reader()}) test::sweep_fields(r);
}

TEST(PlannerJsonReadersHostile, RandomlyMutatedDocumentsThrowOnlyShardplanErrors) {
  uint32_t seed = 4242;
  for (const Reader& r : {mixed_precision_reader(), memory_reader()}) {
    const int refused = test::fuzz(r, 300, seed++);
    EXPECT_GT(refused, 30) << r.name << ": the mutations should break most documents";
  }
}

}  // namespace
}  // namespace shardplan::planner
