// check_checkpoint: a checkpoint header compared by name with a Module tree. Expected findings are
// written out by hand from the module built here (names as PyTorch's state_dict lists them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
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

// Note [Experts stored one by one]: a Mixtral-shaped model (2 layers, 4 experts of 96, hidden 64)
// against the Hub's per-expert layouts. The model's fused tensors are gate_up_proj [4, 192, 64]
// and down_proj [4, 64, 96] per layer; a checkpoint holding every expert's w1/w3 [96, 64] and w2
// [64, 96] (Mixtral's names, with block_sparse_moe.gate) or gate_proj/up_proj/down_proj (Qwen's
// names under mlp) fits it.
ModelConfig tiny_mixtral() {
  return parse_model_config(nlohmann::json::parse(R"({
    "model_type": "mixtral", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "num_local_experts": 4, "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16"})"),
                            "tiny mixtral");
}

std::vector<StEntry> per_expert_entries(bool mixtral_names, int64_t experts = 4) {
  std::vector<StEntry> e = {{"model.embed_tokens.weight", "BF16", {100, 64}},
                            {"model.norm.weight", "BF16", {64}},
                            {"lm_head.weight", "BF16", {100, 64}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const auto& [n, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"self_attn.q_proj.weight", {64, 64}},
             {"self_attn.k_proj.weight", {32, 64}},
             {"self_attn.v_proj.weight", {32, 64}},
             {"self_attn.o_proj.weight", {64, 64}},
             {"input_layernorm.weight", {64}},
             {"post_attention_layernorm.weight", {64}}}) {
      e.push_back({p + n, "BF16", shape});
    }
    const std::string moe = p + (mixtral_names ? "block_sparse_moe." : "mlp.");
    e.push_back({moe + "gate.weight", "BF16", {4, 64}});
    for (int64_t x = 0; x < experts; ++x) {
      const std::string ex = moe + "experts." + std::to_string(x) + ".";
      e.push_back({ex + (mixtral_names ? "w1" : "gate_proj") + ".weight", "BF16", {96, 64}});
      e.push_back({ex + (mixtral_names ? "w3" : "up_proj") + ".weight", "BF16", {96, 64}});
      e.push_back({ex + (mixtral_names ? "w2" : "down_proj") + ".weight", "BF16", {64, 96}});
    }
  }
  return e;
}

TEST_F(CheckCheckpointTest, ExpertsStoredOneByOneFitTheFusedTensors) {
  const ModulePtr model = build_model(tiny_mixtral());
  const Names stacked = {
      "model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.experts.gate_up_proj",
      "model.layers.1.mlp.experts.down_proj", "model.layers.1.mlp.experts.gate_up_proj"};
  for (const bool mixtral_names : {true, false}) {
    SCOPED_TRACE(mixtral_names ? "w1/w3/w2" : "gate/up/down_proj");
    const CheckpointReport r =
        check_checkpoint(checkpoint(per_expert_entries(mixtral_names)), *model);
    EXPECT_TRUE(r.loadable()) << (r.missing.empty() ? "" : r.missing[0])
                              << (r.unexpected.empty() ? "" : r.unexpected[0]);
    EXPECT_EQ(r.stacked_experts, stacked);
    // 3 + 2 x (6 + router + 4 experts x 3 slices) tensors, every one matched.
    EXPECT_EQ(r.matched, 3 + 2 * (6 + 1 + 12));
    const nlohmann::json j = r;
    EXPECT_EQ(j.get<CheckpointReport>(), r);
  }
  // One expert short: its layer's fused tensors are missing, none stacked there.
  std::vector<StEntry> short_one = per_expert_entries(true);
  std::erase_if(short_one, [](const StEntry& e) {
    return e.name.starts_with("model.layers.1.block_sparse_moe.experts.3.");
  });
  const CheckpointReport r = check_checkpoint(checkpoint(short_one), *model);
  EXPECT_FALSE(r.loadable());
  EXPECT_EQ(r.missing, (Names{"model.layers.1.mlp.experts.down_proj",
                              "model.layers.1.mlp.experts.gate_up_proj"}));
  // The slices the file lacks, named as the file names the others.
  const std::string x3 = "model.layers.1.block_sparse_moe.experts.3.";
  EXPECT_EQ(r.missing_slices, (Names{x3 + "w1.weight", x3 + "w2.weight", x3 + "w3.weight"}));
  // A slice of the wrong width is a shape mismatch naming the checkpoint's tensor.
  std::vector<StEntry> wide = per_expert_entries(false);
  for (StEntry& e : wide) {
    if (e.name == "model.layers.0.mlp.experts.2.up_proj.weight") e.shape = {128, 64};
  }
  const CheckpointReport w = check_checkpoint(checkpoint(wide), *model);
  ASSERT_EQ(w.shape_mismatches.size(), 1U);
  EXPECT_EQ(w.shape_mismatches[0].name, "model.layers.0.mlp.experts.2.up_proj.weight");
  EXPECT_EQ(w.shape_mismatches[0].expected_shape, (DimVector{96, 64}));
  // An expert the model does not have is unexpected, its place incomplete neither.
  std::vector<StEntry> extra = per_expert_entries(false);
  extra.push_back({"model.layers.0.mlp.experts.7.up_proj.weight", "BF16", {96, 64}});
  const CheckpointReport x = check_checkpoint(checkpoint(extra), *model);
  EXPECT_EQ(x.unexpected, Names{"model.layers.0.mlp.experts.7.up_proj.weight"});
  EXPECT_TRUE(x.shape_mismatches.empty());
  EXPECT_EQ(x.stacked_experts.size(), 4U);
}

