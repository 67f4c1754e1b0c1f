// DTensor compatibility: DTensor's constants configured as links, priced by collective_cost(),
// reproduce docs/semantics.md §4.2-4.4 (formulas written out below with B in GiB).
#include "collectives/dtensor_compat.h"

#include <gtest/gtest.h>

#include "collectives/cost_model.h"

namespace shardplan::collectives::dtensor {
namespace {

// docs/semantics.md §4.2, in microseconds, B = bytes / 2^30, bw in DTensor's "GB/s".
double ag_us(double b_gib, int64_t n, double lat, double bw) {
  return 6.6 + static_cast<double>(n - 1) * lat +
         (b_gib * static_cast<double>(n - 1) / static_cast<double>(n)) / bw * 1e6;
}
double ar_us(double b_gib, int64_t n, double lat, double bw) {
  return 6.6 + 2 * static_cast<double>(n - 1) * lat +
         (b_gib * 2 * static_cast<double>(n - 1) / static_cast<double>(n)) / bw * 1e6;
}
double us(CollectiveKind k, const collectives::GroupLinks& g, int64_t bytes) {
  return collective_cost({k, g.group_size, bytes, g}).time_s * 1e6;
}

TEST(DTensorCompat, WorkedExampleShardToReplicateOnEightGpus) {
  // docs/semantics.md §4.4: fp32 1024x1024 on mesh (8,), S(0) -> R: all_gather of
  // B = 4 MiB / 8 x 8.
  const auto dims = dtensor_mesh_links(std::vector<int64_t>{8}, 8);
  const int64_t bytes = 1024 * 1024 * 4;
  EXPECT_NEAR(us(CollectiveKind::kAllGather, dims[0], bytes), 49.773, 5e-4);
  EXPECT_NEAR(us(CollectiveKind::kAllGather, dims[0], bytes),
              6.6 + 7 * 0.6 + 0.00390625 * 7 / 8 / 87.7 * 1e6, 1e-9);
}

TEST(DTensorCompat, TopologyRuleMarksOuterDimsInterHost) {
  // docs/semantics.md §4.1 examples with 8 devices per host.
  EXPECT_EQ(dtensor_mesh_links(std::vector<int64_t>{8}, 8)[0].link_class,
            collectives::LinkClass::kNvlink);
  const auto d28 = dtensor_mesh_links(std::vector<int64_t>{2, 8}, 8);
  EXPECT_EQ(d28[0].link_class, collectives::LinkClass::kNetwork);
  EXPECT_EQ(d28[1].link_class, collectives::LinkClass::kNvlink);
  const auto d44 = dtensor_mesh_links(std::vector<int64_t>{4, 4}, 8);
  EXPECT_EQ(d44[0].link_class, collectives::LinkClass::kNetwork);
  EXPECT_EQ(d44[1].link_class, collectives::LinkClass::kNvlink);
}

TEST(DTensorCompat, EveryFormulaOnIntraAndInterHostDims) {
  const auto d = dtensor_mesh_links(std::vector<int64_t>{2, 8}, 8);
  const double inter_bw = 87.7 * 0.22;  // 19.294
  EXPECT_NEAR(inter_bw, 19.294, 1e-12);
  for (int64_t bytes : {int64_t{4096}, int64_t{1} << 22, int64_t{3} << 30}) {
    const double b = static_cast<double>(bytes) / (1 << 30);
    // Intra-host dim 1: 8 devices, 0.6 us, 87.7.
    EXPECT_NEAR(us(CollectiveKind::kAllGather, d[1], bytes), ag_us(b, 8, 0.6, 87.7), 1e-7);
    EXPECT_NEAR(us(CollectiveKind::kReduceScatter, d[1], bytes), ag_us(b, 8, 0.6, 87.7), 1e-7);
    EXPECT_NEAR(us(CollectiveKind::kAllReduce, d[1], bytes), ar_us(b, 8, 0.6, 87.7), 1e-7);
    EXPECT_NEAR(us(CollectiveKind::kAllToAll, d[1], bytes), ag_us(b, 8, 0.6, 87.7) + 1.0, 1e-7);
    // Inter-host dim 0: 2 devices, 2.7 us, 87.7 x 0.22.
    EXPECT_NEAR(us(CollectiveKind::kAllGather, d[0], bytes), ag_us(b, 2, 2.7, inter_bw), 1e-7);
    EXPECT_NEAR(us(CollectiveKind::kAllReduce, d[0], bytes), ar_us(b, 2, 2.7, inter_bw), 1e-7);
  }
}

}  // namespace
}  // namespace shardplan::collectives::dtensor
