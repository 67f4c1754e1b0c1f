// Pipeline schedules (planner/candidate/pipeline_schedule.h): bubbles from Narayanan et al. 2021
// §2.2.1-2.2.2 and in-flight activations from Korthikanti et al. 2022 §4.2.3, each worked out by
// hand below.
#include "planner/candidate/pipeline_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;

PipelineShape one_f_one_b(int64_t p, int64_t m) {
  return {
      .stages = p, .micro_batches = m, .virtual_stages = 1, .schedule = PipelineSchedule::k1F1B};
}
PipelineShape interleaved(int64_t p, int64_t m, int64_t v) {
  return {.stages = p,
          .micro_batches = m,
          .virtual_stages = v,
          .schedule = PipelineSchedule::kInterleaved1F1B};
}

TEST(PipelineSchedule, BubbleFractions) {
  EXPECT_DOUBLE_EQ(bubble_fraction(one_f_one_b(4, 16)), 3.0 / 16);     // (p - 1) / m
  EXPECT_DOUBLE_EQ(bubble_fraction(interleaved(4, 16, 2)), 3.0 / 32);  // (p - 1) / (v m)
  EXPECT_DOUBLE_EQ(bubble_fraction(one_f_one_b(1, 7)), 0.0);
  const PipelineShape gpipe{.stages = 4, .micro_batches = 16, .schedule = PipelineSchedule::kGPipe};
  EXPECT_DOUBLE_EQ(bubble_fraction(gpipe), 3.0 / 16);
}

// 1F1B: stage r holds min(m, p - r) micro-batches of L / p layers; the first stage always L layers.
TEST(PipelineSchedule, OneFOneBFirstStageHoldsAllLayers) {
  EXPECT_EQ(chunks_in_flight(one_f_one_b(4, 16), 0), 4);
  EXPECT_EQ(chunks_in_flight(one_f_one_b(4, 16), 3), 1);
  EXPECT_DOUBLE_EQ(layer_activations_held(one_f_one_b(4, 16), 0, 32), 32.0);  // 4 x 32 / 4
  // Fewer micro-batches than stages: only m are ever in flight.
  EXPECT_EQ(chunks_in_flight(one_f_one_b(8, 4), 0), 4);
  // GPipe runs all m forwards first.
  const PipelineShape gpipe{.stages = 4, .micro_batches = 16, .schedule = PipelineSchedule::kGPipe};
  EXPECT_DOUBLE_EQ(layer_activations_held(gpipe, 0, 32), 16 * 8.0);
}

// Interleaved, p = 4, v = 2: stage 0 warms up 2 (p - 1) + (v - 1) p = 6 + 4 = 10 chunk forwards and
// holds 11 chunks of 32 / 8 = 4 layers = 44 layers = L (1 + (p - 1) / (p v)) = 32 x 1.375. The last
// stage warms up (v - 1) p = 4: 5 chunks. p = 8, v = 4, L = 96: 8 x 4 + 8 - 1 = 39 chunks of 3
// layers = 117 = 96 x (1 + 7 / 32), Korthikanti's factor.
TEST(PipelineSchedule, InterleavedMatchesKorthikantiFactor) {
  EXPECT_EQ(chunks_in_flight(interleaved(4, 16, 2), 0), 11);
  EXPECT_EQ(chunks_in_flight(interleaved(4, 16, 2), 3), 5);
  EXPECT_DOUBLE_EQ(layer_activations_held(interleaved(4, 16, 2), 0, 32), 44.0);
  EXPECT_DOUBLE_EQ(layer_activations_held(interleaved(8, 64, 4), 0, 96), 96 * (1 + 7.0 / 32));
  // A short step never holds more than it runs: m v = 4 x 2 = 8 chunks.
  EXPECT_EQ(chunks_in_flight(interleaved(4, 4, 2), 0), 8);
}

TEST(PipelineSchedule, BadShapesNameTheFlag) {
  const auto error = [](const PipelineShape& s) -> std::string {
    try {
      check_pipeline_shape(s);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(error(interleaved(4, 6, 2)),
              HasSubstr("6 micro-batches per step is not a multiple of --pp 4"));
  EXPECT_THAT(error({.stages = 4, .micro_batches = 8, .virtual_stages = 2}),
              HasSubstr("--virtual-stages 2 with the 1f1b schedule"));
  EXPECT_THAT(error(interleaved(1, 4, 2)), HasSubstr("expected --pp > 1"));
  EXPECT_THAT(error(one_f_one_b(0, 4)), HasSubstr("--pp 0, expected a positive number"));
  EXPECT_THAT(error(one_f_one_b(int64_t{1} << 40, 4)), HasSubstr("at most 2^31"));
  EXPECT_THROW(chunks_in_flight(one_f_one_b(4, 8), 4), Error);
  EXPECT_EQ(parse_pipeline_schedule("GPipe"), PipelineSchedule::kGPipe);
  EXPECT_THROW(parse_pipeline_schedule("zb-h1"), Error);
}

}  // namespace
}  // namespace shardplan::planner
