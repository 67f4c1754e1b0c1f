// The tensor layer's JSON readers under hostile input (json_hostile_support.h): every malformed
// document is a shardplan::Error naming the field, never a library exception.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tensor/describe.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/training.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::tensor {
namespace {

using nlohmann::json;
using test::Reader;
using ::testing::HasSubstr;

StepTotals step_totals() {
  StepTotals t;
  t.ops = 120;
  t.forward_flops = 1.5e12;
  t.forward_matmul_flops = 1.25e12;
  t.backward_flops = 3e12;
  t.backward_matmul_flops = 2.5e12;
  t.recompute_flops = 0.5;
  t.forward_bytes = 1 << 20;
  t.backward_bytes = 2 << 20;
  t.parameters = 124'000'000;
  t.activation_bytes = 3 << 20;
  t.activation_bytes_outside_blocks = 1024;
  t.peak_activation_bytes = 5 << 20;
  return t;
}

Checkpoint checkpoint() {
  Checkpoint ck;
  ck.source = "model.safetensors.index.json";
  CheckpointFile f;
  f.path = "model-00001-of-00001.safetensors";
  f.header.header_bytes = 128;
  f.header.data_bytes = 48;
  f.header.metadata = {{"format", "pt"}};
  ck.files.push_back(f);
  CheckpointTensor w;
  w.name = "lm_head.weight";
  w.dtype = DType::kBFloat16;
  w.shape = {4, 6};
  w.strides = {6, 1};
  w.file = 0;
  w.offset = 136;
  w.nbytes = 48;
  ck.tensors.push_back(w);
  ck.index_metadata = json::parse(R"({"total_size": 48})");
  return ck;
}

CheckpointReport report() {
  CheckpointReport r;
  r.missing = {"model.norm.weight"};
  r.unexpected = {"rotary.inv_freq"};
  r.shape_mismatches.push_back(
      {"embed.weight", {32000, 64}, {32001, 64}, DType::kBFloat16, DType::kBFloat16});
  r.dtype_mismatches.push_back(
      {"lm_head.weight", {64, 32000}, {64, 32000}, DType::kFloat32, DType::kBFloat16});
  r.tied_omitted = {"lm_head.weight"};
  r.stripped_prefix = "transformer.";
  r.matched = 7;
  return r;
}

Reader totals_reader() {
  return {"step totals", [](const json& j) { (void)j.get<StepTotals>(); }, json(step_totals())};
}
Reader checkpoint_reader() {
  return {"checkpoint", [](const json& j) { (void)j.get<Checkpoint>(); }, json(checkpoint()),
          /*free_keys=*/{"files[0].metadata"},
          /*any_value=*/{"index_metadata"}};
}
Reader report_reader() {
  return {"checkpoint report", [](const json& j) { (void)j.get<CheckpointReport>(); },
          json(report())};
}

// How many failures `f` reports that say a library exception escaped (counted, not reported).
int escaped_failures(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    const ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  int n = 0;
  for (int i = 0; i < results.size(); ++i) {
    n += std::string(results.GetTestPartResult(i).message()).find("escaped instead of") !=
         std::string::npos;
  }
  return n;
}

// The harness itself: a reader built on nlohmann's get<>(), as the readers were, is caught.
TEST(JsonHostileHarness, CatchesLibraryExceptions) {
  const Reader raw{"raw get",
                   [](const json& j) { (void)j.at("shape").get<std::vector<int64_t>>(); },
                   json::parse(R"({"shape":[2,4]})")};
  EXPECT_GT(escaped_failures([&] { (void)test::fuzz(raw, 50, 1); }), 5);
  EXPECT_GT(escaped_failures([&] { test::sweep_fields(raw); }), 5);
}

TEST(TensorJsonReaders, RoundTripThroughTheFieldReader) {
  EXPECT_EQ(json(step_totals()).get<StepTotals>(), step_totals());
  const Checkpoint back = json(checkpoint()).get<Checkpoint>();
  EXPECT_EQ(back, checkpoint());
  EXPECT_EQ(json(report()).get<CheckpointReport>(), report());
}

TEST(TensorJsonReadersHostile, MalformedDocumentsNameTheField) {
  auto set = [](json j, const char* pointer, const json& v) {
    j[json::json_pointer(pointer)] = v;
    return j.dump();
  };
  const json totals = totals_reader().valid;
  test::expect_errors(
      totals_reader(),
      {
          {set(totals, "/ops", -1), {"step totals: field 'ops': expected an integer >= 0, got -1"}},
          {set(totals, "/forward_flops", "many"), {"field 'forward_flops': expected a number"}},
          {set(totals, "/peak_activation_bytes", 1.5), {"field 'peak_activation_bytes'"}},
          {set(totals, "/model_flops", 1.0), {"field 'model_flops': unknown key"}},
      });
  const json ck = checkpoint_reader().valid;
  test::expect_errors(
      checkpoint_reader(),
      {
          {set(ck, "/files", json::object()), {"checkpoint: field 'files': expected an array"}},
          {set(ck, "/files/0", "x.safetensors"),
           {"checkpoint: field 'files[0]': expected a JSON object, got string"}},
          {set(ck, "/files/0/header_bytes", -8),
           {"field 'files[0].header_bytes': expected an integer >= 0, got -8"}},
          {set(ck, "/files/0/metadata/format", 1),
           {"field 'files[0].metadata.format': expected a string, got 1"}},
          {set(ck, "/tensors/0/dtype", "F33"), {"field 'tensors[0].dtype': dtype \"F33\""}},
          {set(ck, "/tensors/0/shape", json::array({4, -6})),
           {"field 'tensors[0].shape': element 1: expected an integer >= 0, got -6"}},
          {set(ck, "/tensors/0/file", 1),
           {"field 'tensors[0].file': 1, expected an index into files (1 of them)"}},
          {set(ck, "/tensors/0/offset", json::parse("1e19")), {"field 'tensors[0].offset'"}},
          {set(ck, "/tensors/0/name", nullptr), {"field 'tensors[0].name': expected a string"}},
          {set(ck, "/tensors/0/numel", 24), {"field 'tensors[0].numel': unknown key"}},
      });
  const json rep = report_reader().valid;
  test::expect_errors(
      report_reader(),
      {
          {set(rep, "/missing", "model.norm.weight"),
           {"checkpoint report: field 'missing': expected an array of strings"}},
          {set(rep, "/unexpected/0", 3), {"field 'unexpected': element 0: expected a string"}},
          {set(rep, "/shape_mismatches/0/expected_dtype", "bf17"),
           {"field 'shape_mismatches[0].expected_dtype': unknown dtype 'bf17'"}},
          {set(rep, "/dtype_mismatches/0", json::array()),
           {"field 'dtype_mismatches[0]': expected a JSON object, got array"}},
          {set(rep, "/loadable", true),
           {"field 'loadable': true, expected what missing, unexpected and shape_mismatches say: "
            "false"}},
          {set(rep, "/matched", 1.0), {"field 'matched'"}},
      });
}

TEST(TensorJsonReadersHostile, EveryFieldTakesEveryKindOfValue) {
  for (const Reader& r : {totals_reader(), checkpoint_reader(), report_reader()}) {
    test::sweep_fields(r);
  }
}

TEST(TensorJsonReadersHostile, RandomlyMutatedDocumentsThrowOnlyShardplanErrors) {
  // load_description validates by hand (its messages name the entry, not "field '...'"), so it is
  // fuzzed here but not swept.
  Tensor w = empty({4, 6});
  const Reader description{"tensor description", [](const json& j) { (void)load_description(j); },
                           describe({{"w", w}, {"w.T", t(w)}})};
  uint32_t seed = 4242;
  for (const Reader& r : {totals_reader(), checkpoint_reader(), report_reader(), description}) {
    const int refused = test::fuzz(r, 300, seed++);
    EXPECT_GT(refused, 30) << r.name << ": the mutations should break most documents";
  }
}

}  // namespace
}  // namespace shardplan::tensor
