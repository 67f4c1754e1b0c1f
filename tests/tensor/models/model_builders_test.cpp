// Model builders against published parameter counts, each also derived by a hand formula written
// here (never by the builder), and Hugging Face parameter names and shapes per family.
//
// Note [Parameter formulas]
// Rotary decoders (Llama, Mistral, Qwen2, Gemma, Mixtral), per layer:
//   attention  h * (H * d)  [q]  +  2 * h * (KV * d)  [k, v]  +  (H * d) * h  [o]
//              (+ H*d + 2*KV*d for q/k/v biases: Qwen2)
//   MLP        3 * h * f  (gate, up, down); Mixtral: E * 3 * h * f + E * h (router)
//   norms      2 * h
// plus the embedding V * h, the untied lm_head V * h, and the final norm h.
// GPT-2 per layer: 12 h^2 + 13 h (with f = 4h); plus wte V h, wpe P h, ln_f 2 h.
// GPT-NeoX per layer: 4 h^2 + 2 h f + 9 h + f + 4 h (biases, two LayerNorms of 2 h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::tensor {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Rotary {
  int64_t V, h, f, L, H, KV, d;
  bool tied = false, qkv_bias = false;
  int64_t experts = 0;
};

int64_t rotary_params(const Rotary& r) {
  int64_t attn = r.h * (r.H * r.d) + 2 * r.h * (r.KV * r.d) + (r.H * r.d) * r.h;
  if (r.qkv_bias) attn += r.H * r.d + 2 * r.KV * r.d;
  const int64_t mlp = r.experts ? r.experts * 3 * r.h * r.f + r.experts * r.h : 3 * r.h * r.f;
  return r.L * (attn + mlp + 2 * r.h) + r.V * r.h * (r.tied ? 1 : 2) + r.h;
}

int64_t params_of(const std::string& name) {
  return build_model(find_model_config(name))->parameters_numel();
}

DimVector shape(const Module& m, const std::string& fqn) { return m.get_parameter(fqn).sizes(); }

