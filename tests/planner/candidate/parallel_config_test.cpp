// Parallel configurations (planner/candidate/parallel_config.h): what makes one runnable for a
// model and a job, on Llama-3-70B (64 heads, 8 KV heads, 80 layers, 8192 positions) and
// Mixtral-8x7B (8 experts), with one line naming the flag for each violation.
#include "planner/candidate/parallel_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;

const tensor::ModelConfig& llama70b() {
  static const tensor::ModelConfig c = tensor::find_model_config("llama3-70b");
  return c;
}

std::string error_of(const tensor::ModelConfig& m, const TrainingSetup& s,
                     const ParallelConfig& c) {
  try {
    check_parallel_config(m, s, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

constexpr TrainingSetup kJob{.gpus = 64, .seq = 4096, .global_batch = 256};

TEST(ParallelConfig, AValidConfigurationAndItsPipeline) {
  const ParallelConfig c{
      .tp = 8, .pp = 4, .dp = 2, .micro_batch = 2, .virtual_stages = 2, .sequence_parallel = true};
  EXPECT_EQ(error_of(llama70b(), kJob, c), "");
  EXPECT_EQ(micro_batches_per_step(kJob, c), 64);  // 256 / (2 x 2)
  const PipelineShape p = pipeline_shape(kJob, c);
  EXPECT_EQ(p.schedule, PipelineSchedule::kInterleaved1F1B);
  EXPECT_EQ(p.stages, 4);
  // tp 16 over 8 KV heads replicates each KV head on 2 ranks, as Megatron-LM does.
  EXPECT_EQ(error_of(llama70b(), kJob, {.tp = 16, .pp = 4, .dp = 1}), "");
}

TEST(ParallelConfig, ContradictionsAreOneLineNamingTheFlag) {
  const tensor::ModelConfig& m = llama70b();
  EXPECT_THAT(error_of(m, kJob, {.tp = 8, .pp = 4, .dp = 4}),
              HasSubstr("--tp 8 x --pp 4 x --dp 4 x --cp 1 = 128, expected --gpus 64"));
  EXPECT_THAT(error_of(m, kJob, {.tp = 3, .pp = 1, .dp = 1, .cp = 1}),
              HasSubstr("expected --gpus"));
  EXPECT_THAT(error_of(m, {.gpus = 48, .seq = 4096, .global_batch = 96}, {.tp = 3, .dp = 16}),
              HasSubstr("--tp 3 does not divide the model's 64 attention heads"));
  EXPECT_THAT(error_of(m, {.gpus = 64, .seq = 10000, .global_batch = 256}, {.tp = 8, .dp = 8}),
              HasSubstr("--seq 10000 is longer than llama's 8192 positions"));
  // 2^55 + 1 sequences of 512 tokens: the token count would wrap int64 (to 512).
  EXPECT_THAT(error_of(m, {.gpus = 1, .seq = 512, .global_batch = 36028797018963969}, {}),
              HasSubstr("--global-batch 36028797018963969 x --seq 512 tokens per step overflow"));
  EXPECT_THAT(error_of(m, {.gpus = int64_t{1} << 21, .seq = 512, .global_batch = 1 << 21}, {}),
              HasSubstr("--gpus 2097152 is more than shardplan plans for, expected at most "
                        "1048576"));
  EXPECT_THAT(error_of(m, {.gpus = 64, .seq = 4096, .global_batch = 250}, {.tp = 8, .dp = 8}),
              HasSubstr("--global-batch 250 is not divisible by --dp 8 x --micro-batch 1"));
  EXPECT_THAT(error_of(m, kJob, {.tp = 8, .dp = 4, .cp = 2, .ep = 2}),
              HasSubstr("--ep 2 on a dense model"));
  EXPECT_THAT(error_of(m, {.gpus = 24, .seq = 4096, .global_batch = 24}, {.tp = 8, .cp = 3}),
              HasSubstr("--cp 3: --seq 4096 is not divisible by 2 x 3"));
  EXPECT_THAT(error_of(m, kJob, {.tp = 8, .dp = 8, .zero = 4}),
              HasSubstr("--zero 4, expected 0, 1, 2 or 3"));
  EXPECT_THAT(error_of(m, kJob, {.tp = 1, .dp = 64, .sequence_parallel = true}),
              HasSubstr("--sequence-parallel on needs tensor parallelism"));
  // 256 / (1 x 8) = 32 micro-batches is a multiple of pp 8, but 81 chunks exceed 80 layers.
  EXPECT_THAT(error_of(m, {.gpus = 64, .seq = 4096, .global_batch = 256},
                       {.tp = 8, .pp = 8, .dp = 1, .virtual_stages = 81}),
              HasSubstr("--pp 8 x --virtual-stages 81 model chunks for 80 layers"));
  EXPECT_THAT(error_of(m, {.gpus = 64, .seq = 4096, .global_batch = 12},
                       {.tp = 8, .pp = 8, .dp = 1, .virtual_stages = 2}),
              HasSubstr("12 micro-batches per step is not a multiple of --pp 8"));
}

TEST(ParallelConfig, ExpertParallelismOnAMixtureOfExperts) {
  const tensor::ModelConfig m = tensor::find_model_config("mixtral-8x7b");
  const TrainingSetup job{.gpus = 64, .seq = 4096, .global_batch = 256};
  EXPECT_EQ(error_of(m, job, {.tp = 4, .pp = 2, .dp = 8, .ep = 8}), "");
  EXPECT_THAT(error_of(m, job, {.tp = 4, .pp = 4, .dp = 4, .ep = 8}),
              HasSubstr("--ep 8 does not divide --dp 4"));
  EXPECT_THAT(
      error_of(m, {.gpus = 48, .seq = 4096, .global_batch = 48}, {.tp = 4, .dp = 12, .ep = 3}),
      HasSubstr("--ep 3 does not divide the model's 8 experts"));
}

TEST(ParallelConfig, PrecisionNames) {
  EXPECT_EQ(parse_precision("FP8"), Precision::kFp8);
  EXPECT_EQ(to_string(Precision::kBf16), "bf16");
  EXPECT_THROW(parse_precision("fp4"), Error);
}

}  // namespace
}  // namespace shardplan::planner
