// The model family registry (tensor/models/family.h): exactly the supported Hugging Face
// model_types in order, each entry's parse / to_hf_json / build / layers_path against the shipped
// configs and Hugging Face's names, and a toy family, defined here and never registered, run
// through the same entry interface: what adding a family takes (Note [Adding a model family]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/config_paths.h"
#include "base/error.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/models.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> types_of(const std::vector<const ModelFamily*>& families) {
  std::vector<std::string> out;
  for (const ModelFamily* f : families) out.emplace_back(f->model_type);
  return out;
}

bool has_module(const Module& root, const std::string& fqn) {
  for (const NamedModule& nm : root.named_modules()) {
    if (nm.name == fqn) return true;
  }
  return false;
}

TEST(ModelFamily, RegistryListsTheSupportedTypesInOrder) {
  const std::vector<std::string> want = {"afmoe",
                                         "apertus",
                                         "arcee",
                                         "aria_text",
                                         "axk1",
                                         "axk2",
                                         "bamba",
                                         "biogpt",
                                         "bitnet",
                                         "bloom",
                                         "codegen",
                                         "cohere",
                                         "cohere2",
                                         "cohere2_moe",
                                         "cohere_compass_text",
                                         "cwm",
                                         "dbrx",
                                         "deepseek_v2",
                                         "deepseek_v3",
                                         "deepseek_v32",
                                         "deepseek_v4",
                                         "diffllama",
                                         "dots1",
                                         "ernie4_5",
                                         "ernie4_5_moe",
                                         "exaone4",
                                         "exaone_moe",
                                         "falcon",
                                         "falcon_h1",
                                         "falcon_mamba",
                                         "flex_olmo",
                                         "gemma",
                                         "gemma2",
                                         "gemma3_text",
                                         "gemma3n_text",
                                         "gemma4_text",
                                         "gemma4_unified_text",
                                         "glm",
                                         "glm4",
                                         "glm4_moe",
                                         "glm4_moe_lite",
                                         "glm_moe_dsa",
                                         "gpt2",
                                         "gpt_bigcode",
                                         "gpt_neo",
                                         "gpt_neox",
                                         "gpt_oss",
                                         "gptj",
                                         "granite",
                                         "granite_swa",
                                         "granitemoe",
                                         "granitemoe_swa",
                                         "granitemoehybrid",
                                         "granitemoeshared",
                                         "helium",
                                         "hrm_text",
                                         "hunyuan_v1_dense",
                                         "hunyuan_v1_moe",
                                         "hy_v3",
                                         "hyperclovax",
                                         "inkling_text",
                                         "jais2",
                                         "jamba",
                                         "jetmoe",
                                         "kimi_k2",
                                         "laguna",
                                         "lfm2",
                                         "lfm2_moe",
                                         "llama",
                                         "llama4_text",
                                         "longcat_flash",
                                         "mamba",
                                         "mamba2",
                                         "mellum",
                                         "mimo_v2_flash",
                                         "minicpm3",
                                         "minimax",
                                         "minimax_m2",
                                         "minimax_m3_vl_text",
                                         "ministral",
                                         "ministral3",
                                         "mistral",
                                         "mistral4",
                                         "mixtral",
                                         "mpt",
                                         "muse_glimmer_text",
                                         "nanochat",
                                         "nemotron",
                                         "nemotron_h",
                                         "olmo",
                                         "olmo2",
                                         "olmo3",
                                         "olmo_hybrid",
                                         "olmoe",
                                         "opt",
                                         "persimmon",
                                         "phi",
                                         "phi3",
                                         "phimoe",
                                         "qwen2",
                                         "qwen2_5_vl_text",
                                         "qwen2_moe",
                                         "qwen2_vl_text",
                                         "qwen3",
                                         "qwen3_5_moe_text",
                                         "qwen3_5_text",
                                         "qwen3_moe",
                                         "qwen3_next",
                                         "qwen3_vl_moe_text",
                                         "qwen3_vl_text",
                                         "recurrent_gemma",
                                         "rwkv",
                                         "seed_oss",
                                         "smollm3",
                                         "solar_open",
                                         "stablelm",
                                         "starcoder2",
                                         "step3p5",
                                         "vaultgemma",
                                         "xglm",
                                         "xlstm",
                                         "youtu",
                                         "zamba",
                                         "zamba2",
                                         "zaya"};
  EXPECT_EQ(types_of(model_families()), want);
  EXPECT_EQ(supported_model_types(), want);
  EXPECT_EQ(
      model_types_list(),
      "afmoe, apertus, arcee, aria_text, axk1, axk2, bamba, biogpt, bitnet, bloom, codegen, "
      "cohere, cohere2, cohere2_moe, cohere_compass_text, cwm, dbrx, deepseek_v2, deepseek_v3, "
      "deepseek_v32, deepseek_v4, diffllama, dots1, ernie4_5, ernie4_5_moe, exaone4, "
      "exaone_moe, falcon, falcon_h1, falcon_mamba, flex_olmo, gemma, gemma2, gemma3_text, "
      "gemma3n_text, gemma4_text, gemma4_unified_text, glm, glm4, glm4_moe, glm4_moe_lite, "
      "glm_moe_dsa, gpt2, gpt_bigcode, gpt_neo, gpt_neox, gpt_oss, gptj, granite, granite_swa, "
      "granitemoe, granitemoe_swa, granitemoehybrid, granitemoeshared, helium, hrm_text, "
      "hunyuan_v1_dense, hunyuan_v1_moe, hy_v3, hyperclovax, inkling_text, jais2, jamba, "
      "jetmoe, kimi_k2, laguna, lfm2, lfm2_moe, llama, llama4_text, longcat_flash, mamba, "
      "mamba2, mellum, mimo_v2_flash, minicpm3, minimax, minimax_m2, minimax_m3_vl_text, "
      "ministral, ministral3, mistral, mistral4, mixtral, mpt, muse_glimmer_text, nanochat, "
      "nemotron, nemotron_h, olmo, olmo2, olmo3, olmo_hybrid, olmoe, opt, persimmon, phi, "
      "phi3, phimoe, qwen2, qwen2_5_vl_text, qwen2_moe, qwen2_vl_text, qwen3, "
      "qwen3_5_moe_text, qwen3_5_text, qwen3_moe, qwen3_next, qwen3_vl_moe_text, "
      "qwen3_vl_text, recurrent_gemma, rwkv, seed_oss, smollm3, solar_open, stablelm, "
      "starcoder2, step3p5, vaultgemma, xglm, xlstm, youtu, zamba, zamba2, zaya");
  for (const ModelFamily* f : model_families()) {
    SCOPED_TRACE(f->model_type);
    EXPECT_EQ(find_family(f->model_type), f);
    EXPECT_NE(f->parse, nullptr);
    EXPECT_NE(f->to_hf_json, nullptr);
    EXPECT_NE(f->build, nullptr);
    EXPECT_FALSE(f->hf_class_prefix.empty());
  }
  EXPECT_EQ(find_family("bert"), nullptr);
  EXPECT_EQ(find_family(""), nullptr);
  EXPECT_EQ(find_family("Llama"), nullptr);  // model_type is matched exactly
}

