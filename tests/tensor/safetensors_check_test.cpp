// check_checkpoint: a checkpoint header compared by name with a Module tree. Expected findings are
// written out by hand from the module built here (names as PyTorch's state_dict lists them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/module.h"
#include "tensor/safetensors.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using test::StEntry;
using Names = std::vector<std::string>;

// Tiny LM: embed [10, 4], layers.{0,1} Linear(4, 4), norm LayerNorm(4), lm_head Linear(4, 10, no
// bias) tied to embed.weight, a persistent buffer "pos" [6] and a non-persistent one "cache" [3].
// state_dict names: embed.weight, layers.0.weight, layers.0.bias, layers.1.weight, layers.1.bias,
// norm.weight, norm.bias, lm_head.weight (the tie, listed again), pos. Not cache.
ModulePtr tiny_lm() {
  auto root = std::make_shared<Module>("TinyLM");
  root->register_module("embed", std::make_shared<Embedding>(10, 4));
  auto layers = root->register_module("layers", std::make_shared<ModuleList>());
  layers->push_back(std::make_shared<Linear>(4, 4));
  layers->push_back(std::make_shared<Linear>(4, 4));
  root->register_module("norm", std::make_shared<LayerNorm>(DimVector{4}));
  root->register_module("lm_head", std::make_shared<Linear>(4, 10, false));
  root->register_buffer("pos", empty({6}, {.dtype = DType::kInt64}));
  root->register_buffer("cache", empty({3}), /*persistent=*/false);
  tie_parameters(*root, "lm_head.weight", "embed.weight");
  return root;
}

// The checkpoint a correct save of tiny_lm() gives, without the tied lm_head.weight.
std::vector<StEntry> tiny_lm_entries(const std::string& prefix = "") {
  return {{prefix + "embed.weight", "F32", {10, 4}},  {prefix + "layers.0.weight", "F32", {4, 4}},
          {prefix + "layers.0.bias", "F32", {4}},     {prefix + "layers.1.weight", "F32", {4, 4}},
          {prefix + "layers.1.bias", "F32", {4}},     {prefix + "norm.weight", "F32", {4}},
          {prefix + "norm.bias", "F32", {4}},         {prefix + "pos", "I64", {6}}};
}

class CheckCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() /
            ("shardplan_stcheck_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".safetensors");
  }
  void TearDown() override { fs::remove(path_); }
  Checkpoint checkpoint(const std::vector<StEntry>& entries) {
    const test::StHeader h = test::make_header(entries);
    test::write_bytes(path_, test::file_bytes(h.json, h.data_bytes));
    return read_checkpoint(path_);
  }
  fs::path path_;
};

TEST_F(CheckCheckpointTest, TiedHeadOmittedIsNotMissing) {
  const CheckpointReport r = check_checkpoint(checkpoint(tiny_lm_entries()), *tiny_lm());
  EXPECT_TRUE(r.loadable());
  EXPECT_EQ(r.matched, 8);
  EXPECT_EQ(r.tied_omitted, Names{"lm_head.weight"});
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(r.unexpected.empty());
  EXPECT_EQ(r.stripped_prefix, "");
}

TEST_F(CheckCheckpointTest, TiedHeadSavedToo) {
  std::vector<StEntry> e = tiny_lm_entries();
  e.push_back({"lm_head.weight", "F32", {10, 4}});
  const CheckpointReport r = check_checkpoint(checkpoint(e), *tiny_lm());
  EXPECT_TRUE(r.loadable());
  EXPECT_EQ(r.matched, 9);
  EXPECT_TRUE(r.tied_omitted.empty());
}

TEST_F(CheckCheckpointTest, ReportsMissingUnexpectedMisShapedAndMisTyped) {
  std::vector<StEntry> e = tiny_lm_entries();
  e.erase(e.begin() + 6);                      // norm.bias: missing
  e[3].shape = {4, 5};                         // layers.1.weight: mis-shaped
  e[5].dtype = "BF16";                         // norm.weight: mis-typed (a warning)
  e.push_back({"layers.2.weight", "F32", {4, 4}});  // unexpected
  e.push_back({"cache", "F32", {3}});               // non-persistent: not in a state_dict
  const CheckpointReport r = check_checkpoint(checkpoint(e), *tiny_lm());
  EXPECT_FALSE(r.loadable());
  EXPECT_EQ(r.missing, Names{"norm.bias"});
  EXPECT_EQ(r.unexpected, (Names{"cache", "layers.2.weight"}));
  ASSERT_EQ(r.shape_mismatches.size(), 1u);
  EXPECT_EQ(r.shape_mismatches[0],
            (CheckpointReport::Mismatch{"layers.1.weight", {4, 4}, {4, 5}, DType::kFloat32,
                                        DType::kFloat32}));
  ASSERT_EQ(r.dtype_mismatches.size(), 1u);
  EXPECT_EQ(r.dtype_mismatches[0],
            (CheckpointReport::Mismatch{"norm.weight", {4}, {4}, DType::kFloat32,
                                        DType::kBFloat16}));
  // embed, layers.0.{weight,bias}, layers.1.bias, norm.weight (dtype only), pos.
  EXPECT_EQ(r.matched, 6);

  // Report JSON round trip.
  const nlohmann::json j = r;
  EXPECT_EQ(j.get<CheckpointReport>(), r);
  EXPECT_EQ(j["loadable"], false);
  EXPECT_EQ(j["shape_mismatches"][0]["actual_shape"], nlohmann::json::parse("[4, 5]"));
}

TEST_F(CheckCheckpointTest, TieWithNoNamePresentIsMissingUnderEveryName) {
  std::vector<StEntry> e = tiny_lm_entries();
  e.erase(e.begin());  // embed.weight, and lm_head.weight is absent too
  const CheckpointReport r = check_checkpoint(checkpoint(e), *tiny_lm());
  EXPECT_EQ(r.missing, (Names{"embed.weight", "lm_head.weight"}));
  EXPECT_TRUE(r.tied_omitted.empty());
}

// A base-model checkpoint ("embed.weight") for a model with a head ("transformer.embed.weight"),
// as GPT-2's Hub checkpoint is for GPT2LMHeadModel.
TEST_F(CheckCheckpointTest, BaseModelPrefixIsStripped) {
  auto root = std::make_shared<Module>("WithHead");
  ModulePtr base = tiny_lm();
  root->register_module("transformer", base);
  root->register_module("head", std::make_shared<Linear>(4, 10, false));
  tie_parameters(*root, "head.weight", "transformer.embed.weight");
  const CheckpointReport r = check_checkpoint(checkpoint(tiny_lm_entries()), *root);
  EXPECT_EQ(r.stripped_prefix, "transformer.");
  EXPECT_TRUE(r.loadable());
  EXPECT_EQ(r.matched, 8);
  EXPECT_EQ(r.tied_omitted, (Names{"head.weight", "transformer.lm_head.weight"}));

  // With the prefix in the checkpoint nothing is stripped.
  const CheckpointReport full =
      check_checkpoint(checkpoint(tiny_lm_entries("transformer.")), *root);
  EXPECT_EQ(full.stripped_prefix, "");
  EXPECT_TRUE(full.loadable());
}

}  // namespace
}  // namespace shardplan::tensor
