// The 2025-26 families' traced forward against formulas written out by hand from their papers and
// transformers' modules (tests/data/hf_families configs, small enough to count by hand):
//  - multi-head latent attention (DeepSeek-AI 2024, "DeepSeek-V2" §2.1): five projections and an
//    attention of (d_nope + d_rope) query/key and d_v value channels per head;
//  - a sliding window (Gemma 2, GPT-OSS) or a chunk (Llama 4) bounds the keys of each query: the
//    attention of such a layer counts min(window, s) keys, a full layer s;
//  - shared experts run on every token, routed experts on tokens x k / E each (Note
//    [Expected-load MoE] in tensor/models/models.h).
// And every family's parameters have an init rule, so materialize can fill them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::tensor {
namespace {

const std::string kDir = std::string(SHARDPLAN_TEST_DATA_DIR) + "/hf_families/configs/";

ModelConfig tiny(const std::string& name) { return load_model_config(kDir + name + ".json"); }

double matmul_of(const OpGraph& g, const std::string& module) {
  return g.module_totals().at(module).matmul_flops;
}

// tiny-deepseek-v3: h 256, 4 heads, q_lora 64, kv_lora 32, d_nope 16, d_rope 8, d_v 16.
TEST(FamilyFlops, LatentAttentionByHand) {
  const ModelConfig c = tiny("tiny-deepseek-v3");
  const double B = 2, s = 64, T = B * s, h = 256, n = 4, ql = 64, kvl = 32, dn = 16, dr = 8,
               dv = 16;
  const OpGraph g = trace_model_forward(*build_model(c), 2, 64);
  const std::string a = "model.layers.1.self_attn";
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".q_a_proj"), 2 * T * h * ql);
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".q_b_proj"), 2 * T * ql * n * (dn + dr));
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".kv_a_proj_with_mqa"), 2 * T * h * (kvl + dr));
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".kv_b_proj"), 2 * T * kvl * n * (dn + dv));
  EXPECT_DOUBLE_EQ(matmul_of(g, a + ".o_proj"), 2 * T * n * dv * h);
  // Q K^T over d_nope + d_rope channels, P V over d_v, every key counted (causal mask ignored).
  const double core = 2 * B * n * s * s * ((dn + dr) + dv);
  const double projections =
      2 * T * (h * ql + ql * n * (dn + dr) + h * (kvl + dr) + kvl * n * (dn + dv) + n * dv * h);
  EXPECT_DOUBLE_EQ(matmul_of(g, a), projections + core);
  // Without a query latent (DeepSeek-V2-Lite's shape): one q_proj of h x n (d_nope + d_rope).
  const ModelConfig lite = tiny("tiny-deepseek-v3-noqlora");  // 8 heads, 16 + 16, v 24
  const OpGraph gl = trace_model_forward(*build_model(lite), 1, 32);
  EXPECT_DOUBLE_EQ(matmul_of(gl, "model.layers.0.self_attn.q_proj"), 2 * 32 * 256 * 8 * 32.0);
}

// tiny-gemma2: 4 heads of 64, window 64; layer 0 slides, layer 1 attends to everything.
TEST(FamilyFlops, SlidingWindowCountsWindowKeys) {
  const ModelConfig c = tiny("tiny-gemma2");
  ASSERT_EQ(c.layer_types[0], AttentionType::kSliding);
  ASSERT_EQ(c.layer_types[1], AttentionType::kFull);
  const double s = 256, H = 4, d = 64, W = 64;
  const OpGraph g = trace_model_forward(*build_model(c), 1, 256);
  const double attn_proj = 2 * s * (256 * H * d + 2 * 256 * 2 * d + H * d * 256);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.0.self_attn"), attn_proj + 2 * H * s * W * 2 * d);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.1.self_attn"), attn_proj + 2 * H * s * s * 2 * d);
  // A sequence shorter than the window: every key, as a full layer.
  const OpGraph short_g = trace_model_forward(*build_model(c), 1, 32);
  EXPECT_DOUBLE_EQ(matmul_of(short_g, "model.layers.0.self_attn"),
                   matmul_of(short_g, "model.layers.1.self_attn"));
}