TEST(ModelFamily, EveryShippedConfigRoundTripsThroughItsEntry) {
  std::set<std::string> covered;
  for (const std::string& name : list_configs("models")) {
    SCOPED_TRACE(name);
    const ModelConfig c = find_model_config(name);
    const ModelFamily* f = find_family(c.model_type);
    ASSERT_NE(f, nullptr);
    covered.insert(c.model_type);
    const json j = to_hf_json(c, *f);
    EXPECT_EQ(j.at("model_type"), c.model_type);
    ModelConfig text = c;  // to_hf_json writes a multimodal file's language model alone
    text.multimodal_model_type.clear();
    EXPECT_EQ(parse_model_config(j, *f, "round-trip"), text);
    EXPECT_EQ(parse_model_config(j, "round-trip"), text);  // looked up by model_type: the same
    EXPECT_EQ(to_hf_json(c), j);
  }
  // Every family has a shipped config, so the loop above exercised every entry.
  EXPECT_EQ(std::vector<std::string>(covered.begin(), covered.end()), types_of(model_families()));
}

TEST(ModelFamily, LayersPathAndClassNamesAsHuggingFaceNamesThem) {
  // transformers' module names for the ModuleList of blocks, and the class-name prefixes.
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"gemma", {"model.layers", "GemmaForCausalLM"}},
      {"gpt2", {"transformer.h", "GPT2LMHeadModel"}},
      {"gpt_neox", {"gpt_neox.layers", "GPTNeoXForCausalLM"}},
      {"llama", {"model.layers", "LlamaForCausalLM"}},
      {"mistral", {"model.layers", "MistralForCausalLM"}},
      {"mixtral", {"model.layers", "MixtralForCausalLM"}},
      {"qwen2", {"model.layers", "Qwen2ForCausalLM"}},
      {"qwen2_moe", {"model.layers", "Qwen2MoeForCausalLM"}},
      {"deepseek_v2", {"model.layers", "DeepseekV2ForCausalLM"}},
      {"deepseek_v3", {"model.layers", "DeepseekV3ForCausalLM"}},
      {"deepseek_v32", {"model.layers", "DeepseekV32ForCausalLM"}},
      {"glm4_moe_lite", {"model.layers", "Glm4MoeLiteForCausalLM"}},
      {"glm_moe_dsa", {"model.layers", "GlmMoeDsaForCausalLM"}},
      {"kimi_k2", {"model.layers", "DeepseekV3ForCausalLM"}},
      {"gemma2", {"model.layers", "Gemma2ForCausalLM"}},
      {"gemma3_text", {"model.layers", "Gemma3ForCausalLM"}},
      {"glm4_moe", {"model.layers", "Glm4MoeForCausalLM"}},
      {"gpt_oss", {"model.layers", "GptOssForCausalLM"}},
      {"llama4_text", {"model.layers", "Llama4ForCausalLM"}},
      {"olmo2", {"model.layers", "Olmo2ForCausalLM"}},
      {"olmo3", {"model.layers", "Olmo3ForCausalLM"}},
      {"ernie4_5", {"model.layers", "Ernie4_5ForCausalLM"}},
      {"ernie4_5_moe", {"model.layers", "Ernie4_5_MoeForCausalLM"}},
      {"minimax_m2", {"model.layers", "MiniMaxM2ForCausalLM"}},
      {"phi3", {"model.layers", "Phi3ForCausalLM"}},
      {"qwen3", {"model.layers", "Qwen3ForCausalLM"}},
      {"qwen3_moe", {"model.layers", "Qwen3MoeForCausalLM"}},
      {"qwen3_next", {"model.layers", "Qwen3NextForCausalLM"}},
      {"qwen3_5_text", {"model.layers", "Qwen3_5ForCausalLM"}},
      {"qwen2_vl_text", {"model.layers", "Qwen2VLTextForCausalLM"}},
      {"qwen2_5_vl_text", {"model.layers", "Qwen2_5_VLTextForCausalLM"}},
      {"qwen3_vl_text", {"model.layers", "Qwen3VLTextForCausalLM"}},
      {"qwen3_vl_moe_text", {"model.layers", "Qwen3VLMoeTextForCausalLM"}},
      {"qwen3_5_moe_text", {"model.layers", "Qwen3_5MoeForCausalLM"}},
      {"glm4", {"model.layers", "Glm4ForCausalLM"}},
      {"ministral3", {"model.layers", "Ministral3ForCausalLM"}},
      {"seed_oss", {"model.layers", "SeedOssForCausalLM"}},
      {"smollm3", {"model.layers", "SmolLM3ForCausalLM"}},
      {"exaone4", {"model.layers", "Exaone4ForCausalLM"}},
      {"granite", {"model.layers", "GraniteForCausalLM"}},
      {"granitemoe", {"model.layers", "GraniteMoeForCausalLM"}},
      {"granitemoeshared", {"model.layers", "GraniteMoeSharedForCausalLM"}},
      {"granitemoehybrid", {"model.layers", "GraniteMoeHybridForCausalLM"}},
      {"nemotron_h", {"model.layers", "NemotronHForCausalLM"}},
      {"cohere", {"model.layers", "CohereForCausalLM"}},
      {"cohere2", {"model.layers", "Cohere2ForCausalLM"}},
      {"dots1", {"model.layers", "Dots1ForCausalLM"}},
      {"olmoe", {"model.layers", "OlmoeForCausalLM"}},
      {"arcee", {"model.layers", "ArceeForCausalLM"}},
      {"bamba", {"model.layers", "BambaForCausalLM"}},
      {"hunyuan_v1_dense", {"model.layers", "HunYuanDenseV1ForCausalLM"}},
      {"hunyuan_v1_moe", {"model.layers", "HunYuanMoEV1ForCausalLM"}},
      {"mistral4", {"model.layers", "Mistral4ForCausalLM"}},
      {"solar_open", {"model.layers", "SolarOpenForCausalLM"}},
      {"apertus", {"model.layers", "ApertusForCausalLM"}},
      {"exaone_moe", {"model.layers", "ExaoneMoeForCausalLM"}},
      {"flex_olmo", {"model.layers", "FlexOlmoForCausalLM"}},
      {"starcoder2", {"model.layers", "Starcoder2ForCausalLM"}},
      {"cohere2_moe", {"model.layers", "Cohere2MoeForCausalLM"}},
      {"falcon_h1", {"model.layers", "FalconH1ForCausalLM"}},
      {"axk2", {"model.layers", "AXK2ForCausalLM"}},
      {"deepseek_v4", {"model.layers", "DeepseekV4ForCausalLM"}},
      {"cohere_compass_text", {"model.layers", "CohereCompassForCausalLM"}},
      {"axk1", {"model.layers", "AXK1ForCausalLM"}},
      {"minicpm3", {"model.layers", "MiniCPM3ForCausalLM"}},
      {"hrm_text", {"model.L_module.layers", "HrmTextForCausalLM"}},
      {"xlstm", {"backbone.blocks", "xLSTMForCausalLM"}},
      {"rwkv", {"rwkv.blocks", "RwkvForCausalLM"}},
      {"gemma4_unified_text", {"model.layers", "Gemma4UnifiedForCausalLM"}},
      {"aria_text", {"model.layers", "AriaTextForCausalLM"}},
      {"diffllama", {"model.layers", "DiffLlamaForCausalLM"}},
      {"persimmon", {"model.layers", "PersimmonForCausalLM"}},
      {"biogpt", {"biogpt.layers", "BioGptForCausalLM"}},
      {"recurrent_gemma", {"model.layers", "RecurrentGemmaForCausalLM"}},
      {"gemma3n_text", {"model.layers", "Gemma3nForCausalLM"}},
      {"jetmoe", {"model.layers", "JetMoeForCausalLM"}},
      {"zamba", {"model.layers", "ZambaForCausalLM"}},
      {"codegen", {"transformer.h", "CodeGenForCausalLM"}},
      {"bitnet", {"model.layers", "BitNetForCausalLM"}},
      {"xglm", {"model.layers", "XGLMForCausalLM"}},
      {"gpt_neo", {"transformer.h", "GPTNeoForCausalLM"}},
      {"zamba2", {"model.layers", "Zamba2ForCausalLM"}},
      {"falcon_mamba", {"backbone.layers", "FalconMambaForCausalLM"}},
      {"mamba", {"backbone.layers", "MambaForCausalLM"}},
      {"inkling_text", {"model.layers", "InklingForCausalLM"}},
      {"minimax", {"model.layers", "MiniMaxForCausalLM"}},
      {"jamba", {"model.layers", "JambaForCausalLM"}},
      {"minimax_m3_vl_text", {"model.layers", "MiniMaxM3VLForCausalLM"}},
      {"zaya", {"model.layers", "ZayaForCausalLM"}},
      {"muse_glimmer_text", {"model.language_model.layers", "MuseGlimmerForConditionalGeneration"}},
      {"step3p5", {"model.layers", "Step3p7ForCausalLM"}},
      {"mellum", {"model.layers", "MellumForCausalLM"}},
      {"mamba2", {"backbone.layers", "Mamba2ForCausalLM"}},
      {"longcat_flash", {"model.layers", "LongcatFlashForCausalLM"}},
      {"laguna", {"model.layers", "LagunaForCausalLM"}},
      {"olmo_hybrid", {"model.layers", "OlmoHybridForCausalLM"}},
      {"dbrx", {"transformer.blocks", "DbrxForCausalLM"}},
      {"opt", {"model.decoder.layers", "OPTForCausalLM"}},
      {"falcon", {"transformer.h", "FalconForCausalLM"}},
      {"bloom", {"transformer.h", "BloomForCausalLM"}},
      {"mpt", {"transformer.blocks", "MptForCausalLM"}},
      {"gptj", {"transformer.h", "GPTJForCausalLM"}},
      {"gpt_bigcode", {"transformer.h", "GPTBigCodeForCausalLM"}},
      {"youtu", {"model.layers", "YoutuForCausalLM"}},
      {"nanochat", {"model.layers", "NanoChatForCausalLM"}},
      {"hyperclovax", {"model.layers", "HyperCLOVAXForCausalLM"}},
      {"stablelm", {"model.layers", "StableLmForCausalLM"}},
      {"olmo", {"model.layers", "OlmoForCausalLM"}},
      {"nemotron", {"model.layers", "NemotronForCausalLM"}},
      {"jais2", {"model.layers", "Jais2ForCausalLM"}},
      {"phi", {"model.layers", "PhiForCausalLM"}},
      {"glm", {"model.layers", "GlmForCausalLM"}},
      {"cwm", {"model.layers", "CwmForCausalLM"}},
      {"phimoe", {"model.layers", "PhimoeForCausalLM"}},
      {"gemma4_text", {"model.layers", "Gemma4ForCausalLM"}},
      {"ministral", {"model.layers", "MinistralForCausalLM"}},
      {"vaultgemma", {"model.layers", "VaultGemmaForCausalLM"}},
      {"helium", {"model.layers", "HeliumForCausalLM"}},
      {"lfm2_moe", {"model.layers", "Lfm2MoeForCausalLM"}},
      {"lfm2", {"model.layers", "Lfm2ForCausalLM"}},
      {"granitemoe_swa", {"model.layers", "GraniteMoeSWAForCausalLM"}},
      {"granite_swa", {"model.layers", "GraniteSWAForCausalLM"}},
      {"mimo_v2_flash", {"model.layers", "MiMoV2FlashForCausalLM"}},
      {"afmoe", {"model.layers", "AfmoeForCausalLM"}},
      {"hy_v3", {"model.layers", "HYV3ForCausalLM"}},
  };
  const std::map<std::string, std::string> config_of = {
      {"gemma", "gemma-7b"},
      {"gpt2", "gpt2"},
      {"gpt_neox", "pythia-160m"},
      {"llama", "llama3-8b"},
      {"mistral", "mistral-7b"},
      {"mixtral", "mixtral-8x7b"},
      {"qwen2", "qwen2.5-7b"},
      {"qwen3", "qwen3-8b"},
      {"qwen2_moe", "qwen1.5-moe-a2.7b"},
      {"qwen3_moe", "qwen3-30b-a3b"},
      {"deepseek_v2", "deepseek-v2-lite"},
      {"deepseek_v3", "deepseek-v3"},
      {"deepseek_v32", "deepseek-v3.2"},
      {"glm4_moe_lite", "glm-4.7-flash"},
      {"glm_moe_dsa", "glm-5"},
      {"kimi_k2", "kimi-k2"},
      {"gemma2", "gemma-2-9b"},
      {"gemma3_text", "gemma-3-1b"},
      {"glm4_moe", "glm-4.5-air"},
      {"gpt_oss", "gpt-oss-20b"},
      {"llama4_text", "llama4-scout"},
      {"olmo2", "olmo-2-7b"},
      {"olmo3", "olmo-3-7b"},
      {"ernie4_5", "ernie-4.5-0.3b"},
      {"ernie4_5_moe", "ernie-4.5-21b-a3b"},
      {"minimax_m2", "minimax-m2"},
      {"phi3", "phi-3-mini"},
      {"qwen3_next", "qwen3-next-80b-a3b"},
      {"qwen3_5_text", "qwen3.5-0.8b"},
      {"qwen2_vl_text", "qwen2-vl-7b"},
      {"qwen2_5_vl_text", "qwen2.5-vl-7b"},
      {"qwen3_vl_text", "qwen3-vl-8b"},
      {"qwen3_vl_moe_text", "qwen3-vl-30b-a3b"},
      {"qwen3_5_moe_text", "qwen3.5-35b-a3b"},
      {"glm4", "glm-4-9b-0414"},
      {"ministral3", "ministral-3-8b"},
      {"seed_oss", "seed-oss-36b"},
      {"smollm3", "smollm3-3b"},
      {"exaone4", "exaone-4.0-32b"},
      {"granite", "granite-3.1-8b"},
      {"granitemoe", "granite-3.0-3b-a800m"},
      {"granitemoeshared", "moe-7b-1b-active-shared-experts"},
      {"granitemoehybrid", "granite-4.0-h-small"},
      {"nemotron_h", "nemotron-3-nano-30b-a3b"},
      {"cohere", "command-r-v01"},
      {"cohere2", "command-a-03-2025"},
      {"dots1", "dots.llm1"},
      {"olmoe", "olmoe-1b-7b"},
      {"arcee", "afm-4.5b"},
      {"bamba", "bamba-9b"},
      {"hunyuan_v1_dense", "hunyuan-7b"},
      {"hunyuan_v1_moe", "hunyuan-a13b"},
      {"mistral4", "mistral-small-4-119b"},
      {"solar_open", "solar-open-100b"},
      {"apertus", "apertus-8b"},
      {"exaone_moe", "k-exaone-236b-a23b"},
      {"flex_olmo", "flexolmo-7x7b-1t"},
      {"starcoder2", "starcoder2-3b"},
      {"cohere2_moe", "cohere2-moe"},
      {"hy_v3", "hy3-preview"},
      {"afmoe", "trinity-mini"},
      {"mimo_v2_flash", "mimo-v2-flash"},
      {"granite_swa", "granite-swash-2b"},
      {"granitemoe_swa", "granitemoe-swa"},
      {"lfm2", "lfm2-1.2b"},
      {"lfm2_moe", "lfm2-8b-a1b"},
      {"helium", "helium-1-2b"},
      {"vaultgemma", "vaultgemma"},
      {"ministral", "ministral"},
      {"gemma4_text", "gemma-4-31b"},
      {"phimoe", "phi-3.5-moe"},
      {"cwm", "cwm"},
      {"glm", "glm-4-9b"},
      {"phi", "phi-2"},
      {"jais2", "jais-2-8b"},
      {"nemotron", "minitron-4b"},
      {"olmo", "olmo-7b"},
      {"stablelm", "stablelm-3b-4e1t"},
      {"hyperclovax", "hyperclovax-seed-think-14b"},
      {"nanochat", "nanochat-d32"},
      {"youtu", "youtu-llm-2b"},
      {"minicpm3", "minicpm3-4b"},
      {"axk1", "a.x-k1"},
      {"cohere_compass_text", "north-micro-vision"},
      {"deepseek_v4", "deepseek-v4-flash"},
      {"axk2", "axk2-class-defaults"},
      {"falcon_h1", "falcon-h1-7b"},
      {"hrm_text", "hrm-text-1b"},
      {"xlstm", "xlstm-7b"},
      {"rwkv", "rwkv-4-14b-pile"},
      {"gemma4_unified_text", "gemma-4-12b"},
      {"aria_text", "aria"},
      {"diffllama", "diffllama-1b"},
      {"persimmon", "persimmon-8b-base"},
      {"biogpt", "biogpt-large"},
      {"recurrent_gemma", "recurrentgemma-9b"},
      {"gemma3n_text", "gemma-3n-e4b"},
      {"jetmoe", "jetmoe-8b"},
      {"zamba", "zamba-7b-v1"},
      {"codegen", "codegen-16b-mono"},
      {"bitnet", "bitnet-b1.58-2b-4t"},
      {"xglm", "xglm-7.5b"},
      {"gpt_neo", "gpt-neo-2.7b"},
      {"zamba2", "zamba2-7b"},
      {"falcon_mamba", "falcon-mamba-7b"},
      {"mamba", "mamba-2.8b"},
      {"inkling_text", "inkling"},
      {"minimax", "minimax-text-01"},
      {"jamba", "jamba-1.5-large"},
      {"minimax_m3_vl_text", "minimax-m3"},
      {"zaya", "zaya1-base"},
      {"muse_glimmer_text", "muse-glimmer"},
      {"step3p5", "step-3.5-flash"},
      {"mellum", "mellum2-12b-a2.5b"},
      {"mamba2", "mamba-codestral-7b"},
      {"longcat_flash", "longcat-flash-chat"},
      {"laguna", "laguna-xs.2"},
      {"olmo_hybrid", "olmo-hybrid-7b"},
      {"dbrx", "dbrx-base"},
      {"opt", "opt-66b"},
      {"falcon", "falcon-40b"},
      {"bloom", "bloom-176b"},
      {"mpt", "mpt-30b"},
      {"gptj", "gpt-j-6b"},
      {"gpt_bigcode", "starcoder"}};
  for (const ModelFamily* f : model_families()) {
    const std::string type(f->model_type);
    SCOPED_TRACE(type);
    ASSERT_TRUE(want.count(type));
    const auto& [path, root_type] = want.at(type);
    EXPECT_EQ(f->layers_path, path);
    EXPECT_EQ(root_type.rfind(f->hf_class_prefix, 0), 0u) << f->hf_class_prefix;
    const ModelConfig full = find_model_config(config_of.at(type));
    ASSERT_EQ(full.model_type, type);
    const ModelConfig c = first_layers(full, 2);  // the names, not the size
    EXPECT_EQ(layers_path(c), path);
    const ModulePtr m = build_model(c);
    EXPECT_EQ(m->type_name(), root_type);
    EXPECT_TRUE(has_module(*m, path + ".1"));
    EXPECT_FALSE(has_module(*m, path + ".2"));
  }
}

