// Tensor-parallel plans (planner/cost/tensor_parallel.h): what TP rank 0 holds, from
// parallelize_module's local shapes, against counts written out by hand from each config
// (Megatron's split: projections and vocabulary divided by tp, norms, routers and row-parallel
// biases replicated).
#include "planner/cost/tensor_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// Llama-3-8B on 8 ranks (h 4096, 8 KV heads of 128, MLP 14336, vocab 128256, 32 layers):
//   embedding and output layer: 128256 x 4096 / 8 = 65,667,072 each
//   per layer: attention (2 x 4096^2 + 2 x 1024 x 4096) / 8 = 5,242,880,
//              MLP 3 x 4096 x 14336 / 8 = 22,020,096, two RMSNorms 8,192 (replicated)
//   32 layers x 27,271,168 + final norm 4,096 + 2 x 65,667,072 = 1,004,015,616
TEST(TensorParallel, LlamaThreeEightBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("llama3-8b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 1'004'015'616);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 1'004'015'616);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 1), 8'030'261'248);     // the whole model
}

// Mixtral-8x7B on 4 ranks: every expert split like a gated MLP, the router replicated.
//   embedding and output layer: 32000 x 4096 / 4 = 32,768,000 each
//   per layer: attention 41,943,040 / 4 = 10,485,760; experts 8 x 3 x 4096 x 14336 / 4 =
//              352,321,536; router 4096 x 8 = 32,768; norms 8,192
//   32 x 362,848,256 + 4,096 + 2 x 32,768,000 = 11,676,684,288
TEST(TensorParallel, MixtralExpertsSplitByTensorParallelism) {
  EXPECT_EQ(tp_rank_parameters(tensor::find_model_config("mixtral-8x7b"), 4), 11'676'684'288);
}

// GPT-NeoX-20B on 8 ranks (h 6144, MLP 24576, vocab 50432, 44 layers; biases everywhere):
//   embed_in and embed_out: 50432 x 6144 / 8 = 38,731,776 each
//   per layer: query_key_value (3h x h + 3h) / 8 = 14,158,080; dense h x h / 8 = 4,718,592 plus
//              its bias 6,144 (row-parallel: replicated); dense_h_to_4h (4h x h + 4h) / 8 =
//              18,877,440; dense_4h_to_h 4h x h / 8 = 18,874,368 plus bias 6,144; two LayerNorms
//              24,576
//   44 x 56,665,344 + final LayerNorm 12,288 + 2 x 38,731,776 = 2,570,750,976
TEST(TensorParallel, GptNeoxFusedQkvSplitsByHead) {
  EXPECT_EQ(tp_rank_parameters(tensor::find_model_config("gpt-neox-20b"), 8), 2'570'750'976);
}

// GLM-4-9B-0414 on 2 ranks (h 4096, 2 KV heads of 128, MLP 13696 as one gate_up_proj, vocab
// 151552, 40 layers; q, k, v biases): gate_up_proj splits each half (SS0:2), as Megatron-LM's
// fused linear_fc1.
//   embed_tokens and lm_head: 151552 x 4096 / 2 = 310,378,496 each
//   per layer: q (4096^2 + 4096) / 2 = 8,390,656; k, v (256 x 4096 + 256) / 2 = 524,416 each;
//              o 4096^2 / 2 = 8,388,608; gate_up 27392 x 4096 / 2 = 56,098,816; down 13696 x
//              4096 / 2 = 28,049,408; four RMSNorms 16,384 (replicated)
//   40 x 101,992,704 + final norm 4,096 + 2 x 310,378,496 = 4,700,469,248
TEST(TensorParallel, Glm4FusedGateUpSplitsEachHalf) {
  const tensor::ModelConfig c = tensor::find_model_config("glm-4-9b-0414");
  EXPECT_EQ(tp_rank_parameters(c, 2), 4'700'469'248);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 4'700'469'248);
}

// GPT-2 small on 4 ranks (h 768, vocab 50257, 12 layers, 1024 positions; Conv1D weights [in, out],
// output layer tied to wte):
//   wte by vocabulary rows: torch.chunk of 50257 into 4 gives 12565, 12565, 12565, 12562 rows, so
//   rank 0 holds 12565 x 768 = 9,649,920 and rank 3 12562 x 768 = 9,647,616; wpe 786,432 replicated
//   per layer: c_attn (768 x 2304 + 2304) / 4 = 442,944 (q, k and v each split: SS1:3);
//              attn.c_proj 768 x 768 / 4 = 147,456 plus its bias 768; c_fc (768 x 3072 + 3072) / 4
//              = 590,592; mlp.c_proj 3072 x 768 / 4 = 589,824 plus bias 768; ln_1, ln_2 3,072
//   rank 0: 9,649,920 + 786,432 + 12 x 1,775,424 + ln_f 1,536 = 31,742,976
TEST(TensorParallel, GptTwoFusedQkvAndConv1D) {
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  EXPECT_EQ(tp_rank_parameters(gpt2, 4, 0), 31'742'976);
  EXPECT_EQ(tp_rank_parameters(gpt2, 4, 3), 31'742'976 - 9'649'920 + 9'647'616);
  EXPECT_EQ(tp_rank_parameters(gpt2, 1), 124'439'808);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(gpt2));
  ASSERT_EQ(rules.size(), 6u);
  EXPECT_EQ(rules[1].fused_parts, 3);
}

// Falcon-40B on 8 ranks (h 8192, 128 heads of 64 in 8 key-value groups, MLP 32768, vocab 65024
// tied, 60 layers, no biases): query_key_value is laid out per group ([16 queries, k, v] x 8), so
// its plain row split gives each rank one whole group, 18 of the 144 heads' rows.
//   word_embeddings (and the tied lm_head, once): 65024 x 8192 / 8 = 66,584,576
//   per layer: query_key_value 9216 x 8192 / 8 = 9,437,184; dense 8,388,608; dense_h_to_4h and
//              dense_4h_to_h 33,554,432 each; ln_attn and ln_mlp 32,768 (replicated)
//   60 x 84,967,424 + ln_f 16,384 + 66,584,576 = 5,164,646,400
TEST(TensorParallel, FalconFusedQkvSplitsByKeyValueGroup) {
  const tensor::ModelConfig c = tensor::find_model_config("falcon-40b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 5'164'646'400);
  EXPECT_EQ(tp_rank_parameters(c, 8, 5), 5'164'646'400);
  EXPECT_EQ(tp_rank_parameters(c, 1), 41'303'293'952);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c));
  ASSERT_EQ(rules.size(), 6u);
  EXPECT_EQ(rules[1].fused_parts, 1);  // a plain split: whole groups, not [q; k; v] thirds
}

TEST(TensorParallel, EveryFamilyHasAPlanAndBadRanksAreErrors) {
  EXPECT_THROW((void)tp_rank_parameters(tensor::find_model_config("gpt2"), 2, 2), Error);
  EXPECT_THROW((void)tp_rank_parameters(tensor::find_model_config("gpt2"), 0), Error);
  // Every registered plan names modules its family builds (parallelize_module refuses a pattern
  // that matches nothing) and lays tied weights out consistently.
  for (const char* model :
       {"llama3-8b", "mistral-7b", "qwen2.5-7b", "gemma-7b", "pythia-160m", "megatron-gpt-1.7"}) {
    EXPECT_NO_THROW((void)tp_rank_parameters(tensor::find_model_config(model), 2)) << model;
  }
}

// OLMo Hybrid 7B on 2 ranks (h 3840, 30 heads of 128, MLP 11008, vocab 100352, 24 Gated DeltaNet
// layers of 30 key heads of 96 and 30 value heads of 192, 8 attention layers): every projection
// of both mixers split by whole heads, the convolution, A_log, dt_bias and the norms replicated.
//   embed_tokens and lm_head: 100352 x 3840 / 2 = 192,675,840 each
//   linear layer: q, k 2880 x 3840 / 2 = 5,529,600 each; v, g, o 5760 x 3840 / 2 = 11,059,200
//                 each; a, b 30 x 3840 / 2 = 57,600 each; conv1d 11520 x 4, A_log, dt_bias 30,
//                 o_norm 192 (46,332 replicated); MLP 3 x 3840 x 11008 / 2 = 63,406,080; two
//                 norms 7,680: 107,812,092
//   attention layer: 4 x 3840^2 / 2 = 29,491,200; q_norm, k_norm 7,680; MLP 63,406,080; two
//                 norms 7,680: 92,912,640
//   24 x 107,812,092 + 8 x 92,912,640 + final norm 3,840 + 2 x 192,675,840 = 3,716,146,848
TEST(TensorParallel, OlmoHybridSplitsBothMixersByHead) {
  const tensor::ModelConfig c = tensor::find_model_config("olmo-hybrid-7b");
  EXPECT_EQ(tp_rank_parameters(c, 2), 3'716'146'848);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 3'716'146'848);
  EXPECT_EQ(tp_rank_parameters(c, 1), 7'430'870'688);
}

// Pipeline stages of Llama-3-8B, tp 8 x pp 4: 8 layers of 27,271,168 each per stage (see above);
// the embedding (65,667,072) on stage 0, the final norm (4,096) and output layer (65,667,072) on
// stage 3. The stages sum to the TP rank's 1,004,015,616.
TEST(StageParameters, LlamaEmbeddingFirstHeadLast) {
  const std::vector<int64_t> s = stage_parameters(tensor::find_model_config("llama3-8b"), 8, 4);
  const int64_t layers = 8 * int64_t{27'271'168};
  EXPECT_EQ(
      s, (std::vector<int64_t>{65'667'072 + layers, layers, layers, layers + 4'096 + 65'667'072}));
}

// GPT-2 small, pp 2, no TP: 6 layers of 7,087,872 per stage (7,083,264 in projections, 4,608 in
// biases of row-parallel layers and norms). Stage 0 holds wte 38,597,376 and wpe 786,432; stage 1
// holds ln_f 1,536 and the output layer, which is wte tied: Megatron keeps a copy there, so the
// stages sum to 124,439,808 + 38,597,376. With one stage the tied weight counts once.
TEST(StageParameters, TiedEmbeddingLivesOnBothEnds) {
  const tensor::ModelConfig gpt2 = tensor::find_model_config("gpt2");
  const int64_t half = 6 * int64_t{7'087'872};
  EXPECT_EQ(stage_parameters(gpt2, 1, 2),
            (std::vector<int64_t>{38'597'376 + 786'432 + half, half + 1'536 + 38'597'376}));
  EXPECT_EQ(stage_parameters(gpt2, 1, 1), (std::vector<int64_t>{124'439'808}));
  // 12 layers over 5 stages: floor(s 12 / 5) = 0, 2, 4, 7, 9, 12 -> 2, 2, 3, 2, 3 layers.
  const std::vector<int64_t> five = stage_parameters(gpt2, 1, 5);
  EXPECT_EQ(five[1], 2 * int64_t{7'087'872});
  EXPECT_EQ(five[2], 3 * int64_t{7'087'872});
  EXPECT_THROW((void)stage_parameters(gpt2, 1, 13), Error);
}

}  // namespace
// What the planner relies on to count parameters from a 3-layer copy of a model (planner.cpp,
// params_for): one layer per stage, the full model's list is [first, middle x (L - 2), last] of
// the copy's, for dense, tied, fused and MoE families, with and without TP.
TEST(StageParameters, ThreeLayerCopyGivesEveryLayer) {
  for (const char* name : {"llama3-8b", "gpt2", "mixtral-8x7b", "pythia-160m"}) {
    const tensor::ModelConfig full = tensor::find_model_config(name);
    tensor::ModelConfig small = full;
    small.num_hidden_layers = 3;
    for (int64_t tp : {1, 2}) {
      const std::vector<int64_t> every = stage_parameters(full, tp, full.num_hidden_layers, 0);
      const std::vector<int64_t> few = stage_parameters(small, tp, 3, 0);
      std::vector<int64_t> expanded(static_cast<size_t>(full.num_hidden_layers), few[1]);
      expanded.front() = few[0];
      expanded.back() = few[2];
      EXPECT_EQ(every, expanded) << name << " tp " << tp;
      int64_t sum_every = 0, sum_few = 0;
      for (int64_t n : every) sum_every += n;
      for (int64_t n : few) sum_few += n;
      // Tied weights counted on both ends, the same amount in both models.
      EXPECT_EQ(sum_every - tp_rank_parameters(full, tp, 0),
                sum_few - tp_rank_parameters(small, tp, 0))
          << name << " tp " << tp;
    }
  }
}

}  // namespace shardplan::planner

namespace shardplan::planner {
namespace {

// Routed experts counted from the built model: Mixtral-8x7B's layer holds 8 experts of w1, w3
// (14336 x 4096, column-wise under TP) and w2 (4096 x 14336, row-wise), 3 x 4096 x 14336 each.
TEST(ExpertParameters, MixtralLayerByHandAndSplitByTp) {
  const tensor::ModelConfig m = tensor::find_model_config("mixtral-8x7b");
  const int64_t per_expert = int64_t{3} * 4096 * 14336;
  EXPECT_EQ(expert_parameters_per_layer(m, 1), 8 * per_expert);
  EXPECT_EQ(expert_parameters_per_layer(m, 8), 8 * per_expert / 8);
  EXPECT_EQ(expert_parameters_per_layer(tensor::find_model_config("llama3-8b"), 1), 0);
}

}  // namespace
}  // namespace shardplan::planner
