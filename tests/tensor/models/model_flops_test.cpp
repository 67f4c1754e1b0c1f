// The traced forward of the built models against published FLOP formulas and hand counts:
// Megatron-LM's 72 B L s h^2 (1 + s/6h + V/12hL) for GPT models (Narayanan et al. 2021 Eq. 3
// without recompute = Korthikanti et al. 2022 Eq. 7), the GEMM FLOPs of Llama with GQA, and
// Mixtral's expected-load experts (Note [Expected-load MoE] in tensor/models/models.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tensor/models/models.h"

namespace shardplan::tensor {
namespace {

int count_ops(const OpGraph& g, std::string_view op) {
  int n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op;
  return n;
}

// Megatron's formula counts GEMMs only: 24 B s h^2 + 4 B s^2 h per layer forward and 2 B s h V
// for the logits; fwd + bwd = 3 x forward. What it neglects (and the trace counts in `flops`, not
// `matmul_flops`): LayerNorm, GeLU, softmax, bias adds, residual adds, dropout.
TEST(ModelFlops, GptMatchesMegatronFormula) {
  for (const char* name : {"megatron-gpt-1.7", "megatron-gpt-18.4", "megatron-gpt-1t", "gpt2"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = find_model_config(name);
    const ModulePtr m = build_model(c);
    const double B = 2, s = 512, L = static_cast<double>(c.num_hidden_layers),
                 h = static_cast<double>(c.hidden_size), V = static_cast<double>(c.vocab_size);
    const OpGraph g = trace_model_forward(*m, 2, 512);
    const double eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
    EXPECT_DOUBLE_EQ(3 * g.totals().matmul_flops, eq7);
    // The neglected terms are small but present: under 2% here.
    EXPECT_GT(g.totals().flops, g.totals().matmul_flops);
    EXPECT_LT(g.totals().flops, 1.02 * g.totals().matmul_flops);
    EXPECT_EQ(count_ops(g, "scaled_dot_product_attention"), c.num_hidden_layers);
  }
}

// Llama-3-8B: 2 FLOPs per weight element of every projection per token, plus attention's
// Q K^T and P V, 2 * s * d each per head and query (counted in full despite the causal mask),
// plus the logits.
TEST(ModelFlops, Llama3_8BByHand) {
  const ModulePtr m = build_model(find_model_config("llama3-8b"));
  const double s = 256, h = 4096, f = 14336, L = 32, H = 32, KV = 8, d = 128, V = 128256;
  const OpGraph g = trace_model_forward(*m, 1, 256);
  const double proj = h * H * d + 2 * h * KV * d + H * d * h + 3 * h * f;
  const double per_token = L * (2 * proj + 2 * 2 * s * d * H) + 2 * h * V;
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, per_token * s);
  // Grouped-query attention: k and v reach sdpa with 8 heads, q with 32.
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    EXPECT_EQ(g.tensor(n.inputs[0]).sizes, (DimVector{1, 32, 256, 128}));
    EXPECT_EQ(g.tensor(n.inputs[1]).sizes, (DimVector{1, 8, 256, 128}));
    EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 32, 256, 128}));
  }
  // Rotary: the tables once (cos, sin), then per layer rotate_half on q and k (2 neg).
  EXPECT_EQ(count_ops(g, "cos"), 1);
  EXPECT_EQ(count_ops(g, "sin"), 1);
  EXPECT_EQ(count_ops(g, "neg"), 2 * 32);
  // The logits: [1, 256, V] in bfloat16.
  const OpNode& last = g.nodes().back();
  EXPECT_EQ(g.tensor(last.outputs[0]).sizes, (DimVector{1, 256, 128256}));
  EXPECT_EQ(g.tensor(last.outputs[0]).dtype, DType::kBFloat16);
  EXPECT_EQ(last.module, "lm_head");
}