TEST(ModelFamily, FlagsPerFamily) {
  std::set<std::string> rotary, learned, fused, moe;
  for (const ModelFamily* f : model_families()) {
    if (f->rotary) rotary.emplace(f->model_type);
    if (f->learned_positions) learned.emplace(f->model_type);
    if (f->fused_qkv) fused.emplace(f->model_type);
    if (f->moe) moe.emplace(f->model_type);
  }
  EXPECT_EQ(rotary, (std::set<std::string>{"hrm_text",
                                           "gemma4_unified_text",
                                           "aria_text",
                                           "diffllama",
                                           "persimmon",
                                           "recurrent_gemma",
                                           "gemma3n_text",
                                           "jetmoe",
                                           "codegen",
                                           "bitnet",
                                           "zamba2",
                                           "minimax",
                                           "minimax_m3_vl_text",
                                           "zaya",
                                           "muse_glimmer_text",
                                           "step3p5",
                                           "mellum",
                                           "longcat_flash",
                                           "laguna",
                                           "olmo_hybrid",
                                           "dbrx",
                                           "falcon",
                                           "gptj",
                                           "deepseek_v2",
                                           "deepseek_v3",
                                           "deepseek_v32",
                                           "ernie4_5",
                                           "ernie4_5_moe",
                                           "gemma",
                                           "gemma2",
                                           "gemma3_text",
                                           "glm4_moe",
                                           "glm4_moe_lite",
                                           "glm_moe_dsa",
                                           "gpt_neox",
                                           "gpt_oss",
                                           "kimi_k2",
                                           "llama",
                                           "llama4_text",
                                           "minimax_m2",
                                           "mistral",
                                           "mixtral",
                                           "olmo2",
                                           "olmo3",
                                           "phi3",
                                           "qwen2",
                                           "qwen2_5_vl_text",
                                           "qwen2_moe",
                                           "qwen2_vl_text",
                                           "qwen3",
                                           "qwen3_5_moe_text",
                                           "qwen3_5_text",
                                           "qwen3_moe",
                                           "qwen3_next",
                                           "qwen3_vl_moe_text",
                                           "qwen3_vl_text",
                                           "glm4",
                                           "ministral3",
                                           "seed_oss",
                                           "smollm3",
                                           "exaone4",
                                           "granite",
                                           "granitemoe",
                                           "granitemoeshared",
                                           "granitemoehybrid",
                                           "cohere",
                                           "cohere2",
                                           "dots1",
                                           "olmoe",
                                           "arcee",
                                           "bamba",
                                           "hunyuan_v1_dense",
                                           "hunyuan_v1_moe",
                                           "mistral4",
                                           "solar_open",
                                           "apertus",
                                           "exaone_moe",
                                           "flex_olmo",
                                           "starcoder2",
                                           "cohere2_moe",
                                           "hy_v3",
                                           "afmoe",
                                           "mimo_v2_flash",
                                           "granite_swa",
                                           "granitemoe_swa",
                                           "lfm2",
                                           "lfm2_moe",
                                           "helium",
                                           "vaultgemma",
                                           "ministral",
                                           "gemma4_text",
                                           "phimoe",
                                           "cwm",
                                           "glm",
                                           "phi",
                                           "jais2",
                                           "nemotron",
                                           "olmo",
                                           "stablelm",
                                           "hyperclovax",
                                           "nanochat",
                                           "youtu",
                                           "minicpm3",
                                           "axk1",
                                           "cohere_compass_text",
                                           "deepseek_v4",
                                           "axk2",
                                           "falcon_h1"}));
  EXPECT_EQ(learned, (std::set<std::string>{"biogpt", "gpt_neo", "opt", "gpt_bigcode", "gpt2"}));
  EXPECT_EQ(fused, (std::set<std::string>{"persimmon", "codegen", "dbrx", "falcon", "bloom", "mpt",
                                          "gpt_bigcode", "gpt2", "gpt_neox"}));
  EXPECT_EQ(moe, (std::set<std::string>{"aria_text",
                                        "jetmoe",
                                        "inkling_text",
                                        "minimax",
                                        "minimax_m3_vl_text",
                                        "zaya",
                                        "step3p5",
                                        "mellum",
                                        "longcat_flash",
                                        "laguna",
                                        "dbrx",
                                        "deepseek_v2",
                                        "deepseek_v3",
                                        "deepseek_v32",
                                        "ernie4_5_moe",
                                        "glm4_moe",
                                        "glm4_moe_lite",
                                        "glm_moe_dsa",
                                        "gpt_oss",
                                        "kimi_k2",
                                        "llama4_text",
                                        "minimax_m2",
                                        "mixtral",
                                        "qwen2_moe",
                                        "qwen3_5_moe_text",
                                        "qwen3_moe",
                                        "qwen3_next",
                                        "qwen3_vl_moe_text",
                                        "granitemoe",
                                        "granitemoeshared",
                                        "dots1",
                                        "olmoe",
                                        "hunyuan_v1_moe",
                                        "mistral4",
                                        "solar_open",
                                        "exaone_moe",
                                        "flex_olmo",
                                        "cohere2_moe",
                                        "hy_v3",
                                        "afmoe",
                                        "mimo_v2_flash",
                                        "granitemoe_swa",
                                        "lfm2_moe",
                                        "phimoe",
                                        "axk1",
                                        "deepseek_v4",
                                        "axk2"}));
  // The keys errors name: the file's spelling.
  EXPECT_EQ(find_family("gpt2")->file_key("hidden_size"), "n_embd");
  EXPECT_EQ(find_family("gpt_neox")->file_key("norm_eps"), "layer_norm_eps");
  EXPECT_EQ(find_family("llama")->file_key("norm_eps"), "rms_norm_eps");
  EXPECT_EQ(find_family("llama")->file_key("hidden_size"), "hidden_size");
}

