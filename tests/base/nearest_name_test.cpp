// Suggestions for misspelt names (base/nearest_name.h): Levenshtein distances worked out by
// hand, the typo threshold max(2, |name| / 3), and the hint's wording.
#include "base/nearest_name.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardplan {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("ring", ""), 4u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // k->s, e->i, +g
  EXPECT_EQ(edit_distance("--placement", "--placements"), 1u);
  EXPECT_EQ(edit_distance("rign", "ring"), 2u);  // a transposition is two edits
  EXPECT_EQ(edit_distance("BF16", "bf16"), 0u);  // letters compare without case
}

TEST(NearestName, SuggestsOnlyWhatIsCloseEnough) {
  const std::vector<std::string> clusters = {"cpu-local", "dgx-a100-40g", "dgx-h100", "hgx-h200"};
  EXPECT_EQ(nearest_name("dgx-h10", clusters), "dgx-h100");
  // "dgx-h200" is one edit from both dgx-h100 and hgx-h200: the first listed wins.
  EXPECT_EQ(nearest_name("dgx-h200", clusters), "dgx-h100");
  // 8 characters allow max(2, 8 / 3) = 2 edits; "tpu-pod9" is farther from everything.
  EXPECT_EQ(nearest_name("tpu-pod9", clusters), std::nullopt);
  EXPECT_EQ(nearest_name("", clusters), std::nullopt);
  EXPECT_EQ(nearest_name(std::string(300, 'a'), clusters), std::nullopt);
}

TEST(DidYouMean, IsEmptyWithoutASuggestion) {
  const std::vector<std::string> flags = {"--placements", "--shape", "--mesh"};
  EXPECT_EQ(did_you_mean("--placement", flags), " (did you mean '--placements'?)");
  EXPECT_EQ(did_you_mean("--frobnicate", flags), "");
}

// A name that is part of longer ones suggests them ("h100" is 4 edits from "dgx-h100"): one,
// up to three, none when more than three contain it or it is under 3 characters.
TEST(DidYouMean, SuggestsTheNamesThatContainAPart) {
  const std::vector<std::string> clusters = {"dgx-a100-80g", "dgx-h100", "h100-96g-hbm2e",
                                             "hgx-h200", "dgx-b200"};
  EXPECT_EQ(did_you_mean("h100", clusters), " (did you mean one of 'dgx-h100', 'h100-96g-hbm2e'?)");
  EXPECT_EQ(did_you_mean("B200", clusters), " (did you mean 'dgx-b200'?)");
  EXPECT_EQ(did_you_mean("0", clusters), "");
  EXPECT_EQ(did_you_mean("dgx", clusters),
            " (did you mean one of 'dgx-a100-80g', 'dgx-h100', 'dgx-b200'?)");
  const std::vector<std::string> four = {"dgx-a100", "dgx-b100", "dgx-c100", "dgx-d100"};
  EXPECT_EQ(did_you_mean("dgx", four), "");
}

}  // namespace
}  // namespace shardplan
