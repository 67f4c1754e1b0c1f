// Every small config of tests/data/hf_families/configs against what transformers 5.17 builds on the
// meta device (hf_params.json, written by scripts/gen_hf_families_oracle.py): the parameter total
// (model.parameters(), tied weights once) and the parameter names and shapes, in order, for each
// family shardplan builds.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/models/family.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::tensor {
namespace {

const std::string kDir = std::string(SHARDPLAN_TEST_DATA_DIR) + "/hf_families";

nlohmann::json oracle() {
  std::ifstream in(kDir + "/hf_params.json");
  return nlohmann::json::parse(in)["models"];
}

// The oracle's configs of the families shardplan builds (a family not built yet is skipped; the
// checks/models-2026 acceptance check names those).
std::vector<std::string> built_configs() {
  std::vector<std::string> out;
  const nlohmann::json all = oracle();
  for (auto it = all.begin(); it != all.end(); ++it) {
    std::ifstream in(kDir + "/configs/" + it.key() + ".json");
    const std::string type = nlohmann::json::parse(in).at("model_type").get<std::string>();
    if (find_family(type) != nullptr) out.push_back(it.key());
  }
  return out;
}

TEST(HfFamilies, TotalsEqualTransformersForEveryBuiltFamily) {
  int checked = 0;
  const nlohmann::json all = oracle();
  for (const std::string& name : built_configs()) {
    const nlohmann::json& want = all.at(name);
    SCOPED_TRACE(name);
    const ModelConfig c = load_model_config(kDir + "/configs/" + name + ".json");
    int64_t total = 0;
    for (const NamedTensor& p : build_model(c)->named_parameters()) total += p.tensor.numel();
    EXPECT_EQ(total, want["total"].get<int64_t>());
    ++checked;
  }
  EXPECT_GE(checked, 4);  // mixtral, qwen2_moe, qwen3, qwen3_moe at least
}

TEST(HfFamilies, NamesAndShapesEqualTransformers) {
  const nlohmann::json want = oracle();
  for (const std::string& name : built_configs()) {
    SCOPED_TRACE(name);
    const ModelConfig c = load_model_config(kDir + "/configs/" + name + ".json");
    std::vector<std::pair<std::string, std::vector<int64_t>>> got;
    for (const NamedTensor& p : build_model(c)->named_parameters()) {
      got.emplace_back(p.name,
                       std::vector<int64_t>(p.tensor.sizes().begin(), p.tensor.sizes().end()));
    }
    const nlohmann::json& params = want.at(name).at("params");
    ASSERT_EQ(got.size(), params.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, params[i][0].get<std::string>());
      EXPECT_EQ(got[i].second, params[i][1].get<std::vector<int64_t>>()) << got[i].first;
    }
  }
}

}  // namespace
}  // namespace shardplan::tensor