// A layer count of zero or below is bad input for every family, refused naming the field before
// any per-layer list is made (a fuzz finding: bamba's layer types were sized by it first).
TEST(ModelFamily, EveryFamilyRefusesALayerCountBelowOne) {
  for (const std::string& name : list_configs("models")) {
    const ModelConfig c = find_model_config(name);
    SCOPED_TRACE(name);
    // Nemotron-H's block list (hybrid_override_pattern) gives the count; the file's
    // num_hidden_layers is read and overridden, as NemotronHConfig does.
    if (c.model_type == "nemotron_h") continue;
    for (const int64_t layers : {int64_t{-1}, int64_t{0}}) {
      json j = to_hf_json(c);
      const ModelFamily& f = *find_family(c.model_type);
      j[std::string(f.file_key("num_hidden_layers"))] = layers;
      EXPECT_THAT(
          error_of([&] { parse_model_config(j, "l.json"); }),
          HasSubstr("l.json: field '" + std::string(f.file_key("num_hidden_layers")) + "'"));
    }
  }
}

TEST(ModelFamily, UnknownModelTypeListsEveryFamily) {
  const std::string all =
      "afmoe, apertus, arcee, aria_text, axk1, axk2, bamba, biogpt, bitnet, bloom, codegen, "
      "cohere, cohere2, cohere2_moe, cohere_compass_text, cwm, dbrx, deepseek_v2, deepseek_v3, "
      "deepseek_v32, deepseek_v4, diffllama, dots1, ernie4_5, ernie4_5_moe, exaone4, "
      "exaone_moe, falcon, falcon_h1, falcon_mamba, flex_olmo, gemma, gemma2, gemma3_text, "
      "gemma3n_text, gemma4_text, gemma4_unified_text, glm, glm4, glm4_moe, glm4_moe_lite, "
      "glm_moe_dsa, gpt2";
  // An encoder-decoder type no family builds (shardplan plans decoder-only language models).
  const json j = {{"model_type", "t5"}, {"vocab_size", 32128}};
  EXPECT_THAT(error_of([&] { parse_model_config(j, "t5.json"); }),
              AllOf(HasSubstr("t5.json: field 'model_type': 't5' is not supported"),
                    HasSubstr("expected one of: " + all)));
  ModelConfig c = find_model_config("llama3-8b");
  c.model_type = "t5";
  EXPECT_THAT(
      error_of([&] { validate(c, "built"); }),
      HasSubstr("built: field 'model_type': 't5' is not supported; expected one of: " + all));
  EXPECT_THAT(error_of([&] { build_model(c); }), HasSubstr("expected one of: " + all));
  EXPECT_THAT(error_of([&] { layers_path(c); }), HasSubstr("expected one of: " + all));
  EXPECT_THAT(error_of([&] { to_hf_json(c); }), HasSubstr("expected one of: " + all));
  // A config validated against another family's entry is refused.
  EXPECT_THAT(error_of([&] { validate(find_model_config("gpt2"), *find_family("llama")); }),
              HasSubstr("'gpt2' is not this family's ('llama')"));
}

