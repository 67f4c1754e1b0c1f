// The inspect reports as data (planner/reports/model_report.h,
// planner/reports/checkpoint_report.h), against published parameter counts and counts worked out by
// hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "base/error.h"
#include "planner/reports/checkpoint_report.h"
#include "planner/reports/model_report.h"

namespace shardplan::planner {
namespace {

const std::string kData = SHARDPLAN_TEST_DATA_DIR;

TEST(ModelReport, Gpt2DefaultsToItsOwnPositions) {
  const nlohmann::ordered_json r = model_report({"gpt2", std::nullopt, 1});
  // GPT-2 small: 124,439,808 parameters (Hugging Face's count, lm_head tied to wte).
  EXPECT_EQ(r["parameters"].get<int64_t>(), 124'439'808);
  // No --seq: n_positions 1024 (below the 4096 cap), and the report says so.
  EXPECT_EQ(r["seq"].get<int64_t>(), 1024);
  EXPECT_TRUE(r["seq_is_default"].get<bool>());
  EXPECT_THAT(r["notes"][0].get<std::string>(), ::testing::HasSubstr("seq 1024 by default"));
}

TEST(ModelReport, LongContextModelsAreCappedAndAnExplicitSeqIsKept) {
  // Llama 3 8B has 8192 positions: the default is capped at 4096.
  EXPECT_EQ(model_report({"llama3-8b", std::nullopt, 1})["seq"].get<int64_t>(), kDefaultSeqCap);
  const nlohmann::ordered_json r = model_report({"gpt2", 128, 2});
  EXPECT_EQ(r["seq"].get<int64_t>(), 128);
  EXPECT_FALSE(r["seq_is_default"].get<bool>());
  EXPECT_EQ(r["batch"].get<int64_t>(), 2);
}

// The module table shows the first layer of each layer kind, counted as the layers of its kind:
// Qwen3-Next's 36 linear-attention layers (first: 0) and 12 full-attention layers (first: 3);
// DeepSeek-V3's 3 dense and 58 MoE layers. Their parameters times the counts make the model's.
TEST(ModelReport, ModuleTableHasALayerPerKind) {
  struct Want {
    const char* model;
    std::map<std::string, int64_t> counts;
  };
  for (const Want& w : {Want{"qwen3-next-80b-a3b",
                             {{"model.layers.0", 36},
                              {"model.layers.0.linear_attn", 36},
                              {"model.layers.3", 12},
                              {"model.layers.3.self_attn", 12}}},
                        Want{"deepseek-v3", {{"model.layers.0", 3}, {"model.layers.3", 58}}},
                        Want{"llama3-8b", {{"model.layers.0", 32}}}}) {
    SCOPED_TRACE(w.model);
    const nlohmann::ordered_json r = model_report({w.model, 16, 1});
    std::map<std::string, int64_t> counts;
    int64_t layer_parameters = 0, others = 0;
    for (const auto& row : r["modules"]) {
      const std::string m = row["module"];
      const int64_t n = row["count"], p = row["parameters"];
      if (w.counts.contains(m)) counts[m] = n;
      // Whole layers (model.layers.N) and the modules outside the layers, root and backbone apart.
      if (m.starts_with("model.layers.") && m.find('.', 13) == std::string::npos) {
        layer_parameters += n * p;
      } else if (m != "(model)" && m != "model" && !m.starts_with("model.layers.")) {
        others += p;
      }
    }
    EXPECT_EQ(counts, w.counts);
    EXPECT_EQ(layer_parameters + others, r["parameters"].get<int64_t>());
  }
}

TEST(ModelReport, BadOptionsAreBadInput) {
  EXPECT_THAT(
      [] {
        model_report({"gpt2", 2048, 1});
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("n_positions 1024")));
  EXPECT_THROW(model_report({"gpt2", 0, 1}), Error);
  EXPECT_THROW(model_report({"gpt2", 16, 0}), Error);
}

TEST(CheckpointReport, TinyLlamaFitsItsConfig) {
  const std::string dir = kData + "/safetensors/tiny-llama";
  const CheckpointReport report =
      checkpoint_report(dir + "/model.safetensors", dir + "/config.json");
  const nlohmann::ordered_json& r = report.summary;
  // vocab 32, hidden 16, ffn 24, 2 layers, 4 heads of 4, 2 kv heads: embed 32*16 = 512; per layer
  // q 256 + k 128 + v 128 + o 256 + mlp 3*16*24 = 1152 + 2 norms of 16 = 1952; final norm 16;
  // lm_head 512. 512 + 2*1952 + 16 + 512 = 4944 elements in 1 + 2*9 + 1 + 1 = 21 tensors, bf16.
  EXPECT_EQ(r["parameters"].get<int64_t>(), 4944);
  EXPECT_EQ(r["tensor_count"].get<int64_t>(), 21);
  EXPECT_EQ(r["bytes"].get<int64_t>(), 2 * 4944);
  EXPECT_EQ(r["by_dtype"]["BF16"]["parameters"].get<int64_t>(), 4944);
  EXPECT_TRUE(r["check"]["loadable"].get<bool>());
  // The streamed document (Note [Checkpoint rows one at a time]) is one JSON value with the
  // summary's keys, "tensors" after "files", and a row per tensor in name order.
  std::ostringstream os;
  report.write_json(os);
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(os.str());
  std::vector<std::string> keys;
  for (const auto& [k, v] : doc.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"checkpoint", "files", "tensors", "tensor_count",
                                            "parameters", "bytes", "by_dtype", "check"}));
  ASSERT_EQ(doc["tensors"].size(), 21u);
  EXPECT_EQ(doc["tensors"][0]["name"], "lm_head.weight");
  EXPECT_EQ(doc["tensors"][0]["shape"], nlohmann::json::parse("[32, 16]"));
  EXPECT_EQ(doc["tensors"][0]["dtype"], "BF16");
  EXPECT_EQ(doc["tensors"][0]["nbytes"], 2 * 32 * 16);
  EXPECT_EQ(doc["tensors"][0], report.tensor_row(0));
  EXPECT_EQ(doc["check"], r["check"]);
}

TEST(CheckpointReport, WithoutACheckpointIsBadInput) {
  EXPECT_THROW(checkpoint_report("", "gpt2"), Error);
}

}  // namespace
}  // namespace shardplan::planner
