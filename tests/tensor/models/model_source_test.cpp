// `--model` named by a checkpoint (tensor/models/model_source.h), on the fixtures that
// scripts/gen_safetensors_fixtures.py writes with Hugging Face's names and shapes: a tiny Llama
// (vocab 32, hidden 16, intermediate 24, 2 layers, 4 heads of 4, 2 kv heads, untied, bf16).
#include "tensor/models/model_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

const fs::path kData = fs::path(SHARDPLAN_TEST_DATA_DIR) / "safetensors";

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// By hand: embed 32*16; per layer q 16*16, k and v 8*16 each, o 16*16, gate/up/down 16*24 each,
// two norms of 16; final norm 16; lm_head 32*16.
constexpr int64_t kTinyLlamaParams =
    32 * 16 + 2 * (16 * 16 + 2 * 8 * 16 + 16 * 16 + 3 * 16 * 24 + 2 * 16) + 16 + 32 * 16;
static_assert(kTinyLlamaParams == 4944);

TEST(ModelSource, NamesACheckpoint) {
  EXPECT_TRUE(names_a_checkpoint("x/model.safetensors"));
  EXPECT_TRUE(names_a_checkpoint("model.safetensors.index.json"));
  EXPECT_TRUE(names_a_checkpoint((kData / "tiny-llama").string()));  // a folder
  EXPECT_FALSE(names_a_checkpoint("llama3-70b"));
  EXPECT_FALSE(names_a_checkpoint("x/config.json"));
  EXPECT_FALSE(names_a_checkpoint("no/such/folder"));
}

TEST(ModelSource, ConfigNameOrPathHasNoCheckpoint) {
  const ModelSource s = find_model_source("gpt2");
  EXPECT_EQ(s.config_path.filename(), "gpt2.json");
  EXPECT_EQ(s.config.hidden_size, 768);
  EXPECT_FALSE(s.checkpoint.has_value());
  const ModelSource p = find_model_source((kData / "tiny-llama" / "config.json").string());
  EXPECT_EQ(p.config.num_key_value_heads, 2);
  EXPECT_FALSE(p.checkpoint.has_value());
}

TEST(ModelSource, CheckpointFileOrFolderBuildsFromTheConfigBesideIt) {
  for (const fs::path& p : {kData / "tiny-llama" / "model.safetensors", kData / "tiny-llama"}) {
    const ModelSource s = find_model_source(p.string());
    EXPECT_EQ(s.config_path, kData / "tiny-llama" / "config.json") << p;
    ASSERT_TRUE(s.checkpoint.has_value()) << p;
    EXPECT_EQ(s.checkpoint->tensors.size(), 3u + 2 * 9);  // embed, norm, lm_head + 9 per layer
    EXPECT_EQ(s.checkpoint->numel(), kTinyLlamaParams);
    EXPECT_EQ(s.checkpoint->nbytes(), 2 * kTinyLlamaParams);  // bf16
    EXPECT_EQ(build_model(s.config)->parameters_numel(), kTinyLlamaParams);
  }
}

TEST(ModelSource, CheckpointThatDoesNotFitItsConfigIsRefusedByName) {
  const fs::path index = kData / "tiny-llama-bad" / "model.safetensors.index.json";
  // lm_head.weight missing (first in name order), an unexpected inv_freq, a mis-shaped q_proj.
  EXPECT_THAT(error_of([&] { find_model_source(index.string()); }),
              AllOf(HasSubstr(index.string()), HasSubstr("config.json"),
                    HasSubstr("'lm_head.weight' of the model is missing"),
                    HasSubstr("and 2 more findings")));
}

TEST(ModelSource, CheckpointWithoutConfigIsRefused) {
  const fs::path file = kData / "tiny.safetensors";
  EXPECT_THAT(error_of([&] { find_model_source(file.string()); }),
              AllOf(HasSubstr(file.string()), HasSubstr((kData / "config.json").string()),
                    HasSubstr("does not exist")));
  EXPECT_THAT(error_of([&] { find_model_source("no/such/model.safetensors"); }),
              HasSubstr("checkpoint 'no/such/model.safetensors' does not exist"));
}

TEST(ModelSource, HostileCheckpointIsReportedBeforeLookingForAConfig) {
  const fs::path file = kData / "hostile" / "overlap.safetensors";
  EXPECT_THAT(error_of([&] { find_model_source(file.string()); }),
              AllOf(HasSubstr(file.string()), HasSubstr("tensor \"b\""), HasSubstr("overlap")));
}

