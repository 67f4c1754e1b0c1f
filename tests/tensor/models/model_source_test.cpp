// `--model` named by a checkpoint (tensor/models/model_source.h), on the fixtures that
// scripts/gen_safetensors_fixtures.py writes with Hugging Face's names and shapes: a tiny Llama
// (vocab 32, hidden 16, intermediate 24, 2 layers, 4 heads of 4, 2 kv heads, untied, bf16).
#include "tensor/models/model_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

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

}  // namespace
}  // namespace shardplan::tensor