// The same slice under both of its names (w1 and gate_proj of expert 0) fills its place once: the
// second, in name order, is unexpected.
TEST_F(CheckCheckpointTest, ASliceTwiceIsUnexpectedTheSecondTime) {
  const ModulePtr model = build_model(tiny_mixtral());
  std::vector<StEntry> e = per_expert_entries(false);
  e.push_back({"model.layers.0.block_sparse_moe.experts.0.w1.weight", "BF16", {96, 64}});
  const CheckpointReport r = check_checkpoint(checkpoint(e), *model);
  EXPECT_EQ(r.unexpected, Names{"model.layers.0.mlp.experts.0.gate_proj.weight"});
  EXPECT_EQ(r.stacked_experts.size(), 4U);
  // A fused tensor stored whole beside its slices: the whole one is the model's, the slices are
  // unexpected (not read twice into it).
  std::vector<StEntry> both = per_expert_entries(false);
  both.push_back({"model.layers.1.mlp.experts.down_proj", "BF16", {4, 64, 96}});
  const CheckpointMatch m = match_checkpoint(checkpoint(both), *model);
  EXPECT_EQ(m.report.unexpected.size(), 4U);  // experts 0-3's down_proj of layer 1
  EXPECT_EQ(m.parts_of("model.layers.1.mlp.experts.down_proj")->size(), 1U);
  EXPECT_EQ(m.sliced.count("model.layers.1.mlp.experts.down_proj"), 0U);
  EXPECT_EQ(m.sliced.count("model.layers.0.mlp.experts.down_proj"), 1U);
}

// Where each model tensor's bytes are: a tied name the checkpoint omits reads its partner's
// tensor; a fused expert tensor reads its slices expert by expert, gate before up.
TEST_F(CheckCheckpointTest, PartsNameTheTensorsEachParameterIsReadFrom) {
  const Checkpoint ck = checkpoint(tiny_lm_entries());
  const CheckpointMatch m = match_checkpoint(ck, *tiny_lm());
  auto names = [](const Checkpoint& c, const CheckpointMatch& match, const std::string& n) {
    Names out;
    if (const std::vector<size_t>* parts = match.parts_of(n)) {
      for (const size_t i : *parts) out.push_back(c.tensors[i].name);
    }
    return out;
  };
  EXPECT_EQ(names(ck, m, "lm_head.weight"), Names{"embed.weight"});
  EXPECT_EQ(names(ck, m, "layers.1.bias"), Names{"layers.1.bias"});
  EXPECT_EQ(names(ck, m, "cache"), Names{});  // not persistent: not in a checkpoint

  const Checkpoint moe = checkpoint(per_expert_entries(true));
  const CheckpointMatch mm = match_checkpoint(moe, *build_model(tiny_mixtral()));
  const std::string x = "model.layers.1.block_sparse_moe.experts.";
  EXPECT_EQ(names(moe, mm, "model.layers.1.mlp.experts.gate_up_proj"),
            (Names{x + "0.w1.weight", x + "0.w3.weight", x + "1.w1.weight", x + "1.w3.weight",
                   x + "2.w1.weight", x + "2.w3.weight", x + "3.w1.weight", x + "3.w3.weight"}));
  EXPECT_EQ(names(moe, mm, "model.layers.1.mlp.experts.down_proj"),
            (Names{x + "0.w2.weight", x + "1.w2.weight", x + "2.w2.weight", x + "3.w2.weight"}));
  EXPECT_EQ(names(moe, mm, "model.layers.1.mlp.gate.weight"),
            Names{"model.layers.1.block_sparse_moe.gate.weight"});
}

