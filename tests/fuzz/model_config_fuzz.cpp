// fuzz_model_config: a Hugging Face config.json, parsed as load_model_config does (strict JSON,
// then parse_model_config; tensor/models/model_config.h). A config that parses must round-trip
// through to_hf_json, and a small one (few layers and experts; sizes cost nothing on meta) must
// build, count its parameters and trace a short forward.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strict_json.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::tensor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ModelConfig c;
  if (!fuzz::run([&] {
        // What load_model_config passes (kMaxDepth there).
        const nlohmann::json j = parse_strict_json(fuzz::as_text(data, size), "config.json", 16,
                                                   "a Hugging Face config.json");
        c = parse_model_config(j, "config.json");
      })) {
    return 0;
  }
  std::ostringstream os;
  os << c;
  // to_hf_json is documented to read back to an equal config, also through its text.
  const nlohmann::json hf = to_hf_json(c);
  ModelConfig back;
  FUZZ_CHECK(fuzz::run([&] {
    back = parse_model_config(parse_strict_json(hf.dump(), "to_hf_json", 16, "a config"), "back");
  }));
  // A multimodal file reads back as its language model alone (to_hf_json does not write the
  // wrapper's model_type: Note [Multimodal configs] in tensor/models/model_config.cpp).
  ModelConfig text = c;
  text.multimodal_model_type.clear();
  FUZZ_CHECK(back == text);

  // Building costs one Module per layer and expert, whatever the sizes: keep it small.
  const int64_t layers_x_hidden =
      c.num_hidden_layers <= 4 ? c.num_hidden_layers * std::min<int64_t>(c.hidden_size, 1 << 20)
                               : INT64_MAX;
  if (c.num_hidden_layers > 4 || c.num_local_experts > 8 || layers_x_hidden > (1 << 22)) return 0;
  fuzz::run([&] {
    ModulePtr model = build_model(c);
    (void)model->parameters_numel();
    (void)parameters_by_kind(*model);
    (void)trace_model_forward(*model, 1, 8);
  });
  return 0;
}