// The window of Mistral (MistralConfig: 4096 unless null) and Mixtral (none unless set) on every
// layer, and Qwen2's from max_window_layers on with use_sliding_window (Qwen2Config): a layer of
// H heads of d attending within W keys counts 2 products x 2 H s W d, a full one 2 x 2 H s s d.
TEST(FamilyFlops, MistralMixtralAndQwen2Windows) {
  const double s = 512, W = 128;
  auto core = [&](const ModelConfig& c, const OpGraph& g, int layer) {
    const std::string a = "model.layers." + std::to_string(layer) + ".self_attn";
    double proj = 0;
    for (const char* p : {".q_proj", ".k_proj", ".v_proj", ".o_proj"}) proj += matmul_of(g, a + p);
    return (matmul_of(g, a) - proj) /
           (4 * s * static_cast<double>(c.num_attention_heads * c.head_dim));
  };
  nlohmann::json m = to_hf_json(find_model_config("mistral-7b"));
  m["num_hidden_layers"] = 2;
  m.erase("sliding_window");  // MistralConfig's default, 4096, is then the window
  EXPECT_EQ(parse_model_config(m).sliding_window, 4096);
  m["sliding_window"] = W;
  ModelConfig c = parse_model_config(m);
  ASSERT_EQ(layer_stack(c).kinds.size(), 1u);
  EXPECT_EQ(layer_stack(c).kinds[0].attention, AttentionType::kSliding);
  EXPECT_EQ(layer_stack(c).kinds[0].window, W);
  EXPECT_DOUBLE_EQ(core(c, trace_model_forward(*build_model(c), 1, 512), 1), W);  // keys/query
  m["sliding_window"] = nullptr;  // Mistral 7B v0.2 and later: none
  c = parse_model_config(m);
  EXPECT_TRUE(c.layer_types.empty());
  EXPECT_DOUBLE_EQ(core(c, trace_model_forward(*build_model(c), 1, 512), 1), s);
  nlohmann::json x = to_hf_json(find_model_config("mixtral-8x7b"));
  x["num_hidden_layers"] = 2;
  x["sliding_window"] = W;
  c = parse_model_config(x);
  EXPECT_DOUBLE_EQ(core(c, trace_model_forward(*build_model(c), 1, 512), 0), W);
  nlohmann::json q = to_hf_json(find_model_config("qwen2.5-7b"));
  q["num_hidden_layers"] = 4;
  q["use_sliding_window"] = true;
  q["sliding_window"] = W;
  q["max_window_layers"] = 2;
  c = parse_model_config(q);
  const OpGraph gq = trace_model_forward(*build_model(c), 1, 512);
  EXPECT_DOUBLE_EQ(core(c, gq, 1), s);  // below max_window_layers: full
  EXPECT_DOUBLE_EQ(core(c, gq, 2), W);
  EXPECT_EQ(parse_model_config(to_hf_json(c)), c);  // written back with its layer_types
  q["use_sliding_window"] = false;  // the window is then ignored, as Qwen2Config does
  EXPECT_TRUE(parse_model_config(q).layer_types.empty());
}

// tiny-llama4-text: chunks of 64 on the RoPE layers (0, 1, 2), layer 3 NoPE and full; 8 heads of
// 32 (2 KV heads); layers 1 and 3 route to 4 experts (top-1) beside a shared expert of 128.
TEST(FamilyFlops, ChunkedLayersAndSharedExpert) {
  const ModelConfig c = tiny("tiny-llama4-text");
  const LayerStack stack = layer_stack(c);
  EXPECT_EQ(stack.kinds.size(), 3U);  // chunked dense (0, 2), chunked moe (1), full moe (3)
  const double s = 256, H = 8, d = 32, C = 64, h = 256;
  const OpGraph g = trace_model_forward(*build_model(c), 1, 256);
  const double proj = 2 * s * (h * H * d + 2 * h * 2 * d + H * d * h);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.1.self_attn"), proj + 2 * H * s * C * 2 * d);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.3.self_attn"), proj + 2 * H * s * s * 2 * d);
  // The shared expert sees every token; the 4 routed experts s x 1 / 4 tokens each; the router
  // every token.
  const double f = 128, E = 4;
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.1.feed_forward.shared_expert"), 2 * s * 3 * h * f);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.1.feed_forward.experts"),
                   E * (s * 1 / E) * 2 * 3 * h * f);
  EXPECT_DOUBLE_EQ(matmul_of(g, "model.layers.1.feed_forward"),
                   2 * s * 3 * h * f + s * 2 * 3 * h * f + 2 * s * h * E);
}

// Active parameters: every shared expert, top-k of the routed ones. tiny-qwen2-moe: 3 layers,
// 8 experts of 3 x 256 x 64, top-2, shared expert 3 x 256 x 256 and its gate 256.
TEST(FamilyFlops, SharedExpertsAreAlwaysActive) {
  const ModelConfig c = tiny("tiny-qwen2-moe");
  const ModulePtr m = build_model(c);
  const int64_t total = m->parameters_numel();
  const int64_t routed = 3 * 8 * 3 * 256 * 64;
  EXPECT_EQ(active_parameters(*m, c), total - routed + routed * 2 / 8);
}

TEST(FamilyFlops, EveryFamilyHasInitRulesForEveryParameter) {
  for (const char* name :
       {"tiny-deepseek-v3", "tiny-deepseek-v3-noqlora", "tiny-gemma2", "tiny-gemma3-text",
        "tiny-glm4-moe", "tiny-gpt-oss", "tiny-llama4-text", "tiny-mixtral", "tiny-olmo2",
        "tiny-phi3", "tiny-qwen2-moe", "tiny-qwen3", "tiny-qwen3-moe"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = tiny(name);
    const ModulePtr m = build_model(c);
    EXPECT_EQ(parameter_inits(*m, c).size(), m->named_parameters().size());
  }
  // The special cases transformers' _init_weights makes (docs/launching.md).
  const ModelConfig oss = tiny("tiny-gpt-oss");
  for (const NamedInit& i : parameter_inits(*build_model(oss), oss)) {
    if (i.name.ends_with("sinks") || i.name.ends_with("router.bias")) {
      EXPECT_EQ(i.init.kind, ParameterInit::Kind::kNormal) << i.name;
    }
    if (i.name.ends_with("_proj_bias")) {
      EXPECT_EQ(i.init.kind, ParameterInit::Kind::kConstant) << i.name;
      EXPECT_EQ(i.init.a, 0.0) << i.name;
    }
  }
  const ModelConfig g3 = tiny("tiny-gemma3-text");
  for (const NamedInit& i : parameter_inits(*build_model(g3), g3)) {
    if (i.name.ends_with("norm.weight")) {
      EXPECT_EQ(i.init.a, 0.0) << i.name;  // (1 + w) form
    }
  }
}

}  // namespace
}  // namespace shardplan::tensor