TEST(ModelParams, Llama2_7B) {
  const int64_t hand = rotary_params({32000, 4096, 11008, 32, 32, 32, 128});
  EXPECT_EQ(hand, 6'738'415'616);  // the published count (Touvron et al. 2023; HF model card)
  EXPECT_EQ(params_of("llama2-7b"), hand);
}

// Llama 2 13B (40 heads, no GQA) and 70B (64 heads, 8 key-value heads): the published 13.0 B and
// 69.0 B (Touvron et al. 2023, Table 1 rounds them to 13B and 70B; the HF model cards' safetensors
// totals are 13,015,864,320 and 68,976,648,192).
TEST(ModelParams, Llama2_13BAnd70B) {
  const int64_t b13 = rotary_params({32000, 5120, 13824, 40, 40, 40, 128});
  EXPECT_EQ(b13, 13'015'864'320);
  EXPECT_EQ(params_of("llama2-13b"), b13);
  const int64_t b70 = rotary_params({32000, 8192, 28672, 80, 64, 8, 128});
  EXPECT_EQ(b70, 68'976'648'192);
  EXPECT_EQ(params_of("llama2-70b"), b70);
}

TEST(ModelParams, Llama3_8B) {
  const int64_t hand = rotary_params({128256, 4096, 14336, 32, 32, 8, 128});
  EXPECT_EQ(hand, 8'030'261'248);
  EXPECT_EQ(params_of("llama3-8b"), hand);
}

TEST(ModelParams, Llama3_70B) {
  const int64_t hand = rotary_params({128256, 8192, 28672, 80, 64, 8, 128});
  EXPECT_EQ(hand, 70'553'706'496);
  EXPECT_EQ(params_of("llama3-70b"), hand);
}

TEST(ModelParams, Llama31_405B) {
  const int64_t hand = rotary_params({128256, 16384, 53248, 126, 128, 8, 128});
  EXPECT_EQ(hand, 405'853'388'800);
  EXPECT_EQ(params_of("llama3.1-405b"), hand);
}

// Gemma 3 4B's language model from its multimodal config.json (Note [Multimodal configs] in
// model_config.cpp): hidden 2560, ffn 10240, 34 layers, and Gemma3TextConfig's 8 heads, 4 kv heads,
// head_dim 256, vocab 262208, tied. Per layer, the rotary formula plus q_norm and k_norm (2 x 256)
// and Gemma's two extra norms (pre/post feed-forward, 2 x 2560).
TEST(ModelParams, Gemma3_4BLanguageModelOfItsMultimodalConfig) {
  const nlohmann::json j = nlohmann::json::parse(R"({"model_type": "gemma3",
    "torch_dtype": "bfloat16", "vision_config": {"model_type": "siglip_vision_model"},
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "sliding_window": 1024}})");
  const int64_t hand =
      rotary_params({262208, 2560, 10240, 34, 8, 4, 256, true}) + 34 * (2 * 256 + 2 * 2560);
  EXPECT_EQ(hand, 3'880'263'168);
  // The Gemma 3 technical report (2025), Table 1: 3,209M non-embedding parameters for 4B (and a
  // 417M vision encoder, which is not modelled).
  EXPECT_EQ((hand - 262208 * 2560) / 1'000'000, 3209);
  EXPECT_EQ(build_model(parse_model_config(j, "gemma-3-4b"))->parameters_numel(), hand);
}

TEST(ModelParams, Mistral7B) {
  const int64_t hand = rotary_params({32000, 4096, 14336, 32, 32, 8, 128});
  EXPECT_EQ(hand, 7'241'732'096);
  EXPECT_EQ(params_of("mistral-7b"), hand);
}

TEST(ModelParams, Mixtral8x7B) {
  const int64_t hand = rotary_params({32000, 4096, 14336, 32, 32, 8, 128, false, false, 8});
  EXPECT_EQ(hand, 46'702'792'704);
  EXPECT_EQ(params_of("mixtral-8x7b"), hand);
  // Per token: all but the experts (8 x 3 x 4096 x 14336 in each of 32 layers), and 2 of the 8.
  const int64_t experts = 32 * 8 * 3 * int64_t{4096} * 14336;
  const ModelConfig c = find_model_config("mixtral-8x7b");
  EXPECT_EQ(active_parameters(*build_model(c), c), hand - experts + experts / 8 * 2);
  EXPECT_EQ(hand - experts + experts / 8 * 2, 12'879'925'248);  // the published "12.9B active"
  const ModelConfig dense = find_model_config("llama3-8b");
  EXPECT_EQ(active_parameters(*build_model(dense), dense), params_of("llama3-8b"));
}

TEST(ModelParams, Qwen25_7B) {
  const int64_t hand = rotary_params({152064, 3584, 18944, 28, 28, 4, 128, false, true});
  EXPECT_EQ(hand, 7'615'616'512);
  EXPECT_EQ(params_of("qwen2.5-7b"), hand);
}

TEST(ModelParams, Qwen3) {
  // Qwen3 adds an RMSNorm over head_dim (128) on q and on k: 2 x 128 per layer.
  const int64_t hand8 = rotary_params({151936, 4096, 12288, 36, 32, 8, 128}) + 36 * 2 * 128;
  EXPECT_EQ(hand8, 8'190'735'360);  // "8.2B" (Qwen3-8B's model card)
  EXPECT_EQ(params_of("qwen3-8b"), hand8);
  // Qwen3-0.6B: 0.6 B in all, 0.44 B outside the (tied) embedding.
  const int64_t hand06 =
      rotary_params({151936, 1024, 3072, 28, 16, 8, 128, /*tied=*/true}) + 28 * 2 * 128;
  EXPECT_EQ(params_of("qwen3-0.6b"), hand06);
  EXPECT_EQ(hand06 - 151936 * 1024, 440'467'456);
}

// Qwen's windows, as Qwen3Config, Qwen3MoeConfig and Qwen2MoeConfig derive layer_types: only with
// use_sliding_window; Qwen3 from max_window_layers on, Qwen3-MoE on every layer, Qwen2-MoE on the
// even layers below max_window_layers. Without use_sliding_window a listed layer_types is checked
// and the layers attend in full.
TEST(ModelBuild, QwenSlidingWindowLayers) {
  const AttentionType F = AttentionType::kFull, S = AttentionType::kSliding;
  auto types = [](const char* name, int layers, int max_window_layers) {
    nlohmann::json j = to_hf_json(find_model_config(name));
    j["num_hidden_layers"] = layers;
    j.erase("mlp_only_layers");
    j["use_sliding_window"] = true;
    j["sliding_window"] = 512;
    j["max_window_layers"] = max_window_layers;
    const ModelConfig c = parse_model_config(j, "q.json");
    EXPECT_EQ(c.sliding_window, 512);
    EXPECT_EQ(parse_model_config(to_hf_json(c)), c);  // written back with its layer_types
    return c.layer_types;
  };
  EXPECT_EQ(types("qwen3-0.6b", 5, 3), (std::vector<AttentionType>{F, F, F, S, S}));
  EXPECT_EQ(types("qwen3-30b-a3b", 3, 1), (std::vector<AttentionType>{S, S, S}));
  EXPECT_EQ(types("qwen1.5-moe-a2.7b", 6, 4), (std::vector<AttentionType>{S, F, S, F, F, F}));
  // Qwen3MoeConfig has no layer_types: a listed one changes nothing, every layer slides.
  nlohmann::json m = to_hf_json(find_model_config("qwen3-30b-a3b"));
  m["num_hidden_layers"] = 2;
  m["use_sliding_window"] = true;
  m["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(parse_model_config(m, "m.json").layer_types, (std::vector<AttentionType>{S, S}));
  // Qwen attention slides only on "sliding_attention": a chunked entry attends in full.
  nlohmann::json q3 = to_hf_json(find_model_config("qwen3-0.6b"));
  q3["num_hidden_layers"] = 2;
  q3["use_sliding_window"] = true;
  q3["layer_types"] = {"chunked_attention", "sliding_attention"};
  EXPECT_EQ(parse_model_config(q3, "q3.json").layer_types, (std::vector<AttentionType>{F, S}));

  nlohmann::json j = to_hf_json(find_model_config("qwen3-0.6b"));
  j["use_sliding_window"] = true;
  j.erase("sliding_window");  // Qwen3Config's default, 4096, and its max_window_layers, 28
  const ModelConfig d = parse_model_config(j, "q.json");
  EXPECT_EQ(d.sliding_window, 4096);
  EXPECT_EQ(d.layer_types, std::vector<AttentionType>(28, F));  // 28 layers: none from 28 on
  j["use_sliding_window"] = false;
  j["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 28; ++i)
    j["layer_types"].push_back(i == 3 ? "sliding_attention" : "full_attention");
  EXPECT_EQ(parse_model_config(j, "q.json"), find_model_config("qwen3-0.6b"));  // no window
  j["layer_types"] = nlohmann::json::array({"full_attention"});
  EXPECT_THAT([&] { (void)parse_model_config(j, "q.json"); },
              ThrowsMessage<Error>(HasSubstr("expected a list of num_hidden_layers = 28")));
}

// DeepSeek-V2-Lite (configs/models/deepseek-v2-lite.json; DeepSeek-AI 2024, "DeepSeek-V2",
// Appendix B: "15.7B total, 2.4B activated"), by hand: vocab V 102,400, hidden h 2,048, 27 layers
// of latent attention without a query latent (16 heads of 128 + 64 query/key channels, 128 value
// channels, kv_lora_rank 512), layer 0 a dense MLP of 10,944, the other 26 with 64 routed experts
// of 1,408 (top 6), two shared experts (one MLP of 2,816) and a softmax router without a bias.
TEST(ModelParams, DeepseekV2Lite) {
  const int64_t V = 102400, h = 2048, L = 27, heads = 16;
  const int64_t attention = h * heads * 192 + h * (512 + 64) + 512 + 512 * heads * 256 +
                            heads * 128 * h;  // q_proj, kv_a_proj(+norm), kv_b_proj, o_proj
  const int64_t moe = 64 * 3 * h * 1408 + 3 * h * 2816 + 64 * h;
  const int64_t hand = 2 * V * h + L * (attention + 2 * h) + 3 * h * 10944 + 26 * moe + h;
  EXPECT_EQ(hand, 15'706'484'224);  // "15.7B"
  EXPECT_EQ(params_of("deepseek-v2-lite"), hand);
  // Active: 6 of the 64 experts, 2.66 B; 2.45 B without the input embedding, which DeepSeek's
  // "2.4B activated" leaves out.
  const ModelConfig c = find_model_config("deepseek-v2-lite");
  const int64_t active = hand - 26 * 58 * 3 * h * 1408;
  EXPECT_EQ(active_parameters(*build_model(c), c), active);
  EXPECT_EQ(active - V * h, 2'451'435'008);
  // The router has no score-correction bias (softmax routing): no buffer beside its weight.
  EXPECT_TRUE(build_model(c)->named_buffers({.persistent_only = true}).empty());
}

// DeepSeek-V2 itself, from its published sizes (the same paper: "236B total, 21B activated"):
// hidden 5,120, 60 layers of 128 heads with a query latent of 1,536, 160 routed experts of 1,536
// (top 6, grouped top-k), 2 shared, layer 0 dense of 12,288. Softmax scores only: sigmoid refused.
TEST(ModelParams, DeepseekV2) {
  nlohmann::json j = to_hf_json(find_model_config("deepseek-v2-lite"));
  j.update(nlohmann::json::parse(R"({"hidden_size": 5120, "num_hidden_layers": 60,
      "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
      "n_routed_experts": 160, "moe_intermediate_size": 1536, "intermediate_size": 12288,
      "n_group": 8, "topk_group": 3, "topk_method": "group_limited_greedy"})"));
  const int64_t V = 102400, h = 5120, n = 128;
  const int64_t attention =
      h * 1536 + 1536 + 1536 * n * 192 + h * (512 + 64) + 512 + 512 * n * 256 + n * 128 * h;
  const int64_t moe = 160 * 3 * h * 1536 + 3 * h * 3072 + 160 * h;
  const int64_t hand = 2 * V * h + 60 * (attention + 2 * h) + 3 * h * 12288 + 59 * moe + h;
  const ModelConfig c = parse_model_config(j, "deepseek-v2");
  EXPECT_EQ(build_model(c)->parameters_numel(), hand);
  EXPECT_NEAR(hand / 1e9, 236, 0.5);
  const int64_t active = hand - 59 * 154 * 3 * h * 1536;
  EXPECT_EQ(active_parameters(*build_model(c), c), active);
  EXPECT_NEAR(static_cast<double>(active - V * h) / 1e9, 21, 0.5);
  j["scoring_func"] = "sigmoid";
  EXPECT_THAT([&] { (void)parse_model_config(j, "v2.json"); },
              ThrowsMessage<Error>(HasSubstr("v2.json: field 'scoring_func'")));
  // Prediction layers are bounded as layers are (each is a checkpoint prefix to match).
  j["scoring_func"] = "softmax";
  j["num_nextn_predict_layers"] = 100000000;
  EXPECT_THAT([&] { (void)parse_model_config(j, "v2.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'num_nextn_predict_layers': 100000000")));
}

TEST(ModelParams, Gemma7B) {
  // Gemma: 16 heads of 256 (4096) over hidden 3072; the embedding is tied.
  const int64_t hand = rotary_params({256000, 3072, 24576, 28, 16, 16, 256, true});
  EXPECT_EQ(hand, 8'537'680'896);
  EXPECT_EQ(params_of("gemma-7b"), hand);
}

TEST(ModelParams, Gpt2) {
  const int64_t h = 768, L = 12, V = 50257, P = 1024;
  const int64_t hand = L * (12 * h * h + 13 * h) + V * h + P * h + 2 * h;
  EXPECT_EQ(hand, 124'439'808);
  EXPECT_EQ(params_of("gpt2"), hand);
}

TEST(ModelParams, GptNeoX) {
  auto neox = [](int64_t V, int64_t h, int64_t f, int64_t L) {
    return L * (4 * h * h + 2 * h * f + 9 * h + f) + 2 * V * h + 2 * h;
  };
  // GPT-NeoX-20B paper (Black et al. 2022) and the Pythia suite (Biderman et al. 2023, Table 1).
  EXPECT_EQ(neox(50432, 6144, 24576, 44), 20'554'567'680);
  EXPECT_EQ(params_of("gpt-neox-20b"), neox(50432, 6144, 24576, 44));
  EXPECT_EQ(neox(50304, 768, 3072, 12), 162'322'944);
  EXPECT_EQ(params_of("pythia-160m"), neox(50304, 768, 3072, 12));
}

// Megatron-LM SC21 Table 1: the "Params (B)" column from Eq. 2,
// P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)); our GPT-2 build adds the final LayerNorm (2h),
// which Eq. 2 leaves out. Korthikanti et al. 2022 Table 3 adds 22B and GPT-3's 175B (printed to
// the billion: Eq. 2 gives 22.07 and 174.6).
TEST(ModelParams, MegatronTable1) {
  struct Row {
    const char* name;
    int64_t heads, h, l;
    double billions;
  };
  const Row rows[] = {
      {"megatron-gpt-1.7", 24, 2304, 24, 1.7},        {"megatron-gpt-3.6", 32, 3072, 30, 3.6},
      {"megatron-gpt-7.5", 32, 4096, 36, 7.5},        {"megatron-gpt-18.4", 48, 6144, 40, 18.4},
      {"megatron-gpt-39.1", 64, 8192, 48, 39.1},      {"megatron-gpt-76.1", 80, 10240, 60, 76.1},
      {"megatron-gpt-145.6", 96, 12288, 80, 145.6},   {"megatron-gpt-310.1", 128, 16384, 96, 310.1},
      {"megatron-gpt-529.6", 128, 20480, 105, 529.6}, {"megatron-gpt-1t", 160, 25600, 128, 1008.0},
      {"megatron-gpt-22b", 64, 6144, 48, 22},         {"gpt3-175b", 96, 12288, 96, 175}};
  const int64_t V = 51200, s = 2048;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ModelConfig c = find_model_config(r.name);
    EXPECT_EQ(c.num_attention_heads, r.heads);
    EXPECT_EQ(c.hidden_size, r.h);
    EXPECT_EQ(c.num_hidden_layers, r.l);
    const int64_t eq2 = 12 * r.l * r.h * r.h + 13 * r.l * r.h + (V + s) * r.h;
    EXPECT_EQ(build_model(c)->parameters_numel(), eq2 + 2 * r.h);
    EXPECT_NEAR(static_cast<double>(eq2) / 1e9, r.billions,
                std::max(0.05, 0.005 * r.billions) + 1e-9);
  }
}

TEST(ModelShapes, LlamaNamesAndShapes) {
  const ModulePtr m = build_model(find_model_config("llama3-8b"));
  EXPECT_EQ(m->type_name(), "LlamaForCausalLM");
  EXPECT_EQ(shape(*m, "model.embed_tokens.weight"), (DimVector{128256, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.q_proj.weight"), (DimVector{4096, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.31.self_attn.k_proj.weight"), (DimVector{1024, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.v_proj.weight"), (DimVector{1024, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.self_attn.o_proj.weight"), (DimVector{4096, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.mlp.gate_proj.weight"), (DimVector{14336, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.mlp.down_proj.weight"), (DimVector{4096, 14336}));
  EXPECT_EQ(shape(*m, "model.layers.0.input_layernorm.weight"), (DimVector{4096}));
  EXPECT_EQ(shape(*m, "model.norm.weight"), (DimVector{4096}));
  EXPECT_EQ(shape(*m, "lm_head.weight"), (DimVector{128256, 4096}));
  EXPECT_EQ(m->get_parameter("model.layers.0.mlp.up_proj.weight").dtype(), DType::kBFloat16);
  // The safetensors index of Meta-Llama-3-8B lists 291 tensors: 2 + 32 * 9 + 1.
  const auto params = m->named_parameters();
  EXPECT_EQ(params.size(), 291u);
  EXPECT_EQ(params.front().name, "model.embed_tokens.weight");  // PyTorch's registration order
  EXPECT_EQ(params[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(params.back().name, "lm_head.weight");
  // rotary inv_freq: a non-persistent buffer, absent from a state_dict.
  EXPECT_EQ(m->get_buffer("model.rotary_emb.inv_freq").sizes(), (DimVector{64}));
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  EXPECT_FALSE(m->get_submodule("model.layers.0.self_attn.q_proj").has_parameter("bias") &&
               m->get_parameter("model.layers.0.self_attn.q_proj.bias").defined());
}

TEST(ModelShapes, BiasesAndTiesHonoured) {
  ModelConfig c = find_model_config("llama2-7b");
  c.num_hidden_layers = 1;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  const ModulePtr b = build_model(c);
  EXPECT_EQ(shape(*b, "model.layers.0.self_attn.o_proj.bias"), (DimVector{4096}));
  EXPECT_EQ(shape(*b, "model.layers.0.mlp.down_proj.bias"), (DimVector{4096}));
  EXPECT_EQ(shape(*b, "model.layers.0.mlp.gate_proj.bias"), (DimVector{11008}));
  ModelConfig u = c;
  u.qkv_bias = u.o_bias = u.mlp_bias = false;
  // q, k, v, o biases (4 * 4096) and gate, up, down biases (2 * 11008 + 4096).
  EXPECT_EQ(b->parameters_numel() - build_model(u)->parameters_numel(),
            4 * 4096 + 2 * 11008 + 4096);
  ModelConfig t = u;
  t.tie_word_embeddings = true;
  const ModulePtr tied = build_model(t);
  EXPECT_EQ(build_model(u)->parameters_numel() - tied->parameters_numel(), 32000 * 4096);
  EXPECT_EQ(tied->get_parameter("lm_head.weight").impl(),
            tied->get_parameter("model.embed_tokens.weight").impl());
}

TEST(ModelShapes, QwenGemmaMixtral) {
  const ModulePtr q = build_model(find_model_config("qwen2.5-7b"));
  EXPECT_EQ(q->type_name(), "Qwen2ForCausalLM");
  EXPECT_EQ(shape(*q, "model.layers.0.self_attn.q_proj.bias"), (DimVector{3584}));
  EXPECT_EQ(shape(*q, "model.layers.0.self_attn.k_proj.bias"), (DimVector{512}));
  EXPECT_EQ(shape(*q, "model.layers.0.self_attn.k_proj.weight"), (DimVector{512, 3584}));
  EXPECT_FALSE(q->get_parameter("model.layers.0.self_attn.o_proj.bias").defined());

  const ModulePtr g = build_model(find_model_config("gemma-7b"));
  EXPECT_EQ(shape(*g, "model.layers.0.self_attn.q_proj.weight"), (DimVector{4096, 3072}));
  EXPECT_EQ(shape(*g, "model.layers.0.self_attn.o_proj.weight"), (DimVector{3072, 4096}));
  EXPECT_EQ(g->get_submodule("model.norm").type_name(), "GemmaRMSNorm");
  // Tied: lm_head.weight is the embedding and is listed once, under the embedding's name.
  const auto gp = g->named_parameters();
  EXPECT_EQ(gp.size(), 1u + 28 * 9 + 1);
  for (const auto& p : gp) EXPECT_NE(p.name, "lm_head.weight");

  const ModulePtr m = build_model(find_model_config("mixtral-8x7b"));
  // transformers 5's fused experts: gate and up of all 8 experts in one tensor, down in another.
  EXPECT_EQ(shape(*m, "model.layers.0.mlp.gate.weight"), (DimVector{8, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.31.mlp.experts.gate_up_proj"), (DimVector{8, 2 * 14336, 4096}));
  EXPECT_EQ(shape(*m, "model.layers.0.mlp.experts.down_proj"), (DimVector{8, 4096, 14336}));
  EXPECT_EQ(m->named_parameters().size(), 3u + 32 * (4 + 1 + 2 + 2));
}

TEST(ModelShapes, Gpt2Conv1DIsInOut) {
  const ModulePtr m = build_model(find_model_config("gpt2"));
  EXPECT_EQ(m->type_name(), "GPT2LMHeadModel");
  EXPECT_EQ(shape(*m, "transformer.wte.weight"), (DimVector{50257, 768}));
  EXPECT_EQ(shape(*m, "transformer.wpe.weight"), (DimVector{1024, 768}));
  EXPECT_EQ(shape(*m, "transformer.h.0.attn.c_attn.weight"), (DimVector{768, 2304}));
  EXPECT_EQ(shape(*m, "transformer.h.0.attn.c_attn.bias"), (DimVector{2304}));
  EXPECT_EQ(shape(*m, "transformer.h.11.attn.c_proj.weight"), (DimVector{768, 768}));
  EXPECT_EQ(shape(*m, "transformer.h.0.mlp.c_fc.weight"), (DimVector{768, 3072}));
  EXPECT_EQ(shape(*m, "transformer.h.0.mlp.c_proj.weight"), (DimVector{3072, 768}));
  EXPECT_EQ(shape(*m, "transformer.h.0.ln_1.bias"), (DimVector{768}));
  EXPECT_EQ(shape(*m, "transformer.ln_f.weight"), (DimVector{768}));
  EXPECT_EQ(m->named_parameters().size(), 148u);  // GPT2LMHeadModel without the tied lm_head
  // n_inner honoured.
  ModelConfig c = find_model_config("gpt2");
  c.intermediate_size = 1000;
  const ModulePtr n = build_model(c);
  EXPECT_EQ(shape(*n, "transformer.h.0.mlp.c_fc.weight"), (DimVector{768, 1000}));
  EXPECT_EQ(shape(*n, "transformer.h.0.mlp.c_proj.weight"), (DimVector{1000, 768}));
}

TEST(ModelShapes, GptNeoX) {
  const ModulePtr m = build_model(find_model_config("pythia-160m"));
  EXPECT_EQ(m->type_name(), "GPTNeoXForCausalLM");
  EXPECT_EQ(shape(*m, "gpt_neox.embed_in.weight"), (DimVector{50304, 768}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.attention.query_key_value.weight"),
            (DimVector{2304, 768}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.attention.query_key_value.bias"), (DimVector{2304}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.attention.dense.weight"), (DimVector{768, 768}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.mlp.dense_h_to_4h.weight"), (DimVector{3072, 768}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.mlp.dense_4h_to_h.weight"), (DimVector{768, 3072}));
  EXPECT_EQ(shape(*m, "gpt_neox.layers.0.input_layernorm.bias"), (DimVector{768}));
  EXPECT_EQ(shape(*m, "gpt_neox.final_layer_norm.weight"), (DimVector{768}));
  EXPECT_EQ(shape(*m, "embed_out.weight"), (DimVector{50304, 768}));
  // rotary_pct 0.25 of head_dim 64: 16 channels, inv_freq [8].
  EXPECT_EQ(m->get_buffer("gpt_neox.rotary_emb.inv_freq").sizes(), (DimVector{8}));
}

TEST(ModelParams, ByKind) {
  const auto k = parameters_by_kind(*build_model(find_model_config("llama2-7b")));
  const int64_t h = 4096;
  EXPECT_EQ(k.at("embedding"), 32000 * h);
  EXPECT_EQ(k.at("lm_head"), 32000 * h);
  EXPECT_EQ(k.at("attention"), 32 * 4 * h * h);
  EXPECT_EQ(k.at("mlp"), 32 * 3 * h * 11008);
  EXPECT_EQ(k.at("norm"), 65 * h);
  EXPECT_EQ(k.size(), 5u);
  const auto m = parameters_by_kind(*build_model(find_model_config("mixtral-8x7b")));
  EXPECT_EQ(m.at("router"), 32 * 8 * 4096);
  EXPECT_EQ(m.at("experts"), int64_t{32} * 8 * 3 * 4096 * 14336);
  const auto g = parameters_by_kind(*build_model(find_model_config("gpt2")));
  EXPECT_EQ(g.at("embedding"), 50257 * 768 + 1024 * 768);  // wte + wpe; the tied lm_head is wte
  EXPECT_EQ(g.count("lm_head"), 0u);
}

TEST(ModelBuild, DtypeOverrideAndBadConfigs) {
  const ModelConfig c = find_model_config("gpt2");
  EXPECT_EQ(build_model(c, {.dtype = DType::kBFloat16})->parameters_nbytes(), 124'439'808 * 2);
  ModelConfig bad = c;
  bad.num_attention_heads = 0;
  EXPECT_THAT([&] { build_model(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("num_attention_heads")));
  bad = c;
  bad.model_type = "t5";
  EXPECT_THAT([&] { build_model(bad); }, ::testing::ThrowsMessage<Error>(HasSubstr("model_type")));
}

}  // namespace
}  // namespace shardplan::tensor
