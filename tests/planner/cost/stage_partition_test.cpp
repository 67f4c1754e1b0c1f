// Pipeline layer partition (planner/cost/stage_partition.h, Note [Stage partition]): hand-worked
// splits and, for small pipelines, the slowest stage against an exhaustive search over every split.
#include "planner/cost/stage_partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "base/error.h"

namespace shardplan::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// The slowest stage's time when stage s holds counts[s] layers of a seconds each.
double slowest(const std::vector<int64_t>& counts, double a, double e, double h) {
  double t = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    double x = static_cast<double>(counts[s]) * a;
    if (s == 0) x += e;
    if (s + 1 == counts.size()) x += h;
    t = std::max(t, x);
  }
  return t;
}

TEST(StagePartition, EvenSplitIsTheFloorSplit) {
  // Stage s holds [floor(s L / p), floor((s + 1) L / p)): 10 over 4 = [0, 2), [2, 5), [5, 7), [7,
  // 10).
  EXPECT_THAT(StagePartition::even(10, 4).counts(), ElementsAre(2, 3, 2, 3));
  EXPECT_THAT(StagePartition::even(7, 1).counts(), ElementsAre(7));
  const StagePartition p = StagePartition::even(10, 4);
  EXPECT_EQ(p.stage_of_layer(0), 0);
  EXPECT_EQ(p.stage_of_layer(4), 1);
  EXPECT_EQ(p.stage_of_layer(5), 2);
  EXPECT_EQ(p.stage_of_layer(9), 3);
  EXPECT_EQ(p.max_count(), 3);
}

TEST(StagePartition, Llama3EndsHoldOneLayerFewer) {
  // 126 layers on 16 stages, the output layer worth 0.65 of a layer, the embedding 0.01. With
  // T = 8 a the first and last stages fit 7 layers (7 + 0.65 <= 8) and the 14 middle ones 8:
  // 7 + 14 x 8 + 7 = 126, so T = 8 a; 8 + 7 x 8 + ... cannot go lower, as 126 / 16 > 7.
  const StagePartition p = balance_stages(126, 16, 1.0, 0.01, 0.65);
  std::vector<int64_t> want(16, 8);
  want.front() = 7;
  want.back() = 7;
  EXPECT_EQ(p.counts(), want);
  // The floor split instead puts 8 layers and the output layer on the last stage: 8.65 a.
  EXPECT_DOUBLE_EQ(slowest(StagePartition::even(126, 16).counts(), 1.0, 0.01, 0.65), 8.65);
  EXPECT_DOUBLE_EQ(slowest(p.counts(), 1.0, 0.01, 0.65), 8.0);
}

TEST(StagePartition, HeavyOutputLayerLeavesTheLastStageOneLayer) {
  // An output layer worth 5 layers (GPT-2 small: 2 h V against 24 h^2 is about 5.5): 12 layers
  // on 4 stages. T = 6 a: the last stage fits 1 (1 + 5 = 6), the others 6 each, 13 >= 12; T = 5 a
  // + 5 cannot hold a layer on the last stage below 6. The first takes as few as the rest allow:
  // 12 - 1 - 2 x 6 < 1, so 1, and the middle two share 10.
  const StagePartition p = balance_stages(12, 4, 1.0, 0.0, 5.0);
  EXPECT_THAT(p.counts(), ElementsAre(1, 5, 5, 1));
  EXPECT_DOUBLE_EQ(slowest(p.counts(), 1.0, 0.0, 5.0), 6.0);
}