// A toy family, as a new file tensor/models/family_toy.cpp would define it: a rotary decoder
// whose config.json spells the sizes d_model, d_ff, n_layers, n_heads, max_seq_len. It is not in
// the registry, so only the explicit-family overloads reach it.
void toy_parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("d_model");
  c.intermediate_size = f.integer("d_ff");
  c.num_hidden_layers = f.integer("n_layers");
  c.num_attention_heads = c.num_key_value_heads = f.integer("n_heads");
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.max_position_embeddings = f.integer("max_seq_len", 1024);
  c.hidden_act = "silu";
  c.norm_eps = f.number("norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
}

void toy_to_hf_json(const ModelConfig& c, json& j) {
  j["d_model"] = c.hidden_size;
  j["d_ff"] = c.intermediate_size;
  j["n_layers"] = c.num_hidden_layers;
  j["n_heads"] = c.num_attention_heads;
  j["max_seq_len"] = c.max_position_embeddings;
  j["norm_eps"] = c.norm_eps;
}

ModulePtr toy_build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = "Toy"});
}

constexpr FieldRename kToyRenamed[] = {{"hidden_size", "d_model"},
                                       {"intermediate_size", "d_ff"},
                                       {"num_hidden_layers", "n_layers"},
                                       {"num_attention_heads", "n_heads"},
                                       {"max_position_embeddings", "max_seq_len"}};