TEST(ModelFlops, MixtralExpectedLoad) {
  ModelConfig c = find_model_config("mixtral-8x7b");
  c.num_hidden_layers = 2;
  const ModulePtr m = build_model(c);
  const double T = 2 * 128, h = 4096, f = 14336, E = 8, k = 2;
  const OpGraph g = trace_model_forward(*m, 2, 128);
  const auto& per = g.module_totals();
  // Each of the E experts runs on T k / E = 64 tokens: 3 projections of 2 h f FLOPs per token,
  // as two grouped GEMMs (gate and up fused, then down).
  EXPECT_EQ(per.at("model.layers.0.mlp.experts").matmul_flops, E * (T * k / E) * 3 * 2 * h * f);
  // The whole block: router on every token + all experts = T k tokens' worth of one expert.
  EXPECT_EQ(per.at("model.layers.1.mlp").matmul_flops, 2 * T * h * E + T * k * 3 * 2 * h * f);
  // An uneven share rounds up: 3 tokens * 2 / 8 -> 1 token per expert, 8 experts.
  const OpGraph small = trace_model_forward(*m, 1, 3);
  EXPECT_EQ(small.module_totals().at("model.layers.0.mlp.experts").matmul_flops,
            E * 1 * 3 * 2 * h * f);
}

TEST(ModelFlops, EveryFamilyTracesToLogits) {
  for (const char* name : {"llama2-7b", "mistral-7b", "qwen2.5-7b", "gemma-7b", "pythia-160m",
                           "gpt-neox-20b", "llama3.1-405b"}) {
    SCOPED_TRACE(name);
    ModelConfig c = find_model_config(name);
    c.num_hidden_layers = 2;
    if (!c.layer_types.empty()) c.layer_types.resize(2);  // Mistral's window (4096 > s: no effect)
    const ModulePtr m = build_model(c);
    const OpGraph g = trace_model_forward(*m, 2, 64);
    EXPECT_EQ(g.tensor(g.nodes().back().outputs[0]).sizes, (DimVector{2, 64, c.vocab_size}));
    // 2 FLOPs per token per weight element of every projection (biases excluded: they are adds),
    // plus attention's 4 s H d per token per layer, plus the logits.
    const double L = static_cast<double>(c.num_hidden_layers), s = 64, tokens = 2 * s;
    const auto p = parameters_by_kind(*m);
    double biases = 0;
    if (c.qkv_bias)
      biases +=
          static_cast<double>((c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim);
    if (c.o_bias) biases += static_cast<double>(c.hidden_size);
    if (c.mlp_bias) biases += static_cast<double>(c.intermediate_size + c.hidden_size);
    const double weights = static_cast<double>(p.at("attention") + p.at("mlp")) - L * biases +
                           static_cast<double>(c.vocab_size * c.hidden_size);
    const double attention = L * 4 * s * static_cast<double>(c.num_attention_heads * c.head_dim);
    EXPECT_DOUBLE_EQ(g.totals().matmul_flops, tokens * (2 * weights + attention));
  }
}

TEST(ModelFlops, TrainingBuildAddsDropout) {
  ModelConfig c = find_model_config("gpt2");
  c.num_hidden_layers = 2;
  EXPECT_EQ(count_ops(trace_model_forward(*build_model(c), 1, 16), "dropout"), 0);
  BuildOptions training;
  training.training = true;
  const ModulePtr t = build_model(c, training);
  // Embedding, and per layer the attention and MLP residual branches (attention's own dropout is
  // inside scaled_dot_product_attention).
  EXPECT_EQ(count_ops(trace_model_forward(*t, 1, 16), "dropout"), 1 + 2 * 2);
}

TEST(ModelFlops, BadSizes) {
  ModelConfig c = find_model_config("gpt2");
  c.num_hidden_layers = 1;
  const ModulePtr m = build_model(c);
  EXPECT_THROW(trace_model_forward(*m, 0, 16), Error);
  // Learned positions: GPT-2 has 1024.
  EXPECT_THAT([&] { trace_model_forward(*m, 1, 1025); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("exceeds n_positions 1024")));
}

}  // namespace
}  // namespace shardplan::tensor