TEST(StagePartition, MatchesAnExhaustiveSearchOnSmallPipelines) {
  // Every split of L layers into p stages of at least `lo` (1, or 2 as for two model chunks per
  // stage), against the balanced one.
  const double ends[][2] = {{0, 0}, {0.3, 0.7}, {0.05, 2.4}, {1.5, 0.2}, {3.0, 3.0}, {0, 9.0}};
  for (int64_t lo = 1; lo <= 2; ++lo) {
    for (int64_t L = 1; L <= 11; ++L) {
      for (int64_t p = 1; p <= std::min<int64_t>(L / lo, 5); ++p) {
        for (const auto& eh : ends) {
          double best = std::numeric_limits<double>::infinity();
          std::vector<int64_t> counts;
          std::function<void(int64_t)> go = [&](int64_t left) {
            if (static_cast<int64_t>(counts.size()) == p - 1) {
              counts.push_back(left);
              best = std::min(best, slowest(counts, 1.0, eh[0], eh[1]));
              counts.pop_back();
              return;
            }
            const int64_t stages_after = p - 1 - static_cast<int64_t>(counts.size());
            for (int64_t n = lo; n <= left - lo * stages_after; ++n) {
              counts.push_back(n);
              go(left - n);
              counts.pop_back();
            }
          };
          go(L);
          const StagePartition got = balance_stages(L, p, 1.0, eh[0], eh[1], lo);
          SCOPED_TRACE(testing::Message() << L << " layers, " << p << " stages of at least " << lo
                                          << ", ends " << eh[0] << ", " << eh[1]);
          EXPECT_EQ(got.layers(), L);
          EXPECT_EQ(got.stages(), p);
          const std::vector<int64_t> c = got.counts();
          EXPECT_GE(*std::min_element(c.begin(), c.end()), lo);
          EXPECT_NEAR(slowest(c, 1.0, eh[0], eh[1]), best, 1e-12);
          const StageEnds e = balance_stage_ends(L, p, 1.0, eh[0], eh[1], lo);
          for (int64_t s = 0; s <= p; ++s) EXPECT_EQ(stage_begin(L, p, e, s), got.begin(s));
          if (p > 2) {
            const auto widest = std::max_element(c.begin() + 1, c.end() - 1);  // the first
            EXPECT_EQ(e.middle_max, *widest);
            EXPECT_EQ(widest_middle_stage(L, p, e), widest - c.begin());
          } else {
            EXPECT_EQ(widest_middle_stage(L, p, e), 0);
          }
        }
      }
    }
  }
}

TEST(StagePartition, InterleavedChunksAlternateStages) {
  // Stages of 5 and 3 layers, 2 chunks each: stage 0 splits 5 into 2 + 3 (the later chunk one
  // more), stage 1 splits 3 into 1 + 2. The model runs stage 0 chunk 0 (layers 0-1), stage 1
  // chunk 0 (layer 2), stage 0 chunk 1 (layers 3-5), stage 1 chunk 1 (layers 6-7).
  const std::vector<int64_t> counts = {5, 3};
  const StagePartition p = StagePartition::from_counts(counts, 2);
  const int64_t want[] = {0, 0, 1, 0, 0, 0, 1, 1};
  for (int64_t layer = 0; layer < 8; ++layer) {
    EXPECT_EQ(p.stage_of_layer(layer), want[layer]) << "layer " << layer;
  }
  EXPECT_THAT(p.counts(), ElementsAre(5, 3));
  const std::vector<int64_t> thin = {5, 1};
  EXPECT_THAT([&] { (void)StagePartition::from_counts(thin, 2); },
              ThrowsMessage<Error>(HasSubstr("stage 1 with 1 layers, expected at least 2")));
}

TEST(StagePartition, BadCountsAreRefused) {
  const std::vector<int64_t> zero = {3, 0, 2};
  EXPECT_THAT([&] { (void)StagePartition::from_counts(zero); },
              ThrowsMessage<Error>(HasSubstr("stage 1 with 0 layers, expected at least 1")));
  EXPECT_THAT([] { (void)StagePartition::even(3, 4); },
              ThrowsMessage<Error>(HasSubstr("4 pipeline stages for 3 layers")));
  EXPECT_THAT([] { (void)balance_stage_ends(7, 4, 1.0, 0, 0, 2); },
              ThrowsMessage<Error>(HasSubstr("at least 2 layers on each of 4 stages of 7")));
  EXPECT_THAT([] { (void)StagePartition::even(4, 2).stage_of_layer(4); },
              ThrowsMessage<Error>(HasSubstr("layer 4, expected one of 0..3")));
}

}  // namespace
}  // namespace shardplan::planner
