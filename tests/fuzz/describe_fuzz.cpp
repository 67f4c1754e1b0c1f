// fuzz_describe: a tensor description (configs/examples/*.description.json), loaded as meta tensors
// by load_description_string (tensor/describe.h). Tensors that load must summarize, and describing
// them must give a document that loads back to the same description.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "tensor/describe.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::tensor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NamedTensors named;
  // Meta storages only (the default map_location): a description's nbytes are never allocated.
  if (!fuzz::run([&] { named = load_description_string(fuzz::as_text(data, size), "fuzz.json"); })) {
    return 0;
  }
  fuzz::run([&] { (void)summarize(named); });
  nlohmann::json d;
  FUZZ_CHECK(fuzz::run([&] { d = describe(named); }));
  NamedTensors back;
  FUZZ_CHECK(fuzz::run([&] { back = load_description_string(d.dump(), "describe"); }));
  FUZZ_CHECK(back.size() == named.size());
  FUZZ_CHECK(describe(back) == d);
  FUZZ_CHECK(describe_to_string(back) == describe_to_string(named));
  return 0;
}