// Note [Multimodal checkpoints]: Mixtral's tensors as a multimodal model's language model, in
// both layouts, beside a vision encoder and a projector.
TEST_F(CheckCheckpointTest, MultimodalCheckpointMatchesItsLanguageModel) {
  const ModulePtr model = build_model(tiny_mixtral());
  struct Layout {
    std::string root, model, head;
    Names outside;
  };
  for (const Layout& l :
       {Layout{"language_model.",
               "language_model.model.",
               "language_model.lm_head.",
               {"multi_modal_projector.linear_1.weight", "vision_tower.patch_embedding.weight"}},
        Layout{"model.language_model.",
               "model.language_model.",
               "lm_head.",
               {"model.multi_modal_projector.linear_1.weight",
                "model.vision_tower.patch_embedding.weight"}}}) {
    SCOPED_TRACE(l.model);
    std::vector<StEntry> e = per_expert_entries(false);
    for (StEntry& t : e) {
      if (t.name.starts_with("model.")) t.name = l.model + t.name.substr(6);
      if (t.name.starts_with("lm_head.")) t.name = l.head + t.name.substr(8);
    }
    for (const std::string& n : l.outside) e.push_back({n, "F32", {8, 3}});
    const CheckpointReport r = check_checkpoint(checkpoint(e), *model);
    EXPECT_TRUE(r.loadable());
    EXPECT_EQ(r.language_model_prefix, l.root);
    EXPECT_EQ(r.outside_language_model, l.outside);
    EXPECT_EQ(r.matched, 3 + 2 * (6 + 1 + 12));
    EXPECT_EQ(r.stacked_experts.size(), 4U);
    const nlohmann::json j = r;
    EXPECT_EQ(j.get<CheckpointReport>(), r);
    // A tensor under the language model's prefix that the model lacks is unexpected.
    e.push_back({l.model + "layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}});
    const CheckpointReport u = check_checkpoint(checkpoint(e), *model);
    EXPECT_EQ(u.unexpected, Names{l.model + "layers.0.self_attn.rotary_emb.inv_freq"});
    EXPECT_FALSE(u.loadable());
  }
}

// Note [Quantized checkpoints]: mxfp4 stores a fused expert tensor P as P_blocks (two 4-bit values
// a byte) and P_scales (one a block of 32): gate_up_proj [4, 192, 64] as [4, 192, 2, 16] and
// [4, 192, 2], down_proj [4, 64, 96] as [4, 64, 3, 16] and [4, 64, 3].
TEST_F(CheckCheckpointTest, Mxfp4BlocksStandForTheirTensor) {
  const ModulePtr model = build_model(tiny_mixtral());
  std::vector<StEntry> e = per_expert_entries(false);
  std::erase_if(e, [](const StEntry& t) { return t.name.find(".experts.") != std::string::npos; });
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    e.push_back({p + "gate_up_proj_blocks", "U8", {4, 192, 2, 16}});
    e.push_back({p + "gate_up_proj_scales", "U8", {4, 192, 2}});
    e.push_back({p + "down_proj_blocks", "U8", {4, 64, 3, 16}});
    e.push_back({p + "down_proj_scales", "U8", {4, 64, 3}});
  }
  const CheckpointReport r = check_checkpoint(
      checkpoint(e), *model, {.beyond_model_prefixes = {}, .quant_method = "mxfp4"});
  EXPECT_TRUE(r.loadable());
  EXPECT_EQ(
      r.stored_quantized,
      (Names{"model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.experts.gate_up_proj",
             "model.layers.1.mlp.experts.down_proj", "model.layers.1.mlp.experts.gate_up_proj"}));
  EXPECT_EQ(r.quantization_tensors.size(), 8U);
  const nlohmann::json j = r;
  EXPECT_EQ(j.get<CheckpointReport>(), r);
  // Without the method the blocks are unexpected and the fused tensors missing.
  const CheckpointReport plain = check_checkpoint(checkpoint(e), *model);
  EXPECT_EQ(plain.missing.size(), 4U);
  EXPECT_EQ(plain.unexpected.size(), 8U);
  // Blocks of the wrong size stand for nothing.
  for (StEntry& t : e) {
    if (t.name == "model.layers.1.mlp.experts.down_proj_blocks") t.shape = {4, 64, 2, 16};
  }
  const CheckpointReport bad = check_checkpoint(
      checkpoint(e), *model, {.beyond_model_prefixes = {}, .quant_method = "mxfp4"});
  EXPECT_EQ(bad.unexpected, Names{"model.layers.1.mlp.experts.down_proj_blocks"});
  EXPECT_EQ(bad.missing, Names{"model.layers.1.mlp.experts.down_proj"});
}

// Note [Quantized checkpoints]: 4-bit stand-ins. Each expert's slice as compressed-tensors packs it
// ("<slice>_packed", int32 holding eight 4-bit values: [96, 8] for [96, 64], with its scale and
// shape beside it), and one attention matrix as AWQ stores it ("q_proj.qweight" [64, 8] for
// [64, 64], with qzeros and scales).
TEST_F(CheckCheckpointTest, PackedStandInsFitTheirTensorsAndSlices) {
  const ModulePtr model = build_model(tiny_mixtral());
  auto entries = [](int64_t packed_cols) {
    std::vector<StEntry> out;
    for (const StEntry& t : per_expert_entries(false)) {
      if (t.name.find(".experts.") != std::string::npos) {
        const std::string w = t.name.substr(0, t.name.size() - 7);  // without ".weight"
        out.push_back({w + ".weight_packed", "I32", {t.shape[0], t.shape[1] / 8}});
        out.push_back({w + ".weight_scale", "BF16", {t.shape[0], t.shape[1] / 32}});
        out.push_back({w + ".weight_shape", "I32", {2}});
      } else if (t.name == "model.layers.0.self_attn.q_proj.weight") {
        out.push_back({"model.layers.0.self_attn.q_proj.qweight", "I32", {64, packed_cols}});
        out.push_back({"model.layers.0.self_attn.q_proj.qzeros", "I32", {1, 8}});
        out.push_back({"model.layers.0.self_attn.q_proj.scales", "F16", {1, 64}});
      } else {
        out.push_back(t);
      }
    }
    return out;
  };
  const CheckpointExpectations ct{.beyond_model_prefixes = {},
                                  .quant_method = "compressed-tensors"};
  const CheckpointReport r = check_checkpoint(checkpoint(entries(8)), *model, ct);
  EXPECT_TRUE(r.loadable()) << (r.missing.empty() ? "" : r.missing[0])
                            << (r.unexpected.empty() ? "" : r.unexpected[0]);
  EXPECT_EQ(
      r.stored_quantized,
      (Names{"model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.experts.gate_up_proj",
             "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.experts.down_proj",
             "model.layers.1.mlp.experts.gate_up_proj"}));
  // 2 layers x 4 experts x 3 slices x (packed, scale, shape), and the qweight with its 2.
  EXPECT_EQ(r.quantization_tensors.size(), 2U * 4 * 3 * 3 + 3);
  // A qweight that holds neither 4-bit nor 8-bit values of [64, 64] stands for nothing.
  const CheckpointReport bad = check_checkpoint(checkpoint(entries(5)), *model, ct);
  EXPECT_EQ(bad.unexpected, Names{"model.layers.0.self_attn.q_proj.qweight"});
  EXPECT_EQ(bad.missing, Names{"model.layers.0.self_attn.q_proj.weight"});
  // A second stand-in for the same tensor is unexpected.
  std::vector<StEntry> twice = entries(8);
  twice.push_back({"model.layers.0.self_attn.q_proj.weight_packed", "I32", {64, 8}});
  const CheckpointReport t = check_checkpoint(checkpoint(twice), *model, ct);
  EXPECT_EQ(t.unexpected, Names{"model.layers.0.self_attn.q_proj.weight_packed"});
}

}  // namespace
}  // namespace shardplan::tensor
