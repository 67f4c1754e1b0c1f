// --precision fp8 (Note [FP8 GEMMs] in planner/cost/compute_cost.h): the linear layers' GEMMs at
// the fp8 peak plus the quantization of their operands, everything else, the fused attention
// included, as in bf16.
#include <gtest/gtest.h>

#include "collectives/cluster.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

ComputeModel h100(Precision p) {
  return compute_model(collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), p);
}

TracedModel llama3_8b_block(int64_t seq) {
  return trace_one_block(tensor::find_model_config("llama3-8b"),
                         {.micro_batch = 1,
                          .seq = seq,
                          .recompute = tensor::RecomputePolicy::kNone,
                          .attention = tensor::AttentionImpl::kFlash,
                          .dtype = tensor::DType::kBFloat16});
}

TEST(Fp8, AttentionKeepsTheBf16Rate) {
  const ComputeModel fp8 = h100(Precision::kFp8);
  const ComputeModel bf16 = h100(Precision::kBf16);
  EXPECT_DOUBLE_EQ(fp8.peak_flops, 1978.9e12);
  EXPECT_DOUBLE_EQ(attention_compute(fp8).peak_flops, 989.4e12);
  EXPECT_TRUE(fp8.quantized_gemms);
  EXPECT_FALSE(bf16.quantized_gemms);
  const TracedModel t = llama3_8b_block(4096);
  for (const int64_t tp : {1, 4}) {
    SCOPED_TRACE(tp);
    const RankWork w8 = rank_work(t, fp8, {.tp = tp});
    const RankWork w16 = rank_work(t, bf16, {.tp = tp});
    EXPECT_GT(w8.block().attention_s, 0);
    EXPECT_DOUBLE_EQ(w8.block().attention_s, w16.block().attention_s);
    // The GEMMs got faster, so the block did too, but by less than half.
    EXPECT_LT(w8.block().forward_s, w16.block().forward_s);
    EXPECT_GT(w8.block().forward_s, 0.5 * w16.block().forward_s);
  }
}

// The quantization traffic by hand. Llama 3 8B's linear layers per token: inputs q, k, v, gate
// and up read the hidden state (h each), o reads the attention output (h) and down the MLP's
// inner activation (ffn): 6 h + ffn elements. Outputs: q h, k and v kv_heads x head_dim each, o
// h, gate and up ffn each, down h: 3 h + 2 x 1024 + 2 ffn. At the H100's 0.90 x 3.35 TB/s, an
// input costs 1 + 1 bytes in the forward (two fp8 copies written by its producer) and an output
// gradient 2 + 1 + 1 in the backward (read bf16, write two fp8 copies).
TEST(Fp8, QuantizationTrafficOfTheLinearLayers) {
  const ComputeModel fp8 = h100(Precision::kFp8);
  ComputeModel no_quantize = fp8;
  no_quantize.quantized_gemms = false;
  const int64_t tokens = 4096;
  const TracedModel t = llama3_8b_block(tokens);
  const double h = 4096, ffn = 14336, kv = 8 * 128;
  const double bw = 3350e9 * 0.90;
  const double fwd_bytes = 2.0 * tokens * (6 * h + ffn);
  const double bwd_bytes = 4.0 * tokens * (3 * h + 2 * kv + 2 * ffn);
  const RankWork with = rank_work(t, fp8, {.tp = 1});
  const RankWork without = rank_work(t, no_quantize, {.tp = 1});
  EXPECT_NEAR(with.block().forward_s - without.block().forward_s, fwd_bytes / bw, 1e-9);
  EXPECT_NEAR(with.block().backward_s - without.block().backward_s, bwd_bytes / bw, 1e-9);
  // Nothing is recomputed under RecomputePolicy::kNone.
  EXPECT_DOUBLE_EQ(with.block().recompute_s, without.block().recompute_s);
  // Under tp 4 each rank quantizes its column-parallel inputs whole and its row-parallel ones a
  // quarter (o and down read K / 4); outputs the other way round.
  const RankWork with4 = rank_work(t, fp8, {.tp = 4});
  const RankWork without4 = rank_work(t, no_quantize, {.tp = 4});
  const double fwd4 = 2.0 * tokens * (5 * h + h / 4 + ffn / 4);
  const double bwd4 = 4.0 * tokens * ((h + 2 * kv + 2 * ffn) / 4 + 2 * h);
  EXPECT_NEAR(with4.block().forward_s - without4.block().forward_s, fwd4 / bw, 1e-9);
  EXPECT_NEAR(with4.block().backward_s - without4.block().backward_s, bwd4 / bw, 1e-9);
}

TEST(Fp8, Bf16AndCpuModelsQuantizeNothing) {
  EXPECT_EQ(quantize_seconds(h100(Precision::kBf16), 1e9, 1e9, 2).forward, 0);
  const ComputeModel cpu = compute_model(
      collectives::load_cluster(collectives::resolve_cluster("cpu-local")), Precision::kBf16);
  EXPECT_FALSE(cpu.quantized_gemms);
  EXPECT_DOUBLE_EQ(attention_compute(cpu).peak_flops, cpu.peak_flops);
}

}  // namespace
}  // namespace shardplan::planner