// A DeepSeek-V3 folder as the Hub publishes it (Note [Quantized checkpoints] in
// tensor/safetensors_check.cpp), on the tiny config of tests/data/hf_families: the routed experts
// stored one by one, every matrix of a Linear in float8_e4m3fn with its block scales beside it
// ("<weight>_scale_inv", [ceil(out / 128), ceil(in / 128)]), and the multi-token prediction layer
// after the last one (model.layers.4.*, num_nextn_predict_layers 1), which transformers skips.
class PublishedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardplan_published_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes config.json (the tiny config with `quant` and `mtp`) and model.safetensors; returns how
  // many scale tensors it wrote.
  int64_t write(const std::string& quant, int64_t mtp, const std::string& scale = "_scale_inv") {
    std::ifstream in(fs::path(SHARDPLAN_TEST_DATA_DIR) / "hf_families" / "configs" /
                     "tiny-deepseek-v3.json");
    nlohmann::json cfg = nlohmann::json::parse(in);
    cfg["num_nextn_predict_layers"] = mtp;
    cfg["quantization_config"] = {{"quant_method", quant}, {"weight_block_size", {128, 128}}};
    std::ofstream(dir_ / "config.json") << cfg.dump(1);

    cfg.erase("quantization_config");
    const ModulePtr model = build_model(parse_model_config(cfg, "tiny deepseek"));
    std::vector<NamedTensor> all = model->named_parameters();
    for (NamedTensor& b : model->named_buffers({.persistent_only = true})) all.push_back(b);
    std::vector<test::StEntry> e;
    int64_t scales = 0;
    auto matrix = [&](const std::string& name, int64_t out, int64_t in) {
      e.push_back({name, "F8_E4M3", {out, in}});
      e.push_back({name + scale, "F32", {(out + 127) / 128, (in + 127) / 128}});
      ++scales;
    };
    for (const NamedTensor& t : all) {
      const std::vector<int64_t> shape(t.tensor.sizes().begin(), t.tensor.sizes().end());
      const std::string& n = t.name;
      if (n.ends_with(".experts.gate_up_proj") || n.ends_with(".experts.down_proj")) {
        const std::string stem = n.substr(0, n.rfind('.') + 1);  // "...mlp.experts."
        for (int64_t x = 0; x < shape[0]; ++x) {
          const std::string ex = stem + std::to_string(x) + ".";
          if (n.ends_with("down_proj")) {
            matrix(ex + "down_proj.weight", shape[1], shape[2]);
          } else {
            matrix(ex + "gate_proj.weight", shape[1] / 2, shape[2]);
            matrix(ex + "up_proj.weight", shape[1] / 2, shape[2]);
          }
        }
      } else if (shape.size() == 2 && n.ends_with("proj.weight")) {
        matrix(n, shape[0], shape[1]);
      } else {
        e.push_back({n, t.tensor.dtype() == DType::kFloat32 ? "F32" : "BF16", shape});
      }
      // transformers' router keeps its score-correction bias as a persistent buffer, in fp32
      // (_keep_in_fp32_modules_strict), beside the gate's weight; shardplan builds none.
      if (n.ends_with(".mlp.gate.weight")) {
        e.push_back({n.substr(0, n.size() - 6) + "e_score_correction_bias", "F32", {shape[0]}});
      }
    }
    // The multi-token prediction layer's own modules (DeepSeek-V3 report, Section 2.2).
    e.push_back({"model.layers.4.enorm.weight", "BF16", {256}});
    e.push_back({"model.layers.4.eh_proj.weight", "F8_E4M3", {256, 512}});
    e.push_back({"model.layers.4.eh_proj.weight_scale_inv", "F32", {2, 4}});
    e.push_back({"model.layers.4.mlp.gate.e_score_correction_bias", "F32", {8}});
    const test::StHeader h = test::make_header(e);
    test::write_bytes(dir_ / "model.safetensors", test::file_bytes(h.json, h.data_bytes));
    return scales;
  }
  fs::path dir_;
};

TEST_F(PublishedCheckpointTest, Fp8WithItsPredictionLayerFitsTheConfig) {
  const int64_t scales = write("fp8", 1);
  const ModelSource src = find_model_source(dir_.string());
  EXPECT_EQ(src.check.quant_method, "fp8");
  EXPECT_EQ(src.check.beyond_model,
            (std::vector<std::string>{
                "model.layers.4.eh_proj.weight", "model.layers.4.eh_proj.weight_scale_inv",
                "model.layers.4.enorm.weight", "model.layers.4.mlp.gate.e_score_correction_bias"}));
  // The MoE layers' router biases: buffers the model does not build, not unexpected (every
  // published DeepSeek-V3 checkpoint has them).
  EXPECT_EQ(src.check.buffers,
            (std::vector<std::string>{"model.layers.1.mlp.gate.e_score_correction_bias",
                                      "model.layers.2.mlp.gate.e_score_correction_bias",
                                      "model.layers.3.mlp.gate.e_score_correction_bias"}));
  EXPECT_EQ(static_cast<int64_t>(src.check.quantization_tensors.size()), scales);
  // Every fp8 matrix is a dtype difference (a warning), one per scale.
  EXPECT_EQ(static_cast<int64_t>(src.check.dtype_mismatches.size()), scales);
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_EQ(src.check.stacked_experts.size(), 6U);  // 3 MoE layers x gate_up and down
}

TEST_F(PublishedCheckpointTest, WithoutTheRulesTheExtraTensorsAreNamed) {
  write("fp8", 0);  // a config without the prediction layer: layer 4 is not the model's
  EXPECT_THAT(error_of([&] { find_model_source(dir_.string()); }),
              HasSubstr("tensor 'model.layers.4.eh_proj.weight' is not in the model"));
  // bitsandbytes' state beside each weight ("weight.absmax") is not matched: unexpected, and the
  // error names the method.
  write("bitsandbytes", 1, ".absmax");
  EXPECT_THAT(error_of([&] { find_model_source(dir_.string()); }),
              AllOf(HasSubstr(".weight.absmax' is not in the model"),
                    HasSubstr("quantized with 'bitsandbytes'; shardplan matches")));
}

}  // namespace
}  // namespace shardplan::tensor