const ModelFamily kToyFamily{
    .model_type = "toy",
    .hf_class_prefix = "Toy",
    .layers_path = "model.layers",
    .parse = toy_parse,
    .to_hf_json = toy_to_hf_json,
    .build = toy_build,
    .renamed = kToyRenamed,
};

TEST(ModelFamily, AnUnregisteredFamilyParsesAndBuildsThroughTheSameEntry) {
  const json j = json::parse(R"({"vocab_size": 1000, "d_model": 64, "d_ff": 256, "n_layers": 3,
    "n_heads": 4, "torch_dtype": "bfloat16"})");
  const ModelConfig c = parse_model_config(j, kToyFamily, "toy.json");
  EXPECT_EQ(c.model_type, "toy");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 1024);  // the toy's default
  EXPECT_EQ(c.torch_dtype, DType::kBFloat16);  // read by parse_model_config for every family
  const json out = to_hf_json(c, kToyFamily);
  EXPECT_EQ(out.at("model_type"), "toy");
  EXPECT_EQ(parse_model_config(out, kToyFamily, "round-trip"), c);

  const ModulePtr m = build_model(c, kToyFamily);
  EXPECT_EQ(m->type_name(), "ToyForCausalLM");
  EXPECT_EQ(m->get_submodule("model.layers.2").type_name(), "ToyDecoderLayer");
  EXPECT_EQ(m->get_parameter("model.layers.2.self_attn.q_proj.weight").sizes(),
            DimVector({64, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.down_proj.weight").sizes(), DimVector({64, 256}));
  // Per layer 4 h^2 (q, k, v, o) + 3 h f (MLP) + 2 h (norms); tied embedding V h; final norm h.
  EXPECT_EQ(m->parameters_numel(), 3 * (4 * 64 * 64 + 3 * 64 * 256 + 2 * 64) + 1000 * 64 + 64);

  // Errors name the toy's keys, with ModelConfig's name beside a renamed one.
  json bad = j;
  bad["d_ff"] = 0;
  EXPECT_THAT(error_of([&] { parse_model_config(bad, kToyFamily, "toy.json"); }),
              HasSubstr("toy.json: field 'd_ff' (intermediate_size): must be a positive integer, "
                        "got 0"));
  // Not registered: the model_type lookups do not know it.
  EXPECT_EQ(find_family("toy"), nullptr);
  EXPECT_THAT(error_of([&] { build_model(c); }), HasSubstr("'toy' is not supported"));
  EXPECT_THAT(error_of([&] { parse_model_config(out, "toy.json"); }),
              HasSubstr("'toy' is not supported"));
}

}  // namespace
}  // namespace shardplan::tensor
