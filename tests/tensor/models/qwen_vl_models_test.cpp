// The language models of Qwen2-VL, Qwen2.5-VL (qwen2_vl_text, qwen2_5_vl_text: flat published
// files) and Qwen3-VL (qwen3_vl_text, qwen3_vl_moe_text: text_config), against hand formulas
// written here from transformers' modeling_qwen2_5_vl.py, modeling_qwen3_vl.py and
// modeling_qwen3_vl_moe.py. Each is its *ForCausalLM sibling's stack: Qwen2 (q, k, v biases),
// Qwen3 (per-head q/k norms), Qwen3-MoE (experts before the router); the vision encoder is not
// built (Note [Multimodal configs]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tests/tensor/models/family_test_support.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor {
namespace {

namespace fs = std::filesystem;
using test::names_under;

TEST(QwenVlModels, Qwen25Vl7bLanguageModelMatchesTheHandTotal) {
  // Qwen2.5-VL-7B's language model: V 152,064 untied, h 3,584, 28 layers of 28 heads (head_dim
  // 128) with 4 kv heads and q/k/v biases, F 18,944. The published 8.29 B adds its 0.68 B
  // vision encoder, which is not built.
  const int64_t V = 152064, h = 3584, kv = 4 * 128;
  const int64_t layer = (h * h + h) + 2 * (kv * h + kv) + h * h + 3 * h * 18944 + 2 * h;
  const int64_t total = 2 * V * h + 28 * layer + h;
  EXPECT_EQ(total, 7'615'616'512);
  for (const char* name : {"qwen2.5-vl-7b", "qwen2-vl-7b"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = find_model_config(name);
    EXPECT_FALSE(c.multimodal_model_type.empty());  // a flat file of a multimodal wrapper
    EXPECT_FALSE(c.rope_scaling);                   // mrope: plain RoPE for text tokens
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(build_model(c)->parameters_numel(), total);
  }
  EXPECT_EQ(find_model_config("qwen2.5-vl-7b").model_type, "qwen2_5_vl_text");
}

TEST(QwenVlModels, FlatAndNestedFilesReadAlike) {
  // transformers 5 saves the same model with a text_config; both read to one config.
  const ModelConfig flat = find_model_config("qwen2.5-vl-7b");
  nlohmann::json text = to_hf_json(flat);
  const nlohmann::json nested = {{"model_type", "qwen2_5_vl"}, {"text_config", text}};
  EXPECT_EQ(parse_model_config(nested, "nested"), flat);
  // Qwen2.5-VL's attention takes head_dim from hidden / heads whatever the file says.
  text["head_dim"] = 64;
  EXPECT_EQ(parse_model_config(text, "head_dim ignored").head_dim, 128);
  // A flat file's tie is its text model's (the keys move into text_config together).
  nlohmann::json tied = to_hf_json(flat);
  tied["model_type"] = "qwen2_5_vl";
  tied["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(tied, "tied").tie_word_embeddings);
  // A nested file: the outer config's tie decides, false when it states none (transformers 5.16
  // ties a *ForConditionalGeneration model as its own config says).
  nlohmann::json outer_tied = nested;
  outer_tied["tie_word_embeddings"] = true;
  outer_tied["text_config"]["tie_word_embeddings"] = false;
  EXPECT_TRUE(parse_model_config(outer_tied, "outer tied").tie_word_embeddings);
  outer_tied.erase("tie_word_embeddings");
  outer_tied["text_config"]["tie_word_embeddings"] = true;
  EXPECT_FALSE(parse_model_config(outer_tied, "text tied").tie_word_embeddings);
  // The wrapper always builds its own text model.
  nlohmann::json other = nested;
  other["text_config"]["model_type"] = "qwen2";
  EXPECT_THAT([&] { parse_model_config(other, "o.json"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "field 'model_type': 'qwen2', but 'qwen2_5_vl' always builds its text model")));
  tied["text_config"] = "qwen2";
  EXPECT_THAT([&] { parse_model_config(tied, "t.json"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "t.json: field 'text_config': expected an object (or none")));
}

TEST(QwenVlModels, Qwen3VlDenseAndMoeMatchTheirTextSiblings) {
  // Qwen3-VL-8B's language model is Qwen3-8B's stack: V 151,936 untied, h 4,096, 36 layers of 32
  // heads of 128 with 8 kv heads and per-head q/k norms, F 12,288.
  const int64_t V = 151936, h = 4096;
  const int64_t layer = 2 * h * h + 2 * 1024 * h + 2 * 128 + 3 * h * 12288 + 2 * h;
  const int64_t dense = 2 * V * h + 36 * layer + h;
  EXPECT_EQ(dense, 8'190'735'360);
  const ModelConfig c = find_model_config("qwen3-vl-8b");
  EXPECT_EQ(c.model_type, "qwen3_vl_text");
  EXPECT_EQ(build_model(c)->parameters_numel(), dense);
  // Qwen3-VL-30B-A3B's is Qwen3-30B-A3B's: 48 layers, h 2,048, 32 heads of 128 with 4 kv heads,
  // 128 experts of 768, top 8.
  const int64_t hm = 2048;
  const int64_t moe_layer =
      2 * hm * 4096 + 2 * 512 * hm + 2 * 128 + 128 * hm + 128 * 3 * hm * 768 + 2 * hm;
  const int64_t moe = 2 * V * hm + 48 * moe_layer + hm;
  EXPECT_EQ(moe, 30'532'122'624);
  const ModelConfig m = find_model_config("qwen3-vl-30b-a3b");
  const ModulePtr model = build_model(m);
  EXPECT_EQ(model->parameters_numel(), moe);
  EXPECT_EQ(active_parameters(*model, m), moe - 48 * 120 * 3 * hm * 768);
  EXPECT_EQ(model->type_name(), "Qwen3VLMoeTextForCausalLM");
  EXPECT_EQ(names_under(*model, "model.layers.0."),
            (std::vector<std::string>{
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.gate.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"}));
}

TEST(QwenVlModels, RopeScalingThatScalesNothingIsRead) {
  // "default" (any family) and Qwen-VL's "mrope" are no scaling; other types keep their checks.
  nlohmann::json j = {{"model_type", "llama"},
                      {"vocab_size", 100},
                      {"hidden_size", 64},
                      {"intermediate_size", 96},
                      {"num_hidden_layers", 1},
                      {"num_attention_heads", 4},
                      {"rope_scaling", {{"rope_type", "default"}}}};
  EXPECT_FALSE(parse_model_config(j, "default").rope_scaling);
  // "mrope" only where the config class rewrites it to default (Qwen2-VL, Qwen2.5-VL).
  j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {8, 12, 12}}};
  EXPECT_THAT([&] { parse_model_config(j, "m.json"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("rope_type 'mrope'")));
  j["model_type"] = "qwen2_5_vl_text";
  EXPECT_FALSE(parse_model_config(j, "mrope").rope_scaling);
  j["model_type"] = "llama";
  j["rope_scaling"] = {{"rope_type", "bogus"}, {"factor", 2.0}};
  EXPECT_THAT([&] { parse_model_config(j, "bogus.json"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("rope_type 'bogus'")));
}

// Qwen2.5-VL's published checkpoint: the language model under its plain names, the vision
// encoder beside it as visual.* (transformers 5 renames both as it loads).
TEST(QwenVlModels, FlatCheckpointListsTheVisionEncoderBesideTheModel) {
  const fs::path dir =
      fs::temp_directory_path() / ("shardplan_qwen_vl_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json cfg = to_hf_json(first_layers(find_model_config("qwen2.5-vl-7b"), 1));
  cfg["model_type"] = "qwen2_5_vl";
  cfg["hidden_size"] = 64;
  cfg["intermediate_size"] = 96;
  cfg["num_attention_heads"] = 4;
  cfg["num_key_value_heads"] = 2;
  cfg["vocab_size"] = 100;
  std::ofstream(dir / "config.json") << cfg.dump(1);
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  std::vector<test::StEntry> e;
  for (const NamedTensor& t : model->named_parameters()) {
    e.push_back(
        {t.name, "BF16", std::vector<int64_t>(t.tensor.sizes().begin(), t.tensor.sizes().end())});
  }
  e.push_back({"visual.patch_embed.proj.weight", "BF16", {1280, 3, 2, 14, 14}});
  const test::StHeader h = test::make_header(e);
  test::write_bytes(dir / "model.safetensors", test::file_bytes(h.json, h.data_bytes));
  const ModelSource src = find_model_source(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_EQ(src.check.beyond_model, (std::vector<std::string>{"visual.patch_embed.proj.weight"}));
}

}  // namespace
}  // namespace shardplan::tensor
